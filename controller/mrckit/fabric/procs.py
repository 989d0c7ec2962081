"""Processes of an emulated fabric: P4Runtime servers of eBPF switches, bmv2 switches and host
agents (design section 9).

Each is started with ``subprocess.Popen(["nsenter", "--net=/var/run/netns/NS", ...])``: a
fresh process that sees the bpffs pins (``ip netns exec`` would remount /sys), and never a
fork of this process, which may run gRPC threads. Each gets its own session, so a Ctrl-C in
the terminal reaches only the CLI, which then stops them in order. Output goes to a log file
(a pipe would break once the CLI exits); they log one line when they serve, and
:func:`wait_ready` waits for all of them at once, so the start-up costs one Python start,
not one per node.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import MrcError
from ..netns import NETNS_DIR
from ..resources import child_pythonpath
from .state import ProcInfo, start_ticks, wait_gone

READY_TIMEOUT_S = 60.0
"""Two cores starting twenty Python processes at once: be patient."""
STOP_TIMEOUT_S = 10.0


def child_env() -> dict:
    """The environment of our child processes: this mrckit first on PYTHONPATH, unbuffered."""
    # The child imports this same mrckit, from a source checkout as well.
    env = dict(os.environ, PYTHONUNBUFFERED="1")  # the ready line must reach the log at once
    env["PYTHONPATH"] = child_pythonpath(env)
    return env


def mrc_argv(*args: str) -> list[str]:
    """argv running the ``mrc`` CLI of this very Python with ``args``."""
    return [sys.executable, "-c", "import sys; from mrckit.cli import main; sys.exit(main())", *args]


def start(argv: list[str], log: Path, *, ns: str | None, address: str) -> tuple[subprocess.Popen, ProcInfo]:
    """Start ``argv`` inside namespace ``ns`` (None: here), stdout and stderr to ``log``.
    Returns the Popen and its :class:`ProcInfo`."""
    if ns is not None:
        argv = ["nsenter", f"--net={NETNS_DIR}/{ns}", "--", *argv]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=child_env(), start_new_session=True)
    ticks = None
    for _ in range(50):  # /proc/PID appears at once; be safe against a slow exec
        ticks = start_ticks(proc.pid)
        if ticks is not None:
            break
        time.sleep(0.01)
    return proc, ProcInfo(proc.pid, ticks or 0, address, argv, str(log))


def wait_ready(procs: dict[str, tuple[subprocess.Popen, ProcInfo]], marker: str,
               timeout: float = READY_TIMEOUT_S, progress: Callable[[int], None] | None = None) -> None:
    """Wait until the log of every process holds ``marker``; ``progress(n)`` is called with
    the number ready each time it grows.

    Raises:
        MrcError: one exited or stayed silent for ``timeout`` s; the message names the node
            and gives the last lines of its log.
    """
    waiting = dict(procs)
    end = time.monotonic() + timeout
    while waiting and time.monotonic() < end:
        for node, (proc, info) in list(waiting.items()):
            if marker in Path(info.log).read_text(errors="replace"):
                del waiting[node]
                if progress:
                    progress(len(procs) - len(waiting))
            elif proc.poll() is not None:
                raise MrcError(f"{node} did not start (exit status {proc.returncode}): {tail(info.log)}")
        time.sleep(0.1)
    if waiting:
        node, (_, info) = next(iter(waiting.items()))
        raise MrcError(f"{node} did not start within {timeout:g} s ({len(waiting)} still waiting): "
                       f"{tail(info.log)}")


def tail(path: str, lines: int = 6) -> str:
    """The last ``lines`` lines of a log, on one line each joined by ' | '."""
    try:
        text = Path(path).read_text(errors="replace").strip().splitlines()
    except FileNotFoundError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(log is empty)"


def stop(info: ProcInfo, timeout: float = STOP_TIMEOUT_S) -> bool:
    """SIGTERM the process of ``info`` (only if it is the same process: pid and start time),
    wait, SIGKILL after ``timeout`` s. Returns whether it was running."""
    if not info.alive():
        return False
    try:
        os.kill(info.pid, signal.SIGTERM)
        if not wait_gone(info.pid, info.start_ticks, timeout):
            os.kill(info.pid, signal.SIGKILL)
            wait_gone(info.pid, info.start_ticks, timeout)
    except ProcessLookupError:
        pass
    return True


def stop_many(infos: list[ProcInfo], timeout: float = STOP_TIMEOUT_S) -> None:
    """Stop several processes in parallel: SIGTERM all, wait, SIGKILL the rest."""
    live = [i for i in infos if i.alive()]
    for info in live:
        try:
            os.kill(info.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    end = time.monotonic() + timeout
    for info in live:
        if not wait_gone(info.pid, info.start_ticks, max(end - time.monotonic(), 0.0)):
            try:
                os.kill(info.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            wait_gone(info.pid, info.start_ticks, 2.0)
