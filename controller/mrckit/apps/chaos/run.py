"""Run a chaos soak: bring up the default fabric, keep a ring of MRC QPs writing across it, apply
the seeded schedule (``schedule.py``), then gather what happened into a :class:`ChaosReport`.

The traffic runs on its own thread as rounds of ``mrc traffic ring`` (one QP per host, every
byte verified at the receiver), until the schedule has ended. Each fault begins on a thread of
its own at its planned time; one that takes effect late (a process start on a busy machine) says
by how much in the report.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ...errors import MrcError
from ...topology import generate_clos
from ..traffic import make_flows, run_traffic
from .report import ChaosReport, Decision, FaultResult
from .schedule import Fault, make_schedule

ROUND_TIMEOUT_S = 240.0
"""How long one traffic round may take: a QP whose host's agent restarts waits for it."""
DOWN_WAIT_S = 10.0
"""How long the switches' P4Runtime server may stay down waiting for traffic to show that the
switches forward without it (a traffic round may be between its QPs)."""


@dataclass(frozen=True)
class ChaosOptions:
    """A soak's settings: ``seed``, ``duration_s`` (the schedule's length), the ``endpoint``
    (``native`` or ``python``), ``qp_size`` (bytes each QP of a round writes), the fabric
    ``name`` and its namespace ``prefix`` (None: the fabric's default)."""

    seed: int = 1
    duration_s: float = 60.0
    endpoint: str = "native"
    qp_size: int = 32 << 20
    name: str = "chaos"
    prefix: str | None = None


def run_chaos(opts: ChaosOptions, say: Callable[[str], None] = lambda _: None) -> ChaosReport:
    """Bring up the default fabric as ``opts.name``, run the soak, tear the fabric down (also on
    error and Ctrl-C) and return the report.

    Raises:
        MrcError: the fabric did not come up, or a bad option (duration, endpoint).
    """
    from ...fabric.fabric import Fabric
    from ...fabric.state import DEFAULT_PREFIX

    topo = generate_clos()
    spine_links = [(link.a, link.b) for link in map(topo.fabric_link, range(len(topo.fabric_links)))]
    schedule = make_schedule(opts.seed, opts.duration_s, spine_links, [h.name for h in topo.hosts])
    say(f"bringing up fabric {opts.name}")
    fab = Fabric.up(topo, name=opts.name, prefix=opts.prefix or DEFAULT_PREFIX)
    try:
        report = ChaosReport(seed=opts.seed, duration_s=opts.duration_s, fabric=opts.name,
                             endpoint=opts.endpoint, qp_size=opts.qp_size)
        traffic = _Traffic(fab, opts, report)
        t0 = time.monotonic()
        traffic.start()
        report.faults = _Faults(fab, t0, say).run(schedule)
        traffic.finish(say)
        report.decisions = _decisions(fab, t0)
        report.reconcile_writes = _controller_writes(fab)
        return report
    finally:
        say(f"tearing fabric {opts.name} down")
        fab.down()


class _Traffic:
    """Rounds of a ring of QPs, on a thread, until :meth:`finish`; results into ``report``."""

    def __init__(self, fab, opts: ChaosOptions, report: ChaosReport):
        self.fab, self.opts, self.report = fab, opts, report
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._loop, name="chaos-traffic", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _loop(self) -> None:
        try:
            while not self.stop.is_set():
                self._round(self.report.rounds)
        except BaseException as exc:  # noqa: BLE001 - reported by finish() on the main thread
            self.error = exc

    def _round(self, n: int) -> None:
        flows = make_flows("ring", self.fab.hosts(), self.opts.qp_size, seed=self.opts.seed * 1000 + n)
        result = run_traffic(self.fab, "ring", flows, endpoint=self.opts.endpoint, seed=self.opts.seed * 1000 + n,
                             timeout=ROUND_TIMEOUT_S)
        r = self.report
        r.rounds += 1
        r.flows += len(result.flows)
        r.flows_ok += sum(f.ok for f in result.flows)
        r.bytes_verified += sum(f.size for f in result.flows if f.ok)
        r.bytes_lost += sum(f.size for f in result.flows if not f.ok)
        r.flow_errors += [f"round {n} QP {f.id} {f.src}->{f.dst}: {f.error}" for f in result.flows if f.error]

    def finish(self, say) -> None:
        """Let the running round complete, then stop. Raises what the thread raised."""
        say("schedule over: waiting for the last traffic round")
        self.stop.set()
        self.thread.join()
        if self.error is not None:
            raise self.error


