"""The demo scenario's logic, apart from any fabric: when to fail and restore, and what the
samples, agent events and controller timeline say about the failover.

:class:`Phases` fires the fault at a third of the transfer (by bytes placed) and the restore at
two thirds (later if the fault has not lasted long enough yet). :func:`analyze` turns a finished run (:class:`RunRecord`) into a
:class:`~mrckit.apps.demo.report.DemoReport` whose ``checks`` are the issue's acceptance facts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from ...fabric.flap import FlapWindow
from ...wire.ev import ev_plane, ev_t1
from .report import (
    ByteCounts, Check, DeadEvMark, DemoReport, EndpointCounts, EndpointName, EvCycle, EvTransition, Failover,
    FaultEffect, FaultInfo, LossStats, Mode, PathStats, SwitchCounts, Target, TimelineEvent, path_name,
)
from .loss import loss_stats, per_ev_loss
from .series import Recorder, Sample

FAIL_FRACTION, RESTORE_FRACTION = 1 / 3, 2 / 3
LATEST_RESTORE_FRACTION = 0.8
"""The restore waits for the fault's minimum duration, but not beyond this fraction of bytes."""
SHARE_RATIO = 0.8
"""loss/flap: the failing path's share of data packets during the fault must stay below this
fraction of its healthiest-but-smallest sibling's share ("clearly smaller", ours)."""
OUT_OF_SERVICE = ("ASSUMED_BAD", "DENIED")
RETIRE_REASONS = ("RTO_TIMEOUT", "LOSS", "PATH_LOSS", "PORT_DOWN", "PEER_PORT_DOWN", "SACK_ALWAYS_SKIP")


class Phases:
    """Fault and restore points of a transfer of ``size`` bytes, by bytes placed.

    :meth:`due` returns ``"fail"`` once the responder has placed a third of the bytes, and
    ``"restore"`` once it has placed two thirds and the fault has lasted ``min_fault_ns``, or
    at ``latest_restore`` of the bytes whichever the time (a fast write still leaves the path
    time to come back); else None. Each fires once.
    """

    def __init__(self, size: int, min_fault_ns: int = 0, latest_restore: float = LATEST_RESTORE_FRACTION):
        if size <= 0:
            raise ValueError(f"transfer size must be positive, got {size}")
        self.fail_at = int(size * FAIL_FRACTION)
        self.restore_at = int(size * RESTORE_FRACTION)
        self.restore_by = int(size * max(latest_restore, RESTORE_FRACTION))
        self.min_fault_ns = min_fault_ns
        self.failed_ns: int | None = None
        self.restored = False

    def in_effect(self, now_ns: int) -> None:
        """The fault took effect at ``now_ns`` (CLOCK_MONOTONIC): its minimum duration counts
        from here, not from the decision (starting a flap process takes a while on a busy
        machine)."""
        self.failed_ns = now_ns

    def due(self, placed: int, now_ns: int = 0) -> str | None:
        """The action due at ``placed`` bytes placed at time ``now_ns`` (CLOCK_MONOTONIC), if
        any (and mark it done)."""
        if self.failed_ns is None:
            if placed >= self.fail_at:
                self.failed_ns = now_ns
                return "fail"
            return None
        if self.restored or placed < self.restore_at:
            return None
        if now_ns - self.failed_ns >= self.min_fault_ns or placed >= self.restore_by:
            self.restored = True
            return "restore"
        return None


@dataclass(frozen=True)
class AgentEvent:
    """An EV event from a host agent (WatchEvents), with the host that reported it.
    ``t_ns`` is CLOCK_MONOTONIC; states and reason are names (``ASSUMED_BAD``, ``RTO_TIMEOUT``)."""

    host: str
    t_ns: int
    peer: str
    ev: int
    old_state: str
    new_state: str
    reason: str
    plane: int = 0
    link: str = ""
    probe_ok: bool = False
    replaced_by: int = 0


