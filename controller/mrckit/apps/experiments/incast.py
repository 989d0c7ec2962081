"""``mrc experiment incast``: 7 senders write to 1 receiver at once while a victim flow, from a
host on a senders' leaf to another host on the receiver's leaf, makes many small writes one
after another: it shares the T0-T1 links with the incast, but not the receiver's last hop
(docs/experiments.md).

The paper's claim (mrc-facts.md section 6, "7-to-1 incast plus victim flow"): with MRC the
victim is unaffected. One fabric, at the experiment's link speed, every port's data queue
bounded (``--capacity``); three runs on it, each verifying every byte:

- the victim alone (trimming on), the baseline;
- the incast and the victim, trimming on (``--trim-threshold``);
- the same with trimming off (threshold ``THRESHOLD_NONE``): the full queues drop.

The link speed is low (1000 packets/s per port by default) so that 7 senders still overrun the
receiver's last hop when the machine is loaded: a starved endpoint sends below it, and then
nothing congests. The victim's figures count only the writes it posted while the incast ran.
``--transport rc`` adds a run of the RC baseline (go-back-N on one pinned EV, docs/endpoint.md
"The RC baseline") on a fabric of its own whose host agents pin each QP to one EV, with
trimming off (RC packets are never trimmed) and the same queue capacity.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...endpoint.choices import TRANSPORTS
from ...errors import MrcError
from ...topology.model import DEFAULT_TRIM_THRESHOLD
from ...wire.pipeline import THRESHOLD_NONE
from ..traffic import Flow, TrafficReport, make_flows, run_traffic
from .bringup import experiment_fabric
from .congestion import (counts_since, nic_drops, set_queue_capacity, set_trim_threshold, switch_counts, total,
                         trim_thresholds)
from .demo_fault import FabricSize
from .record import ExperimentRecord, Figure, RunStart

NAME = "incast"
CLAIM = ("7-to-1 incast plus a victim flow: MRC, no victim impact; DCQCN with 1 QP: about 25 % loss to the "
         "victim; PFC only: the victim at 30-100 Gb/s")
DIFFERS = ("The paper's NICs and switches are hardware at line rate; here every link drains a few thousand "
           "packets/s (the eBPF switch's virtual queue), each NIC port is a token bucket at the same rate, and "
           "the victim's small writes are posted one after another by a Python worker on 2 cores shared with "
           "every host's endpoint, so its completion times carry that worker's delays in every run, the baseline "
           "too, and vary much with the machine's load (the record holds it). The queue model delays nothing, so "
           "the senders' NSCC-style windows (native endpoint) never see queueing delay in the switches: they "
           "shrink on trims and ECN marks only (at most once per RTT) and grow on every ACK whose RTT stays below "
           "the target. Where the victim is hurt, the per-switch counters say where: trims, marks and drops on "
           "the T1 ports toward the receiver's leaf (links the victim shares), not only at the receiver's last "
           "hop. With trimming off a congestion drop is a loss to MRC: the senders' host dataplanes retire the "
           "EVs that lost packets (ASSUMED_BAD, counted per run), and QPs then stalled, past the run's time limit, "
           "in some of our runs: each had no GOOD EV left toward the receiver in one plane, while the other "
           "plane still had some. The record also lists the links the controller denied during each run on the hosts' evidence of "
           "loss, which here comes from congestion and from endpoints starved of CPU, not from failures.")


ENDPOINT = "native"
"""The endpoint every run uses: the RC baseline exists only in the native endpoint."""
SETTLE_S = 15.0
"""How long a run waits for the last run's denials to be lifted before it starts."""
RUN_TIMEOUT_S = 60.0
"""How long one run's flows may take once started; a flow still running then is reported as
not completed (its bytes unverified)."""


@dataclass(frozen=True)
class Run:
    """One traffic run: its ``label``, the ``transport``, whether the switches trim, and
    whether the incast runs beside the victim."""

    label: str
    transport: str
    trimming: bool
    incast: bool


