"""``mrc host up|down|ev|events``: run the host agent, stop it, show its EV table and events."""

from __future__ import annotations

import contextlib
import os
import sys
from datetime import datetime

import click


@click.group()
def host() -> None:
    """The host dataplane and agent (tc egress + XDP ingress, EV sets, probes)."""


@host.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.option("--listen", help="gRPC address: unix:/path or 127.0.0.1:PORT "
              "(default unix:/run/mrckit/host-NAME.sock).")
@click.option("--xdp-mode", type=click.Choice(["native", "generic", "auto"]),
              help="Override the config's XDP mode (default native).")
@click.option("--create-nic", is_flag=True, help="Create the NIC device (a veth pair) if missing.")
@click.option("--tls-key", type=click.File("rb"), help="PEM key: serve gRPC over TLS.")
@click.option("--tls-cert", type=click.File("rb"), help="PEM certificate for --tls-key.")
def up(config, listen, xdp_mode, create_nic, tls_key, tls_cert) -> None:
    """Attach to the NIC device and the plane ports of CONFIG and run the agent until Ctrl-C.

    CONFIG is YAML: host: {name, nic_address, leaf, downlink, nic_device, t1_per_plane,
    ports: [{plane, ifname, address, mac, neighbor_mac}], mode: srv6|ecmp}, settings: {...}
    (see docs/host.md).
    """
    import dataclasses

    from ..host.run import load_config, run_agent

    cfg = load_config(config)
    if xdp_mode:
        cfg = dataclasses.replace(cfg, settings=dataclasses.replace(cfg.settings, xdp_mode=xdp_mode))

    def ready(result, address):
        for ifname, plane, mode in result.ports:
            click.echo(f"plane {plane}: XDP ingress on {ifname} ({mode} mode)")
        for warning in result.warnings:
            click.echo(f"warning: {warning}", err=True)
        click.echo(f"tc egress on {cfg.nic_device} ({result.mode} mode); {result.template_evs} EVs per peer, "
                   f"{result.backup_evs} backups; serving on {address}")

    run_agent(cfg, listen, create_nic=create_nic, ready=ready,
              tls_key=tls_key.read() if tls_key else None, tls_cert=tls_cert.read() if tls_cert else None)


@host.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.option("--listen", help="The address the agent was started with (`mrc host up --listen`); "
              "default: its default socket.")
def down(config, listen) -> None:
    """Stop the agent of CONFIG and detach every program from its NIC device and ports."""
    from ..host.run import load_config, stop_agent

    done = stop_agent(load_config(config), address=listen)
    click.echo("\n".join(done) if done else "nothing was running or attached")


FABRIC_HELP = ("Resolve HOST in this running fabric (its controller's --name); needed when several "
               "running fabrics have the name.")


def _address(target: str, fabric: str | None) -> tuple[str, str]:
    """``(address, where)`` of the agent HOST names: ``target`` itself if it is an address; else,
    without ``fabric``, the standalone agent's socket if it exists; else the agent of the
    running fabric that has the host (``fabric``, or the only one). ``where`` says which, for
    the output. Raises MrcError (the name is in several fabrics, or none) or UsageError."""
    from ..host.run import default_address

    if ":" in target or "/" in target:
        if fabric is not None:
            raise click.UsageError("--fabric resolves a host name; HOST is an address")
        return target, target
    standalone = default_address(target)
    if fabric is None and os.path.exists(standalone.removeprefix("unix:")):
        return standalone, f"standalone agent {standalone}"
    from ..control.lookup import locate_host

    fab, address = locate_host(target, fabric=fabric)
    return address, f"fabric {fab}"


def _stub(target: str, fabric: str | None = None):
    """``(stub, where)``: a HostAgent stub for HOST (see :func:`_address`)."""
    import grpc

    from ..proto import host_agent_pb2_grpc as pbg

    address, where = _address(target, fabric)
    return pbg.HostAgentStub(grpc.insecure_channel(address)), where


@contextlib.contextmanager
def _agent_errors():
    """A failed RPC (agent down, bad request) as one line on stderr and exit status 2."""
    import grpc

    try:
        yield
    except grpc.RpcError as exc:
        click.echo(f"mrc: error: host agent: {exc.code().name}: {exc.details()}", err=True)
        sys.exit(2)


