"""``mrc experiment NAME``: experiments that build their own fabric, run, verify every byte and
report; ``mrc experiment table`` writes the results table (docs/experiments.md). Printing
only; the work is in :mod:`mrckit.apps`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..endpoint.choices import TRANSPORTS
from .endpoint import ENDPOINTS, parse_size
from .params import INT

DEFAULT_RESULTS = "docs/experiments"
DEFAULT_TABLE = "docs/experiments.md"


@click.group("experiment")
def experiment() -> None:
    """Experiments that build their own fabric, run, verify every byte and report (docs/experiments.md)."""


def _say(text: str) -> None:
    click.echo(text, err=True)


def _fabric_options(planes: int, spines: int, leaves: int, hosts: int, link_speed: int):
    """Options every experiment takes: the fabric's size and its link speed."""
    def wrap(f):
        for opt in reversed([
            click.option("--seed", type=INT, default=1, show_default=True,
                         help="Seeds the fault schedule, the data and the agents' EV choice."),
            click.option("--planes", type=click.IntRange(1, 16), default=planes, show_default=True),
            click.option("--spines", type=click.IntRange(1, 64), default=spines, show_default=True,
                         help="T1 switches per plane."),
            click.option("--leaves", type=click.IntRange(1, 64), default=leaves, show_default=True,
                         help="T0 switches per plane."),
            click.option("--hosts-per-leaf", type=click.IntRange(1, 64), default=hosts, show_default=True),
            click.option("--link-speed", type=click.IntRange(1, 1_000_000), default=link_speed, show_default=True,
                         help="Drain rate of every switch port's queue model, packets/s: the emulated link speed."),
            click.option("--out", "out_dir", type=click.Path(file_okay=False),
                         help=f"Write NAME.json and NAME.png in this folder (e.g. {DEFAULT_RESULTS})."),
        ]):
            f = opt(f)
        return f
    return wrap


def _emit(record, out_dir: str | None) -> None:
    """Print the record and its BENCH lines, write its JSON under
    ``out_dir``, and exit 1 unless it passed."""
    for line in record.lines():
        click.echo(line)
    for line in record.bench_lines():
        click.echo(line)
    if out_dir:
        path = Path(out_dir) / f"{record.name}.json"
        record.write_json(path)
        click.echo(f"wrote {path}" + (f" and {Path(out_dir) / record.plot}" if record.plot else ""))
    if not record.passed:
        sys.exit(1)


def _plot_path(out_dir: str | None, name: str) -> str | None:
    return str(Path(out_dir) / f"{name}.png") if out_dir else None


@experiment.command("failover")
@_fabric_options(planes=2, spines=2, leaves=2, hosts=2, link_speed=5000)
@click.option("--evs", type=click.IntRange(1, 256), default=128, show_default=True, help="EVs per QP.")
@click.option("--duration", type=click.FloatRange(1, 60), default=6.0, show_default=True,
              help="Seconds the write should last at the rate a warm-up write measures.")
@click.option("--name", default="expfailover", show_default=True, help="The fabric's name.")
def failover_cmd(seed, planes, spines, leaves, hosts_per_leaf, link_speed, out_dir, evs, duration, name) -> None:
    """A T0-T1 link fails mid-transfer: the time to bypass it (dataplane-stamped), the packets
    lost and the goodput dip, against the same write before the fault."""
    from ..apps.experiments.demo_fault import FabricSize
    from ..apps.experiments.failover import FailoverOptions, run_failover

    opts = FailoverOptions(size=FabricSize(planes, spines, leaves, hosts_per_leaf), evs=evs,
                           link_speed_pps=link_speed, duration_s=duration, seed=seed, name=name)
    record = run_failover(opts, _say, plot=_plot_path(out_dir, "failover"))
    _emit(record, out_dir)


@experiment.command("lossy-ev")
@_fabric_options(planes=8, spines=2, leaves=2, hosts=2, link_speed=2000)
@click.option("--evs", type=click.IntRange(1, 256), default=128, show_default=True, help="EVs per QP.")
@click.option("--loss-percent", type=click.FloatRange(0, 100, min_open=True), default=20.0, show_default=True,
              help="Packets the lossy path drops, percent.")
@click.option("--duration", type=click.FloatRange(1, 60), default=6.0, show_default=True,
              help="Seconds the write should last at the rate a warm-up write measures.")