@dataclass(frozen=True)
class IncastOptions:
    """The experiment's settings: the fabric ``size`` (by default full bisection, as many
    spines as hosts per leaf, so no leaf's uplinks are oversubscribed), ``senders`` of the incast, each writing
    ``incast_bytes``; the victim's ``victim_writes`` writes of ``victim_write_bytes`` each;
    the ``link_speed_pps``, the ``trim_threshold`` and the queues' ``capacity`` (packets; by
    default equal, so a trimming port trims where a port without trimming drops); the
    ``transports`` to run, ``seed`` and fabric ``name``."""

    size: FabricSize = FabricSize(planes=2, spines=3, leaves=4, hosts_per_leaf=3)
    senders: int = 7
    incast_bytes: int = 1 << 20
    victim_write_bytes: int = 32 << 10
    victim_writes: int = 64
    link_speed_pps: int = 1000
    trim_threshold: int = DEFAULT_TRIM_THRESHOLD
    capacity: int = DEFAULT_TRIM_THRESHOLD
    transports: tuple[str, ...] = ("mrc",)
    seed: int = 1
    name: str = "expincast"

    def command(self) -> str:
        return (f"mrc experiment incast --seed {self.seed} {self.size.options()} --senders {self.senders} "
                f"--incast-size {self.incast_bytes} --victim-write {self.victim_write_bytes} "
                f"--victim-writes {self.victim_writes} --link-speed {self.link_speed_pps} "
                f"--trim-threshold {self.trim_threshold} --capacity {self.capacity}"
                + "".join(f" --transport {t}" for t in self.transports))

    def check(self) -> None:
        """Raises MrcError naming the first bad setting."""
        if self.size.leaves < 2 or self.size.hosts_per_leaf < 2:
            raise MrcError(f"fabric {self.size.describe()}: the incast needs 2 leaves and 2 hosts per leaf at least")
        room = (self.size.leaves - 1) * self.size.hosts_per_leaf - 1
        if not 1 <= self.senders <= room:
            raise MrcError(f"--senders {self.senders}: use 1..{room} on {self.size.describe()} (the receiver's leaf "
                           "holds the receivers, one host of the last leaf sends the victim flow)")
        if self.victim_writes < 1 or self.victim_write_bytes < 1 or self.incast_bytes < 1:
            raise MrcError(f"--victim-writes {self.victim_writes}, --victim-write {self.victim_write_bytes}, "
                           f"--incast-size {self.incast_bytes}: use 1 or more")
        if not 1 <= self.trim_threshold < THRESHOLD_NONE or not 1 <= self.capacity < THRESHOLD_NONE:
            raise MrcError(f"--trim-threshold {self.trim_threshold} / --capacity {self.capacity}: use 1 packet or more")
        for t in self.transports:
            if t not in TRANSPORTS:
                raise MrcError(f"--transport {t}: use {', '.join(TRANSPORTS)}")


def placement(size: FabricSize, senders: int) -> tuple[str, list[str], str, str]:
    """(receiver, incast senders, victim sender, victim receiver): the receiver and the victim's
    receiver are the first two hosts of leaf 0; the victim sends from the last host of the
    last leaf; the senders are the first hosts of leaves 1.., in order."""
    topo = size.topology()
    by_leaf = [[h.name for h in topo.hosts if h.leaf == leaf] for leaf in range(size.leaves)]
    far = [h for hosts in by_leaf[1:] for h in hosts]
    return by_leaf[0][0], far[:-1][:senders], far[-1], by_leaf[0][1]


def flows(opts: IncastOptions, incast: bool) -> list[Flow]:
    """The incast's flows (ids 0..senders-1) and then the victim's flow of several writes."""
    receiver, senders, v_src, v_dst = placement(opts.size, opts.senders)
    out = make_flows("incast", senders + [receiver], opts.incast_bytes, k=opts.senders, dst=receiver) if incast else []
    return out + [Flow(opts.senders, v_src, v_dst, opts.victim_write_bytes * opts.victim_writes, opts.victim_writes)]


def _runs(opts: IncastOptions) -> list[Run]:
    out = [Run("victim alone", "mrc", True, False), Run("trimming on", "mrc", True, True),
           Run("trimming off", "mrc", False, True)]
    return out + [Run(f"{t} baseline", t, False, True) for t in opts.transports if t != "mrc"]


