"""One host's side of ``mrc traffic``: a process inside the host's namespace that runs one MRC
endpoint with every QP of that host, the QPs it writes on and the QPs it is written to.

It reads one JSON line on stdin, the plan::

    {"nic": ADDR, "endpoint": "python"|"native", "seed": S, "timeout": SECONDS, "timeout_exp": N,
     "transport": "mrc"|"rc", "send": [[FLOW, PEER_NIC, SIZE, WRITES], ...],
     "recv": [[FLOW, PEER_NIC, SIZE, WRITES], ...]}

(WRITES may be left out: 1) and answers in JSON lines on stdout: ``{"ready": true}`` once
every QP and memory region exists; after the line ``go`` it posts one WRITE_WITH_IMM per send
flow (all flows at once, the immediate is the flow id; a flow of several writes posts its
``patterns.chunks`` one after another, each once the previous completed) and prints
``{"sent": {FLOW: [start_ns, end_ns, error, [[post_ns, done_ns], ...]]}}`` once they all
ended (the list of each write's times for a flow of several writes, else empty). It prints
``{"done": true, "recvs": {FLOW: [t_ns, sha256_ok]}}`` once every write of every flow to it
completed, the timeout passed, or the line ``stop`` came (every writer has ended: what has not
arrived will not). It keeps answering its peers until stdin closes, then exits.
With ``"progress_s": P`` in the plan, it also prints ``{"placed": BYTES, "t_ns": T}`` every P
seconds from ``go`` until ``done``: the bytes placed so far in all its receive regions. With
``"max_cwnd": W``, every writer's window is capped at W full packets.

Flow f uses QP number ``QPN_BASE + f`` at both ends and rkey ``RKEY_BASE + f``; its data is
:func:`flow_data`, which both ends and the report derive. Times are CLOCK_MONOTONIC ns, which
every namespace of one machine shares.
"""

from __future__ import annotations

import hashlib
import json
import queue
import sys
import threading
import time

QPN_BASE = 0x10000
RKEY_BASE = 0x10000
MODULE = "mrckit.apps.traffic.worker"
STOP_DRAIN_S = 10.0
"""After ``stop``, how long the receiver keeps polling for completions already queued (several
QPs often complete together as the last writer ends, and at a load average of 30 the last
ones arrive seconds after their writers reported)."""


def flow_data(seed: int, flow: int, size: int) -> bytes:
    """The ``size`` bytes that flow ``flow`` of a run seeded ``seed`` writes (deterministic)."""
    from ..common import seeded_bytes

    return seeded_bytes(f"mrc-traffic/{seed}/{flow}", size)


_SAY = threading.Lock()


def _say(**msg) -> None:
    with _SAY:  # the writer's and the receiver's threads both report
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def _writes(entry: list) -> int:
    """A plan entry's number of writes (1 when the entry leaves it out)."""
    return entry[3] if len(entry) > 3 else 1


class _Series:
    """The writes of one flow of several writes, one after another on its QP (a thread): each
    posted once the previous completed, so each one's completion time is its own."""

    def __init__(self, ep, qp, flow: int, data: bytes, writes: int, deadline: float):
        from .patterns import chunks

        self.times: list[list[int]] = []
        self.error: str | None = None
        self.done = threading.Event()
        args = (ep, qp, flow, data, chunks(len(data), writes), deadline)
        threading.Thread(target=self._run, args=args, daemon=True).start()

    def _run(self, ep, qp, flow, data, parts, deadline) -> None:
        try:
            for off, n in parts:
                part = data[off:off + n]  # held until its completion, as write() asks
                comp = ep.write(qp, part, off, RKEY_BASE + flow, imm=flow)
                comp.wait(max(0.0, deadline - time.monotonic()))
                self.times.append([comp.started_ns, comp.finished_ns])
        except Exception as exc:  # QpError or TimeoutError: reported with the flow, never a crash
            self.error = f"write {len(self.times) + 1} of {len(parts)}: {exc or type(exc).__name__}"
        finally:
            self.done.set()

    def result(self, deadline: float) -> list:
        """[start_ns, end_ns, error, times] once the series ended or at ``deadline``."""
        if not self.done.wait(max(0.0, deadline - time.monotonic())):
            return [self.times[0][0] if self.times else None, None, "timed out", list(self.times)]
        start = self.times[0][0] if self.times else None
        end = self.times[-1][1] if self.error is None and self.times else None
        return [start, end, self.error, self.times]


def _post(ep, qps, plan, data: dict, deadline: float) -> dict:
    """Post every send flow of ``plan`` with its bytes from ``data`` (flow -> bytes); returns
    flow -> Completion, or a :class:`_Series` for a flow of several writes."""
    comps: dict = {}
    for entry in plan["send"]:
        flow = entry[0]
        if _writes(entry) > 1:
            comps[flow] = _Series(ep, qps[flow], flow, data[flow], _writes(entry), deadline)
        else:
            comps[flow] = ep.write(qps[flow], data[flow], 0, RKEY_BASE + flow, imm=flow)
    return comps