@click.option("--name", default="explossy", show_default=True, help="The fabric's name.")
def lossy_ev_cmd(seed, planes, spines, leaves, hosts_per_leaf, link_speed, out_dir, evs, loss_percent, duration,
                 name) -> None:
    """One path of 16 drops 20 % of its packets: how soon its EVs are deactivated, and the
    goodput with the loss against the same write before it."""
    from ..apps.experiments.demo_fault import FabricSize
    from ..apps.experiments.lossy_ev import LossyEvOptions, run_lossy_ev

    opts = LossyEvOptions(size=FabricSize(planes, spines, leaves, hosts_per_leaf), evs=evs, link_speed_pps=link_speed,
                          loss_percent=loss_percent, duration_s=duration, seed=seed, name=name)
    record = run_lossy_ev(opts, _say, plot=_plot_path(out_dir, "lossy-ev"))
    _emit(record, out_dir)


@experiment.command("flaps")
@_fabric_options(planes=2, spines=2, leaves=2, hosts=2, link_speed=5000)
@click.option("--evs", type=click.IntRange(1, 256), default=128, show_default=True, help="EVs per QP.")
@click.option("--per-minute", "per_minute", default="14,120", show_default=True,
              help="Flap rates of the T0-T1 link, flaps per minute, comma-separated: one write each.")
@click.option("--duration", type=click.FloatRange(1, 60), default=9.0, show_default=True,
              help="Seconds each write should last; the link flaps during its middle third.")
@click.option("--name", default="expflaps", show_default=True, help="The fabric's name.")
def flaps_cmd(seed, planes, spines, leaves, hosts_per_leaf, link_speed, out_dir, evs, per_minute, duration,
              name) -> None:
    """T0-T1 link flaps at 14 per minute and faster: throughput and loss with and without flaps."""
    from ..apps.experiments.demo_fault import FabricSize
    from ..apps.experiments.flaps import FlapsOptions, parse_rates, run_flaps

    opts = FlapsOptions(size=FabricSize(planes, spines, leaves, hosts_per_leaf), evs=evs, link_speed_pps=link_speed,
                        per_minute=parse_rates(per_minute), duration_s=duration, seed=seed, name=name)
    record = run_flaps(opts, _say, plot=_plot_path(out_dir, "flaps"))
    _emit(record, out_dir)


@experiment.command("random-loss")
@_fabric_options(planes=2, spines=2, leaves=2, hosts=1, link_speed=5000)
@click.option("--evs", type=click.IntRange(1, 256), default=128, show_default=True, help="EVs per MRC QP.")
@click.option("--loss-percents", default="0.1,1,5", show_default=True,
              help="Random loss on every link, percent, comma-separated (e.g. 0.1,0.5,1,2,5): one write per "
              "transport each, after a loss-free one.")
@click.option("--write-bytes", default="4M", show_default=True, help="Bytes of each write.")
@click.option("--name", default="exprloss", show_default=True, help="The fabrics' name.")
def random_loss_cmd(seed, planes, spines, leaves, hosts_per_leaf, link_speed, out_dir, evs, loss_percents,
                    write_bytes, name) -> None:
    """Random loss on every link: one MRC QP and one RC baseline QP (go-back-N, one path), each
    as a fraction of its own loss-free goodput."""
    from ..apps.experiments.demo_fault import FabricSize
    from ..apps.experiments.random_loss import RandomLossOptions, parse_percents, run_random_loss

    opts = RandomLossOptions(size=FabricSize(planes, spines, leaves, hosts_per_leaf), evs=evs,
                             link_speed_pps=link_speed, loss_percents=parse_percents(loss_percents),
                             write_bytes=parse_size(write_bytes), seed=seed, name=name)
    record = run_random_loss(opts, _say, plot=_plot_path(out_dir, "random-loss"))
    _emit(record, out_dir)


@experiment.command("load-balance")
@_fabric_options(planes=2, spines=2, leaves=2, hosts=2, link_speed=2500)
@click.option("--evs", type=click.IntRange(1, 256), default=256, show_default=True, help="EVs per QP.")
@click.option("--rc-qps", default="1,2,4,8,16", show_default=True,
              help="RC baseline QPs per host pair, comma-separated: one run each.")
