"""``mrc experiment load-balance``: in EV-hash (ECMP) mode, one MRC QP per host pair sprayed
over 256 EVs against 1, 2, 4, 8 and 16 RC baseline QPs per pair, each QP pinned to one EV
(docs/endpoint.md "The RC baseline"); aggregate goodput and how evenly the source leaf's T0-T1
links carried the load (the switches' tx_port counters) (docs/experiments.md).

The paper's claim (mrc-facts.md section 6, "Versus RoCEv2"): 1 MRC QP over 256 paths beats 16
RoCE QPs, and RoCE gains little beyond 8 QPs. Two pairs write at once, leaf 0 to leaf 1
(``h0-0`` to ``h1-0``, ``h0-1`` to ``h1-1``), so the source leaf's uplinks carry as much as its
hosts' ports can send (full bisection): QPs that the switches' hash puts on one uplink
overload it, while others idle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from ...errors import MrcError
from ..demo.run import AGENT_SETTINGS
from .bringup import experiment_fabric
from .demo_fault import FabricSize
from .options import parse_numbers
from .record import ExperimentRecord, Figure, RunStart
from .writes import WriteRun, run_writes

NAME = "load-balance"
CLAIM = "1 MRC QP over 256 paths beats 16 RoCE QPs; RoCE gains little beyond 8 QPs"
DIFFERS = ("The paper compares NICs (64 Pollara) at 400-800G; here two host pairs of a small EV-hash fabric, links "
           "emulated at a few thousand packets/s, with the RC baseline (go-back-N, a fixed window, no DCQCN, no "
           "PFC: an overloaded link drops) instead of a RoCE NIC, on a loaded 2-core machine where the "
           "endpoints' CPU also limits goodput. With no congestion control the RC QPs' fixed windows add up (16 "
           "QPs: 16 x 64 packets in flight per pair), so drops and go-back-N, not only the hash's collisions, "
           "limit many RC QPs. The spread is over the source leaf's T0-T1 links only.")
PAIRS = (("h0-0", "h1-0"), ("h0-1", "h1-1"))
SOURCE_LEAF = 0


@dataclass(frozen=True)
class LoadBalanceOptions:
    """The experiment's settings: the fabric ``size`` (2 hosts per leaf at least), ``evs`` per
    QP, ``link_speed_pps``, the RC QP counts ``rc_qps`` per pair, ``write_bytes`` per pair per
    run (split over its QPs), ``seed`` and fabric ``name``."""

    size: FabricSize = FabricSize(planes=2, spines=2, leaves=2, hosts_per_leaf=2)
    evs: int = 256
    link_speed_pps: int = 2500
    rc_qps: tuple[int, ...] = (1, 2, 4, 8, 16)
    write_bytes: int = 4 << 20
    seed: int = 1
    name: str = "explb"

    def check(self) -> None:
        """Raises MrcError naming a bad option."""
        if not self.rc_qps or any(not 1 <= n <= 64 for n in self.rc_qps):
            raise MrcError(f"--rc-qps {self.qps_text()}: give 1 or more QP counts within 1..64")
        if self.size.leaves < 2 or self.size.hosts_per_leaf < 2:
            raise MrcError(f"fabric {self.size.describe()}: two pairs cross from leaf 0 to leaf 1, "
                           "so 2 leaves and 2 hosts per leaf at least")
        if not 1 <= self.evs <= 256:
            raise MrcError(f"--evs {self.evs}: use 1..256 EVs per QP")
        if self.write_bytes < max(self.rc_qps):
            raise MrcError(f"--write-bytes {self.write_bytes}: fewer bytes than QPs")

    def qps_text(self) -> str:
        return ",".join(str(n) for n in self.rc_qps)

    def command(self) -> str:
        return (f"mrc experiment load-balance --seed {self.seed} {self.size.options()} --evs {self.evs} "
                f"--link-speed {self.link_speed_pps} --rc-qps {self.qps_text()} --write-bytes {self.write_bytes}")


def parse_counts(text: str) -> tuple[int, ...]:
    """``1,2,4,8,16`` to (1, 2, 4, 8, 16). Raises MrcError for anything else."""
    return parse_numbers(text, "--rc-qps", int, "1,2,4,8,16")


def run_load_balance(opts: LoadBalanceOptions, say: Callable[[str], None] = lambda _: None,
                     plot: str | None = None) -> ExperimentRecord:
    """An EV-hash fabric for MRC (one run), then one for the RC baseline (one run per QP
    count); return the record; ``plot``: write the PNG there.

    Raises:
        MrcError: a bad option, a fabric did not come up, or a traffic worker died.
    """
    opts.check()
    start = RunStart.now()
    settings = dataclasses.replace(AGENT_SETTINGS, seed=opts.seed, ev_count=opts.evs,
                                   backups_per_plane=min(AGENT_SETTINGS.backups_per_plane, opts.evs))
    runs: list[WriteRun] = []
    for transport, counts in (("mrc", (1,)), ("rc", opts.rc_qps)):
        with experiment_fabric(opts.size.topology(), opts.name, settings, opts.link_speed_pps, say, mode="ecmp",
                               transport=transport) as fab:
            for n in counts:
                say(f"{transport}: {n} QP(s) per pair, {len(PAIRS)} pairs, {opts.write_bytes} B per pair")
                run = WriteRun(transport, 0.0, n, opts.write_bytes // n, PAIRS)
                before = uplink_packets(fab)
                run_writes(fab, run, opts.seed)
                after = uplink_packets(fab)
                run.links = {k: after[k] - before.get(k, 0) for k in after}
                runs.append(run)
    record = load_balance_record(opts, runs)
    if plot:
        save_plot(record, runs, plot)
    record.finish(start)
    return record


def uplink_packets(fab) -> dict[str, int]:
    """Packets each T0-T1 link of the source leaf carried up so far, by link name (the T0's
    ``tx_port`` counter of its port toward the T1)."""
    out = {}
    for name in fab.switches():
        sw = fab.compiled.switch(name)
        if not name.endswith(f"-t0-{SOURCE_LEAF}"):
            continue
        counts = fab.switch_counters(name, "tx_port")
        for port in sw.ports:
            if "-t1-" in port.peer:
                out[f"{name}>{port.peer}"] = counts[port.number][0]
    return out


def spread(links: dict[str, int]) -> float | None:
    """Load imbalance over the links: the busiest link's packets over the mean (1.0 = even);
    None when nothing crossed."""
    if not links or not sum(links.values()):
        return None
    return max(links.values()) / (sum(links.values()) / len(links))


def _run(runs: list[WriteRun], transport: str, n: int) -> WriteRun | None:
    return next((r for r in runs if r.transport == transport and r.qps == n), None)


def _goodput(run: WriteRun | None) -> float | None:
    return run.goodput_mbps if run else None


def load_balance_record(opts: LoadBalanceOptions, runs: list[WriteRun]) -> ExperimentRecord:
    """The record of finished runs (pure)."""
    mrc, top = _run(runs, "mrc", 1), max(opts.rc_qps)
    rc_top = _run(runs, "rc", top)
    below = max((n for n in opts.rc_qps if n < top), default=None)
    rc_below = _run(runs, "rc", below) if below else None
    figures = [
        Figure(measure="aggregate goodput, 1 MRC QP per pair", value=_goodput(mrc), unit="MB/s",
               baseline=f"{top} RC QPs per pair, same run", baseline_value=_goodput(rc_top), goal="> 1"),
        Figure(measure="T0-T1 load spread (busiest / mean), 1 MRC QP per pair", value=spread(mrc.links) if mrc else None,
               unit="x", baseline=f"{top} RC QPs per pair", baseline_value=spread(rc_top.links) if rc_top else None),
    ]
    if rc_below:
        figures.append(Figure(measure=f"aggregate goodput, {top} RC QPs per pair", value=_goodput(rc_top), unit="MB/s",
                              baseline=f"{below} RC QPs per pair, same run", baseline_value=_goodput(rc_below),
                              goal="little gain"))
    rc_runs = [r for r in runs if r.transport == "rc"]
    ours = (f"1 MRC QP per pair {_mb(_goodput(mrc))} (spread {_x(spread(mrc.links) if mrc else None)}); RC "
            + ", ".join(f"{r.qps} QPs {_mb(_goodput(r))} (spread {_x(spread(r.links))})" for r in rc_runs))
    return ExperimentRecord(
        name=NAME, claim=CLAIM, ours=ours, command=opts.command(), seed=opts.seed, link_speed_pps=opts.link_speed_pps,
        setting=dict(planes=opts.size.planes, spines=opts.size.spines, leaves=opts.size.leaves,
                     hosts_per_leaf=opts.size.hosts_per_leaf, evs=opts.evs, rc_qps=opts.qps_text(),
                     write_bytes=opts.write_bytes, pairs=",".join(f"{s}>{d}" for s, d in PAIRS), mode="ecmp",
                     endpoint="native"),
        figures=figures, differs=DIFFERS,
        checks={"every byte verified": bool(runs) and all(r.verified for r in runs),
                "RC really single-path: each QP on one EV (the senders' per-EV counters)": bool(rc_runs)
                and all(0 < e <= r.qps for r in rc_runs for e in r.evs_per_pair)
                and all(r.evs_per_pair == [1] * len(PAIRS) for r in rc_runs if r.qps == 1),
                "MRC sprayed over more EVs than the most RC QPs": mrc is not None
                and all(e > top for e in mrc.evs_per_pair),
                "the T0-T1 links' counters moved in every run": all(sum(r.links.values()) > 0 for r in runs)},
        details=dict(runs=[dict(r.summary(), spread=spread(r.links)) for r in runs]))


def save_plot(record: ExperimentRecord, runs: list[WriteRun], path: str) -> None:
    """Aggregate goodput and T0-T1 load spread per configuration; named in ``record.plot``."""
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"MRC x{r.qps}" if r.transport == "mrc" else f"RC x{r.qps}" for r in runs]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.bar(labels, [r.goodput_mbps or 0 for r in runs], color=["C0" if r.transport == "mrc" else "C1" for r in runs])
    ax1.set_ylabel("aggregate goodput (MB/s)")
    ax1.set_title("QPs per host pair (2 pairs)")
    ax2.bar(labels, [spread(r.links) or 0 for r in runs], color=["C0" if r.transport == "mrc" else "C1" for r in runs])
    ax2.axhline(1.0, color="grey", linewidth=0.8)
    ax2.set_ylabel("busiest T0-T1 link / mean")
    ax2.set_title("load spread over the source leaf's uplinks")
    fig.suptitle("load-balance: EV-hash mode, 1 MRC QP vs N RC QPs")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    record.plot = Path(path).name


def _mb(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} MB/s"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"