@dataclass(frozen=True)
class ControllerEvent:
    """A controller action at ``t_ns`` (CLOCK_MONOTONIC): ``what`` is ``DENY``, ``LIFT``,
    ``LOCALISED`` or another timeline word; ``links`` the links it concerns."""

    t_ns: int
    what: str
    links: tuple[str, ...] = ()
    detail: str = ""


@dataclass
class RunRecord:
    """Everything one demo run measured, before analysis. Times are CLOCK_MONOTONIC ns.

    ``fault_rows``/``restore_rows``: the sender's EV table toward the receiver just before the
    fault and just before the restore (rows as ``HostAgent.ev_table``).

    ``mode``: the fabric's forwarding mode. ``path_of``: EV -> (plane, spine) of the path the
    report attributes it to (SRv6: the EV's own fields; EV-hash mode: the spine it hashes to).
    Loss accounting (``mrckit.apps.demo.loss``): ``rx_sent`` per EV the send times (ns) of the
    packets that reached the responder, ``packets_sent``/``packets_received`` the endpoints'
    totals, ``link_packets_lost`` the failed link's switch counters' figure. ``dead_evs``: the
    sender's EVs in use at fault time whose path crossed the failed link (SRv6: the EV's path;
    EV-hash mode: the sender T0's group at fault time, ``ecmp_paths.group_path``).
    ``fault_program_drops``: what the loss/blackhole program dropped (None: not read).
    ``link_denied_at_fault``: the sender denied the link when the fault came (None: not read)."""

    target: Target
    topology: dict[str, int]
    sender: str
    receiver: str
    receiver_nic: str
    fault: FaultInfo
    recorder: Recorder
    t_fault_ns: int
    t_restore_ns: int
    t_end_ns: int
    bytes: ByteCounts
    endpoint: EndpointCounts
    switches: SwitchCounts = field(default_factory=SwitchCounts)
    events: list[AgentEvent] = field(default_factory=list)
    controller: list[ControllerEvent] = field(default_factory=list)
    fault_log: list[tuple[int, str]] = field(default_factory=list)
    demo_log: list[tuple[int, str]] = field(default_factory=list)
    fault_rows: list[dict] = field(default_factory=list)
    restore_rows: list[dict] = field(default_factory=list)
    mode: Mode = "srv6"
    path_of: Callable[[int], tuple[int, int]] = field(default=lambda ev: _ev_path(ev))
    rx_sent: dict[int, list[int]] = field(default_factory=dict)
    packets_sent: int = 0
    packets_received: int = 0
    link_packets_lost: int | None = None
    dead_evs: frozenset[int] = frozenset()
    fault_program_drops: int | None = None
    link_denied_at_fault: bool | None = None
    endpoint_name: EndpointName = "python"
    t_fault_injected_ns: int | None = None
    t_first_drop_ns: int | None = None
    agent_rto_ns: int | None = None
    writer_rto_ns: int | None = None
    writer_max_cwnd: int | None = None
    t_restored_ns: int | None = None
    flap: FlapWindow | None = None


def analyze(run: RunRecord) -> DemoReport:
    """The report of a finished run, with its checks evaluated.

    Raises:
        ValueError: the run has no samples.
    """
    rec = run.recorder
    if not rec.samples:
        raise ValueError("the demo run recorded no samples")
    failover = _failover(run)
    paths = _paths(run, failover)
    duration = (run.t_end_ns - rec.t0_ns) / 1e9
    report = DemoReport(
        target=run.target, mode=run.mode, endpoint_name=run.endpoint_name, agent_rto_ns=run.agent_rto_ns,
        writer_rto_ns=run.writer_rto_ns, writer_max_cwnd=run.writer_max_cwnd, topology=run.topology, sender=run.sender, receiver=run.receiver,
        duration_s=duration, goodput_gbps=_gbps(run.bytes.sent, duration), bytes=run.bytes,
        endpoint=run.endpoint, fault=run.fault, failover=failover,
        ev_transitions=_transitions(run.events), ev_cycles=_cycles(run), paths=paths,
        switches=run.switches, timeline=_timeline(run), series=rec.series(), loss=_loss(run),
        fault_effect=_fault_effect(run))
    report.series.failed_path_retired_t_s, report.series.failed_path_probed_back_t_s = _cycle_times(run)
    report.checks = checks(report)
    report.passed = all(c.ok for c in report.checks)
    return report


