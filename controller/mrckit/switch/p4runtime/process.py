"""Start and stop the P4Runtime server of one eBPF switch as its own process.

The process runs inside the switch's network namespace, entered with ``nsenter --net`` from a
fresh ``subprocess.Popen`` (design section 9: ``ip netns exec`` would remount /sys and hide the
pins, and forking a process that runs gRPC threads is unsafe). It listens on a unix socket
that the controller reaches from the root namespace. The eBPF switch manager calls ``spawn``
after ``EbpfSwitch.setup()`` and ``stop`` before ``teardown()``.
"""

import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ...errors import MrcError
from .server import TlsFiles

READY_TIMEOUT_S = 20.0


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


def spawn(switch: str, address: str, **kwargs) -> subprocess.Popen:
    """Start the server (arguments as ``command``) and return once it listens.

    Raises MrcError with the server's own error output if it exits or stays silent for
    ``READY_TIMEOUT_S`` seconds (it is then killed).
    """
    errors = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: the server never blocks on it
    proc = subprocess.Popen(command(switch, address, **kwargs), stdout=subprocess.PIPE,
                            stderr=errors, text=True, env=_env())
    proc.errors = errors
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline()
            if line.startswith("listening"):
                return proc
        if proc.poll() is not None:
            break
    _terminate(proc, 5.0)
    errors.seek(0)
    err = errors.read().strip()
    stop(proc)
    raise MrcError(f"P4Runtime server for switch {switch} did not start on {address}: {err or 'no output'}")


def stop(proc: subprocess.Popen, timeout: float = 10.0) -> int:
    """SIGTERM the server, wait (SIGKILL after ``timeout`` s); return its exit code."""
    _terminate(proc, timeout)
    for stream in (proc.stdout, getattr(proc, "errors", None)):
        if stream:
            stream.close()
    return proc.returncode


def _env() -> dict:
    # The child must import this same mrckit, also from a source checkout.
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _terminate(proc: subprocess.Popen, timeout: float) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
