"""Stop and start again one of a running fabric's own processes, as an operator or a crash would:
the controller, the P4Runtime server of the eBPF switches, or one host agent.

Each comes back with its own command line, so it finds what it left: the controller reconciles
the switches from a Read and takes the agents' denials over; the switch server serves the pinned
maps, which forwarded packets all along; an agent loads its dataplane again and the controller
configures it. The previous log is kept beside the new one (``<log>.prev``).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import MrcError
from ..switch.p4runtime.process import SERVING_MARKER
from . import procs
from .nodes import AGENT_READY
from .state import FabricState, ProcInfo, wait_gone

CONTROLLER = "controller"
SWITCHES = "switches"
"""The name of the one process that serves P4Runtime for every eBPF switch of a fabric."""
CONTROLLER_READY = "ready:"
"""The line ``mrc controller run`` prints once it has programmed and configured everything."""
STOP_WAIT_S = 10.0


@dataclass(frozen=True)
class Restart:
    """One restart: which process, how (``SIGKILL`` or ``SIGTERM``), and the wall-clock ns
    (CLOCK_REALTIME) at which the signal was sent and the new process served."""

    which: str
    signal: str
    stopped_ns: int
    serving_ns: int


def processes(state: FabricState) -> list[str]:
    """The names :func:`locate` takes: ``controller`` (if one runs), ``switches`` (eBPF
    target), and each host name."""
    out = [CONTROLLER] if state.controller else []
    out += [SWITCHES] if state.target == "ebpf" and state.switches else []
    return out + sorted(state.hosts)


def restart_process(info: ProcInfo, which: str, marker: str, *, kill: bool = False, down_s: float = 0.0,
                    while_down: Callable[[], object] | None = None,
                    started: Callable[[ProcInfo], None] = lambda _: None) -> Restart:
    """Stop the process of ``info`` with SIGKILL (``kill``) or SIGTERM, wait until it is gone,
    call ``while_down()`` if given, leave it down until ``down_s`` seconds have passed since it
    was gone, start it again with its own command line, call ``started(new_info)`` (the caller
    records it, so a teardown finds it even if it never serves), and wait until its log shows
    ``marker``. ``which`` names it in errors. Holds no lock: the fabric's state is the caller's.

    Raises:
        MrcError: the new process did not serve (with its log).
    """
    sig = signal.SIGKILL if kill else signal.SIGTERM
    stopped_ns = time.time_ns()
    if info.alive():
        try:
            os.kill(info.pid, sig)
        except ProcessLookupError:
            pass
        if not wait_gone(info.pid, info.start_ticks, STOP_WAIT_S):
            os.kill(info.pid, signal.SIGKILL)
            wait_gone(info.pid, info.start_ticks, STOP_WAIT_S)
    gone = time.monotonic()
    if while_down is not None:
        while_down()
    time.sleep(max(down_s - (time.monotonic() - gone), 0.0))
    log = Path(info.log)
    if log.exists():
        log.replace(log.with_name(log.name + ".prev"))
    proc, new = procs.start(info.argv, log, ns=None, address=info.address)  # argv holds its nsenter
    started(new)
    procs.wait_ready({which: (proc, new)}, marker)
    return Restart(which, sig.name, stopped_ns, time.time_ns())


def locate(state: FabricState, which: str) -> tuple[ProcInfo, str]:
    """The process ``which`` (see :func:`processes`) and the log line it prints once it serves.

    Raises:
        MrcError: no such process in this fabric (naming the ones there are).
    """
    if which == CONTROLLER and state.controller:
        return ProcInfo(**state.controller), CONTROLLER_READY
    if which == SWITCHES and state.target == "ebpf" and state.switches:
        return next(iter(state.switches.values())), SERVING_MARKER
    if which in state.hosts:
        return state.hosts[which], AGENT_READY
    raise MrcError(f"no process {which!r} in fabric {state.name}: use one of {', '.join(processes(state))}")


def record(state: FabricState, which: str, new: ProcInfo) -> None:
    """Put the restarted process ``which`` in ``state`` and save it."""
    if which == CONTROLLER:
        state.controller = dataclasses.asdict(new)
    elif which == SWITCHES:
        state.switches = {name: dataclasses.replace(new, address=old.address) for name, old in state.switches.items()}
    else:
        state.hosts[which] = new
    state.save()