def _loss(run: RunRecord) -> LossStats:
    retirements = [(e.t_ns, e.ev) for e in _sender_events(run)
                   if e.ev and e.new_state == "ASSUMED_BAD" and e.reason in RETIRE_REASONS]
    rec = run.recorder
    stats = loss_stats(tx_samples=rec.ev_samples, last_tx=rec.ev_last_tx, read_end_ns=rec.ev_read_end_ns,
                      rx_sent=run.rx_sent, packets_sent=run.packets_sent, packets_received=run.packets_received,
                      t_fault_ns=run.t_fault_ns, t_restore_ns=run.t_restore_ns, retirements=retirements,
                      link_packets_lost=run.link_packets_lost)
    _dead_link_figures(run, stats)
    return stats


def _dead_link_figures(run: RunRecord, loss: LossStats) -> None:
    """Fill ``loss``'s figures of the EVs that crossed the failed link at fault time."""
    dead = run.dead_evs
    out = {e.ev for e in _sender_events(run)
           if e.ev in dead and run.t_fault_ns <= e.t_ns <= run.t_restore_ns
           and ((e.new_state == "ASSUMED_BAD" and e.reason in RETIRE_REASONS) or e.new_state == "DENIED")}
    final_tx = run.recorder.ev_samples[-1][1] if run.recorder.ev_samples else {}
    lost = per_ev_loss(final_tx, run.rx_sent)
    loss.dead_link_evs = len(dead)
    loss.dead_link_evs_retired = len(out)
    loss.dead_link_packets_lost = sum(n for ev, n in lost.items() if ev in dead)


def _fault_effect(run: RunRecord) -> FaultEffect:
    """Evidence that the fault hit the write (see ``FaultEffect``)."""
    if run.fault.kind in ("loss", "blackhole"):
        return FaultEffect(fault_program_drops=run.fault_program_drops, link_denied_at_fault=run.link_denied_at_fault)
    end = min(run.t_restore_ns, run.t_end_ns)
    if run.fault.kind == "down":
        downs = [run.t_fault_ns]  # set down synchronously by the demo itself
    else:  # each down of the flap process, as reported to the controller
        downs = [c.t_ns for c in run.controller if c.what == "LINK_DOWN" and run.fault.link in c.links
                 and run.t_fault_ns <= c.t_ns <= run.t_restore_ns]
    downs = sorted(t for t in downs if t < run.t_end_ns)
    if not downs:
        return FaultEffect(down_transitions=0, dead_link_packets_after=0)
    samples = run.recorder.ev_samples
    base = next((tx for t, tx in reversed(samples) if t <= downs[0]), {})
    last = next((tx for t, tx in reversed(samples) if t <= end), base)
    after = sum(max(last.get(ev, 0) - base.get(ev, 0), 0) for ev in run.dead_evs)
    return FaultEffect(down_transitions=len(set(downs)), dead_link_packets_after=after)


# ---------------------------------------------------------------- failover figures ------
def _on_path(plane: int, spine: int, fault: FaultInfo) -> bool:
    return (plane, spine) == (fault.plane, fault.spine)


def _sender_events(run: RunRecord) -> list[AgentEvent]:
    """The sender agent's EV state changes toward the receiver (and its port and link events).
    A PROBE_RESULT repeats its EV's state (a probe's outcome, not a change): left out, or a dead
    EV's later probe results would move the time it left service."""
    return [e for e in run.events if e.host == run.sender and e.peer in ("", run.receiver_nic)
            and e.reason != "PROBE_RESULT"]


