"""``mrc controller run TOPO``, ``mrc controller status``, ``mrc controller link`` and ``mrc
controller watch``: printing and argument parsing only; the work is in :mod:`mrckit.control` (docs/controller.md)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import logging
import signal
import sys
from pathlib import Path

import click

# Defaults shown in --help. They equal mrckit.control.reactor.SETTLE_NS and
# mrckit.control.client.RUN_DIR (tests/unit/cli checks); importing those here would load
# finsy, grpc and numpy for every ``mrc`` command.
SETTLE_MS = 100.0
RUN_DIR = "/run/mrckit/controller"
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
        click.echo(f"ready: {len(ctl.switches)} switches programmed, {len(ctl.hosts)} hosts configured; "
                   f"northbound {ctl.address or 'off'}")
        _print_counts(ctl)
        sys.stdout.flush()
    else:
        ready.cancel()
    await runner
    click.echo("controller stopped")


def _status_lines(st: dict) -> list[str]:
    from ..control import format_marks

    out = [f"controller {st['name']}: running, pid {st['pid']}; "
           f"{st['topology']}; {st.get('mode', 'srv6')} mode; {'ready' if st.get('ready') else 'not ready'}",
           f"pipeline cookie {st['pipeline']['cookie']:#x} ({st['pipeline']['p4info']})", "switches:"]
    for name, s in st["switches"].items():
        t = s["total"]
        out.append(f"  {name:<12} {s['address']:<40} dev {s['device_id']:<3} "
                   f"{'up' if s['connected'] else 'DOWN':<4} "
                   f"reconciles {s['reconciles']}  writes "
                   f"+{t['inserted']} ~{t['modified']} -{t['deleted']}"
                   + (f"  ({s['error']})" if s["error"] else ""))
    out.append("hosts:")
    for name, h in st["hosts"].items():
        state = "watching" if h["watching"] else "configured" if h["configured"] else "DOWN"
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


def _stamp(time_ns: int) -> str:
    return dt.datetime.fromtimestamp(time_ns / 1e9, dt.timezone.utc).strftime("%H:%M:%S.%f")


def _watch_line(kind: str, item) -> str:
    """One line of ``mrc controller watch``: a timeline mark, or a host's EV event."""
    if kind == "mark":
        return f"{_stamp(item['time_ns'])}  {item['kind']:<17} {','.join(item['links']) or '-':<24} {item['detail']}"
    from ..proto.host_agent_pb2 import EvState

    host, ev = item
    what = f"{EvState.Name(ev.old_state)}->{EvState.Name(ev.new_state)}"
    return (f"{_stamp(ev.wall_time_ns)}  ev {host:<14} peer {ev.peer} ev {ev.ev:#x} {what} ({ev.reason})"
            + (f" link {ev.link}" if ev.link else ""))


def register(main: click.Group) -> None:
    """Add ``mrc controller`` to the ``mrc`` command."""

    @main.group("controller")
    def controller_group() -> None:
        """Program switches over P4Runtime, configure host agents, react to failures."""

    @controller_group.command("run")
    @click.argument("topo", type=click.Path(dir_okay=False))
    @click.option("--name", default="default", show_default=True,
                  help="Its name: socket NAME.sock and saved status NAME.state.json under --run-dir.")
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
    @click.option("--run-dir", type=click.Path(file_okay=False), default=RUN_DIR, show_default=True,
                  help="Folder of its northbound socket and saved status.")
    @click.option("--listen", metavar="ADDR", help="Northbound address instead of unix:RUN_DIR/NAME.sock: "
                  "unix:/path, or 127.0.0.1:PORT (loopback; 0 picks a port).")
    @click.option("--once", is_flag=True, help="Program and configure once, print write counts, exit.")
    @click.option("-v", "--verbose", is_flag=True, help="Log every decision.")
    def run_cmd(topo, name, target, mode, p4info, device_config, switch_specs, host_specs, device_id, nic_device,
                agent_settings, reconfigure_hosts, settle_ms, run_dir, listen, once, verbose):
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
                         run_dir=run_dir, listen=listen,
                         settle_ns=int(settle_ms * 1e6), reconfigure_hosts=reconfigure_hosts,
                         topology_file=str(Path(topo).resolve()))
        asyncio.run(_run(ctl, once, reconfigure_hosts))

    address_option = click.option("--address", metavar="ADDR",
                                  help="The controller's northbound address (default unix:RUN_DIR/NAME.sock).")
    run_dir_option = click.option("--run-dir", type=click.Path(file_okay=False), default=RUN_DIR,
                                  show_default=True, help="Folder of controllers' sockets.")

    @controller_group.command("link")
    @click.argument("link")
    @click.option("--down/--up", "down", required=True, help="The link went down, or came back up.")
    @click.option("--name", default="default", show_default=True)
    @run_dir_option
    @address_option
    @click.option("--source", default="cli", show_default=True, help="Who reports it (shown on the timeline).")
    def link_cmd(link, down, name, run_dir, address, source):
        """Report that LINK (e.g. p0/t0-1/t1-0) went down or came back up to the running
        controller NAME. An ecmp-mode controller rewrites the groups of the affected switches
        at once; an srv6-mode one DENIES the link on every host (lifts it on --up). A link the
        fabric lacks, or no controller running under NAME, is refused."""
        from ..control import report_link

        written = report_link(name, link, up=not down, run_dir=run_dir, address=address, source=source)
        click.echo(f"reported {link} {'down' if down else 'up'} to controller {name!r}"
                   + (f": {sum(written.values())} updates on {len(written)} switches" if written else ""))

    @controller_group.command("status")
    @click.option("--name", default="default", show_default=True)
    @run_dir_option
    @address_option
    @click.option("--json", "as_json", is_flag=True, help="The raw status.")
    def status_cmd(name, run_dir, address, as_json):
        """Show a running controller's switches, hosts, links believed down, denials and timeline."""
        from ..control import read_status

        st = read_status(name, run_dir, address)
        if as_json:
            click.echo(json.dumps(st, indent=1, sort_keys=True))
            return
        for line in _status_lines(st):
            click.echo(line)

    @controller_group.command("watch")
    @click.option("--name", default="default", show_default=True)
    @run_dir_option
    @address_option
    @click.option("--ev-events", is_flag=True, help="Also every EV event the hosts stream to the controller.")
    @click.option("--no-replay", is_flag=True, help="Only what happens from now on.")
    def watch_cmd(name, run_dir, address, ev_events, no_replay):
        """Follow a running controller's failure timeline (link down, first ASSUMED_BAD,
        localisation, DENY on all hosts, lift; reroutes in ecmp mode) until it stops or Ctrl-C."""
        from ..control import ControllerClient

        with ControllerClient.named(name, run_dir, address) as client:
            try:
                for kind, item in client.watch(replay=not no_replay, ev_events=ev_events):
                    click.echo(_watch_line(kind, item))
                    sys.stdout.flush()
            except KeyboardInterrupt:
                return
        click.echo("controller stopped")