class _Faults:
    """Applies a schedule on a running fabric; times are seconds from ``t0`` (monotonic)."""

    def __init__(self, fab, t0: float, say):
        self.fab, self.t0, self.say = fab, t0, say
        self.wall0 = time.time_ns() - int((time.monotonic() - t0) * 1e9)  # wall ns at t0

    def now(self) -> float:
        return time.monotonic() - self.t0

    def run(self, schedule: list[Fault]) -> list[FaultResult]:
        """Apply ``schedule``: each fault begins on its own thread at its start time (a restart
        takes seconds and must not delay the next fault); a link fault is restored at its end
        time, once it has taken effect and lasted its planned length (a late start shifts its
        end; it is never restored before it failed). Everything is restored at the end, also
        on error."""
        results = {id(f): FaultResult(kind=f.kind, target=list(f.target), value=f.value, planned_s=f.start_s)
                   for f in schedule}
        steps = sorted([(f.start_s, 0, f) for f in schedule] + [(f.end_s, 1, f) for f in schedule
                                                                 if f.kind in ("loss", "flap")],
                       key=lambda s: (s[0], s[1]))
        begun: dict[int, threading.Thread] = {}
        try:
            for at, is_end, fault in steps:
                time.sleep(max(at - self.now(), 0.0))
                res = results[id(fault)]
                if is_end:
                    begun[id(fault)].join()
                    if res.applied_s is not None:  # a late fault still lasts its planned length
                        time.sleep(max(res.applied_s + fault.end_s - fault.start_s - self.now(), 0.0))
                    self._guard(self._end, fault, res)
                else:
                    begun[id(fault)] = threading.Thread(target=self._guard, args=(self._begin, fault, res),
                                                        name=f"chaos-{fault.kind}", daemon=True)
                    begun[id(fault)].start()
            for t in begun.values():
                t.join()
        finally:
            self.fab.restore_all()  # nothing stays broken, whatever happened above
        return [results[id(f)] for f in schedule]

    def _guard(self, step, fault: Fault, res: FaultResult) -> None:
        """Run ``step``; a fault that cannot be applied is recorded in its result, not raised."""
        try:
            step(fault, res)
        except MrcError as exc:
            res.error = str(exc)
            self.say(f"{fault.kind}: {exc}")

    def _begin(self, fault: Fault, res: FaultResult) -> None:
        self.say(f"{self.now():6.2f} s  {fault.describe()}")
        if fault.kind in ("loss", "flap"):
            self.fab.fail_link(*fault.target, kind=fault.kind, value=fault.value)
            res.applied_s = round(self.now(), 3)
            return
        which = {"controller": "controller", "switches": "switches"}.get(fault.kind) or fault.target[0]
        seen: dict[str, int] = {}
        while_down = (lambda: seen.update(_crossed_while_down(self.fab))) if fault.kind == "switches" else None
        r = self.fab.restart(which, kill=fault.kind != "agent", down_s=fault.value, while_down=while_down)
        res.applied_s = round((r.stopped_ns - self.wall0) / 1e9, 3)
        res.ended_s = round((r.serving_ns - self.wall0) / 1e9, 3)
        res.evidence = {"down_s": round((r.serving_ns - r.stopped_ns) / 1e9, 3), **seen}

    def _end(self, fault: Fault, res: FaultResult) -> None:
        if res.applied_s is None:
            return
        if fault.kind == "loss":
            res.evidence = self._loss_counts(fault)
        self.fab.restore(*fault.target)
        res.ended_s = round(self.now(), 3)
        if fault.kind == "flap":
            window = self.fab.flap_window(*fault.target)
            res.evidence = {"flaps": window.flaps if window else None}
        self.say(f"{self.now():6.2f} s  restored {'-'.join(fault.target)}")

    def _loss_counts(self, fault: Fault) -> dict:
        """Drops of the loss program at both ends, and its first drop (s from t0)."""
        from ...fabric import faults
        from ...fabric.faultctl import find_link

        na, ia, nb, ib = find_link(self.fab.state, *fault.target)
        dropped = sum(faults.read_stats(self.fab.state.nodes[n], i).dropped_loss for n, i in ((na, ia), (nb, ib)))
        first = self.fab.first_drop_ns(*fault.target)
        return {"dropped": dropped,
                "first_drop_s": None if first is None else round(first / 1e9 - self.t0, 3)}


def _crossed_while_down(fab) -> dict[str, int]:
    """Packets that crossed the fabric (decapsulated by a receiving host's dataplane) while no
    P4Runtime server ran, waiting up to :data:`DOWN_WAIT_S` for the first: the switches
    forwarded them from their pinned maps."""
    before = _decapped(fab)
    end = time.monotonic() + DOWN_WAIT_S
    crossed = 0
    while crossed == 0 and time.monotonic() < end:
        time.sleep(0.05)
        now = _decapped(fab)
        crossed = sum(max(now.get(h, 0) - n, 0) for h, n in before.items())
    return {"crossed_while_down": crossed}


def _decapped(fab) -> dict[str, int]:
    """Each host's ``RX_DECAP`` count (its agent's dataplane counters); a host whose agent
    does not answer is left out."""
    import grpc

    out = {}
    for name in fab.hosts():
        try:
            out[name] = int(fab.host(name).stats().counters.get("dp_rx_decap", 0))
        except grpc.RpcError:
            continue
    return out


def _decisions(fab, t0: float) -> list[Decision]:
    """The controller's LOCALISED, DENY and LIFT marks after ``t0``, with their reasons."""
    from ..demo.observe import controller_events

    out = []
    for e in controller_events(fab):
        if e.what in ("LOCALISED", "DENY", "LIFT") and e.t_ns / 1e9 >= t0:
            out.append(Decision(kind=e.what, t_s=round(e.t_ns / 1e9 - t0, 3), links=list(e.links), why=e.detail))
    return out


def _controller_writes(fab) -> dict[str, int] | None:
    """Per switch, the running controller's writes over its life (None: no status)."""
    from ...control.client import read_status

    try:
        status = read_status(fab.name)
    except MrcError:
        return None
    return {name: sum(int(t.get(k, 0)) for k in ("inserted", "modified", "deleted", "pipeline_pushed"))
            for name, s in status.get("switches", {}).items() for t in [s.get("total", {})]}
