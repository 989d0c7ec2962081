"""``mrc controller run TOPO``, ``mrc controller status`` and ``mrc controller link``: printing
and argument parsing only; the work is in :mod:`mrckit.control` (docs/controller.md)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import signal
import sys
import time
from pathlib import Path

import click

# Defaults shown in --help. They equal mrckit.control.reactor.SETTLE_NS and
# mrckit.control.status.STATUS_DIR (tests/unit/cli checks); importing those here would load
# finsy, grpc and numpy for every ``mrc`` command.
SETTLE_MS = 100.0
STATUS_DIR = "/run/mrckit/controller"
MODES = ("srv6", "ecmp")  # mrckit.topology.entries.MODES


def _override(spec: str, what: str) -> tuple[str, str, int | None]:
    """``NAME=ADDRESS`` or ``NAME=ADDRESS@DEVICE_ID``."""
    name, sep, address = spec.partition("=")
    if not sep or not name or not address:
        raise click.BadParameter(f"{spec!r}: expected NAME=ADDRESS", param_hint=what)
    head, at, dev = address.rpartition("@")
    if at and dev.isdigit():
        return name, head, int(dev)
    if at and head and "/" not in dev:  # "@x" ending a unix path is part of the path
        raise click.BadParameter(f"{spec!r}: device id {dev!r} after '@' is not a number", param_hint=what)
    return name, address, None


def _settings(specs: tuple[str, ...]) -> dict:
    """``FIELD=VALUE`` pairs as an AgentSettings dict (checked by the proto when used)."""
    out = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{spec!r}: expected FIELD=VALUE", param_hint="--agent-setting")
        out[key] = int(value) if value.isdigit() else value
    if out:
        from ..control.hosts import agent_settings

        agent_settings(out)  # an unknown field or a bad value: MrcError naming it, before any work
    return out


def _print_counts(ctl) -> None:
    for name, st in ctl.switches.items():
        c = st.last
        if c is not None:
            click.echo(f"  {name:<12} pipeline {'pushed' if c.pipeline_pushed else 'kept (cookie matches)':<22} "
                       f"read {c.entries_read:>4}  insert {c.inserted:>4}  modify {c.modified:>3}  "
                       f"delete {c.deleted:>3}  write requests {c.write_requests}")


async def _run(ctl, once: bool, reconfigure: bool) -> None:
    if once:
        await ctl.program_switches()
        click.echo(f"programmed {len(ctl.switches)} switches:")
        _print_counts(ctl)
        try:
            configured = await ctl.configure_hosts(force=reconfigure)
            ctl.ready.set()
        finally:
            await ctl.close()
            ctl.save_status(stopped=True)
        click.echo(f"hosts: {sum(configured.values())} configured now, "
                   f"{len(configured) - sum(configured.values())} already configured")
        return
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    runner = asyncio.create_task(ctl.run(stop))
    ready = asyncio.create_task(ctl.ready.wait())
    await asyncio.wait([runner, ready], return_when=asyncio.FIRST_COMPLETED)
    if ready.done():
        click.echo(f"ready: {len(ctl.switches)} switches programmed, {len(ctl.hosts)} hosts configured")
        _print_counts(ctl)
        sys.stdout.flush()
    else:
        ready.cancel()
    await runner
    click.echo("controller stopped")


def _status_lines(st: dict) -> list[str]:
    from ..control import format_marks

    out = [f"controller {st['name']}: {'running, pid ' + str(st['pid']) if st['running'] else 'not running'}; "
           f"{st['topology']}; {st.get('mode', 'srv6')} mode; {'ready' if st.get('ready') else 'not ready'}",
           f"pipeline cookie {st['pipeline']['cookie']:#x} ({st['pipeline']['p4info']})", "switches:"]
    for name, s in st["switches"].items():
        t = s["total"]
        out.append(f"  {name:<12} {s['address']:<40} dev {s['device_id']:<3} "
                   f"{('up' if s['connected'] else 'DOWN') if st['running'] else '-':<4} "
                   f"reconciles {s['reconciles']}  writes "
                   f"+{t['inserted']} ~{t['modified']} -{t['deleted']}"
                   + (f"  ({s['error']})" if s["error"] else ""))
    out.append("hosts:")
    for name, h in st["hosts"].items():
        state = "watching" if h["watching"] else "configured" if h["configured"] else "DOWN"
        state = state if st["running"] else "-"
        out.append(f"  {name:<12} {h['address']:<40} {state:<10} events {h['events']}"
                   + (f"  ({h['error']})" if h["error"] else ""))
    out.append(f"links believed down: {', '.join(st['links_down']) or 'none'}")
    if st.get("mode") == "ecmp":
        out.append(f"rerouted around (groups changed): {', '.join(st.get('rerouted', {})) or 'none'}")
    else:
        out.append(f"denials: {', '.join(st['denials']) or 'none'}")
    for link, why in st.get("withheld", {}).items():
        out.append(f"  withheld {link}: {why}")
    if st.get("localisation"):
        out.append(f"last localisation: {st['localisation']['describe']}")
    if st["timeline"]:
        out.append("timeline:")
        out += ["  " + line for line in format_marks(st["timeline"])]
    return out


def check_link_report(name: str, link: str, status_dir) -> None:
    """Refuse a link report that no controller would act on: no controller running under
    ``name``, or a ``link`` (design 3.3 name) its fabric does not have. Checked against the
    topology file the controller names in its status, else against its switch names.

    Raises:
        MrcError: naming the controller or the link.
    """
    from ..control import read_status, status_path
    from ..errors import MrcError
    from ..topology import load_topology
    from ..topology.ecmp import down_t1_links
    from ..wire.addressing import parse_link_name

    try:
        parsed = parse_link_name(link)
    except ValueError as exc:
        raise MrcError(f"link {link!r}: {exc}") from None
    st = read_status(status_path(name, status_dir))
    if not st["running"]:
        raise MrcError(f"no controller is running under --name {name!r} (its status file says it stopped); "
                       "nothing reported")
    topo_file = st.get("topology_file")
    if topo_file and Path(topo_file).exists():
        down_t1_links(load_topology(topo_file), [link])  # TopologyError (an MrcError) names the link
        return
    switches = st.get("switches", {})
    ends = [f"p{parsed.plane}-t0-{parsed.leaf}"] + ([f"p{parsed.plane}-t1-{parsed.index}"]
                                                    if parsed.kind == "t1" else [])
    if switches and any(end not in switches for end in ends):
        raise MrcError(f"no link {link} in the fabric of controller {name!r}")


def register(main: click.Group) -> None:
    """Add ``mrc controller`` to the ``mrc`` command."""

    @main.group("controller")
    def controller_group() -> None:
        """Program switches over P4Runtime, configure host agents, react to failures."""

    @controller_group.command("run")
    @click.argument("topo", type=click.Path(dir_okay=False))
    @click.option("--name", default="default", show_default=True, help="Status file name under --status-dir.")
    @click.option("--target", type=click.Choice(["ebpf", "bmv2"]), default="ebpf", show_default=True,
                  help="Switch target (only bmv2's 510-port limit differs).")
    @click.option("--mode", type=click.Choice(MODES), default="srv6", show_default=True,
                  help="srv6: uSID source routing, failed links DENIED on hosts; ecmp: EV-hash mode, "
                       "ipv6_fib and ECMP groups, rewritten on link reports (mrc controller link).")
    @click.option("--p4info", type=click.Path(dir_okay=False), help="P4Info text (default p4src/build/).")
    @click.option("--device-config", type=click.Path(dir_okay=False), help="bmv2 JSON (default p4src/build/).")
    @click.option("--switch", "switch_specs", multiple=True, metavar="NAME=ADDR[@DEVID]",
                  help="P4Runtime address of a switch (overrides the topology). Repeatable.")
    @click.option("--host", "host_specs", multiple=True, metavar="NAME=ADDR",
                  help="Agent address of a host (overrides the topology). Repeatable.")
    @click.option("--device-id", type=int, help="Device id of switches whose entry gives none (default 1).")
    @click.option("--nic-device", default="nic0", show_default=True, help="Hosts' virtual NIC device.")
    @click.option("--agent-setting", "agent_settings", multiple=True, metavar="FIELD=VALUE",
                  help="An AgentSettings field (host_agent.proto) for the agents it configures, "
                       "e.g. rto_ns=50000000. Repeatable.")
    @click.option("--reconfigure-hosts", is_flag=True,
                  help="Configure agents that have a config already (resets their dataplane).")
    @click.option("--settle-ms", type=float, default=SETTLE_MS, show_default=True,
                  help="Evidence gathering time before localising a failure.")
    @click.option("--status-dir", type=click.Path(file_okay=False), default=STATUS_DIR, show_default=True)
    @click.option("--once", is_flag=True, help="Program and configure once, print write counts, exit.")
    @click.option("-v", "--verbose", is_flag=True, help="Log every decision.")
    def run_cmd(topo, name, target, mode, p4info, device_config, switch_specs, host_specs, device_id, nic_device,
                agent_settings, reconfigure_hosts, settle_ms, status_dir, once, verbose):
        """Program every switch and configure every host agent of TOPO, then keep them so and
        react to failures until Ctrl-C. Works on any P4Runtime server (bmv2, the eBPF target,
        hardware) and agent that the topology or --switch/--host name."""
        from ..control import DEFAULT_DEVICE_ID, Controller, load_pipeline, targets_from_topology
        from ..topology import load_topology

        logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(message)s")
        logging.getLogger("mrckit.control.controller").setLevel(logging.INFO)
        logging.getLogger("finsy").setLevel(logging.WARNING)
        if settle_ms < 0:
            raise click.BadParameter(f"{settle_ms}: must be 0 or more", param_hint="--settle-ms")
        settings = _settings(agent_settings)
        topology = load_topology(topo)
        switches, hosts = targets_from_topology(
            topology, {n: (a, d) for n, a, d in (_override(x, "--switch") for x in switch_specs)},
            {n: a for n, a, _ in (_override(x, "--host") for x in host_specs)},
            device_id=DEFAULT_DEVICE_ID if device_id is None else device_id, nic_device=nic_device)
        hosts = [dataclasses.replace(h, settings=settings) for h in hosts]
        pipeline = load_pipeline(p4info, device_config)
        ctl = Controller(topology, switches, hosts, pipeline, target=target, mode=mode, name=name,
                         status_dir=status_dir,
                         settle_ns=int(settle_ms * 1e6), reconfigure_hosts=reconfigure_hosts,
                         topology_file=str(Path(topo).resolve()))
        asyncio.run(_run(ctl, once, reconfigure_hosts))

    @controller_group.command("link")
    @click.argument("link")
    @click.option("--down/--up", "down", required=True, help="The link went down, or came back up.")
    @click.option("--name", default="default", show_default=True)
    @click.option("--status-dir", type=click.Path(file_okay=False), default=STATUS_DIR, show_default=True)
    @click.option("--source", default="cli", show_default=True, help="Who reports it (shown on the timeline).")
    def link_cmd(link, down, name, status_dir, source):
        """Report that LINK (e.g. p0/t0-1/t1-0) went down or came back up to the running
        controller NAME. An ecmp-mode controller rewrites the groups of the affected switches
        at once; an srv6-mode one DENIES the link on every host (lifts it on --up). A link the
        fabric lacks, or no controller running under NAME, is refused and nothing is written."""
        from ..control import report_link

        check_link_report(name, link, status_dir)
        report = report_link(name, link, up=not down, status_dir=status_dir, source=source)
        click.echo(f"reported {report.link} {'down' if down else 'up'} to controller {name!r}")

    @controller_group.command("status")
    @click.option("--name", default="default", show_default=True)
    @click.option("--status-dir", type=click.Path(file_okay=False), default=STATUS_DIR, show_default=True)
    @click.option("--json", "as_json", is_flag=True, help="The raw status.")
    def status_cmd(name, status_dir, as_json):
        """Show a running controller's switches, hosts, links believed down, denials and timeline."""
        from ..control import read_status, status_path

        st = read_status(status_path(name, status_dir))
        if as_json:
            click.echo(json.dumps(st, indent=1, sort_keys=True))
            return
        age = (time.time_ns() - st.get("updated_ns", 0)) / 1e9
        for line in _status_lines(st):
            click.echo(line)
        click.echo(f"(status written {age:.1f} s ago)")