def _failover(run: RunRecord) -> Failover:
    rec, fault = run.recorder, run.fault
    after = [e for e in run.events if run.t_fault_ns <= e.t_ns <= run.t_restore_ns]
    first_bad = next((e.t_ns for e in sorted(after, key=lambda e: e.t_ns)
                      if e.new_state == "ASSUMED_BAD" and e.ev), None)
    denies = [c for c in run.controller if c.what == "DENY" and c.t_ns >= run.t_fault_ns]
    deny = min(denies, key=lambda c: c.t_ns) if denies else None
    lifts = [c for c in run.controller if c.what == "LIFT" and deny and c.t_ns >= deny.t_ns]
    t_out = _t_out_of_service(run, deny)
    dead_tx = [r["last_tx_ns"] for r in run.restore_rows
               if _on_path(r["plane"], r["t1"], fault) and r["last_tx_ns"]]
    # Failover is complete once the path is out of service AND its last packet has left: the
    # dataplane applies the agent's decision a moment after the decision's timestamp.
    t_failover = None if t_out is None else max([t_out, *dead_tx])
    silent = _dead_path_packets(rec, fault, t_failover, run.t_restore_ns)
    b_fault, b_restore = rec.before(run.t_fault_ns), rec.before(run.t_restore_ns)
    end = rec.samples[-1]
    return Failover(
        t_fault_s=rec.seconds(run.t_fault_ns), t_restore_s=rec.seconds(run.t_restore_ns),
        t_first_assumed_bad_s=rec.seconds(first_bad), t_out_of_service_s=rec.seconds(t_out),
        t_failover_s=rec.seconds(t_failover),
        t_last_dead_tx_s=rec.seconds(max(dead_tx)) if dead_tx else None,
        t_deny_s=rec.seconds(deny.t_ns) if deny else None,
        deny_links=sorted({ln for c in denies for ln in c.links}),
        t_deny_lifted_s=rec.seconds(min(c.t_ns for c in lifts)) if lifts else None,
        goodput_before_gbps=_window_gbps(rec.samples[0], b_fault, rec.t0_ns),
        goodput_during_gbps=_window_gbps(b_fault, b_restore),
        goodput_after_gbps=_window_gbps(b_restore, end, end_bytes=run.bytes.placed, end_ns=run.t_end_ns),
        dead_path_packets_failover_to_restore=silent, **_dataplane(run))


def _dead_path_packets(rec: Recorder, fault: FaultInfo, t_failover: int | None, t_restore_ns: int) -> int | None:
    """Data packets the samples count on the failed path from failover to the restore: from
    the first read begun after the failover to the last read ended before the restore. None
    without a failover, or when less than one sampling interval of the fault was left after it."""
    if t_failover is None:
        return None
    a, b = rec.at(t_failover), rec.read_by(t_restore_ns)
    if a.t_ns >= b.t_ns:
        return None
    key = (fault.plane, fault.spine)
    return max(0, b.path_packets[key] - a.path_packets[key])


def dead_ev_out_times(events: list[AgentEvent], dead_evs: frozenset[int], t_from_ns: int,
                      t_until_ns: int, link: str = "") -> dict[int, tuple[int, str]]:
    """For each dead EV, its first ASSUMED_BAD or DENIED transition within [t_from_ns,
    t_until_ns] among the sender's ``events`` (dataplane ktime ns; a dataplane retirement's
    timestamp is the slot's ``bad_ns``): EV -> (t_ns, new state). The sender agent's denial of
    ``link`` (a link event, EV 0, stamped when the agent wrote the dataplane's denied-links map)
    takes out every dead EV not out before it. EVs never taken out are absent."""
    out: dict[int, tuple[int, str]] = {}
    for e in sorted(events, key=lambda e: e.t_ns):
        if not t_from_ns <= e.t_ns <= t_until_ns or e.new_state not in OUT_OF_SERVICE:
            continue
        if e.ev in dead_evs and e.ev not in out:
            out[e.ev] = (e.t_ns, e.new_state)
        elif link and not e.ev and e.link == link and e.new_state == "DENIED":
            out.update({ev: (e.t_ns, "DENIED") for ev in dead_evs if ev not in out})
    return out


