"""``mrc experiment NAME``: experiments that build their own fabric, run, verify every byte and
report. Printing only; the work is in :mod:`mrckit.apps`."""

from __future__ import annotations

import sys

import click

from .endpoint import ENDPOINTS, parse_size
from .params import INT


@click.group("experiment")
def experiment() -> None:
    """Experiments that build their own fabric, run, verify every byte and report."""


@experiment.command("chaos")
@click.option("--seed", type=INT, default=1, show_default=True, help="Seeds the fault schedule and the data.")
@click.option("--duration", type=click.FloatRange(min=10), default=60.0, show_default=True,
              help="Seconds of the fault schedule; traffic runs until its last round completes.")
@click.option("--endpoint", "impl", type=click.Choice(ENDPOINTS), default="native", show_default=True,
              help="Which MRC endpoint runs on every host.")
@click.option("--size", default="32M", show_default=True, help="Bytes each QP of a traffic round writes.")
@click.option("--name", default="chaos", show_default=True, help="The fabric's name.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the report as JSON here.")
def chaos_cmd(seed, duration, impl, size, name, json_path) -> None:
    """A soak across the default fabric: rings of MRC QPs while a seeded schedule kills and
    restarts the controller, one host agent and the switches' P4Runtime server, flaps one
    T0-T1 link at 10 Hz and puts 1 % loss on another. Prints the faults as applied (and how
    late), every DENY with its reason, and exits 1 unless every byte verified, every fault
    showed in the dataplane and the restarted controller wrote nothing (docs/chaos.md)."""
    from ..apps.chaos import ChaosOptions, run_chaos

    opts = ChaosOptions(seed=seed, duration_s=duration, endpoint=impl, qp_size=parse_size(size), name=name)
    report = run_chaos(opts, say=lambda text: click.echo(text, err=True))
    for line in report.lines():
        click.echo(line)
    if json_path:
        report.write_json(json_path)
        click.echo(f"wrote {json_path}")
    if not report.passed:
        sys.exit(1)


def register(main: click.Group) -> None:
    """Add ``experiment`` to the ``mrc`` group."""
    main.add_command(experiment)
