"""The state file of one emulated fabric, so that separate ``mrc`` invocations (``fabric
status|down``, ``fail``, ``restore``) act on a fabric that an earlier ``fabric up`` built.

Everything of fabric ``NAME`` lives under ``/run/mrckit/NAME/``: ``fabric.json`` (this
state), ``faults.log`` (one timestamped line per fault and restore), the gRPC unix sockets of
its switches and host agents, the host agents' config files and the processes' logs.
Namespaces are ``<prefix><NAME>-<node>`` and eBPF switch pins
``/sys/fs/bpf/mrckit/switch/<prefix><NAME>-<node>/``, so one prefix finds all of it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..errors import MrcError
from ..topology.compile import Mode, Target

RUN_ROOT = Path("/run/mrckit")
STATE_LOCK = threading.RLock()
"""Orders the bring-up threads' changes to a :class:`FabricState` and its saves."""
STATE_FILE = "fabric.json"
FAULT_LOG = "faults.log"
DEFAULT_PREFIX = "mrcf-"
"""Namespace prefix of fabrics started from the CLI; ``mrc fabric down --all`` removes it."""
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_]{0,15}$")
RESERVED = frozenset({"bmv2", "switch", "fabric", "host"})
"""Folders of /run/mrckit that other parts of mrckit own."""


def check_name(name: str) -> str:
    """A fabric name: 1..16 of ``a-z 0-9 _``, starting alphanumeric, not a reserved folder.

    Raises:
        MrcError: naming the rule broken.
    """
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise MrcError(f"fabric name {name!r}: use 1 to 16 characters of a-z, 0-9 and _, "
                       "starting with a letter or digit")
    if name in RESERVED:
        raise MrcError(f"fabric name {name!r} is reserved (a folder of {RUN_ROOT} has it)")
    return name


def state_dir(name: str) -> Path:
    """``/run/mrckit/<name>``."""
    return RUN_ROOT / check_name(name)


@dataclass
class ProcInfo:
    """A process the fabric started: pid, its start time (``/proc/PID/stat`` field 22, clock
    ticks, to tell a reused pid apart), gRPC address, argv and log file."""

    pid: int
    start_ticks: int
    address: str
    argv: list[str]
    log: str

    def alive(self) -> bool:
        """Whether this very process (same pid AND start time) still runs."""
        return start_ticks(self.pid) == self.start_ticks


@dataclass
class FabricState:
    """Everything needed to inspect, fault and tear down a running fabric.

    Attributes:
        name: the fabric name; prefix: the namespace prefix (``mrcf-`` from the CLI).
        target: ``ebpf`` or ``bmv2``. topology: the topology as YAML text (``dump_topology``).
        mode: the forwarding mode, ``srv6`` (uSID source routing) or ``ecmp`` (EV-hash mode,
            docs/ecmp-mode.md); compile, the controller and the host configs follow it.
        nodes: node name -> namespace. links: ``[node_a, if_a, node_b, if_b]`` per link.
        link_names: ``link:A:B`` (names sorted) -> the link name of design 3.3
            (``p0/t0-1/t1-0``), which the controller and the agents use.
        switches / hosts: node name -> the process serving it (P4Runtime server or bmv2 /
            host agent). pins: eBPF switch pin names (node name -> pin name).
        device_ids: switch node -> P4Runtime device id.
        faults: active faults, key ``link:A:B`` or ``switch:S`` -> description.
        flappers: active flap processes, key -> ProcInfo.
        created: wall-clock time (ISO 8601, UTC).
    """

    name: str
    prefix: str
    target: Target
    topology: str
    nodes: dict[str, str] = field(default_factory=dict)
    links: list[list[str]] = field(default_factory=list)
    link_names: dict[str, str] = field(default_factory=dict)
    switches: dict[str, ProcInfo] = field(default_factory=dict)
    hosts: dict[str, ProcInfo] = field(default_factory=dict)
    pins: dict[str, str] = field(default_factory=dict)
    device_ids: dict[str, int] = field(default_factory=dict)
    faults: dict[str, dict] = field(default_factory=dict)
    flappers: dict[str, ProcInfo] = field(default_factory=dict)
    controller: dict = field(default_factory=dict)
    mode: Mode = "srv6"
    created: str = field(default_factory=lambda: now_iso())

    @property
    def dir(self) -> Path:
        return state_dir(self.name)

    def save(self) -> None:
        """Write ``fabric.json`` atomically (a reader never sees half a file). Threads that
        change the state while others save hold :data:`STATE_LOCK` around change and save."""
        with STATE_LOCK:
            self.dir.mkdir(parents=True, exist_ok=True)
            tmp = self.dir / (STATE_FILE + ".tmp")
            tmp.write_text(json.dumps(asdict(self), indent=1, sort_keys=True))
            os.replace(tmp, self.dir / STATE_FILE)

    @classmethod
    def load(cls, name: str) -> "FabricState":
        """Read fabric ``name``'s state. Raises MrcError if no such fabric runs."""
        path = state_dir(name) / STATE_FILE
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            raise MrcError(f"no fabric named {name!r} is up (no {path}); see `mrc fabric status`") from None
        except json.JSONDecodeError as exc:
            raise MrcError(f"{path} is damaged ({exc}); remove the fabric with `mrc fabric down --all`") from None
        for key in ("switches", "hosts", "flappers"):
            doc[key] = {k: ProcInfo(**v) for k, v in doc.get(key, {}).items()}
        return cls(**doc)

    def log_fault(self, text: str) -> str:
        """Append ``<ISO time> <text>`` to ``faults.log``; returns the line."""
        line = f"{now_iso()} {text}"
        with open(self.dir / FAULT_LOG, "a") as log:
            log.write(line + "\n")
        return line

    def fault_log(self) -> list[str]:
        """The lines of ``faults.log``, oldest first."""
        try:
            return (self.dir / FAULT_LOG).read_text().splitlines()
        except FileNotFoundError:
            return []


@contextlib.contextmanager
def locked(name: str):
    """Hold fabric ``name``'s lock (``flock`` on ``/run/mrckit/<name>/lock``) for a ``with``
    block, so that two ``mrc fail``/``restore`` runs do not overwrite each other's state.

    Raises:
        MrcError: no such fabric.
    """
    folder = state_dir(name)
    if not (folder / STATE_FILE).exists():
        raise MrcError(f"no fabric named {name!r} is up (no {folder / STATE_FILE}); see `mrc fabric status`")
    with open(folder / "lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def list_fabrics() -> list[str]:
    """Names of the fabrics with a state file under /run/mrckit."""
    if not RUN_ROOT.is_dir():
        return []
    return sorted(p.name for p in RUN_ROOT.iterdir()
                  if (p / STATE_FILE).is_file() and NAME_RE.match(p.name) and p.name not in RESERVED)


def now_iso() -> str:
    """The current time, UTC, ISO 8601 with microseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def start_ticks(pid: int) -> int | None:
    """Start time of process ``pid`` in clock ticks since boot, or None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # Field 2 (comm) may hold spaces and parentheses: split after its closing one.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None  # exited, not yet reaped: as good as gone
    return int(fields[19])


def wait_gone(pid: int, ticks: int, timeout: float) -> bool:
    """Wait up to ``timeout`` s for process (pid, ticks) to exit; True if it did."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if start_ticks(pid) != ticks:
            return True
        time.sleep(0.02)
    return start_ticks(pid) != ticks