def dataplane_failover_ns(first_drop_ns: int | None, out: dict[int, tuple[int, str]],
                          dead_evs: frozenset[int]) -> int | None:
    """Failover time from the dataplane's own clock: the last dead EV's retirement minus the
    fault program's first drop (ns). None without a first drop, without dead EVs, or when one
    of them was never taken out (``out`` from :func:`dead_ev_out_times`)."""
    if first_drop_ns is None or not dead_evs or not dead_evs <= out.keys():
        return None
    return max(out[ev][0] for ev in dead_evs) - first_drop_ns


def _dataplane(run: RunRecord) -> dict:
    """The Failover fields that come from the dataplane's timestamps."""
    t0 = run.t_first_drop_ns
    out = dead_ev_out_times(_sender_events(run), run.dead_evs, t0 if t0 is not None else run.t_fault_ns,
                            run.t_restore_ns, run.fault.link)
    fo = dataplane_failover_ns(t0, out, run.dead_evs)
    last_tx = {r["ev"]: r["last_tx_ns"] for r in run.restore_rows if r.get("last_tx_ns")}
    ref = t0 if t0 is not None else run.t_fault_ns
    us = lambda t: None if t is None else (t - ref) / 1e3  # noqa: E731
    marks = [DeadEvMark(ev=ev, out_us=us(out[ev][0]) if ev in out else None, how=out.get(ev, (0, ""))[1],
                        last_tx_us=us(last_tx.get(ev))) for ev in sorted(run.dead_evs)]
    flap = run.flap or FlapWindow()
    return dict(fault_time_source="fault program" if t0 is not None else "demo",
                t_fault_injected_s=run.recorder.seconds(run.t_fault_injected_ns),
                t_restored_s=run.recorder.seconds(run.t_restored_ns),
                flaps=run.flap.flaps if run.flap else None,
                t_first_flap_down_s=run.recorder.seconds(flap.first_down_ns),
                t_last_flap_up_s=run.recorder.seconds(flap.last_up_ns),
                dataplane_failover_us=None if fo is None else fo / 1e3,
                dead_evs=len(run.dead_evs), dead_evs_out=len(out), dead_ev_marks=marks)


def _t_out_of_service(run: RunRecord, deny: ControllerEvent | None) -> int | None:
    """When the sender stopped choosing the failed path, the earlier of:
    - every EV of the path that was in its set at fault time is ASSUMED_BAD or DENIED, and so
      is every EV of the path that a replacement put in later (the last such event);
    - the controller's DENY of the failed link took effect on every host."""
    fault = run.fault
    live = {r["ev"] for r in run.fault_rows
            if _on_path(r["plane"], r["t1"], fault) and not r.get("retired") and r["state"] in ("GOOD", "SKIP")}
    if not live:
        return None
    out: dict[int, int] = {}
    for e in sorted(_sender_events(run), key=lambda e: e.t_ns):
        if not run.t_fault_ns <= e.t_ns <= run.t_restore_ns:
            continue
        if e.reason == "REPLACED" and e.replaced_by and _on_path(*run.path_of(e.replaced_by), fault):
            live.add(e.replaced_by)  # a backup on the failed path took a slot: it must fail too
        elif e.ev in live and e.new_state in OUT_OF_SERVICE:
            out[e.ev] = e.t_ns
    by_events = max(out.values()) if live <= out.keys() else None
    by_deny = deny.t_ns if deny and fault.link in deny.links else None
    times = [t for t in (by_events, by_deny) if t is not None]
    return min(times) if times else None