def run_incast(opts: IncastOptions, say: Callable[[str], None] = lambda _: None,
               plot: str | None = None) -> ExperimentRecord:
    """Run the experiment (fabric up, the runs of :func:`_runs` one after another, fabric
    down) and return its record; ``plot``: write the PNG there.

    Raises:
        MrcError: a bad option, or the fabric did not come up.
    """
    from ..demo.run import AGENT_SETTINGS

    opts.check()
    start = RunStart.now()
    settings = dataclasses.replace(AGENT_SETTINGS, seed=opts.seed)
    results = {}
    runs = _runs(opts)
    for transport in dict.fromkeys(r.transport for r in runs):  # mrc first; one fabric each
        with experiment_fabric(opts.size.topology(), opts.name, settings, opts.link_speed_pps, say,
                               transport=transport) as fab:
            say(f"queue capacity {opts.capacity} packets on {set_queue_capacity(fab, opts.capacity)} ports")
            for run in (r for r in runs if r.transport == transport):
                results[run.label] = _one_run(fab, opts, run, say)
    record = incast_record(opts, results)
    if plot:
        from .incast_plot import plot_incast

        plot_incast(record, results, plot)
    record.finish(start)
    return record


def _one_run(fab, opts: IncastOptions, run: Run, say: Callable[[str], None]) -> dict:
    """One run on ``fab``: thresholds set, traffic moved, counters read; returns the traffic
    report, the switch counts, the hosts' NIC drops and the controller's denials of the run,
    and the thresholds read back after it."""
    set_trim_threshold(fab, opts.trim_threshold if run.trimming else THRESHOLD_NONE)
    denied_at_start = wait_denials_lifted(fab, SETTLE_S)
    if denied_at_start:
        say(f"{run.label}: still denied after {SETTLE_S:g} s: {', '.join(denied_at_start)}")
    fl = flows(opts, run.incast)
    say(f"{run.label}: {len(fl) - 1} incast flows of {opts.incast_bytes} B, the victim's {opts.victim_writes} "
        f"writes of {opts.victim_write_bytes} B, transport {run.transport}")
    before, nic_before, t_wall = switch_counts(fab), nic_drops(fab), time.time_ns()
    report = run_traffic(fab, "incast", fl, endpoint=ENDPOINT, transport=run.transport, seed=opts.seed,
                         timeout=RUN_TIMEOUT_S)
    counts = counts_since(before, switch_counts(fab))
    nic = {h: n - nic_before.get(h, 0) for h, n in nic_drops(fab).items() if n - nic_before.get(h, 0)}
    say(f"{run.label}: {sum(f.ok for f in report.flows)} of {len(fl)} flows verified; trimmed "
        f"{total(counts, 'trimmed')}, congestion drops {total(counts, 'congestion_drops')}")
    return dict(run=run, report=report, counts=counts, nic_drops=nic, thresholds=sorted(trim_thresholds(fab)),
                denials=controller_denials(fab, t_wall), denied_at_start=denied_at_start,
                sender_evs=sender_evs(fab, fl))


def sender_evs(fab, fl: list[Flow]) -> dict[str, dict[str, int]]:
    """Each sender's EVs toward its flow's receiver after the run, summed over planes: how
    many are GOOD and how many ASSUMED_BAD (a loss, a congestion drop too, retires an EV at
    once); from its agent (``GetStats``). A host whose agent does not answer is left out."""
    import grpc

    out = {}
    for f in fl:
        try:
            st = fab.host(f.src).stats(peer=fab.host(f.dst).nic_address)
        except grpc.RpcError:
            continue
        planes = [p for p in st.planes if p.peer]
        out[f.src] = dict(evs=sum(p.evs for p in planes), good=sum(p.good for p in planes),
                          assumed_bad=sum(p.assumed_bad for p in planes),
                          planes_without_good=sum(1 for p in planes if p.good == 0))
    return out


