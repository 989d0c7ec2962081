"""Launch bmv2 ``simple_switch_grpc`` for one switch, its ports being veth interfaces in a
network namespace (design sections 4 and 9).

The P4Runtime server listens on a unix socket (``--grpc-server-addr unix:/PATH``), which a
controller in the root namespace reaches although the switch lives in its own namespace. bmv2's
Thrift runtime server (TCP, inside the namespace) is used only for the queue settings that
P4Runtime lacks: ``set_queue_rate`` and ``set_queue_depth`` (packets/s and packets).

>>> with Bmv2Switch("s0", "mrcsw", {0: "p0", 1: "p1"}) as sw:      # doctest: +SKIP
...     sw.set_queue_rate(100, port=1)
...     sw.grpc_address                                           # "unix:/run/mrckit/bmv2/s0/grpc.sock"

The program needs two priority queues per port (``p4src/mrc_switch.p4``: CONTROL and trimmed
packets take queue 1), so the launcher always passes ``--priority-queues 2``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from .. import netns
from ..errors import MrcError
from ..resources import P4_JSON, P4_P4INFO, p4_build_dir

P4TOOLS_BIN = "/opt/p4tools/bin"
DEFAULT_JSON = p4_build_dir() / P4_JSON
"""p4c's bmv2 JSON of ``p4src/mrc_switch.p4``, shipped as package data (:mod:`mrckit.resources`)."""
DEFAULT_P4INFO = p4_build_dir() / P4_P4INFO
"""Its P4Info (text proto), shipped alongside."""
RUN_ROOT = Path("/run/mrckit/bmv2")
DEVICE_ID = 1
"""P4Runtime device id; finsy's default is 1 and bmv2's 0, so we pass 1 (design section 9)."""
PRIORITY_QUEUES = 2
THRIFT_PORT = 9090
"""bmv2's default Thrift port; each switch has its own namespace, so they never clash."""
BMV2_DROP_PORT = 511
LOG_TAIL_LINES = 20


def find_tool(name: str) -> str | None:
    """Path of bmv2/p4c tool ``name`` on PATH or under /opt/p4tools/bin, or None."""
    path = shutil.which(name)
    if path:
        return path
    candidate = os.path.join(P4TOOLS_BIN, name)
    return candidate if os.access(candidate, os.X_OK) else None


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log written)"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


def _cli_env(cli: str) -> dict[str, str]:
    """The environment for bmv2's Python CLI: its modules live under the install prefix."""
    prefix = Path(cli).resolve().parent.parent
    extra = [str(p) for p in sorted(prefix.glob("lib/python3*/*-packages"))]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(extra + [env["PYTHONPATH"]] if env.get("PYTHONPATH") else extra)
    return env


def simple_switch_argv(binary: str, ports: dict[int, str], device_id: int, grpc_address: str, *,
                       json_path: str | Path | None = None, extra: list[str] | tuple = ()) -> list[str]:
    """The ``simple_switch_grpc`` command line that every mrckit bmv2 switch runs: ``ports``
    maps port numbers to interface names, ``grpc_address`` is where P4Runtime listens
    (``unix:/path`` or ``HOST:PORT``). Without ``json_path`` the switch starts with no program
    (``--no-p4``) and the controller pushes the pipeline. ``extra`` goes before the ports
    (logging options). Two priority queues and drop port 511 always: the program needs both."""
    argv = [binary, "--device-id", str(device_id), "--thrift-port", str(THRIFT_PORT), *extra]
    for port, iface in sorted(ports.items()):
        argv += ["-i", f"{port}@{iface}"]
    argv += [str(json_path)] if json_path is not None else ["--no-p4"]
    return argv + ["--", "--grpc-server-addr", grpc_address,
                   "--priority-queues", str(PRIORITY_QUEUES), "--drop-port", str(BMV2_DROP_PORT)]


