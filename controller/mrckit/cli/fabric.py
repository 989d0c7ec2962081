"""``mrc fabric up|status|down|check``, ``mrc fail link|switch``, ``mrc restore``: the fabric
emulator and its faults (``mrckit.fabric``, docs/fabric.md)."""

from __future__ import annotations

import contextlib
import json
import sys

import click

from ..endpoint.choices import TRANSPORTS

DEFAULT_NAME = "default"


@click.group()
def fabric() -> None:
    """An emulated multi-plane fabric in network namespaces (switches, hosts, controller)."""


@fabric.command()
@click.argument("topology", required=False, type=click.Path(dir_okay=False))
@click.option("--name", default=DEFAULT_NAME, show_default=True, help="Fabric name (a-z0-9_, up to 16).")
@click.option("--target", type=click.Choice(["ebpf", "bmv2"]), default="ebpf", show_default=True,
              help="Switch target.")
@click.option("--mode", type=click.Choice(["srv6", "ecmp"]), default="srv6", show_default=True,
              help="Forwarding mode: srv6 (hosts source-route each EV with uSIDs) or ecmp (EV-hash "
              "mode: no outer header, the switches hash the EV over ECMP groups).")
@click.option("--p4runtime-port", type=int, help="eBPF target: serve P4Runtime on 127.0.0.1 from this "
              "port up (one per switch) instead of unix sockets under /run/mrckit/NAME/.")
@click.option("--no-controller", is_flag=True, help="Do not start `mrc controller run` (switches stay empty).")
@click.option("--p4info", type=click.Path(exists=True, dir_okay=False),
              help="P4Info for the controller (default p4src/build/).")
@click.option("--device-config", type=click.Path(exists=True, dir_okay=False),
              help="bmv2 JSON for the controller (default p4src/build/).")
@click.option("--rto-us", type=click.IntRange(min=1), metavar="US",
              help="Host agents' RTO in microseconds  [default: 50000, i.e. 50 ms].")
@click.option("--foreground", "-f", is_flag=True, help="Stay until Ctrl-C or SIGTERM, then tear down.")
@click.option("--transport", type=click.Choice(TRANSPORTS), default="mrc", show_default=True,
              help="rc: the host agents run in pinned-EV mode, each QP on one fixed EV, for the RC baseline "
              "(`--transport rc` on mrc write/listen/traffic); mrc: they spray every QP over its EVs.")
def up(topology, name, target, mode, p4runtime_port, no_controller, p4info, device_config, rto_us, foreground,
       transport) -> None:
    """Build the fabric of TOPOLOGY (YAML; default: the small fabric, 2 planes, 2 spines and
    3 leaves per plane, 2 hosts per leaf), start its switches, host agents and controller.
    """
    from ..fabric.fabric import Fabric, fabric_settings, wait_for_signal
    from ..topology import generate_clos, load_topology

    topo = load_topology(topology) if topology else generate_clos()
    settings = fabric_settings(rto_us * 1000 if rto_us else None, target)
    if transport == "rc":
        import dataclasses

        settings = dataclasses.replace(settings, pinned_ev=True)
    extra = (("--p4info", p4info) if p4info else ()) + (("--device-config", device_config) if device_config else ())
    with _progress_bar() as progress:
        fab = Fabric.up(topo, name=name, target=target, mode=mode, settings=settings,
                        p4runtime_port=p4runtime_port, controller=not no_controller, controller_args=extra,
                        progress=progress)
    click.echo(f"fabric {name} up: {len(fab.switches())} switches ({target}, {mode} mode), {len(fab.hosts())} hosts, "
               f"{len(fab.state.links)} links; state in {fab.state.dir}")
    click.echo(f"controller topology: {fab.topology_path}" + (" (controller not started)" if no_controller else ""))
    if not foreground:
        fab.detach()
        click.echo(f"tear down with: mrc fabric down {name}")
        return
    try:
        wait_for_signal(lambda: click.echo("running; Ctrl-C tears it down"))
    finally:
        fab.down()
        click.echo(f"fabric {name} down")