def wait_denials_lifted(fab, timeout_s: float) -> list[str]:
    """Wait up to ``timeout_s`` for the controller to lift every denial (its probes lift a link
    denied on congestion evidence once they cross it), so that a run does not start with the
    last run's denials; returns the links still denied (empty if the controller does not
    answer)."""
    from ...control.client import read_status

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            denied = sorted(read_status(fab.name).get("denials", {}))
        except MrcError:
            return []
        if not denied or time.monotonic() >= deadline:
            return denied
        time.sleep(0.5)


def controller_denials(fab, since_ns: int) -> list[str]:
    """The links the controller DENIED on every host since ``since_ns`` (wall clock), from its
    timeline: host evidence of loss on a path makes it take the path's links out, and a
    congestion drop is loss too. Empty if the controller does not answer."""
    from ...control.client import read_status

    try:
        marks = read_status(fab.name).get("timeline", [])
    except MrcError:
        return []
    return [link for m in marks if m.get("kind") == "deny_all_hosts" and int(m["time_ns"]) >= since_ns
            for link in m.get("links", ())]


def victim_figures(report: TrafficReport, victim_id: int) -> dict:
    """The victim's writes posted before the last incast flow completed (all of them without an
    incast): their count, goodput (payload Gb/s over the time from the first post to the last
    completion) and p50/p99 completion times (s)."""
    victim = next(f for f in report.flows if f.id == victim_id)
    ends = [f.end_ns for f in report.flows if f.id != victim_id and f.end_ns is not None]
    cutoff = max(ends) if ends else None
    writes = [w for w in victim.writes_ns if cutoff is None or w[0] < cutoff]
    fcts = np.array([(e - s) / 1e9 for s, e in writes], dtype=float)
    span = (writes[-1][1] - writes[0][0]) / 1e9 if writes else 0.0
    per_write = victim.size / max(victim.writes, 1)
    return dict(writes=len(writes), goodput_gbps=len(writes) * per_write * 8 / span / 1e9 if span > 0 else None,
                fct_p50_s=float(np.percentile(fcts, 50)) if len(fcts) else None,
                fct_p99_s=float(np.percentile(fcts, 99)) if len(fcts) else None)


def incast_fct(report: TrafficReport, victim_id: int) -> float | None:
    """The incast's completion time: first post to last completion over its flows (s); None
    if one did not complete."""
    inc = [f for f in report.flows if f.id != victim_id]
    starts = [f.start_ns for f in inc if f.start_ns is not None]
    ends = [f.end_ns for f in inc if f.end_ns is not None]
    if not inc or len(starts) < len(inc) or len(ends) < len(inc):
        return None
    return (max(ends) - min(starts)) / 1e9