def _receive(ep, regions, want: dict, deadline: float, stop: threading.Event) -> dict:
    """Wait for every WRITE_WITH_IMM completion of every recv flow and then check its region's
    bytes against ``want`` (flow -> (SHA-256 hex of its data, its number of writes)), until
    ``deadline`` or ``stop``; returns flow -> [t_ns, sha256_ok]."""
    seen = {flow: 0 for flow in want}
    got: dict = {}
    stopped = None
    while len(got) < len(want) and time.monotonic() < deadline:
        if stop.is_set():
            # Every writer has ended, but a completion its last ack implies may still be on its
            # way through this endpoint's queue: drain for a moment before giving up on it.
            stopped = stopped or time.monotonic()
            if time.monotonic() - stopped > STOP_DRAIN_S:
                break
        comp = ep.poll_recv(timeout=0.05)
        if comp is None:
            continue
        flow = comp.qpn - QPN_BASE
        if flow in want and flow not in got and comp.imm == flow:
            seen[flow] += 1
            expected, writes = want[flow]
            if seen[flow] == writes:
                got[flow] = [time.monotonic_ns(), regions[flow].sha256() == expected]
    return got


def _sends(comps: dict, deadline: float) -> dict:
    """flow -> [start_ns, end_ns, error or None, write times], waiting for each until ``deadline``."""
    out = {}
    for flow, comp in comps.items():
        if isinstance(comp, _Series):
            out[flow] = comp.result(deadline)
            continue
        try:
            comp.wait(max(0.0, deadline - time.monotonic()))
            out[flow] = [comp.started_ns, comp.finished_ns, None, []]
        except Exception as exc:  # QpError or TimeoutError: reported per flow, never a crash
            out[flow] = [comp.started_ns, None, str(exc) or type(exc).__name__, []]
    return out


def _progress(regions: dict, every_s: float, until: threading.Event) -> None:
    """Print the bytes placed in ``regions`` so far every ``every_s`` s until ``until``."""
    while True:
        _say(placed=sum(mr.placed_bytes for mr in regions.values()), t_ns=time.monotonic_ns())
        if until.wait(every_s):
            return


def _window(packets: int):
    """The congestion settings of a window capped at ``packets`` full packets (None: no cap)."""
    from ...endpoint.cc import NsccConfig

    return NsccConfig.capped(packets) if packets else None


def _stdin_lines() -> queue.Queue:
    """Lines of stdin, stripped, in a queue that a reader thread fills; None at EOF."""
    lines: queue.Queue = queue.Queue()

    def read():
        for line in sys.stdin:
            lines.put(line.strip())
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _follow(lines: queue.Queue, stop: threading.Event, closed: threading.Event) -> None:
    """Set ``stop`` on the line ``stop`` or at EOF, and ``closed`` at EOF."""
    while (line := lines.get()) is not None:
        if line == "stop":
            stop.set()
    stop.set()
    closed.set()


def run(plan: dict) -> int:
    from ...endpoint.endpoint import QpConfig
    from ...endpoint.requestor import INFINITE_RETRIES, RetryConfig

    from ...endpoint import implementation

    try:
        ep = implementation(plan.get("endpoint", "python"))(plan["nic"])
    except (ValueError, OSError) as exc:
        _say(error=f"cannot start the endpoint on {plan['nic']}: {exc}")
        return 1
    try:
        # A QP never gives up by itself: a busy machine may starve an endpoint for longer than
        # its retries last, and the run's timeout bounds every flow anyway.
        config = QpConfig(retry=RetryConfig(timeout_exp=plan["timeout_exp"], exp_retries=INFINITE_RETRIES),
                          cc=_window(plan.get("max_cwnd", 0)), transport=plan.get("transport", "mrc"))
        regions, qps = {}, {}
        for flow, peer, size, *_ in plan["recv"]:
            regions[flow] = ep.register_mr(size, rkey=RKEY_BASE + flow)
            ep.create_qp(peer, qpn=QPN_BASE + flow, remote_qpn=QPN_BASE + flow, config=config)
        for flow, peer, *_ in plan["send"]:
            qps[flow] = ep.create_qp(peer, qpn=QPN_BASE + flow, remote_qpn=QPN_BASE + flow, config=config)
        # The data and the expected hashes before "ready": on a busy machine, making them
        # after "go" would hold the writes back by seconds.
        data = {flow: flow_data(plan["seed"], flow, size) for flow, _peer, size, *_ in plan["send"]}
        want = {entry[0]: (hashlib.sha256(flow_data(plan["seed"], entry[0], entry[2])).hexdigest(), _writes(entry))
                for entry in plan["recv"]}
        _say(ready=True)
        lines = _stdin_lines()
        if lines.get() != "go":
            return 1
        deadline = time.monotonic() + plan["timeout"]
        comps = _post(ep, qps, plan, data, deadline)
        stop, closed = threading.Event(), threading.Event()
        threading.Thread(target=_follow, args=(lines, stop, closed), daemon=True).start()
        threading.Thread(target=lambda: _say(sent=_sends(comps, deadline)), daemon=True).start()
        received = threading.Event()
        if plan.get("progress_s"):
            threading.Thread(target=_progress, args=(regions, plan["progress_s"], received), daemon=True).start()
        recvs = _receive(ep, regions, want, deadline, stop)
        received.set()
        _say(done=True, recvs=recvs)
        closed.wait()  # keep answering the peers until the run is over
    finally:
        ep.close()
    return 0


def main() -> int:
    line = sys.stdin.readline()
    try:
        plan = json.loads(line)
    except ValueError:
        _say(error=f"the plan is not JSON: {line[:80]!r}")
        return 2
    return run(plan)


if __name__ == "__main__":
    sys.exit(main())
