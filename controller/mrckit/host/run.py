"""Running the agent as a process: config files, the default socket, ``mrc host up/down``.

A config file is YAML in the shape of the gRPC ``ConfigureRequest`` (``host:`` and optional
``settings:``, proto field names), or the bare ``host:`` mapping. The agent listens on
``unix:/run/mrckit/host-<name>.sock`` unless told otherwise, writes its pid beside its socket
(:func:`pid_file`), and on SIGTERM or Ctrl-C detaches everything it attached.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import yaml
from google.protobuf import json_format

from ..bpf.attach import tc_detach, xdp_detach
from ..errors import MrcError
from ..proto import host_agent_pb2 as pb
from .agent import ConfigureResult, HostAgent
from .config import AgentConfig, from_proto, to_proto
from .nicdev import create_nic_device, nic_mtu
from .ports import link_exists, link_mtu

RUN_DIR = Path("/run/mrckit")


def default_address(name: str) -> str:
    """``unix:/run/mrckit/host-<name>.sock``, where ``mrc host ev NAME`` looks first."""
    return f"unix:{RUN_DIR}/host-{name}.sock"


def pid_file(name: str, address: str | None = None) -> Path:
    """Where the agent serving ``address`` keeps its pid, for ``mrc host down``: beside its unix
    socket (``<socket>.pid``), so two fabrics whose hosts share names (each agent on its own
    socket) never share a pid file; ``/run/mrckit/host-<name>.pid`` for the default socket, a
    TCP address or no address. An agent on its own socket also takes the name's file when no
    live agent holds it (see :func:`_pid_files`), so ``mrc host down CONFIG`` finds it."""
    if address and address.startswith("unix:") and address != default_address(name):
        return Path(address[5:] + ".pid")
    return RUN_DIR / f"host-{name}.pid"


def _pid_files(name: str, address: str) -> list[Path]:
    """The pid files an agent on ``address`` writes: its own, and the name's unless another
    live agent holds that one (the first agent of a name keeps it)."""
    own, by_name = pid_file(name, address), pid_file(name)
    if own == by_name:
        return [own]
    try:
        holder = int(by_name.read_text().strip())
    except (OSError, ValueError):
        holder = 0
    return [own] if holder != os.getpid() and _is_agent(holder) else [own, by_name]


def _release_pid_file(path: Path, pid: int) -> None:
    """Remove ``path`` only if it still names ``pid``: never another agent's file."""
    try:
        if path.read_text().strip() == str(pid):
            path.unlink()
    except OSError:
        pass


def _is_agent(pid: int) -> bool:
    """Whether ``pid`` is a running ``mrc host up`` (a pid file left by a crash may name a
    process that reused the pid since)."""
    try:
        return b"\0host\0up\0" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def load_config(path: str | os.PathLike) -> AgentConfig:
    """Read a host config file (YAML). Raises MrcError naming the file and the bad field, in
    one line (a YAML error gives its line)."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except UnicodeDecodeError as exc:
        raise MrcError(f"{path}: not a UTF-8 text file ({exc.reason} at byte {exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise MrcError(f"{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(doc, dict):
        raise MrcError(f"{path}: expected a mapping with 'host:' (and optionally 'settings:')")
    if "host" not in doc:
        doc = {"host": doc}
    for key in ("host", "settings"):
        if key in doc and not isinstance(doc[key], dict):
            raise MrcError(f"{path}: '{key}' must be a mapping, got {type(doc[key]).__name__}")
    locator = doc["host"].get("locator")
    if isinstance(locator, str):
        try:
            doc["host"]["locator"] = int(locator, 0)
        except ValueError:
            raise MrcError(f"{path}: host.locator {locator!r} is not an integer (e.g. 0xfcbbbb00)") from None
    try:
        req = json_format.ParseDict(doc, pb.ConfigureRequest())
    except json_format.ParseError as exc:
        # protobuf appends a second line listing the fields in JSON (camelCase) spelling.
        raise MrcError(f"{path}: {str(exc).splitlines()[0]}") from None
    cfg = from_proto(req)
    cfg.validate()
    return cfg


def dumps_config(cfg: AgentConfig) -> str:
    """The YAML text of ``cfg`` that :func:`load_config` reads back: the ``ConfigureRequest``
    with proto field names."""
    doc = json_format.MessageToDict(to_proto(cfg), preserving_proto_field_name=True)
    return yaml.safe_dump(doc, sort_keys=False)


def run_agent(cfg: AgentConfig, listen: str | None = None, *, create_nic: bool = False,
              tls_key: bytes | None = None, tls_cert: bytes | None = None,
              ready=None) -> None:
    """Configure an agent with ``cfg``, serve gRPC on ``listen`` and block until SIGTERM/SIGINT.
    ``ready(result, address)`` is called once serving. Everything is detached on the way out.

    Raises:
        MrcError: the config or the kernel refused (nothing stays attached).
    """
    from .service import serve

    if create_nic and not link_exists(cfg.nic_device):
        create_nic_device(cfg.nic_device, cfg.nic_address, nic_mtu({p.ifname: _mtu(p.ifname) for p in cfg.ports}))
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    address = listen or default_address(cfg.name)
    if address.startswith("unix:"):
        Path(address[5:]).unlink(missing_ok=True)
    agent = HostAgent()
    result: ConfigureResult = agent.configure(cfg)
    stop = threading.Event()
    server = None
    try:
        server = serve(agent, address, tls_key=tls_key, tls_cert=tls_cert)
        for path in _pid_files(cfg.name, address):
            path.write_text(str(os.getpid()))
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        if ready:
            ready(result, address)
        stop.wait()  # no timeout: an idle agent's process does not wake (a signal still ends it)
    finally:
        if server is not None:
            server.stop(1)
        agent.close()
        for path in _pid_files(cfg.name, address):
            _release_pid_file(path, os.getpid())
        if address.startswith("unix:"):
            Path(address[5:]).unlink(missing_ok=True)


def _mtu(ifname: str) -> int:
    try:
        return link_mtu(ifname)
    except OSError:
        raise MrcError(f"plane port {ifname} does not exist") from None


def stop_agent(cfg: AgentConfig, timeout: float = 10.0, address: str | None = None) -> list[str]:
    """Stop the agent of ``cfg.name`` serving on ``address`` (default: its default socket) with
    SIGTERM to its pid, then detach whatever is still attached to its NIC device and ports
    (after a crash). Returns what was done, in words."""
    done = []
    pf = pid_file(cfg.name, address)
    running = pf.exists()
    if running:
        text = pf.read_text().strip()
        pid = int(text) if text.isdigit() else 0
        if not _is_agent(pid):
            pf.unlink(missing_ok=True)
            done.append(f"removed a stale pid file ({pf}: pid {text or '?'} is no agent)")
            running = False
    if running and pf.exists():
        try:
            os.kill(pid, signal.SIGTERM)
            done.append(f"stopped agent pid {pid}")
            end = time.monotonic() + timeout
            while time.monotonic() < end and Path(f"/proc/{pid}").exists():
                time.sleep(0.05)
        except ProcessLookupError:
            pf.unlink(missing_ok=True)
    for port in cfg.ports:
        try:
            if xdp_detach(port.ifname):
                done.append(f"detached XDP from {port.ifname}")
        except MrcError:
            pass
    try:
        if tc_detach(cfg.nic_device, "egress"):
            done.append(f"detached tc egress from {cfg.nic_device}")
    except MrcError:
        pass
    return done
