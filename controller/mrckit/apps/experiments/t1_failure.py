"""``mrc experiment t1-failure``: one T1 (spine) switch stops forwarding under an all-to-all of
many QPs; the share of QPs it affects, beside 1 - (1 - 1/S)^E, and the aggregate goodput over
time against the same traffic without the fault (docs/experiments.md).

The paper's claim (mrc-facts.md section 6, "T1 switch failure"): a T1 stopped forwarding in a
75K-GPU job, "about 1/4 of QPs were affected", throughput "largely unaffected".

- **The fault.** Every link of the T1 gets the fault program's blackhole at both ends
  (``mrc fail link --blackhole``): everything that reaches the T1 is dropped, everything it
  would send too, and its links stay up, so nothing is reported to the controller: the hosts'
  evidence must find it, as a switch that silently stops forwarding. The dataplane proves it:
  the fault programs' drop counters, and the T1's own ``tx_port`` counters, which must not move.
- **E and S.** Each host draws, per plane, E T1s at random (the agents' ``t1_draws``,
  ``mrckit.host.evset``) and spreads the plane's EVs over them; with S T1s per plane, a QP's
  EVs cross a given T1 with probability 1 - (1 - 1/S)^E.
- **Affected.** A QP (``qps_per_pair`` per ordered host pair, ``mrc traffic``'s all-to-all) is
  affected when its writer's EV set toward the receiver (the host dataplane's per-peer set,
  design 5, which the pair's QPs share) sent a
  packet on an EV whose path crosses the dead T1 while the fault held: an EV of that plane and
  T1 with ``last_tx_ns`` at or after the fault's start, in the writer's EV table read before the
  restore. Every such packet was dropped. QPs between hosts of one leaf cross no T1 and are
  left out of the share. A QP is *exposed* when that set holds an EV across the T1 at all, in
  any state (the event the formula gives the chance of): an exposed QP escapes when its EVs
  there were out of service, or a link of the T1 denied, already when the fault came.
- **Many QPs on one NIC.** A host's QPs share its NIC port's token bucket (``linkspeed``), whose
  queue holds ``NIC_QUEUE_MS``: each writer's window is capped so that all of a host's QPs
  together fill at most half of it (:func:`window_cap`), the writers' RTO is at least twice
  that queue and the agents' four times, and the controller gathers evidence for a second
  before it denies a link. Without the cap the QPs' initial windows overflow the queue at once, and its drops,
  on the few paths a host uses, look to the hosts and the controller like failed links, as do the retransmissions of packets
  still waiting in it.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from ...errors import MrcError
from ...topology import Role
from ...wire.constants import DEFAULT_PAYLOAD_LEN, TIME_UNIT_NS
from ..demo.run import AGENT_SETTINGS
from ..traffic import Flow, make_flows, run_traffic
from .bringup import experiment_fabric
from .demo_fault import FabricSize
from .linkspeed import NIC_QUEUE_MS
from .record import ExperimentRecord, Figure, RunStart
from .t1_observe import DeadT1, aggregate_series, window_gbps

NAME = "t1-failure"
CLAIM = ("A T1 stopped forwarding in a 75K-GPU job; about ¼ of QPs were affected and about 580K packets "
         "dropped; it forwarded again about 2 min after reboot; throughput largely unaffected")
DIFFERS = ("The paper's QPs each choose their own EVs; here EV sets are per host pair (design 5) and each host "
           "draws its E T1s per plane once, for all its peers (the agents' t1_draws), so the QPs of one writer are "
           "affected together and the share moves in steps of one writer's QPs around the formula. With E = 1 an "
           "affected writer loses that plane for the fault (every EV and backup it has there crosses the dead T1), "
           "so the aggregate goodput falls by about its share of the line rate, where the paper's QPs, with many "
           "EVs per plane over many T1s, lose one path in S and keep line rate. The T1 fails for seconds, not "
           "minutes; goodput is the bytes placed at the receivers at the emulated link speed on a 2-core machine "
           "shared with other work, where the writers' windows are capped and their RTO is long (the NIC queue "
           "at that speed), so neither run reaches line rate and a few percent either way is noise.")
PROGRESS_S = 0.25
"""How often each receiver reports the bytes placed so far."""
TRAFFIC_TIMEOUT_S = 120.0
"""How long one all-to-all may take before its unfinished QPs are reported failed."""
AGENT_RTO_NS = 4 * NIC_QUEUE_MS * 1_000_000
"""The agents' RTO: four times the NIC queue, which a packet may wait in before it leaves."""
WRITER_TIMEOUT_EXP = math.ceil(math.log2(2 * NIC_QUEUE_MS * 1_000_000 / TIME_UNIT_NS))
"""The writers' RTO, 1.024 us x 2^N: at least twice the NIC queue (18: 268 ms), so that a
packet waiting there, or a writer the machine's load starves for a while, does not send it
again, which the host dataplane would take for a loss on its path."""
SETTLE_MS = 1000
"""The controller's evidence time before it denies a link (``--settle-ms``): with one T1 per
plane a host's spurious timeouts name one link alone, and its probes clear it in that time."""


