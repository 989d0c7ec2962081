"""``mrc experiment lossy-ev``: one path of 16 (2 spines per plane x 8 planes) drops 20 % of
its packets while a QP writes across the fabric; how soon the sender stops using the EVs of
that path, and the goodput before and during (docs/experiments.md).

The paper's claim (mrc-facts.md section 6, "EV drop test"): on 16 paths, one EV dropping 20 %
"was deactivated immediately, with no loss of line rate". The lossy path is the T0-T1 link
p0/t0-1/t1-1 (the loss program, ``mrc fail link --loss``); the time to deactivate is stamped
by the dataplanes: the loss program's first drop to the last retirement of an EV on that path
in the sender's host dataplane (as ``failover``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..demo.report import DemoReport
from .demo_fault import DemoFault, FabricSize, bytes_verified, demo_details, run_demo_faults, save_plot
from .linkspeed import fraction
from .record import ExperimentRecord, Figure, RunStart

NAME = "lossy-ev"
CLAIM = ("16 paths (2 per plane x 8); one EV dropping 20 % was deactivated immediately, with no loss "
         "of line rate")
DIFFERS = ("The paper's EV is deactivated by the NIC as losses show; here the host dataplane retires an EV "
           "once several sends on it go unacknowledged, and at the emulated link speed a path carries one "
           "packet every few hundred microseconds, so the evidence takes milliseconds to gather. Goodput is "
           "the same write before and during the loss, on a 2-core machine where the endpoint's CPU, not "
           "only the links, can limit it.")


@dataclass(frozen=True)
class LossyEvOptions:
    """The experiment's settings: the fabric ``size`` (16 paths by default), ``evs`` per QP,
    ``link_speed_pps``, ``loss_percent`` on the lossy path, ``duration_s`` of the write,
    ``seed`` and fabric ``name``."""

    size: FabricSize = FabricSize(planes=8, spines=2, leaves=2, hosts_per_leaf=2)
    evs: int = 128
    link_speed_pps: int = 2000
    loss_percent: float = 20.0
    duration_s: float = 6.0
    seed: int = 1
    name: str = "explossy"

    def command(self) -> str:
        return (f"mrc experiment lossy-ev --seed {self.seed} {self.size.options()} --evs {self.evs} "
                f"--link-speed {self.link_speed_pps} --loss-percent {self.loss_percent:g} "
                f"--duration {self.duration_s:g}")


def run_lossy_ev(opts: LossyEvOptions, say: Callable[[str], None] = lambda _: None,
                 plot: str | None = None) -> ExperimentRecord:
    """Run the experiment (fabric up, one write with the path lossy from a third to two thirds
    of its bytes, fabric down) and return its record; ``plot``: the demo's PNG.

    Raises:
        MrcError: a bad option, the fabric did not come up, or the write failed.
    """
    start = RunStart.now()
    run = DemoFault(size=opts.size, evs=opts.evs, link_speed_pps=opts.link_speed_pps, duration_s=opts.duration_s,
                    fail="loss", loss_percent=opts.loss_percent, seed=opts.seed, name=opts.name)
    report = run_demo_faults(run, [run], say)[0]
    record = lossy_ev_record(opts, report)
    save_plot(record, report, plot)
    record.finish(start)
    return record


def lossy_ev_record(opts: LossyEvOptions, r: DemoReport) -> ExperimentRecord:
    """The record of a finished run (pure: from the demo's report)."""
    fo, loss, planes = r.failover, r.loss, r.topology["planes"]
    paths = planes * r.topology["spines"]
    drops = r.fault_effect.fault_program_drops
    t_off = fo.dataplane_failover_us
    before = fraction(fo.goodput_before_gbps, opts.link_speed_pps, planes)
    during = fraction(fo.goodput_during_gbps, opts.link_speed_pps, planes)
    figures = [
        Figure(measure="time to deactivate the lossy path's EVs", value=t_off, unit="us",
               baseline="host agent RTO (configured)", baseline_value=r.agent_rto_ns / 1e3 if r.agent_rto_ns else None,
               note="loss program's first drop to the last retirement of an EV on the path, dataplane clocks"),
        Figure(measure="goodput with the lossy path", value=fo.goodput_during_gbps, unit="Gb/s",
               baseline="goodput before the loss", baseline_value=fo.goodput_before_gbps),
        Figure(measure="goodput after the loss", value=fo.goodput_after_gbps, unit="Gb/s",
               baseline="goodput before the loss", baseline_value=fo.goodput_before_gbps),
    ]
    ours = (f"{paths} paths, one at {opts.loss_percent:g} % loss: its {fo.dead_evs} EVs deactivated in "
            + (f"{t_off / 1e3:.1f} ms" if t_off is not None else "- (not every one)")
            + f" (dataplane clocks); goodput {_pct(during)} of line rate with the loss vs {_pct(before)} before"
            + ("; the link was denied already when the loss began" if r.fault_effect.link_denied_at_fault else ""))
    return ExperimentRecord(
        name=NAME, claim=CLAIM, ours=ours, command=opts.command(), seed=opts.seed, link_speed_pps=opts.link_speed_pps,
        setting=dict(planes=opts.size.planes, spines=opts.size.spines, leaves=opts.size.leaves,
                     hosts_per_leaf=opts.size.hosts_per_leaf, evs=opts.evs, loss_percent=opts.loss_percent,
                     duration_s=opts.duration_s, lossy_link=r.fault.link, endpoint=r.endpoint_name),
        figures=figures, differs=DIFFERS,
        checks={"every byte verified": bytes_verified(r),
                "the path dropped packets, by the loss program's counters": (drops or 0) > 0,
                "the lossy path carried EVs, and every one was taken out": _taken_out(r)},
        details=dict(paths=paths, loss_program_drops=drops, dead_evs=fo.dead_evs, dead_evs_out=fo.dead_evs_out,
                     link_denied_at_loss=r.fault_effect.link_denied_at_fault,
                     t_fault_s=fo.t_fault_s, t_restore_s=fo.t_restore_s, t_deny_s=fo.t_deny_s,
                     line_rate_fraction_before=before, line_rate_fraction_during=during,
                     packets_lost_to_fault=loss.packets_lost_to_fault, **demo_details(r)))


def _taken_out(r: DemoReport) -> bool:
    """The path's EVs in use when the loss began were all taken out; or, when the controller
    had denied the link already (spurious timeouts of a busy machine, before the write
    could wait them out: ``link_denied_at_loss`` in the details), none carried traffic, which
    is the same outcome reached earlier, not a failure to deactivate."""
    fo = r.failover
    if r.fault_effect.link_denied_at_fault:
        return True
    return fo.dead_evs > 0 and fo.dead_evs_out == fo.dead_evs


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.0f} %"