@contextlib.contextmanager
def _progress_bar():
    """A ``progress(step, done, total)`` for ``Fabric.up`` that draws one bar per bring-up
    step on stderr (rich), or None when stderr is not a terminal (logs stay clean)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bars = Progress(TextColumn("{task.description:>13}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=False)
    tasks: dict[str, int] = {}

    def progress(step: str, done: int, total: int) -> None:
        if step not in tasks:
            tasks[step] = bars.add_task(step, total=total)
        bars.update(tasks[step], completed=done, total=total)

    with bars:
        yield progress


@fabric.command()
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(name, as_json) -> None:
    """Show fabric NAME (default: every fabric): its processes (pid, running or not), links,
    faults and fault log."""
    from ..fabric.faultctl import status as fabric_status
    from ..fabric.state import FabricState, list_fabrics

    names = [name] if name else list_fabrics()
    docs = [fabric_status(FabricState.load(n)) for n in names]
    if as_json:
        click.echo(json.dumps(docs if not name else docs[0], indent=1))
        return
    if not docs:
        click.echo("no fabric is up")
    for doc in docs:
        _print_status(doc)


def _print_status(doc: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 200)
    dead = [n for n, alive in doc["processes"].items() if not alive]
    missing = [n for n, ns in doc["namespaces"].items() if not ns["exists"]]
    mode = doc.get("mode", "srv6")
    console.print(f"[bold]fabric {doc['name']}[/bold] ({doc['target']}, {mode} mode), up since {doc['created']}: "
                  f"{len(doc['processes'])} processes, {len(dead)} not running{': ' + ', '.join(dead) if dead else ''}; "
                  f"{len(missing)} namespaces missing")
    table = Table(title="processes", title_justify="left")
    for col in ("node", "kind", "pid", "state", "address"):
        table.add_column(col)
    for p in doc.get("process_list", []):
        table.add_row(p["node"], p["kind"], str(p["pid"]), "running" if p["running"] else "[red]NOT RUNNING[/red]",
                      p["address"] or "-")
    console.print(table)
    down = [ln for ln in doc["links"] if "UP" not in (ln["state_a"], ln["state_b"]) or ln["state_a"] != ln["state_b"]]
    console.print(f"{len(doc['links'])} links, {len(down)} not up")
    for ln in down:
        console.print(f"  {ln['a']}:{ln['if_a']} {ln['state_a']} — {ln['b']}:{ln['if_b']} {ln['state_b']}")
    if doc["faults"]:
        table = Table(title="active faults")
        for col in ("target", "fault", "since"):
            table.add_column(col)
        for key, f in doc["faults"].items():
            value = "" if f.get("value") is None else f" {f['value']:g}"
            table.add_row(key, f["kind"] + value, f["since"])
        console.print(table)
    for line in doc["fault_log"][-10:]:
        console.print(f"  {line}", highlight=False)


@fabric.command()
@click.argument("name", required=False)
@click.option("--all", "everything", is_flag=True, help="Every fabric, and anything left named mrcf-*.")
def down(name, everything) -> None:
    """Tear fabric NAME down (default: 'default'): processes, pins, namespaces, state, and the
    saved status of its controller (also when only that is left)."""
    from ..fabric import teardown

    if everything:
        removed = teardown.down_all()
        lines = [f"{kind}: {', '.join(items)}" for kind, items in removed.items() if items]
        click.echo("removed " + "; ".join(lines) if lines else "nothing to remove")
        return
    from ..fabric.state import state_dir

    name = name or DEFAULT_NAME
    was_up = state_dir(name).exists()
    if not teardown.down(name):
        from ..errors import MrcError

        raise MrcError(f"no fabric named {name!r} is up; see `mrc fabric status`")
    click.echo(f"fabric {name} down" if was_up else f"fabric {name} is not up; removed its controller's leftover saved status")


@fabric.command()
@click.argument("name", required=False, default=DEFAULT_NAME)
@click.option("--packets", default=256, show_default=True,
              help="Packets per host pair (256: two rotations of a 128-EV set, so every plane).")
@click.option("--pps", type=click.FloatRange(min=1), help="Cap on the total send rate, packets/s (default: none on "
              "the ebpf target, 500 on bmv2, whose libpcap port rings overflow on an unpaced burst).")
def check(name, packets, pps) -> None:
    """Send UDP/4791 between every host pair of NAME and report it per pair and per plane;
    exit 1 unless every pair received everything over every plane."""
    from ..apps import pairwise
    from ..fabric.fabric import Fabric

    fab = Fabric.open(name)
    if pps is None and fab.state.target == "bmv2":
        pps = pairwise.BMV2_PPS
    results = pairwise.pairwise_udp(fab, packets, pps=pps)
    for r in results:
        if not r.ok:
            click.echo(f"  {r.src} -> {r.dst}: {r.received}/{r.sent} received, {r.misdelivered} misdelivered, "
                       f"per plane {r.per_plane}")
    click.echo(pairwise.summary(results))
    sys.exit(0 if all(r.ok for r in results) else 1)


@click.group()
def fail() -> None:
    """Break a running fabric: a link or a switch (see `mrc restore`)."""


def _fabric_option(fn):
    return click.option("--fabric", "fabric_name", default=DEFAULT_NAME, show_default=True,
                        help="Which fabric.")(fn)


@fail.command("link")
@click.argument("a")
@click.argument("b")
@click.option("--down", "kind", flag_value="down", help="Both ends administratively down.")
@click.option("--flap", type=float, metavar="HZ", help="Down and up HZ times a second.")
@click.option("--loss", type=float, metavar="PCT", help="Drop PCT percent of packets, both directions.")
@click.option("--blackhole", "kind", flag_value="blackhole", help="Drop every packet, link stays up.")
@_fabric_option
def fail_link(a, b, kind, flap, loss, fabric_name) -> None:
    """Break the link between nodes A and B (exactly one of --down, --flap, --loss, --blackhole)."""
    from ..errors import MrcError
    from ..fabric.fabric import Fabric

    chosen = [k for k, on in (("kind", kind), ("flap", flap is not None), ("loss", loss is not None)) if on]
    if len(chosen) != 1:
        raise MrcError("give exactly one of --down, --flap HZ, --loss PCT, --blackhole")
    value = flap if flap is not None else loss
    kind = kind or ("flap" if flap is not None else "loss")
    click.echo(Fabric.open(fabric_name).fail_link(a, b, kind, value))


@fail.command("switch")
@click.argument("switch")
@_fabric_option
def fail_switch(switch, fabric_name) -> None:
    """Detach SWITCH's dataplane (eBPF: XDP off every port; bmv2: process stopped)."""
    from ..fabric.fabric import Fabric

    click.echo(Fabric.open(fabric_name).fail_switch(switch))


