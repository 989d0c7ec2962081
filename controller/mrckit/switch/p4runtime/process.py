"""Start and stop the P4Runtime server of one eBPF switch as its own process.

The process runs inside the switch's network namespace, entered with ``nsenter --net`` from a
fresh ``subprocess.Popen`` (design section 9: ``ip netns exec`` would remount /sys and hide the
pins, and forking a process that runs gRPC threads is unsafe). It listens on a unix socket
that the controller reaches from the root namespace. ``EbpfSwitch(..., p4runtime=ADDRESS)``
starts it in ``setup()`` once the maps are pinned and stops it in ``teardown()`` before they
are unpinned; :func:`spawn` and :func:`stop` serve a switch set up without one.

Output (stdout and stderr) goes to a log file, never a pipe: the server must not block on a
full pipe, and it may outlive the process that started it (``mrc fabric up``). It prints one
line ``listening ADDRESS`` when it serves; each server gets its own session, so a Ctrl-C in
the terminal reaches only its manager, which then stops it.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...errors import MrcError
from ...resources import child_pythonpath
from .server import TlsFiles, unix_path

READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
READY_MARKER = "listening "
"""The line the server prints once it serves (``__main__``), once per switch."""
SERVING_MARKER = "serving "
"""The line the many-switch form prints once it serves every switch: ``serving N switches``."""


class ServerStartError(MrcError):
    """A server exited before serving, or stayed silent; ``server`` is that one."""

    def __init__(self, message: str, server: "ServerProcess"):
        super().__init__(message)
        self.server = server


@dataclass(frozen=True)
class ServerOptions:
    """How to run one switch's P4Runtime server.

    Attributes:
        address: ``unix:/path`` or ``host:port`` (``server.unix_path`` rules).
        device_id: the P4Runtime device id (finsy's default, 1).
        tls: server certificate and key (and client CA), or None for plaintext.
        state_dir: where the pipeline is stored (None: ``/run/mrckit/switch/<name>``).
        log: the server's log file (None: an unnamed temporary file, gone after stop).
        in_switch_netns: run inside the switch's namespace (default); False runs it in the
            caller's, so a loopback TCP address is reachable from there. The server reaches
            the switch only through its pins, so either works.
    """

    address: str
    device_id: int = 1
    tls: TlsFiles | None = None
    state_dir: Path | None = None
    log: Path | None = None
    in_switch_netns: bool = True

    def __post_init__(self):
        if not isinstance(self.address, str) or not (unix_path(self.address) or _host_port(self.address)):
            raise MrcError(f"P4Runtime address {self.address!r}: use unix:/path or host:port")
        if not isinstance(self.device_id, int) or not 0 <= self.device_id < 1 << 64:
            raise MrcError(f"P4Runtime device id {self.device_id!r}: an integer in 0..2^64-1")


def _host_port(address: str) -> bool:
    host, _, port = address.rpartition(":")
    return bool(host) and port.isdigit() and int(port) < 65536


def command(switch: str, address: str, *, netns: str | None = None, device_id: int = 1,
            state_dir: Path | None = None, tls: TlsFiles | None = None) -> list[str]:
    """The argv that serves ``switch`` on ``address``, inside ``netns`` when given."""
    argv = [sys.executable, "-m", "mrckit.switch.p4runtime", "--switch", switch,
            "--listen", address, "--device-id", str(device_id)]
    if state_dir is not None:
        argv += ["--state-dir", str(state_dir)]
    if tls is not None:
        argv += ["--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
        if tls.client_ca:
            argv += ["--tls-client-ca", str(tls.client_ca)]
    if netns:
        argv = ["nsenter", f"--net=/var/run/netns/{netns}", "--"] + argv
    return argv


class ServerProcess:
    """A started server process of switch ``switch`` (not yet known to serve: see
    :meth:`wait_ready`). ``pid``, ``argv``, ``address`` and ``log`` (None for a temporary
    log) describe it for records such as a fabric's state file."""

    def __init__(self, switch: str, options: ServerOptions, netns: str | None):
        self.switch, self.address = switch, options.address
        self.argv = command(switch, options.address, netns=netns if options.in_switch_netns else None,
                            device_id=options.device_id, state_dir=options.state_dir, tls=options.tls)
        self.log = options.log
        out = open(options.log, "w+b") if options.log else tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=_env(), start_new_session=True)
        except OSError as exc:
            out.close()
            raise MrcError(f"P4Runtime server for switch {switch}: cannot run {self.argv[0]}: {exc.strerror}") from None
        self._out = out
        self.pid = self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def output(self) -> str:
        """Everything the server logged so far."""
        if self._out.closed:
            return Path(self.log).read_text(errors="replace") if self.log and Path(self.log).exists() else ""
        # pread: the server writes through the same file offset, which must not move
        size = os.fstat(self._out.fileno()).st_size
        return os.pread(self._out.fileno(), size, 0).decode(errors="replace")

    def tail(self, lines: int = 6) -> str:
        """The last ``lines`` lines of the log, joined by `` | ``."""
        return " | ".join(self.output().strip().splitlines()[-lines:]) or "no output"

    def ready(self) -> bool:
        """Whether the server serves. Raises MrcError (with its last log lines) if it exited."""
        if any(line.startswith(READY_MARKER) for line in self.output().splitlines()):
            return True
        if self.proc.poll() is not None:
            raise ServerStartError(f"P4Runtime server for switch {self.switch} did not start on {self.address} "
                                   f"(exit status {self.proc.returncode}): {self.tail()}", self)
        return False

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> "ServerProcess":
        """Return once the server serves; see :func:`wait_all`."""
        wait_all([self], timeout)
        return self

    def stop(self, timeout: float | None = None) -> int:
        """SIGTERM the server, wait, SIGKILL after ``timeout`` s (default
        :data:`STOP_TIMEOUT_S`); return its exit code (0 after a clean stop, -9 when killed).
        Idempotent."""
        _terminate(self.proc, STOP_TIMEOUT_S if timeout is None else timeout)
        if not self._out.closed:
            self._out.close()
        return self.proc.returncode


