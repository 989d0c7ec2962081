"""``mrc traffic``: many QPs at once on a running fabric (docs/traffic.md). Printing only; the
work is in :mod:`mrckit.apps.traffic`."""

from __future__ import annotations

import sys

import click

from .endpoint import ENDPOINTS, check_transport_option, parse_size, transport_option
from .params import INT

PATTERNS = ("all-to-all", "ring", "incast", "permutation")
"""The patterns of mrckit.apps.traffic.patterns (tests/unit/cli checks that they agree; `mrc`
does not import numpy just to start)."""


@click.command("traffic")
@click.argument("pattern", type=click.Choice(PATTERNS))
@click.option("--fabric", "fabric_name", default="default", show_default=True, help="Which running fabric.")
@click.option("--size", default="8M", show_default=True, help="Bytes each QP writes, e.g. 64K, 8M.")
@click.option("-k", "k", type=INT, default=7, show_default=True, help="incast: how many senders.")
@click.option("--dst", help="incast: the receiving host (default: the first host).")
@click.option("--hosts", help="Comma-separated hosts to use (default: every host of the fabric).")
@click.option("--seed", type=INT, default=0, show_default=True, help="Seeds the data and the permutation.")
@click.option("--timeout", type=click.FloatRange(min=1), default=300.0, show_default=True,
              help="Seconds the whole run may take once started.")
@click.option("--endpoint", "impl", type=click.Choice(ENDPOINTS), default="native", show_default=True,
              help="Which MRC endpoint runs on every host: the native (C) one or the Python reference.")
@click.option("--timeout-exp", type=click.IntRange(0, 24),
              help="The writers' RTO is 1.024 us x 2^N (default: 8 native, 16 python).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the report as JSON here.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Write a PNG plot here.")
@transport_option
def traffic_cmd(pattern, fabric_name, size, k, dst, hosts, seed, timeout, impl, timeout_exp, json_path,
                plot_path, transport) -> None:
    """Run PATTERN between the hosts of a running fabric, one QP per flow, all at once; print
    each QP's completion time and goodput (median, p99) and verify every byte. Exit 1 unless
    every flow completed and verified."""
    from ..apps.traffic import make_flows, run_traffic
    from ..fabric.fabric import Fabric

    check_transport_option(transport, impl)
    fab = Fabric.open(fabric_name)
    names = [h.strip() for h in hosts.split(",") if h.strip()] if hosts else fab.hosts()
    for name in names:
        fab.host(name)  # an unknown host: one error line before anything starts
    flows = make_flows(pattern, names, parse_size(size), k=k, dst=dst, seed=seed)
    click.echo(f"{pattern}: {len(flows)} QPs of {flows[0].size} B among {len(names)} hosts of fabric {fab.name}, "
               f"{impl} endpoint, {transport} transport")
    report = run_traffic(fab, pattern, flows, endpoint=impl, seed=seed, timeout=timeout, timeout_exp=timeout_exp,
                         transport=transport)
    for line in report.lines():
        click.echo(line)
    if json_path:
        report.write_json(json_path)
        click.echo(f"wrote {json_path}")
    if plot_path:
        report.plot(plot_path)
        click.echo(f"wrote {plot_path}")
    if not report.passed:
        sys.exit(1)


def register(main: click.Group) -> None:
    """Add ``traffic`` to the ``mrc`` group."""
    main.add_command(traffic_cmd)