@click.group(invoke_without_command=True)
@click.option("--all", "everything", is_flag=True, help="Undo every fault.")
@_fabric_option
@click.pass_context
def restore(ctx, everything, fabric_name) -> None:
    """Undo faults: `restore link A B`, `restore switch S` or `restore --all`."""
    if ctx.invoked_subcommand is not None:
        return
    if not everything:
        click.echo(ctx.get_help())
        ctx.exit(2)
    from ..fabric.fabric import Fabric

    lines = Fabric.open(fabric_name).restore_all()
    click.echo("\n".join(lines) if lines else "no fault to restore")


def _sub_fabric_option(fn):
    return click.option("--fabric", "fabric_name", help="Which fabric (default: 'default').")(fn)


def _which(ctx: click.Context, fabric_name: str | None) -> str:
    # `mrc restore --fabric X link A B` and `mrc restore link A B --fabric X` both work.
    parent = ctx.parent.params if ctx.parent is not None else {}
    return fabric_name or parent.get("fabric_name") or DEFAULT_NAME


@restore.command("link")
@click.argument("a")
@click.argument("b")
@_sub_fabric_option
@click.pass_context
def restore_link(ctx, a, b, fabric_name) -> None:
    """Undo the fault on the link between A and B."""
    from ..fabric.fabric import Fabric

    click.echo(Fabric.open(_which(ctx, fabric_name)).restore(a, b))


@restore.command("switch")
@click.argument("switch")
@_sub_fabric_option
@click.pass_context
def restore_switch(ctx, switch, fabric_name) -> None:
    """Re-attach SWITCH's dataplane, its tables as they were."""
    from ..fabric.fabric import Fabric

    click.echo(Fabric.open(_which(ctx, fabric_name)).restore(switch))


def register(main: click.Group) -> None:
    """Add ``fabric``, ``fail`` and ``restore`` to ``mrc``."""
    main.add_command(fabric)
    main.add_command(fail)
    main.add_command(restore)
