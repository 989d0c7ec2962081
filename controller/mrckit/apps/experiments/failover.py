"""``mrc experiment failover``: a T0-T1 link fails mid-transfer; how fast the sender bypasses
it, what is lost, and how far goodput dips (docs/experiments.md).

The paper's claim (mrc-facts.md section 6, "Failover"): a failed path is bypassed "in a few
tens of microseconds". The time to bypass is stamped by the dataplanes themselves: from the
fault program's first drop on the failed link (``Fabric.first_drop_ns``) to the last
retirement of an EV that crossed it in the sender's host dataplane (the slot's ``bad_ns``),
both ``bpf_ktime_get_ns()`` (the demo's "dataplane failover", ``mrckit.apps.demo.scenario``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..demo.report import DemoReport
from .demo_fault import DemoFault, FabricSize, bytes_verified, demo_details, goodput_dip, run_demo_faults, save_plot
from .linkspeed import fraction
from .record import ExperimentRecord, Figure, RunStart

NAME = "failover"
CLAIM = 'A failed path is bypassed "in a few tens of microseconds" (paper); "microseconds" (blog)'
DIFFERS = ("The bypass time is set by how soon the sender has evidence of the loss: in the paper, the "
           "NIC's hardware timers and SACKs at 800G, packets nanoseconds apart on each path; here the host "
           "dataplane retires an EV after several unacknowledged sends, and at the emulated link speed "
           "(5000 pps per port, 4 paths) the packets of one path leave hundreds of microseconds apart, so the "
           "evidence takes milliseconds to gather; the native endpoint's SACKs also wait for 2 shared cores.")


@dataclass(frozen=True)
class FailoverOptions:
    """The experiment's settings: the fabric ``size``, ``evs`` per QP, ``link_speed_pps``,
    ``duration_s`` of the write, ``seed`` and fabric ``name``."""

    size: FabricSize = FabricSize()
    evs: int = 128
    link_speed_pps: int = 5000
    duration_s: float = 6.0
    seed: int = 1
    name: str = "expfailover"

    def command(self) -> str:
        return (f"mrc experiment failover --seed {self.seed} {self.size.options()} --evs {self.evs} "
                f"--link-speed {self.link_speed_pps} --duration {self.duration_s:g}")


def run_failover(opts: FailoverOptions, say: Callable[[str], None] = lambda _: None,
                 plot: str | None = None) -> ExperimentRecord:
    """Run the experiment (fabric up, one write with the link down from a third to two thirds
    of its bytes, fabric down) and return its record; ``plot``: write the demo's PNG there.

    Raises:
        MrcError: a bad option, the fabric did not come up, or the write failed.
    """
    start = RunStart.now()
    run = DemoFault(size=opts.size, evs=opts.evs, link_speed_pps=opts.link_speed_pps, duration_s=opts.duration_s,
                    fail="down", seed=opts.seed, name=opts.name)
    report = run_demo_faults(run, [run], say)[0]
    record = failover_record(opts, report)
    save_plot(record, report, plot)
    record.finish(start)
    return record


def failover_record(opts: FailoverOptions, r: DemoReport) -> ExperimentRecord:
    """The record of a finished run (pure: from the demo's report)."""
    fo, loss, planes = r.failover, r.loss, r.topology["planes"]
    lost_outside = max(loss.packets_lost - loss.packets_lost_to_fault, 0)
    dip = goodput_dip(r)
    bypass = fo.dataplane_failover_us
    figures = [
        Figure(measure="time to bypass", value=bypass, unit="us", baseline="host agent RTO (configured)",
               baseline_value=r.agent_rto_ns / 1e3 if r.agent_rto_ns else None,
               note="fault program's first drop to the last dead EV's retirement, dataplane clocks"),
        Figure(measure="packets lost to the fault", value=loss.packets_lost_to_fault, unit="packets",
               baseline="packets lost outside the fault window", baseline_value=lost_outside),
        Figure(measure="goodput dip (lowest 100 ms after the fault)", value=dip, unit="Gb/s",
               baseline="goodput before the fault", baseline_value=fo.goodput_before_gbps),
        Figure(measure="goodput during the fault", value=fo.goodput_during_gbps, unit="Gb/s",
               baseline="goodput before the fault", baseline_value=fo.goodput_before_gbps),
    ]
    ours = ("bypassed in " + (f"{bypass:.0f} us" if bypass is not None else "- (not every dead EV retired)")
            + f" (dataplane clocks); {loss.packets_lost_to_fault} packets lost; goodput "
            f"{_pct(fraction(fo.goodput_during_gbps, opts.link_speed_pps, planes))} of line rate during the "
            f"fault vs {_pct(fraction(fo.goodput_before_gbps, opts.link_speed_pps, planes))} before")
    return ExperimentRecord(
        name=NAME, claim=CLAIM, ours=ours, command=opts.command(), seed=opts.seed, link_speed_pps=opts.link_speed_pps,
        setting=dict(planes=opts.size.planes, spines=opts.size.spines, leaves=opts.size.leaves,
                     hosts_per_leaf=opts.size.hosts_per_leaf, evs=opts.evs, duration_s=opts.duration_s,
                     failed_link=r.fault.link, endpoint=r.endpoint_name, size_bytes=r.bytes.sent),
        figures=figures, differs=DIFFERS,
        checks={"every byte verified": bytes_verified(r),
                "the link failed, by the dataplane counters": fo.fault_time_source == "fault program"
                or (loss.link_packets_lost or 0) > 0,
                "the failed link carried EVs, and every one was taken out": fo.dead_evs > 0
                and fo.dead_evs_out == fo.dead_evs},
        details=dict(dead_evs=fo.dead_evs, dead_evs_out=fo.dead_evs_out, t_fault_s=fo.t_fault_s,
                     t_restore_s=fo.t_restore_s, t_deny_s=fo.t_deny_s, goodput_after_gbps=fo.goodput_after_gbps,
                     link_packets_lost=loss.link_packets_lost, **demo_details(r),
                     line_rate_fraction_before=fraction(fo.goodput_before_gbps, opts.link_speed_pps, planes),
                     line_rate_fraction_during=fraction(fo.goodput_during_gbps, opts.link_speed_pps, planes)))


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.0f} %"
