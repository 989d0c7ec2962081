"""What the link experiments share: the demo's one-QP write (``mrckit.apps.demo``: a write
from ``h0-0`` to ``h1-0`` sprayed over every plane and spine, the sender's EV table sampled,
a fault on the T0-T1 link p0/t0-1/t1-1 from a third to two thirds of the bytes, every byte
verified) on a fabric the experiment sizes, at its link speed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from ...errors import MrcError
from ...topology import generate_clos
from ..demo.plots import BIN_S, rates
from ..demo.report import DemoReport, FailKind
from ..demo.run import AGENT_SETTINGS, DemoOptions, Observer, run_on_fabric
from .bringup import experiment_fabric
from .linkspeed import DEFAULT_LINK_SPEED_PPS


@dataclass(frozen=True)
class FabricSize:
    """A Clos to build: ``planes``, ``spines`` and ``leaves`` per plane, ``hosts_per_leaf``."""

    planes: int = 2
    spines: int = 2
    leaves: int = 2
    hosts_per_leaf: int = 2

    def topology(self):
        """The topology (``generate_clos``). Raises MrcError for a size out of range."""
        from ...topology import TopologyError

        try:
            return generate_clos(self.planes, self.spines, self.leaves, self.hosts_per_leaf)
        except TopologyError as exc:
            raise MrcError(f"fabric size: {exc}") from None

    def describe(self) -> str:
        return (f"{self.planes} planes x {self.spines} spines, {self.leaves} leaves x "
                f"{self.hosts_per_leaf} hosts")

    def options(self) -> str:
        """The size as ``mrc experiment`` options."""
        return (f"--planes {self.planes} --spines {self.spines} --leaves {self.leaves} "
                f"--hosts-per-leaf {self.hosts_per_leaf}")


@dataclass(frozen=True)
class DemoFault:
    """One demo-style run: the fabric ``size``, ``evs`` EVs per QP (the agents' ``ev_count``),
    the ``link_speed_pps``, a write that lasts about ``duration_s`` at the rate a warm-up write
    measures, the fault ``fail`` (``down``, ``flap`` at ``flap_hz``, ``loss`` of
    ``loss_percent``), the ``seed`` (data, agents' EV choice) and the fabric ``name``."""

    size: FabricSize = FabricSize()
    evs: int = 128
    link_speed_pps: int = DEFAULT_LINK_SPEED_PPS
    duration_s: float = 6.0
    fail: FailKind = "down"
    flap_hz: float = 2.0
    loss_percent: float = 10.0
    seed: int = 1
    name: str = "exp"

    def demo_options(self) -> DemoOptions:
        """The demo's options for this run (checked). Raises MrcError naming a bad one."""
        if self.size.leaves < 2 or self.size.spines < 2 or self.size.hosts_per_leaf < 2:
            raise MrcError(f"fabric {self.size.describe()}: the write needs 2 leaves, 2 spines and "
                           "2 hosts per leaf at least")
        if not 1 <= self.evs <= 256:
            raise MrcError(f"--evs {self.evs}: use 1..256 EVs per QP")
        settings = dataclasses.replace(AGENT_SETTINGS, seed=self.seed, ev_count=self.evs,
                                       backups_per_plane=min(AGENT_SETTINGS.backups_per_plane, self.evs))
        opts = DemoOptions(endpoint="native", seed=self.seed, duration_s=self.duration_s, fail=self.fail,
                           flap_hz=self.flap_hz, loss_percent=self.loss_percent, name=self.name, settings=settings)
        opts.check()
        return opts


class _Say(Observer):
    def __init__(self, say: Callable[[str], None]):
        self.say = say

    def phase(self, text: str) -> None:
        self.say(text)


def run_demo_faults(run: DemoFault, faults: list[DemoFault], say: Callable[[str], None] = lambda _: None
                    ) -> list[DemoReport]:
    """Bring up ``run``'s fabric at its link speed and run one demo write per element of
    ``faults`` on it, one after another (each with its own fault settings; the fabric, EVs and
    link speed are ``run``'s); returns their reports. The first write is sized by its warm-up
    write, the later ones take its size (the same fabric, one warm-up). The fabric is torn
    down at the end.

    Raises:
        MrcError: a bad option, the fabric did not come up, or a write failed.
    """
    opts = [f.demo_options() for f in faults]
    with experiment_fabric(run.size.topology(), run.name, opts[0].agent_settings(), run.link_speed_pps, say) as fab:
        reports = [run_on_fabric(fab, opts[0], _Say(say))]
        for o in opts[1:]:
            reports.append(run_on_fabric(fab, dataclasses.replace(o, size=o.size or reports[0].bytes.sent), _Say(say)))
        return reports


def goodput_dip(report: DemoReport, window_s: float = 1.0) -> float | None:
    """The lowest goodput (payload Gb/s) over intervals of ``BIN_S`` within ``window_s`` after
    the fault, from the responder's placed bytes; None if no interval fits."""
    s, t_fault = report.series, report.failover.t_fault_s
    mids, bps = rates(s.t_s, s.bytes_placed, BIN_S)
    inside = [r for t, r in zip(mids, bps) if t_fault <= t <= t_fault + window_s]
    return min(inside) * 8 / 1e9 if inside else None


def bytes_verified(report: DemoReport) -> bool:
    """Every byte of the write placed and equal to what was sent (SHA-256 and byte count)."""
    b = report.bytes
    return b.hash_match and b.verified == b.sent


def save_plot(record, report: DemoReport, path: str | None) -> None:
    """Write the demo's plot of ``report`` (goodput, packets per path, the failover zoom) to
    ``path`` and name it in ``record.plot`` (nothing without a path)."""
    if not path:
        return
    from pathlib import Path

    from ..demo.plots import plot_report

    plot_report(report, path)
    record.plot = Path(path).name


def demo_details(report: DemoReport) -> dict:
    """What the write's sender and the switches did, for a record's details: the sender's EV
    transitions by new state and reason, and the switches' trims, ECN marks and drops by
    reason over the whole run."""
    sender = report.sender
    return dict(sender_ev_transitions={f"{t.new_state}/{t.reason}": t.count for t in report.ev_transitions
                                       if t.host == sender},
                switch_trimmed=report.switches.trimmed, switch_ecn_marked=report.switches.ecn_marked,
                switch_dropped=dict(report.switches.dropped), retransmits=report.endpoint.retransmits_total,
                responder_trimmed=report.endpoint.responder_trimmed, bytes=report.bytes.sent)