def incast_record(opts: IncastOptions, results: dict) -> ExperimentRecord:
    """The record of finished runs (pure): ``results`` maps a run's label to what
    :func:`_one_run` returned."""
    vid = opts.senders
    runs = {label: dict(victim=victim_figures(r["report"], vid), incast_fct_s=incast_fct(r["report"], vid),
                        trimmed=total(r["counts"], "trimmed"), congestion_drops=total(r["counts"], "congestion_drops"),
                        drops=total(r["counts"], "drops"), trimmed_last_hop=total(r["counts"], "trimmed_to_hosts"),
                        dropped_last_hop=total(r["counts"], "dropped_to_hosts"), nic_drops=sum(r["nic_drops"].values()),
                        nic_drops_per_host=r["nic_drops"], controller_denials=r.get("denials", []),
                        denied_at_start=r.get("denied_at_start", []), sender_evs=r.get("sender_evs", {}),
                        assumed_bad_evs=sum(e["assumed_bad"] for e in r.get("sender_evs", {}).values()),
                        ecn_marked=total(r["counts"], "ecn_marked"), per_switch=r["counts"],
                        trim_thresholds=r["thresholds"], transport=r["run"].transport,
                        flows_verified=sum(f.ok for f in r["report"].flows), flows=len(r["report"].flows),
                        failed=[f"flow {f.id} {f.src}->{f.dst}: {f.error or 'not verified'}"
                                for f in r["report"].flows if not f.ok])
            for label, r in results.items()}
    alone, on, off = runs["victim alone"], runs["trimming on"], runs["trimming off"]
    figures = []
    for label in [k for k in runs if k != "victim alone"]:
        v = runs[label]["victim"]
        figures += [Figure(measure=f"victim goodput, {label}", value=v["goodput_gbps"], unit="Gb/s",
                           baseline="the victim alone", baseline_value=alone["victim"]["goodput_gbps"]),
                    Figure(measure=f"victim p99 write completion, {label}", value=_ms(v["fct_p99_s"]), unit="ms",
                           baseline="the victim alone", baseline_value=_ms(alone["victim"]["fct_p99_s"]))]
    figures += [Figure(measure="incast completion, trimming off", value=off["incast_fct_s"], unit="s",
                       baseline="trimming on", baseline_value=on["incast_fct_s"],
                       note=f"{len(off['failed'])} flows not complete in {RUN_TIMEOUT_S:g} s" if off["failed"] else ""),
                Figure(measure="packets trimmed, trimming on", value=on["trimmed"], unit="packets",
                       baseline="trimming off", baseline_value=off["trimmed"]),
                Figure(measure="congestion drops, trimming off", value=off["congestion_drops"], unit="packets",
                       baseline="trimming on", baseline_value=on["congestion_drops"])]
    return ExperimentRecord(
        name=NAME, claim=CLAIM, ours=_ours(alone, on, off), command=opts.command(), seed=opts.seed,
        link_speed_pps=opts.link_speed_pps,
        setting=dict(planes=opts.size.planes, spines=opts.size.spines, leaves=opts.size.leaves,
                     hosts_per_leaf=opts.size.hosts_per_leaf, senders=opts.senders, incast_bytes=opts.incast_bytes,
                     victim_write_bytes=opts.victim_write_bytes, victim_writes=opts.victim_writes,
                     trim_threshold=opts.trim_threshold, capacity=opts.capacity,
                     transports=",".join(opts.transports), endpoint=ENDPOINT),
        figures=figures, differs=DIFFERS,
        checks={"every byte that arrived verified (no run placed a wrong byte)":
                    all(f.verified for r in results.values() for f in r["report"].flows if f.arrived),
                "every flow completed and verified, the victim alone and trimming on":
                    all(r["report"].passed for r in results.values() if r["run"].trimming),
                "the incast with trimming on trimmed, by the switch counters": on["trimmed"] > 0,
                "with trimming off (threshold never on every port) no switch trimmed": off["trimmed"] == 0
                and off["trim_thresholds"] == [THRESHOLD_NONE]},
        details=dict(runs=runs, placement=dict(zip(("receiver", "senders", "victim_src", "victim_dst"),
                                                   placement(opts.size, opts.senders)))))


def _ms(s: float | None) -> float | None:
    return None if s is None else s * 1e3


def _ours(alone: dict, on: dict, off: dict) -> str:
    def ratio(run: dict) -> str:
        a, b = run["victim"]["goodput_gbps"], alone["victim"]["goodput_gbps"]
        return f"{a / b * 100:.0f} %" if a is not None and b else "-"

    def p99(run: dict) -> str:
        v = run["victim"]["fct_p99_s"]
        return "-" if v is None else f"{v * 1e3:.1f} ms"

    stalled = f"; {len(off['failed'])} flows not complete in {RUN_TIMEOUT_S:g} s with trimming off" if off["failed"] else ""
    return (f"victim goodput {ratio(on)} of alone with trimming on ({on['trimmed']} trims, "
            f"{on['trimmed_last_hop']} at last hops, {len(on['controller_denials'])} links denied), {ratio(off)} "
            f"with trimming off ({off['congestion_drops']} drops, {off['dropped_last_hop']} at last hops, "
            f"{off['nic_drops']} at host NICs, {len(off['controller_denials'])} links denied, "
            f"{off['assumed_bad_evs']} senders' EVs left ASSUMED_BAD vs {on['assumed_bad_evs']} with trimming on); p99 write "
            f"{p99(on)} / {p99(off)} vs {p99(alone)} alone{stalled}")