def wait_all(servers: list[ServerProcess], timeout: float = READY_TIMEOUT_S,
             progress: Callable[[int], None] | None = None) -> None:
    """Wait until every server serves; they start in parallel, so this costs about one
    Python start-up, not one per server. ``progress(n)`` is called with the number serving
    each time it grows.

    Raises:
        ServerStartError: one exited or stayed silent for ``timeout`` s, naming its switch and giving
            its last log lines. The servers are left running: the caller stops them.
    """
    waiting = list(servers)
    end = time.monotonic() + timeout
    while waiting:
        still = [s for s in waiting if not s.ready()]
        if progress and len(still) < len(waiting):
            progress(len(servers) - len(still))
        waiting = still
        if waiting and time.monotonic() >= end:
            s = waiting[0]
            raise ServerStartError(f"P4Runtime server for switch {s.switch} did not start on {s.address} "
                                   f"within {timeout:g} s ({len(waiting)} still waiting): {s.tail()}", s)
        if waiting:
            time.sleep(0.05)


def spawn(switch: str, address: str, *, timeout: float = READY_TIMEOUT_S, log: Path | None = None,
          **kwargs) -> ServerProcess:
    """Start the server (other arguments as ``command``: ``netns``, ``device_id``,
    ``state_dir``, ``tls``) and return once it listens.

    Raises MrcError with the server's own output if it exits or stays silent for ``timeout``
    seconds (it is then stopped).
    """
    netns = kwargs.pop("netns", None)
    server = ServerProcess(switch, ServerOptions(address, log=log, **kwargs), netns)
    try:
        server.wait_ready(timeout)
    except BaseException:
        server.stop(5.0)
        raise
    return server


def stop(server: ServerProcess, timeout: float | None = None) -> int:
    """SIGTERM the server, wait (SIGKILL after ``timeout`` s); return its exit code."""
    return server.stop(timeout)


def _env() -> dict:
    # The child must import this same mrckit, also from a source checkout; unbuffered, so
    # its log lines reach the file at once.
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = child_pythonpath(env)
    return env


def _terminate(proc: subprocess.Popen, timeout: float) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