@click.option("--write-bytes", default="4M", show_default=True, help="Bytes each host pair writes per run.")
@click.option("--name", default="explb", show_default=True, help="The fabrics' name.")
def load_balance_cmd(seed, planes, spines, leaves, hosts_per_leaf, link_speed, out_dir, evs, rc_qps, write_bytes,
                     name) -> None:
    """EV-hash mode: 1 MRC QP per host pair over 256 EVs against 1, 2, 4, 8 and 16 single-path
    RC QPs; aggregate goodput and the load spread over the T0-T1 links."""
    from ..apps.experiments.demo_fault import FabricSize
    from ..apps.experiments.load_balance import LoadBalanceOptions, parse_counts, run_load_balance

    opts = LoadBalanceOptions(size=FabricSize(planes, spines, leaves, hosts_per_leaf), evs=evs,
                              link_speed_pps=link_speed, rc_qps=parse_counts(rc_qps),
                              write_bytes=parse_size(write_bytes), seed=seed, name=name)
    record = run_load_balance(opts, _say, plot=_plot_path(out_dir, "load-balance"))
    _emit(record, out_dir)


@experiment.command("t1-failure")
@_fabric_options(planes=2, spines=4, leaves=4, hosts=1, link_speed=1000)
@click.option("--qps-per-pair", type=click.IntRange(1, 64), default=4, show_default=True,
              help="QPs each host writes to each other host (all-to-all).")
@click.option("--evs", type=click.IntRange(128, 256), default=128, show_default=True, help="EVs per QP.")
@click.option("--t1-draws", type=click.IntRange(1, 256), default=1, show_default=True,
              help="E: T1s each host draws per plane for its EVs; a QP crosses a given T1 with "
                   "probability 1 - (1 - 1/spines)^E.")
@click.option("--duration", type=click.FloatRange(3, 60), default=9.0, show_default=True,
              help="Seconds the all-to-all lasts at line rate; the T1 fails during its middle third.")
@click.option("--name", default="expt1", show_default=True, help="The fabric's name.")
def t1_failure_cmd(seed, planes, spines, leaves, hosts_per_leaf, link_speed, out_dir, qps_per_pair, evs, t1_draws,
                   duration, name) -> None:
    """One T1 stops forwarding under an all-to-all of many QPs: the share of QPs affected beside
    1 - (1 - 1/S)^E, and the aggregate goodput against the same traffic without the fault."""
    from ..apps.experiments.demo_fault import FabricSize
    from ..apps.experiments.t1_failure import T1FailureOptions, run_t1_failure

    opts = T1FailureOptions(size=FabricSize(planes, spines, leaves, hosts_per_leaf), qps_per_pair=qps_per_pair,
                            evs=evs, t1_draws=t1_draws,
                            link_speed_pps=link_speed, duration_s=duration, seed=seed, name=name)
    record = run_t1_failure(opts, _say, plot=_plot_path(out_dir, "t1-failure"))
    _emit(record, out_dir)


@experiment.command("incast")
@_fabric_options(planes=2, spines=3, leaves=4, hosts=3, link_speed=1000)
@click.option("--senders", type=click.IntRange(1, 64), default=7, show_default=True,
              help="Hosts that write to the receiver at once.")
@click.option("--incast-size", default="1M", show_default=True, help="Bytes each incast sender writes.")
@click.option("--victim-write", default="32K", show_default=True, help="Bytes of each of the victim's writes.")
@click.option("--victim-writes", type=click.IntRange(1, 100_000), default=64, show_default=True,
              help="The victim's writes, one after another.")
@click.option("--trim-threshold", type=click.IntRange(1, 1 << 20), default=64, show_default=True,
              help="Queue depth (packets) at which every switch port trims, with trimming on.")
@click.option("--capacity", type=click.IntRange(1, 1 << 20), default=64, show_default=True,
              help="Packets every switch port's data queue holds; a whole data packet that finds it full is dropped.")
@click.option("--transport", "transports", multiple=True, type=click.Choice(TRANSPORTS), default=("mrc",),
              show_default=True, help="Transports to run the incast with: mrc always runs; rc adds the RC baseline "
              "(go-back-N on one pinned EV) on a fabric of its own.")