def _call(fn, *args, **kw):
    with _agent_errors():
        return fn(*args, **kw)


@host.command()
@click.argument("target", metavar="HOST")
@click.option("--peer", help="Only this peer's EVs (a NIC address).")
@click.option("--state", type=click.Choice(["GOOD", "SKIP", "ASSUMED_BAD", "DENIED"]), help="Only EVs in this state.")
@click.option("--fabric", help=FABRIC_HELP)
def ev(target, peer, state, fabric) -> None:
    """Show the EV table of HOST (an agent name, unix:/path or HOST:PORT): state, plane,
    path and counters of every EV of every live peer. In ecmp mode the T1 column shows "-":
    the switches hash the EV, so its T1 bits name no spine."""
    from rich.console import Console
    from rich.table import Table

    from ..proto import host_agent_pb2 as pb

    stub, where = _stub(target, fabric)
    stats = _call(stub.GetStats, pb.GetStatsRequest(include_evs=True, peer=peer or ""), timeout=10)
    mode = stats.mode or "srv6"
    table = Table(title=f"EVs of {target} ({_where(target, where)}{mode} mode)")
    for col in ("peer", "slot", "EV", "plane", "T1", "state", "path", "tx pkts", "tx bytes",
                "acked", "skips", "nacks"):
        table.add_column(col, justify="right" if col not in ("peer", "state", "path") else "left")
    for p in stats.peers:
        for e in p.evs:
            name = pb.EvState.Name(e.state) + (" (retired)" if e.retired else "")
            if state and pb.EvState.Name(e.state) != state:
                continue
            table.add_row(p.peer, "-" if e.retired else str(e.slot), f"0x{e.ev:08x}", str(e.plane),
                          ev_t1_cell(mode, e.t1), name, e.path, str(e.tx_packets), str(e.tx_bytes), str(e.acked),
                          str(e.skips), str(e.nacks))
    # Piped output keeps every column: rich would squeeze the table to 80 columns.
    Console(width=None if sys.stdout.isatty() else 240).print(table)


@host.command()
@click.argument("target", metavar="HOST")
@click.option("--replay", is_flag=True, help="First print the events kept since the agent started.")
@click.option("--fabric", help=FABRIC_HELP)
def events(target, replay, fabric) -> None:
    """Stream HOST's EV events (state changes and probe results) until Ctrl-C."""
    from ..proto import host_agent_pb2 as pb

    stub, where = _stub(target, fabric)
    if where != target:
        click.echo(f"events of {target} ({where})", err=True)
    with _agent_errors():
        for e in stub.WatchEvents(pb.WatchEventsRequest(replay=replay)):
            when = datetime.fromtimestamp(e.wall_time_ns / 1e9).strftime("%H:%M:%S.%f")
            what = f"{pb.EvState.Name(e.old_state)} -> {pb.EvState.Name(e.new_state)}"
            extra = f" replaced_by=0x{e.replaced_by:08x}" if e.replaced_by else ""
            extra += f" probe_ok={e.probe_ok}" if e.reason == "PROBE_RESULT" else ""
            extra += f" link={e.link}" if e.link else ""
            if e.HasField("plane_stats"):  # a failure report: the plane's state toward the peer
                ps = e.plane_stats
                extra += (f" plane{ps.plane}: {ps.assumed_bad} bad + {ps.retired} retired of {ps.evs}"
                          f" EVs; ev tx={e.ev_counters.tx_packets} acked={e.ev_counters.acked}")
            click.echo(f"{when} {e.peer or '-'} ev=0x{e.ev:08x} plane={e.plane} {what} {e.reason}{extra}")