def window_cap(planes: int, link_speed_pps: int, writers: int) -> int:
    """Full packets each of a host's ``writers`` QPs may have in flight so that together they
    queue at most half of ``NIC_QUEUE_MS`` at the host's line rate (2 at least)."""
    return max(2, int(planes * link_speed_pps * NIC_QUEUE_MS / 1000 / 2 / writers))


@dataclass(frozen=True)
class T1FailureOptions:
    """The experiment's settings: the fabric ``size``, ``qps_per_pair`` (QPs each host writes
    to each other host), ``evs`` per QP and ``t1_draws`` (E) per plane, ``link_speed_pps``, ``duration_s`` the traffic lasts at line rate, the fault from
    a third to two thirds of it, ``seed`` (the dead T1, the draws, the data) and fabric ``name``."""

    size: FabricSize = FabricSize(planes=2, spines=4, leaves=4, hosts_per_leaf=1)
    qps_per_pair: int = 4
    evs: int = 128
    t1_draws: int = 1
    link_speed_pps: int = 1000
    duration_s: float = 9.0
    seed: int = 1
    name: str = "expt1"

    def command(self) -> str:
        return (f"mrc experiment t1-failure --seed {self.seed} {self.size.options()} "
                f"--qps-per-pair {self.qps_per_pair} --evs {self.evs} "
                f"--t1-draws {self.t1_draws} --link-speed {self.link_speed_pps} --duration {self.duration_s:g}")

    def formula(self) -> float:
        """1 - (1 - 1/S)^E: the chance that a QP's EVs cross a given T1 of their plane."""
        return 1 - (1 - 1 / self.size.spines) ** self.t1_draws

    def check(self) -> None:
        """Raises MrcError naming a bad option."""
        if self.size.spines < 2 or self.size.leaves < 2:
            raise MrcError(f"fabric {self.size.describe()}: a T1 failure needs 2 spines and 2 leaves at least")
        if not 1 <= self.t1_draws <= 256:
            raise MrcError(f"--t1-draws {self.t1_draws}: use 1..256 T1s drawn per plane")
        if not 1 <= self.qps_per_pair <= 64:
            raise MrcError(f"--qps-per-pair {self.qps_per_pair}: use 1..64")
        if not 128 <= self.evs <= 256 or self.evs % self.size.planes:
            raise MrcError(f"--evs {self.evs}: use 128..256, a multiple of the {self.size.planes} planes")


def run_t1_failure(opts: T1FailureOptions, say: Callable[[str], None] = lambda _: None,
                   plot: str | None = None) -> ExperimentRecord:
    """Run the experiment: fabric up, the all-to-all once without the fault (the baseline) and
    once with the T1 failed from a third to two thirds of ``duration_s``, fabric down; returns
    the record, ``plot``: the goodput PNG.

    Raises:
        MrcError: a bad option, the fabric did not come up, or a worker died.
    """
    opts.check()
    start = RunStart.now()
    topo = opts.size.topology()
    rng = random.Random(f"t1-failure/{opts.seed}")
    plane, index = rng.randrange(opts.size.planes), rng.randrange(opts.size.spines)
    dead = next(s for s in topo.switches if s.role == Role.T1 and (s.plane, s.index) == (plane, index))
    settings = dataclasses.replace(AGENT_SETTINGS, seed=opts.seed, ev_count=opts.evs, t1_draws=opts.t1_draws,
                                   rto_ns=AGENT_RTO_NS)
    hosts = [h.name for h in topo.hosts]
    per_host = (len(hosts) - 1) * opts.qps_per_pair
    size = int(opts.duration_s * opts.size.planes * opts.link_speed_pps * DEFAULT_PAYLOAD_LEN / per_host)
    pairs = make_flows("all-to-all", hosts, size) * opts.qps_per_pair
    flows = [Flow(i, f.src, f.dst, size) for i, f in enumerate(pairs)]
    cap = window_cap(opts.size.planes, opts.link_speed_pps, per_host)
    with experiment_fabric(topo, opts.name, settings, opts.link_speed_pps, say,
                           controller_args=("--settle-ms", str(SETTLE_MS))) as fab:
        say(f"baseline: all-to-all, {len(flows)} QPs of {size} B (windows of {cap} packets), no fault")
        base = _traffic(fab, flows, opts.seed, cap, None)
        say(f"the same with {dead.name} failed from {opts.duration_s / 3:.1f} s to {2 * opts.duration_s / 3:.1f} s")
        fault = DeadT1(fab, dead.name, opts.duration_s / 3, opts.duration_s / 3, say)
        faulty = _traffic(fab, flows, opts.seed, cap, fault)
    record = t1_failure_record(opts, base, faulty, fault, topo)
    if plot:
        from .t1_plot import plot_goodput

        plot_goodput(record, dead.name, plot)
    record.finish(start)
    return record