def _gbps(nbytes: int, seconds: float) -> float:
    return nbytes * 8 / seconds / 1e9 if seconds > 0 else 0.0


def _window_gbps(a: Sample, b: Sample, t0_ns: int | None = None, *, end_bytes: int | None = None,
                 end_ns: int | None = None) -> float:
    start_ns = t0_ns if t0_ns is not None else a.t_ns
    start_bytes = 0 if t0_ns is not None else a.bytes_placed
    stop_ns = end_ns if end_ns is not None else b.t_ns
    stop_bytes = end_bytes if end_bytes is not None else b.bytes_placed
    return _gbps(stop_bytes - start_bytes, (stop_ns - start_ns) / 1e9)


# ---------------------------------------------------------------- per path ---------------
def _paths(run: RunRecord, failover: Failover) -> list[PathStats]:
    rec, fault = run.recorder, run.fault
    b_fault, b_restore, end = rec.before(run.t_fault_ns), rec.before(run.t_restore_ns), rec.samples[-1]
    during = {p: b_restore.path_packets[p] - b_fault.path_packets[p] for p in rec.paths}
    total_during = sum(during.values()) or 1
    retired, back = _per_path_cycles(run)
    return [PathStats(name=path_name(*p), plane=p[0], spine=p[1], failed=_on_path(*p, fault),
                      packets_before=b_fault.path_packets[p], packets_during=during[p],
                      packets_after=end.path_packets[p] - b_restore.path_packets[p],
                      packets_total=end.path_packets[p], share_during=during[p] / total_during,
                      retired=retired[p], probed_back=back[p])
            for p in rec.paths]


def _ev_path(ev: int) -> tuple[int, int]:
    return ev_plane(ev), ev_t1(ev)


def _per_path_cycles(run: RunRecord) -> tuple[Counter[tuple[int, int]], Counter[tuple[int, int]]]:
    """Per path (plane, spine), how often the sender retired one of its EVs and probed one back."""
    retired: Counter[tuple[int, int]] = Counter()
    back: Counter[tuple[int, int]] = Counter()
    for e in _sender_events(run):
        if not e.ev:
            continue
        if e.new_state == "ASSUMED_BAD" and e.reason in RETIRE_REASONS:
            retired[run.path_of(e.ev)] += 1
        elif e.reason == "PROBE_OK" and e.new_state == "GOOD":
            back[run.path_of(e.ev)] += 1
    return retired, back


def _cycles(run: RunRecord) -> list[EvCycle]:
    per_ev: dict[int, list[int]] = {}
    for e in _sender_events(run):
        if not e.ev or not _on_path(*run.path_of(e.ev), run.fault):
            continue
        counts = per_ev.setdefault(e.ev, [0, 0])
        if e.new_state == "ASSUMED_BAD" and e.reason in RETIRE_REASONS:
            counts[0] += 1
        elif e.reason == "PROBE_OK" and e.new_state == "GOOD":
            counts[1] += 1
    return [EvCycle(ev=f"{ev:#010x}", path=path_name(*run.path_of(ev)), retired=r, probed_back=b)
            for ev, (r, b) in sorted(per_ev.items()) if r or b]


def _cycle_times(run: RunRecord) -> tuple[list[float], list[float]]:
    retired, back = [], []
    for e in _sender_events(run):
        if e.ev and _on_path(*run.path_of(e.ev), run.fault):
            if e.new_state == "ASSUMED_BAD" and e.reason in RETIRE_REASONS:
                retired.append(run.recorder.seconds(e.t_ns))
            elif e.reason == "PROBE_OK" and e.new_state == "GOOD":
                back.append(run.recorder.seconds(e.t_ns))
    return retired, back