class Bmv2Switch:
    """One ``simple_switch_grpc`` process serving one switch.

    Args:
        name: the switch's name: names its run folder ``/run/mrckit/bmv2/<name>/`` (gRPC socket,
            logs).
        netns: the namespace that holds the port interfaces.
        ports: switch port number (0..510; 511 is bmv2's drop port) -> interface name.
        json_path: the bmv2 JSON to start with; None starts without a program (``--no-p4``) and
            waits for SetForwardingPipelineConfig.
        device_id: the P4Runtime device id.
        ready_timeout: seconds to wait for the P4Runtime server to answer.
        log_level: bmv2 log level for the log file (trace, debug, info, warn, error, off).

    :meth:`start` raises MrcError with the exact command and the last lines of the bmv2 log
    when the switch does not come up; :meth:`stop` leaves no process, socket or folder behind.
    """

    def __init__(self, name: str, netns_name: str, ports: dict[int, str], *,
                 json_path: str | Path | None = DEFAULT_JSON, device_id: int = DEVICE_ID,
                 ready_timeout: float = 15.0, log_level: str = "info"):
        if not name or "/" in name or name in (".", ".."):
            raise MrcError(f"switch name {name!r}: must be a plain name")
        for port in ports:
            if not isinstance(port, int) or not 0 <= port < BMV2_DROP_PORT:
                raise MrcError(f"switch {name}: port {port!r} outside 0..{BMV2_DROP_PORT - 1} "
                               f"(bmv2 reserves {BMV2_DROP_PORT} as its drop port)")
        self.name, self.netns, self.ports = name, netns_name, dict(ports)
        self.json_path = Path(json_path) if json_path is not None else None
        self.device_id, self.ready_timeout, self.log_level = device_id, ready_timeout, log_level
        self.run_dir = RUN_ROOT / name
        self.socket_path = self.run_dir / "grpc.sock"
        self.log_base = self.run_dir / "bmv2"
        self.proc: subprocess.Popen | None = None
        self.command: list[str] = []

    @property
    def grpc_address(self) -> str:
        """The P4Runtime address for grpcio/finsy: ``unix:/run/mrckit/bmv2/<name>/grpc.sock``."""
        return f"unix:{self.socket_path}"

    def build_command(self, binary: str) -> list[str]:
        """The full command line (nsenter into the namespace, then simple_switch_grpc)."""
        logging = ["--log-level", self.log_level, "--log-flush", "--log-file", str(self.log_base)]
        return ["nsenter", f"--net={netns.NETNS_DIR}/{self.netns}", "--",
                *simple_switch_argv(binary, self.ports, self.device_id, self.grpc_address,
                                    json_path=self.json_path, extra=logging)]

    def start(self) -> "Bmv2Switch":
        """Start the switch and wait until its P4Runtime server answers.

        Raises:
            MrcError: simple_switch_grpc not found, the namespace is missing, the JSON does not
                exist, the process exited, or it did not answer within ``ready_timeout``; the
                message holds the command and the last lines of the bmv2 log.
        """
        binary = find_tool("simple_switch_grpc")
        if binary is None:
            raise MrcError(f"simple_switch_grpc not found on PATH or in {P4TOOLS_BIN}")
        if not netns.exists(self.netns):
            raise MrcError(f"switch {self.name}: network namespace {self.netns} does not exist")
        if self.json_path is not None and not self.json_path.is_file():
            raise MrcError(f"switch {self.name}: bmv2 JSON {self.json_path} not found")
        if self.proc is not None:
            raise MrcError(f"switch {self.name} is running already")
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.run_dir.mkdir(parents=True)
        self.command = self.build_command(binary)
        with open(self.run_dir / "stdout.log", "wb") as out:
            # A new session: Ctrl-C in the caller's terminal reaches us, and we stop the switch.
            self.proc = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop(keep_logs=True)
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while True:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                self._fail(f"simple_switch_grpc exited with status {code}")
            if self.socket_path.exists() and self._p4runtime_answers():
                return
            if time.monotonic() >= deadline:
                self._fail(f"the P4Runtime server did not answer within {self.ready_timeout:g} s")
            time.sleep(0.1)

    def _p4runtime_answers(self) -> bool:
        import grpc
        from finsy.proto import p4r, p4r_grpc

        with grpc.insecure_channel(self.grpc_address) as channel:
            try:
                p4r_grpc.P4RuntimeStub(channel).Capabilities(p4r.CapabilitiesRequest(), timeout=1.0)
            except grpc.RpcError:
                return False
        return True

    @property
    def log_path(self) -> Path:
        """bmv2's own log file (its logger may add a ``.txt`` extension to the name we give)."""
        with_ext = self.log_base.with_suffix(".txt")
        return with_ext if with_ext.exists() else self.log_base

    def _fail(self, why: str) -> None:
        logs = [f"--- {p.name} (last {LOG_TAIL_LINES} lines) ---\n{_tail(p)}"
                for p in (self.run_dir / "stdout.log", self.log_path)]
        raise MrcError(f"bmv2 switch {self.name} failed to start: {why}\n"
                       f"command: {' '.join(self.command)}\n" + "\n".join(logs))

    def stop(self, *, keep_logs: bool = False) -> None:
        """Stop the process (SIGTERM, then SIGKILL after 5 s) and remove the run folder
        (kept with ``keep_logs``, for a failed start). Idempotent."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.proc = None
        if keep_logs:
            self.socket_path.unlink(missing_ok=True)
        else:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    # --- queue settings (bmv2 Thrift runtime; P4Runtime has none) ---
    def set_queue_rate(self, pps: int, port: int | None = None) -> None:
        """Drain rate of ``port``'s egress queues (every port when None), in packets/s.
        0 removes the limit (bmv2's meaning). Raises MrcError when the CLI refuses."""
        self._cli(f"set_queue_rate {self._count(pps, 'queue rate')}" + self._port_arg(port))

    def set_queue_depth(self, packets: int, port: int | None = None) -> None:
        """Capacity of ``port``'s egress queues (every port when None), in packets; bmv2
        tail-drops beyond it without counting. Raises MrcError when the CLI refuses."""
        self._cli(f"set_queue_depth {self._count(packets, 'queue depth')}" + self._port_arg(port))

    @staticmethod
    def _count(value: int, what: str) -> int:
        if not isinstance(value, int) or value < 0:
            raise MrcError(f"{what} {value!r}: must be a non-negative integer")
        return value

    def _port_arg(self, port: int | None) -> str:
        if port is None:
            return ""
        if port not in self.ports:
            raise MrcError(f"switch {self.name} has no port {port!r} (ports: {sorted(self.ports)})")
        return f" {port}"

    def _cli(self, line: str) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise MrcError(f"switch {self.name} is not running")
        cli = find_tool("simple_switch_CLI")
        if cli is None:
            raise MrcError(f"simple_switch_CLI not found on PATH or in {P4TOOLS_BIN}")
        # Our interpreter, not the script's `env python3`: it has the thrift module.
        proc = subprocess.run(["nsenter", f"--net={netns.NETNS_DIR}/{self.netns}", "--", sys.executable,
                               cli, "--thrift-port", str(THRIFT_PORT)], input=(line + "\n").encode(),
                              capture_output=True, env=_cli_env(cli), timeout=30)
        out = (proc.stdout + proc.stderr).decode(errors="replace")
        if proc.returncode != 0 or "Error" in out or "Invalid" in out:
            raise MrcError(f"switch {self.name}: bmv2 CLI refused {line!r}: {out.strip()}")

    def __enter__(self) -> "Bmv2Switch":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
