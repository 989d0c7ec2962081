"""``mrc experiment flaps``: a T0-T1 link flaps at 14 per minute (Fig. 5 of the paper plots
up to about 14), and faster as a stress, while a QP writes across it; throughput and loss with
and without flaps (docs/experiments.md).

The paper's claim (mrc-facts.md section 6, "Link flaps"): "multiple link flaps each minute"
between T0 and T1 with "no measurable impact". One fabric, one demo write per rate: the link
flaps during the middle third of the write (``mrckit.fabric.flap``: down for the first half of
each period), the first and last thirds are the same run without flaps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...errors import MrcError
from ..demo.report import DemoReport
from .demo_fault import DemoFault, FabricSize, bytes_verified, demo_details, run_demo_faults, save_plot
from .linkspeed import fraction
from .options import parse_numbers
from .record import ExperimentRecord, Figure, RunStart

NAME = "flaps"
CLAIM = ('"Multiple link flaps each minute" between T0 and T1 (Fig. 5 plots up to about 14 per minute) '
         "with no measurable impact")
DIFFERS = ("One link of a small fabric flaps, so each flap takes out a larger share of the QP's paths "
           "(1 of planes x spines) than one link of 131K-GPU fabric does; the flap is a veth carrier change "
           "that drops what is in flight on the link. The throughput figure is the same write's goodput "
           "during the flaps against before them, on a 2-core machine shared with other work, so a few "
           "percent either way is noise.")
MAX_PER_MINUTE = 50 * 60
"""The flapper's limit, 50 Hz."""


def parse_rates(text: str) -> tuple[float, ...]:
    """Flap rates per minute from ``"14,120"``. Raises MrcError naming a bad one."""
    rates = parse_numbers(text, "--per-minute", float, "14,120")
    for v in rates:
        if not 0 < v <= MAX_PER_MINUTE:
            raise MrcError(f"--per-minute {v:g}: use (0, {MAX_PER_MINUTE}] flaps per minute")
    return rates


@dataclass(frozen=True)
class FlapsOptions:
    """The experiment's settings: the fabric ``size``, ``evs`` per QP, ``link_speed_pps``, the
    flap rates ``per_minute`` (one write each), ``duration_s`` of each write, ``seed``, fabric
    ``name``."""

    size: FabricSize = FabricSize()
    evs: int = 128
    link_speed_pps: int = 5000
    per_minute: tuple[float, ...] = (14.0, 120.0)
    duration_s: float = 9.0
    seed: int = 1
    name: str = "expflaps"

    def command(self) -> str:
        rates = ",".join(f"{r:g}" for r in self.per_minute)
        return (f"mrc experiment flaps --seed {self.seed} {self.size.options()} --evs {self.evs} "
                f"--link-speed {self.link_speed_pps} --per-minute {rates} --duration {self.duration_s:g}")


def run_flaps(opts: FlapsOptions, say: Callable[[str], None] = lambda _: None,
              plot: str | None = None) -> ExperimentRecord:
    """Run the experiment (one fabric, one write per flap rate) and return its record;
    ``plot``: the demo's PNG of the fastest rate's write.

    Raises:
        MrcError: a bad option, the fabric did not come up, or a write failed.
    """
    if not opts.per_minute:
        raise MrcError("--per-minute: give one rate at least")
    start = RunStart.now()
    base = DemoFault(size=opts.size, evs=opts.evs, link_speed_pps=opts.link_speed_pps, duration_s=opts.duration_s,
                     fail="flap", seed=opts.seed, name=opts.name)
    runs = [DemoFault(**{**base.__dict__, "flap_hz": r / 60.0}) for r in opts.per_minute]
    reports = run_demo_faults(base, runs, say)
    record = flaps_record(opts, reports)
    save_plot(record, reports[-1], plot)
    record.finish(start)
    return record


def flaps_record(opts: FlapsOptions, reports: list[DemoReport]) -> ExperimentRecord:
    """The record of finished runs, one report per rate of ``opts.per_minute`` (pure)."""
    figures, rows = [], []
    for rate, r in zip(opts.per_minute, reports):
        fo, loss, planes = r.failover, r.loss, r.topology["planes"]
        lost_outside = max(loss.packets_lost - loss.packets_lost_to_fault, 0)
        figures += [
            Figure(measure=f"goodput with flaps at {rate:g}/min", value=fo.goodput_during_gbps, unit="Gb/s",
                   baseline="goodput before the flaps", baseline_value=fo.goodput_before_gbps),
            Figure(measure=f"packets lost with flaps at {rate:g}/min", value=loss.packets_lost_to_fault,
                   unit="packets", baseline="packets lost outside the flaps", baseline_value=lost_outside),
        ]
        rows.append(dict(per_minute=rate, flaps=_downs(r), flap_window_s=round(fo.t_restore_s - fo.t_fault_s, 2),
                         goodput_before_gbps=fo.goodput_before_gbps, goodput_during_gbps=fo.goodput_during_gbps,
                         goodput_after_gbps=fo.goodput_after_gbps,
                         line_rate_fraction_before=fraction(fo.goodput_before_gbps, opts.link_speed_pps, planes),
                         line_rate_fraction_during=fraction(fo.goodput_during_gbps, opts.link_speed_pps, planes),
                         packets_lost_to_flaps=loss.packets_lost_to_fault, packets_lost_outside=lost_outside,
                         link_packets_lost=loss.link_packets_lost, down_transitions=r.fault_effect.down_transitions,
                         **demo_details(r)))
    ours = "; ".join(f"{row['per_minute']:g}/min ({row['flaps']} flaps): goodput {_ratio(row)} of before, "
                     f"{row['packets_lost_to_flaps']} packets lost" for row in rows)
    return ExperimentRecord(
        name=NAME, claim=CLAIM, ours=ours, command=opts.command(), seed=opts.seed, link_speed_pps=opts.link_speed_pps,
        setting=dict(planes=opts.size.planes, spines=opts.size.spines, leaves=opts.size.leaves,
                     hosts_per_leaf=opts.size.hosts_per_leaf, evs=opts.evs, duration_s=opts.duration_s,
                     per_minute=",".join(f"{r:g}" for r in opts.per_minute),
                     flapping_link=reports[0].fault.link, endpoint=reports[0].endpoint_name),
        figures=figures, differs=DIFFERS,
        checks={"every byte verified": all(bytes_verified(r) for r in reports),
                "the link flapped at every rate, by the switch counters and its down transitions":
                    all(_flapped(r) for r in reports)},
        details=dict(rates=rows))


def _downs(r: DemoReport) -> int:
    """The flapping link's down transitions: the flapper's own count, or (when its log has no
    window line) the downs it reported to the controller."""
    return r.failover.flaps or r.fault_effect.down_transitions or 0


def _flapped(r: DemoReport) -> bool:
    """The link went down (:func:`_downs`), and its switch counters show packets one end sent
    that the other never received."""
    return _downs(r) > 0 and (r.loss.link_packets_lost or 0) > 0


def _ratio(row: dict) -> str:
    before, during = row["goodput_before_gbps"], row["goodput_during_gbps"]
    return f"{during / before * 100:.0f} %" if before else "-"