def _transitions(events: list[AgentEvent]) -> list[EvTransition]:
    counts = Counter((e.host, e.new_state, e.reason) for e in events)
    # One step: the events of one host toward one peer into one state at one timestamp.
    steps = Counter((e.host, e.peer, e.new_state, e.t_ns) for e in events if e.ev)
    together: dict[tuple[str, str, str], int] = {}
    for e in events:
        key = (e.host, e.new_state, e.reason)
        together[key] = max(together.get(key, 0), steps.get((e.host, e.peer, e.new_state, e.t_ns), 0))
    return [EvTransition(host=h, new_state=s, reason=r, count=n, together=together[(h, s, r)])
            for (h, s, r), n in sorted(counts.items())]


# ---------------------------------------------------------------- timeline ---------------
def _timeline(run: RunRecord) -> list[TimelineEvent]:
    """Demo phases, the fabric's fault log, the controller's actions, and per host, reason
    and phase (before, during, after the fault) the first agent event (with how many)."""
    rec = run.recorder
    lines = [TimelineEvent(t_s=rec.seconds(t), source="demo", what=w) for t, w in run.demo_log]
    lines += [TimelineEvent(t_s=rec.seconds(t), source="fabric", what=w) for t, w in run.fault_log]
    lines += [TimelineEvent(t_s=rec.seconds(c.t_ns), source="controller", what=c.what,
                            detail=" ".join([", ".join(c.links), c.detail]).strip()) for c in run.controller]
    firsts: dict[tuple[str, str, str, int], tuple[AgentEvent, int]] = {}
    for e in sorted(run.events, key=lambda e: e.t_ns):
        phase = (e.t_ns >= run.t_fault_ns) + (e.t_ns >= run.t_restore_ns)
        key = (e.host, e.reason, e.new_state, phase)
        first, n = firsts.get(key, (e, 0))
        firsts[key] = (first, n + 1)
    for (host, reason, state, _), (e, n) in firsts.items():
        what = f"{host}: {reason} -> {state}"
        detail = (f"first of {n}; " if n > 1 else "") + (f"EV {e.ev:#010x}" if e.ev else e.link)
        lines.append(TimelineEvent(t_s=rec.seconds(e.t_ns), source="agent", what=what, detail=detail))
    return sorted(lines, key=lambda x: x.t_s)


# ---------------------------------------------------------------- checks -----------------
def checks(report: DemoReport) -> list[Check]:
    """The issue's acceptance facts, evaluated on ``report`` (EV-hash mode: :func:`ecmp_checks`)."""
    b, f = report.bytes, report.failover
    out = [Check(name="bytes_verified", ok=b.verified == b.sent and b.hash_match,
                 detail=f"sent {b.sent} B, verified {b.verified} B, SHA-256 match {b.hash_match}"),
           fault_took_effect(report)]
    if report.mode == "ecmp":
        return out + ecmp_checks(report)
    failed = [p for p in report.paths if p.failed]
    healthy = [p for p in report.paths if not p.failed]
    if not failed:
        return out + [Check(name="failed_path_known", ok=False,
                            detail=f"no sampled path is {path_name(report.fault.plane, report.fault.spine)}")]
    dead = failed[0]
    if report.fault.kind in ("down", "blackhole"):
        n = f.dead_path_packets_failover_to_restore
        out.append(Check(name="failed_path_silent", ok=n == 0, detail=_silent_detail(dead.name, n, f)))
        out.append(Check(name="failed_path_back", ok=dead.packets_after > 0,
                         detail=f"{dead.name}: {dead.packets_after} data packets after the restore"))
    else:
        smallest = min((p.share_during for p in healthy), default=0.0)
        out.append(Check(name="failed_path_smaller_share", ok=dead.share_during < SHARE_RATIO * smallest,
                         detail=f"{dead.name}: {dead.share_during:.1%} of data packets during the fault; "
                                f"smallest healthy share {smallest:.1%}"))
        out.append(Check(name="failed_path_cycles", ok=dead.retired > 0 and dead.probed_back > 0,
                         detail=f"{dead.name}: EVs retired {dead.retired} times, probed back "
                                f"{dead.probed_back} times"))
    idle = [p.name for p in healthy if min(p.packets_before, p.packets_during, p.packets_after) <= 0]
    out.append(Check(name="other_paths_carry", ok=bool(healthy) and not idle,
                     detail="every other path carried data before, during and after the fault"
                     if not idle else f"idle in some phase: {', '.join(idle)}"))
    return out