@host.command()
@click.argument("target", metavar="HOST")
@click.option("--ev", "ev_value", help="The EV (0x... or decimal).")
@click.option("--peer", default="", help="With --ev: only this peer (default every peer and the template).")
@click.option("--link", help="A link name: p<plane>/t0-<L>/t1-<t> or p<plane>/t0-<L>/down-<D>.")
@click.option("--allow", is_flag=True, help="Lift DENIED instead of setting it.")
@click.option("--fabric", help=FABRIC_HELP)
def deny(target, ev_value, peer, link, allow, fabric) -> None:
    """Set (or with --allow lift) DENIED on HOST, for one EV or every EV crossing a link."""
    from ..proto import host_agent_pb2 as pb

    if bool(ev_value) == bool(link):
        raise click.UsageError("give exactly one of --ev and --link")
    ev = _ev(ev_value) if ev_value else 0  # checked before connecting: a typo is not an agent error
    stub, where = _stub(target, fabric)
    if where != target:
        click.echo(f"{target}: {where}")
    if link:
        req = pb.SetEvStateRequest(link=link, denied=not allow)
    else:
        req = pb.SetEvStateRequest(ev=pb.EvTarget(peer=peer, ev=ev), denied=not allow)
    res = _call(stub.SetEvState, req, timeout=10)
    click.echo(f"{res.evs_changed} EVs affected" + (", denied-links map changed" if res.link_changed else ""))
    if res.not_applied:
        click.echo(f"note: {res.not_applied}")


@host.command()
@click.argument("target", metavar="HOST")
@click.option("--fabric", help=FABRIC_HELP)
def planes(target, fabric) -> None:
    """Show HOST's per-plane statistics: EVs by state, retired EVs and traffic, summed over the
    live peers, then per peer, and its arrivals: the probes it accepted by the path they came
    on. In ecmp mode (EVs are opaque) this is the failure evidence."""
    from rich.console import Console
    from rich.table import Table

    from ..proto import host_agent_pb2 as pb

    stub, where = _stub(target, fabric)
    stats = _call(stub.GetStats, pb.GetStatsRequest(), timeout=10)
    click.echo(f"planes of {target} ({_where(target, where)}{stats.mode or 'srv6'} mode)")
    if stats.denied_links:
        click.echo(f"links denied: {', '.join(stats.denied_links)}"
                   + ("" if stats.denials_applied else " (recorded, not applied: EVs are opaque)"))
    table = Table()
    cols = ("peer", "plane", "port", "EVs", "good", "skip", "bad", "denied", "retired", "tx pkts",
            "tx bytes", "acked", "nacks", "skips")
    for col in cols:
        table.add_column(col, justify="left" if col in ("peer", "port") else "right")
    for r in stats.planes:
        table.add_row(r.peer or "(all)", str(r.plane), "up" if r.port_up else "DOWN", str(r.evs), str(r.good),
                      str(r.skip), str(r.assumed_bad), str(r.denied), str(r.retired), str(r.tx_packets),
                      str(r.tx_bytes), str(r.acked), str(r.nacks), str(r.skips))
    console = Console(width=None if sys.stdout.isatty() else 240)
    console.print(table)
    if stats.rx_paths:
        console.print(arrivals_table(stats.mode, stats.rx_paths))


def arrivals_table(mode: str, rx_paths):
    """The arrivals (``RxPath`` rows: probes accepted) as a table: plane, T1, sender (its NIC
    address), packets. The T1 cell is ``-`` in ecmp mode, where EVs name no spine."""
    from rich.table import Table

    from ..wire.addressing import nic_address

    table = Table(title="arrivals: probes accepted, by the path they came on")
    for col in ("plane", "T1", "sender", "packets"):
        table.add_column(col, justify="left" if col == "sender" else "right")
    for r in rx_paths:
        table.add_row(str(r.plane), ev_t1_cell(mode, r.t1), str(nic_address(r.src_leaf, r.src_downlink)),
                      str(r.packets))
    return table


def _where(target: str, where: str) -> str:
    """``"fabric NAME, "`` (or the standalone agent) when HOST was a name, else nothing."""
    return "" if where == target else f"{where}, "


def ev_t1_cell(mode: str, t1: int) -> str:
    """The EV table's T1 cell: the EV's T1 field in srv6 mode; ``-`` in ecmp mode, where EVs are
    opaque (the switches hash them) and the field names no spine."""
    return "-" if mode == "ecmp" else str(t1)


def _ev(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not an EV (0x... or decimal)", param_hint="--ev") from None
    if not 0 <= value <= 0xFFFFFFFF:
        raise click.BadParameter(f"{text!r} is not a 32-bit EV", param_hint="--ev")
    return value


def register(main) -> None:
    main.add_command(host)
