"""``mrc experiment random-loss``: random loss on every link of the fabric, one MRC QP against
one RC baseline QP (RoCEv2 RC's go-back-N on one path; docs/endpoint.md "The RC baseline"),
each reported as a fraction of its own loss-free run on the same fabric (docs/experiments.md).

The paper's claim (mrc-facts.md section 6, "Versus RoCEv2"): at 1 % loss MRC reaches about a
third of its target throughput, and RoCE is "unusable". The loss is the fault program's
(``mrc fail link --loss``) on both ends of every link, hosts' links included, so a packet
meets it at each of its 4 hops (host, T0, T1, T0): at 1 % per link, about 4 % per path.
Each transport gets a fabric of its own, brought up for it (RC: pinned-EV host agents).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...endpoint.choices import TRANSPORTS
from ...errors import MrcError
from ...fabric import faults
from ..demo.run import AGENT_SETTINGS
from .bringup import experiment_fabric
from .demo_fault import FabricSize
from .options import parse_numbers
from .record import ExperimentRecord, Figure, RunStart
from .writes import WriteRun, run_writes

NAME = "random-loss"
CLAIM = 'At 1 % loss, MRC reaches about 1/3 of target throughput and RoCE is "unusable"'
DIFFERS = ("The paper's RoCE is a NIC's RC (with DCQCN); ours is the native endpoint's RC baseline: go-back-N "
           "on one pinned EV, a fixed window, no DCQCN, no PFC (docs/endpoint.md). The loss applies at each of "
           "a path's 4 hops, and the links are emulated at a few thousand packets/s on a 2-core machine, where "
           "the endpoints' CPU and timers, not only the links, set the pace; each figure is a fraction of the "
           "same transport's loss-free run on the same fabric.")
SRC, DST = "h0-0", "h1-0"
HEADLINE_PERCENT = 1.0


@dataclass(frozen=True)
class RandomLossOptions:
    """The experiment's settings: the fabric ``size``, ``evs`` per QP (MRC), ``link_speed_pps``,
    the ``loss_percents`` swept (each also run loss-free first), ``write_bytes`` per run,
    ``seed`` (data, agents' EV choice; the loss itself is the kernel's random draw) and fabric
    ``name``."""

    size: FabricSize = FabricSize(planes=2, spines=2, leaves=2, hosts_per_leaf=1)
    evs: int = 128
    link_speed_pps: int = 5000
    loss_percents: tuple[float, ...] = (0.1, 1.0, 5.0)
    write_bytes: int = 4 << 20
    seed: int = 1
    name: str = "exprloss"

    def check(self) -> None:
        """Raises MrcError naming a bad option."""
        if not self.loss_percents or any(not 0 < p <= 50 for p in self.loss_percents):
            raise MrcError(f"--loss-percents {self.percents_text()}: give 1 or more percents within (0, 50]")
        if self.size.leaves < 2:
            raise MrcError(f"fabric {self.size.describe()}: the write crosses 2 leaves")
        if not 1 <= self.evs <= 256:
            raise MrcError(f"--evs {self.evs}: use 1..256 EVs per QP")

    def percents_text(self) -> str:
        return ",".join(f"{p:g}" for p in self.loss_percents)

    def command(self) -> str:
        return (f"mrc experiment random-loss --seed {self.seed} {self.size.options()} --evs {self.evs} "
                f"--link-speed {self.link_speed_pps} --loss-percents {self.percents_text()} "
                f"--write-bytes {self.write_bytes}")


def parse_percents(text: str) -> tuple[float, ...]:
    """``0.1,1,5`` to (0.1, 1.0, 5.0). Raises MrcError for anything else."""
    return parse_numbers(text, "--loss-percents", float, "0.1,1,5")


def run_random_loss(opts: RandomLossOptions, say: Callable[[str], None] = lambda _: None,
                    plot: str | None = None) -> ExperimentRecord:
    """For each transport: a fabric up, one loss-free write, one write per loss level, the
    fabric down; return the record; ``plot``: write the PNG there.

    Raises:
        MrcError: a bad option, a fabric did not come up, or a traffic worker died.
    """
    opts.check()
    start = RunStart.now()
    runs: list[WriteRun] = []
    settings = _settings(opts)
    for transport in TRANSPORTS:
        with experiment_fabric(opts.size.topology(), opts.name, settings, opts.link_speed_pps, say,
                               transport=transport) as fab:
            for pct in (0.0, *opts.loss_percents):
                say(f"{transport}: one QP {SRC} -> {DST}, {opts.write_bytes} B, "
                    + (f"{pct:g} % loss on every link" if pct else "no loss"))
                runs.append(_lossy_write(fab, WriteRun(transport, pct, 1, opts.write_bytes, ((SRC, DST),)), opts.seed))
    record = random_loss_record(opts, runs)
    if plot:
        save_plot(record, runs, plot)
    record.finish(start)
    return record


def _settings(opts: RandomLossOptions):
    import dataclasses

    return dataclasses.replace(AGENT_SETTINGS, seed=opts.seed, ev_count=opts.evs,
                               backups_per_plane=min(AGENT_SETTINGS.backups_per_plane, opts.evs))


def _lossy_write(fab, run: WriteRun, seed: int) -> WriteRun:
    """``run`` with its loss on both ends of every link of ``fab``, undone afterwards."""
    links = [(a, ia, b, ib) for a, ia, b, ib in fab.state.links]
    if run.loss_percent:
        for a, _, b, _ in links:
            fab.fail_link(a, b, "loss", run.loss_percent)
    try:
        run_writes(fab, run, seed)
        if run.loss_percent:
            for a, ia, b, ib in links:
                for node, ifname in ((a, ia), (b, ib)):
                    c = faults.read_stats(fab.state.nodes[node], ifname)
                    run.fault_seen += c.seen
                    run.fault_dropped += c.dropped_loss
    finally:
        if run.loss_percent:
            fab.restore_all()
    return run


def _find(runs: list[WriteRun], transport: str, pct: float) -> WriteRun | None:
    return next((r for r in runs if r.transport == transport and r.loss_percent == pct), None)


def _fraction(runs: list[WriteRun], transport: str, pct: float) -> float | None:
    base, lossy = _find(runs, transport, 0.0), _find(runs, transport, pct)
    if base is None or lossy is None or not base.goodput_mbps or lossy.goodput_mbps is None:
        return None
    return lossy.goodput_mbps / base.goodput_mbps


def random_loss_record(opts: RandomLossOptions, runs: list[WriteRun]) -> ExperimentRecord:
    """The record of finished runs (pure)."""
    pct = HEADLINE_PERCENT if HEADLINE_PERCENT in opts.loss_percents else opts.loss_percents[0]
    figures = []
    for t in TRANSPORTS:
        base, lossy = _find(runs, t, 0.0), _find(runs, t, pct)
        figures.append(Figure(measure=f"{t.upper()} goodput at {pct:g} % loss", unit="MB/s",
                              value=lossy.goodput_mbps if lossy else None,
                              baseline=f"{t.upper()} loss-free, same fabric",
                              baseline_value=base.goodput_mbps if base else None,
                              goal="about 1/3" if t == "mrc" else "", note="ratio: the fraction of loss-free"))
    mrc, rc = _find(runs, "mrc", pct), _find(runs, "rc", pct)
    figures.append(Figure(measure=f"MRC vs RC goodput at {pct:g} % loss", unit="MB/s",
                          value=mrc.goodput_mbps if mrc else None, baseline=f"RC at {pct:g} % loss, same run",
                          baseline_value=rc.goodput_mbps if rc else None))
    ours = "; ".join(f"at {p:g} % loss MRC {_pct(_fraction(runs, 'mrc', p))}, RC {_pct(_fraction(runs, 'rc', p))}"
                     for p in opts.loss_percents) + " of their loss-free goodput"
    rc_runs = [r for r in runs if r.transport == "rc"]
    return ExperimentRecord(
        name=NAME, claim=CLAIM, ours=ours, command=opts.command(), seed=opts.seed, link_speed_pps=opts.link_speed_pps,
        setting=dict(planes=opts.size.planes, spines=opts.size.spines, leaves=opts.size.leaves,
                     hosts_per_leaf=opts.size.hosts_per_leaf, evs=opts.evs, loss_percents=opts.percents_text(),
                     write_bytes=opts.write_bytes, src=SRC, dst=DST, endpoint="native"),
        figures=figures, differs=DIFFERS,
        checks={"every byte verified": bool(runs) and all(r.verified for r in runs),
                "RC really on one path (the sender's per-EV counters)": bool(rc_runs)
                and all(r.evs_per_pair == [1] for r in rc_runs),
                "MRC sprayed over several EVs": all(r.evs_per_pair[0] > 1 for r in runs if r.transport == "mrc"),
                "the loss programs dropped packets in every lossy run": all(r.fault_dropped > 0 for r in runs
                                                                           if r.loss_percent)},
        details=dict(runs=[r.summary() for r in runs],
                     fraction_of_loss_free={t: {f"{p:g}": _fraction(runs, t, p) for p in opts.loss_percents}
                                            for t in TRANSPORTS}))


def save_plot(record: ExperimentRecord, runs: list[WriteRun], path: str) -> None:
    """Goodput as a fraction of loss-free against the loss per link, one line per transport;
    named in ``record.plot``."""
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    percents = sorted({r.loss_percent for r in runs if r.loss_percent})
    fig, ax = plt.subplots(figsize=(6, 4))
    for t in TRANSPORTS:
        ys = [_fraction(runs, t, p) for p in percents]
        ax.plot(percents, [y if y is not None else float("nan") for y in ys], marker="o", label=t.upper())
    ax.set_xscale("log")
    ax.set_xlabel("random loss on every link (%)")
    ax.set_ylabel("goodput / loss-free goodput")
    ax.set_ylim(0, 1.1)
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title("random-loss: one QP, MRC vs the RC baseline")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    record.plot = Path(path).name


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.0f} %"