def _silent_detail(path: str, n: int | None, f: Failover) -> str:
    if n is not None:
        return f"{path}: {n} data packets from failover ({_fmt_s(f.t_failover_s)}) to restore ({_fmt_s(f.t_restore_s)})"
    if f.t_failover_s is None:
        return (f"{path}: the sender never took the path out of service between the fault "
                f"({_fmt_s(f.t_fault_s)}) and the restore ({_fmt_s(f.t_restore_s)}): no failover to measure from")
    return (f"{path}: failover ({_fmt_s(f.t_failover_s)}) left less than one sampling interval before the "
            f"restore ({_fmt_s(f.t_restore_s)}): no data packet count to judge")


LARGER_SIZE = "the write was too short for the fault to hit it: use a longer --duration or a larger --size (e.g. 96M)"


def fault_took_effect(report: DemoReport) -> Check:
    """The fault hit the write: ``down``/``flap``, the link went down at least once before the
    write completed, and the sender put data packets on the failed link's EVs after that, as
    the samples count them or as the dead EVs' own ``last_tx_ns`` shows (the dataplane's clock:
    a failover faster than the sampling interval leaves the samples nothing to count);
    ``loss``/``blackhole``, the fault program dropped packets. A write that ends before the
    fault bites proves nothing, so the run fails."""
    fe, kind = report.fault_effect, report.fault.kind
    if kind in ("loss", "blackhole"):
        n = fe.fault_program_drops
        ok = bool(n)
        detail = (f"the {kind} program dropped {n} packets on {report.fault.link}" if ok
                  else f"the {kind} program on {report.fault.link} dropped "
                       f"{'nothing' if n == 0 else 'an unknown number of packets (counters unread)'}; {LARGER_SIZE}")
        return Check(name="fault_took_effect", ok=ok, detail=detail)
    downs, after = fe.down_transitions or 0, fe.dead_link_packets_after or 0
    late = sum(1 for m in report.failover.dead_ev_marks if m.last_tx_us is not None and m.last_tx_us > 0)
    ok = downs > 0 and (after > 0 or late > 0)
    detail = (f"{report.fault.link} went down {downs} time(s) while the write ran; "
              f"{after} data packets on its {report.loss.dead_link_evs} EVs after the first in the "
              f"samples, {late} of them sent on after the fault in the dataplane's clock")
    if downs == 0:
        detail = f"{report.fault.link} never went down before the write completed; {LARGER_SIZE}"
    elif not ok:
        detail += f"; {LARGER_SIZE}"
    return Check(name="fault_took_effect", ok=ok, detail=detail)


def ecmp_checks(report: DemoReport) -> list[Check]:
    """EV-hash mode: EVs are opaque to the hosts, so a path (plane x spine) is the switches'
    hash, not the host's choice, and the SRv6 path checks do not apply. What must hold (beyond
    every byte verified): every plane carried data before, during and after the fault."""
    planes: dict[int, list[int]] = {}
    for p in report.paths:
        sums = planes.setdefault(p.plane, [0, 0, 0])
        for i, n in enumerate((p.packets_before, p.packets_during, p.packets_after)):
            sums[i] += n
    idle = [f"plane {p}" for p, sums in sorted(planes.items()) if min(sums) <= 0]
    return [Check(name="planes_carry", ok=bool(planes) and not idle,
                  detail="every plane carried data before, during and after the fault"
                  if not idle else f"idle in some phase: {', '.join(idle)}")]


def _fmt_s(t: float | None) -> str:
    return "never" if t is None else f"{t:.3f} s"