@click.option("--name", default="expincast", show_default=True, help="The fabric's name.")
def incast_cmd(seed, planes, spines, leaves, hosts_per_leaf, link_speed, out_dir, senders, incast_size, victim_write,
               victim_writes, trim_threshold, capacity, transports, name) -> None:
    """7 senders write to 1 receiver while a victim flow that shares their T0-T1 links makes
    small writes: the victim's goodput and p99 completion time with trimming on and off,
    against the victim alone; the incast's completion time; trims and drops per switch."""
    from ..apps.experiments.demo_fault import FabricSize
    from ..apps.experiments.incast import IncastOptions, run_incast

    opts = IncastOptions(size=FabricSize(planes, spines, leaves, hosts_per_leaf), senders=senders,
                         incast_bytes=parse_size(incast_size), victim_write_bytes=parse_size(victim_write),
                         victim_writes=victim_writes, link_speed_pps=link_speed, trim_threshold=trim_threshold,
                         capacity=capacity, transports=tuple(transports), seed=seed, name=name)
    record = run_incast(opts, _say, plot=_plot_path(out_dir, "incast"))
    _emit(record, out_dir)


@experiment.command("table")
@click.option("--results", type=click.Path(file_okay=False), default=DEFAULT_RESULTS, show_default=True,
              help="The folder of the experiments' JSON records.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=DEFAULT_TABLE, show_default=True)
def table_cmd(results, out_path) -> None:
    """Write the results table (Markdown) from the experiments' JSON records, and print the
    BENCH summary."""
    from ..apps.experiments.table import load_records, render_table, summary_lines

    records = load_records(results)
    Path(out_path).write_text(render_table(records, results_rel=_relative(results, out_path)))
    for line in summary_lines(records):
        click.echo(line)
    click.echo(f"wrote {out_path} ({len(records)} experiments)")


def _relative(results: str, out_path: str) -> str:
    """The results folder as the table's links name it (relative to the table's folder)."""
    import os

    return Path(os.path.relpath(Path(results).resolve(), Path(out_path).resolve().parent)).as_posix()


@experiment.command("chaos")
@click.option("--seed", type=INT, default=1, show_default=True, help="Seeds the fault schedule and the data.")
@click.option("--duration", type=click.FloatRange(min=10), default=60.0, show_default=True,
              help="Seconds of the fault schedule; traffic runs until its last round completes.")
@click.option("--endpoint", "impl", type=click.Choice(ENDPOINTS), default="native", show_default=True,
              help="Which MRC endpoint runs on every host.")
@click.option("--size", default="32M", show_default=True, help="Bytes each QP of a traffic round writes.")
@click.option("--name", default="chaos", show_default=True, help="The fabric's name.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the report as JSON here.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help=f"Write the experiment record chaos.json in this folder (e.g. {DEFAULT_RESULTS}).")
def chaos_cmd(seed, duration, impl, size, name, json_path, out_dir) -> None:
    """A soak across the default fabric: rings of MRC QPs while a seeded schedule kills and
    restarts the controller, one host agent and the switches' P4Runtime server, flaps one
    T0-T1 link at 10 Hz and puts 1 % loss on another. Prints the faults as applied (and how
    late), every DENY with its reason, and exits 1 unless every byte verified, every fault
    showed in the dataplane and the restarted controller wrote nothing (docs/chaos.md)."""
    from ..apps.chaos import ChaosOptions, run_chaos
    from ..apps.experiments.chaos import chaos_record
    from ..apps.experiments.record import RunStart

    start = RunStart.now()
    opts = ChaosOptions(seed=seed, duration_s=duration, endpoint=impl, qp_size=parse_size(size), name=name)
    report = run_chaos(opts, say=_say)
    for line in report.lines():
        click.echo(line)
    record = chaos_record(opts, report, command=_chaos_command(seed, duration, impl, size))
    record.finish(start)
    for line in record.bench_lines():
        click.echo(line)
    if json_path:
        report.write_json(json_path)
        click.echo(f"wrote {json_path}")
    if out_dir:
        path = Path(out_dir) / "chaos.json"
        record.write_json(path)
        click.echo(f"wrote {path}")
    if not report.passed:
        sys.exit(1)


def _chaos_command(seed, duration, impl, size) -> str:
    return f"mrc experiment chaos --seed {seed} --duration {duration:g} --endpoint {impl} --size {size}"


def register(main: click.Group) -> None:
    """Add ``experiment`` to the ``mrc`` group."""
    main.add_command(experiment)