def _traffic(fab, flows, seed: int, cap: int, fault: DeadT1 | None):
    """One all-to-all run, windows capped at ``cap`` packets, with ``fault`` fired from its
    start (and always restored)."""
    if fault:
        fault.start()
    try:
        return run_traffic(fab, "all-to-all", flows, endpoint="native", seed=seed, progress_s=PROGRESS_S,
                           on_go=fault.go if fault else None, max_cwnd=cap, timeout=TRAFFIC_TIMEOUT_S,
                           timeout_exp=WRITER_TIMEOUT_EXP)
    finally:
        if fault:
            fault.finish()


def t1_failure_record(opts: T1FailureOptions, base, faulty, fault: DeadT1, topo) -> ExperimentRecord:
    """The record of the two runs (pure, once ``fault`` has finished)."""
    leaf = {h.name: h.leaf for h in topo.hosts}
    nic = {h.name: ipaddress.IPv6Address(h.nic_address) for h in topo.hosts}
    crossing = [f for f in faulty.flows if leaf[f.src] != leaf[f.dst]]
    exposed = [f for f in crossing if fault.exposed(f.src, nic[f.dst])]
    affected = [f for f in crossing if fault.sent_on_dead(f.src, nic[f.dst])]
    out = [f for f in affected if fault.taken_out(f.src, nic[f.dst], (leaf[f.src], leaf[f.dst]))]
    share = len(affected) / len(crossing) if crossing else None
    t_go, t_fault, t_restore = fault.times()
    win = (t_fault - t_go, t_restore - t_go)
    before = window_gbps(faulty, t_go + win[0] // 4, t_fault)
    during = window_gbps(faulty, t_fault, t_restore)
    base_during = window_gbps(base, base.started_ns + win[0], base.started_ns + win[1])
    formula = opts.formula()
    figures = [
        Figure(measure="share of QPs affected", value=share, unit="of QPs", baseline="1 - (1 - 1/S)^E",
               baseline_value=formula, note=f"S = {opts.size.spines}, E = {opts.t1_draws}; QPs across a T1"),
        Figure(measure="goodput during the fault", value=during, unit="Gb/s",
               baseline="the same window without the fault", baseline_value=base_during),
        Figure(measure="goodput during vs before the fault", value=during, unit="Gb/s",
               baseline="goodput before the fault", baseline_value=before),
    ]
    ratio = f"{during / base_during * 100:.0f} %" if during and base_during else "-"
    writers = len({f.src for f in crossing})
    hit = len({f.src for f in affected})
    ours = (f"{len(affected)} of {len(crossing)} QPs across a T1 affected ({_pct(share)}, the QPs of {hit} of "
            f"{writers} writers; {len(exposed)} had EVs across it at all; formula "
            f"{_pct(formula)} for S = {opts.size.spines}, E = {opts.t1_draws}); {fault.drops} packets dropped "
            f"at the dead T1; aggregate goodput during the fault {ratio} of the same window without it")
    return ExperimentRecord(
        name=NAME, claim=CLAIM, ours=ours, command=opts.command(), seed=opts.seed, link_speed_pps=opts.link_speed_pps,
        setting=dict(planes=opts.size.planes, spines=opts.size.spines, leaves=opts.size.leaves,
                     hosts_per_leaf=opts.size.hosts_per_leaf, qps_per_pair=opts.qps_per_pair, evs=opts.evs,
                     t1_draws=opts.t1_draws,
                     duration_s=opts.duration_s, qps=len(faulty.flows), qp_bytes=faulty.flows[0].size,
                     dead_t1=fault.switch, endpoint="native"),
        figures=figures, differs=DIFFERS,
        checks={"every byte verified, with and without the fault": base.passed and faulty.passed,
                "the T1 dropped packets, by its links' fault-program counters": fault.drops > 0,
                "the T1 forwarded nothing during the fault, by its tx_port counters": fault.t1_tx_during == 0},
        details=dict(writers=writers, writers_affected=hit, failed_qps=[f"{f.src}->{f.dst} ({name}): {f.error or 'not verified'}" for name, r in
                                 (("baseline", base), ("fault", faulty)) for f in r.flows if not f.ok][:20],
                     qps=len(faulty.flows), qps_across_t1=len(crossing), qps_affected=len(affected),
                     qps_exposed=len(exposed), affected_taken_out=len(out),
                     denied_at_restore=sorted(set().union(*fault.denied.values())), affected=sorted(f"{f.src}->{f.dst}" for f in affected),
                     formula=formula, fault_program_drops=fault.drops, t1_tx_during=fault.t1_tx_during,
                     t_fault_s=round(win[0] / 1e9, 3), t_restore_s=round(win[1] / 1e9, 3),
                     goodput_before_gbps=before, goodput_during_gbps=during, baseline_during_gbps=base_during,
                     baseline_wall_s=base.summary().wall_s, fault_wall_s=faulty.summary().wall_s,
                     series_fault=aggregate_series(faulty), series_baseline=aggregate_series(base)))


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.0f} %"
