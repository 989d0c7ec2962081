"""``mrc topo`` (gen, check, compile, link), ``mrc paths`` and ``mrc trace``: the topology
commands. Printing only; the work is in :mod:`mrckit.topology`. Each takes ``--mode srv6|ecmp``
(EV-hash mode: switches hash the EV, so a path is not known from the EV's fields)."""

from __future__ import annotations

import ipaddress
import json
import sys

import click

from ..wire.ev import ev_plane, ev_unpack
from ..wire.usid import DEFAULT_LOCATOR
from .params import INT

# Defaults shown in --help. mrckit.topology imports numpy, which `mrc` must not load just to
# start, so these repeat mrckit.topology.generate's DEFAULT_* and compile.TARGETS
# (tests/unit/cli checks that they agree); MODES repeats mrckit.topology.entries.MODES.
DEFAULT_PLANES, DEFAULT_SPINES, DEFAULT_LEAVES, DEFAULT_HOSTS_PER_LEAF, DEFAULT_MTU = 2, 2, 3, 2, 3500
TARGETS = ("ebpf", "bmv2")
MODES = ("srv6", "ecmp")
MODE_HELP = "srv6: uSID source routing; ecmp: EV-hash mode (the switches hash the EV over groups)"


def _locator(text: str) -> int:
    try:
        net = ipaddress.IPv6Network(text, strict=True)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if net.prefixlen != 32:
        raise click.BadParameter(f"{text} is not a /32")
    return int(net.network_address) >> 96


@click.group("topo")
def topo_group() -> None:
    """Generate, check and compile multi-plane Clos topologies (docs/topology.md)."""


@topo_group.command("gen")
@click.option("--planes", type=int, default=DEFAULT_PLANES, show_default=True, help="planes (1..16)")
@click.option("--spines", type=int, default=DEFAULT_SPINES, show_default=True, help="T1 per plane (1..256)")
@click.option("--leaves", type=int, default=DEFAULT_LEAVES, show_default=True, help="T0 per plane (1..1024)")
@click.option("--hosts-per-leaf", type=int, default=DEFAULT_HOSTS_PER_LEAF, show_default=True,
              help="hosts per leaf, each with one port per plane")
@click.option("--locator", default=str(ipaddress.IPv6Network((DEFAULT_LOCATOR << 96, 32))), show_default=True,
              help="uSID block, a /32")
@click.option("--mtu", type=int, default=DEFAULT_MTU, show_default=True, help="fabric link MTU, bytes")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="file to write (default stdout)")
def topo_gen(planes, spines, leaves, hosts_per_leaf, locator, mtu, output) -> None:
    """Generate a rail-aligned multi-plane two-tier Clos as YAML."""
    from ..topology import dump_topology, dumps_topology, generate_clos

    topo = generate_clos(planes, spines, leaves, hosts_per_leaf, locator=_locator(locator), mtu=mtu)
    if output:
        dump_topology(topo, output)
        click.echo(f"wrote {output}: {topo.summary()}", err=True)
    else:
        sys.stdout.write(dumps_topology(topo))


@topo_group.command("check")
@click.argument("topo_file", metavar="TOPO")
def topo_check(topo_file) -> None:
    """Validate TOPO and print a one-line summary."""
    from ..topology import load_topology

    click.echo(f"{topo_file}: ok: {load_topology(topo_file).summary()}")


def _print_switch(cfg) -> None:
    """A :class:`mrckit.topology.SwitchConfig`: ports and table entries, one per line."""
    from ..topology import mac_str

    click.echo(f"{cfg.name}: {cfg.role} {cfg.index} of plane {cfg.plane}, uSID 0x{cfg.usid:04x}")
    for p in cfg.ports:
        click.echo(f"  port {p.number:3d} {p.ifname:<10} {mac_str(p.mac)} -> {p.peer}:{p.peer_ifname} "
                   f"{mac_str(p.peer_mac)}  {p.link}")
    for e in (*cfg.entries, *cfg.members, *cfg.groups, *cfg.routes):
        click.echo(f"  {e}")


def _print_host(cfg) -> None:
    """A :class:`mrckit.topology.HostConfig`: addresses and ports, one per line."""
    from ..topology import mac_str

    click.echo(f"{cfg.name}: NIC {cfg.nic_address}, leaf {cfg.leaf}, downlink {cfg.downlink}, mtu {cfg.mtu} "
               f"(NIC device {cfg.nic_mtu}), T1 per plane {list(cfg.t1_per_plane)}")
    for p in cfg.ports:
        click.echo(f"  {p.ifname:<8} {p.address}  {mac_str(p.mac)} -> {p.t0}:{p.t0_port} {mac_str(p.t0_mac)}  "
                   f"{p.link}")


def _json_switch(cfg) -> dict:
    out = {"name": cfg.name, "role": cfg.role, "plane": cfg.plane, "index": cfg.index, "usid": cfg.usid,
           "ports": {p.number: p.ifname for p in cfg.ports},
           "entries": [{"table": e.table, "match": e.match, "action": e.action, "params": e.params}
                       for e in cfg.entries]}
    if cfg.mode == "ecmp":
        out["mode"] = cfg.mode
        out["members"] = [{"profile": m.profile, "member_id": m.member_id, "action": m.action, "params": m.params}
                          for m in cfg.members]
        out["groups"] = [{"profile": g.profile, "group_id": g.group_id, "members": list(g.members)}
                         for g in cfg.groups]
        out["routes"] = [{"table": r.table, "prefix": str(r.prefix), r.target[0]: r.target[1]} for r in cfg.routes]
    return out


@topo_group.command("compile")
@click.argument("topo_file", metavar="TOPO")
@click.option("--target", type=click.Choice(TARGETS), default="ebpf", show_default=True)
@click.option("--mode", type=click.Choice(MODES), default="srv6", show_default=True, help=MODE_HELP)
@click.option("--down", "down", multiple=True, metavar="LINK",
              help="ecmp: compile the groups for this link being down, e.g. p0/t0-1/t1-0 (repeatable)")
@click.option("--switch", "switches", multiple=True, help="only this switch (repeatable)")
@click.option("--host", "hosts", multiple=True, help="only this host (repeatable)")
@click.option("--json", "as_json", is_flag=True, help="switch entries as JSON, one object per line")
def topo_compile(topo_file, target, mode, down, switches, hosts, as_json) -> None:
    """Compile TOPO and print switch tables and host configs (all, unless --switch/--host)."""
    from ..topology import compile_fabric, load_topology

    if down and mode != "ecmp":
        raise click.BadParameter("links down change the tables in ecmp mode only (SRv6 hosts steer around "
                                 "them)", param_hint="--down")
    fabric = compile_fabric(load_topology(topo_file), target, mode)
    down = fabric.down_links(down) if mode == "ecmp" else ()
    names = list(switches) or ([] if hosts else [s.name for s in fabric.topology.switches])
    for name in names:
        if as_json:
            click.echo(json.dumps(_json_switch(fabric.switch(name, down))))
        else:
            _print_switch(fabric.switch(name, down))
    for name in (hosts or ([] if switches or as_json else [h.name for h in fabric.topology.hosts])):
        _print_host(fabric.host(name))


@topo_group.command("export")
@click.argument("topo_file", metavar="TOPO")
@click.option("--format", "fmt", type=click.Choice(["containerlab"]), default="containerlab", show_default=True,
              help="what to write: a containerlab lab (bmv2 switches, mrckit hosts, the controller)")
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False, writable=True),
              help="folder to write the lab into (created if missing)")
@click.option("--name", "lab", default="mrckit", show_default=True, help="lab name (containers are clab-NAME-NODE)")
@click.option("--mode", type=click.Choice(MODES), default="srv6", show_default=True, help=MODE_HELP)
@click.option("--switch-image", default="p4lang/behavioral-model:latest", show_default=True,
              help="container image with simple_switch_grpc")
@click.option("--host-image", default="mrckit-host:latest", show_default=True,
              help="container image with mrckit installed (docker/mrckit-host.Dockerfile)")
def topo_export(topo_file, fmt, out_dir, lab, mode, switch_image, host_image) -> None:
    """Write TOPO as a containerlab lab, to run it on other machines (docs/fabric.md)."""
    from ..fabric.containerlab import export_containerlab
    from ..topology import load_topology

    done = export_containerlab(load_topology(topo_file), out_dir, lab, switch_image=switch_image,
                               host_image=host_image, mode=mode)
    click.echo(f"wrote {done.topology}, {done.controller} and {len(done.hosts)} host configs; "
               f"run: containerlab deploy -t {done.topology}")


@topo_group.command("link")
@click.argument("topo_file", metavar="TOPO")
@click.argument("link")
@click.option("--mode", type=click.Choice(MODES), default="srv6", show_default=True, help=MODE_HELP)
def topo_link(topo_file, link, mode) -> None:
    """The EV classes whose paths cross LINK (e.g. p0/t0-1/t1-0), as patterns; in ecmp mode,
    where no EV class follows from a link, the group changes its failure causes."""
    from ..topology import compile_fabric, ev_classes_for_link, load_topology

    topo = load_topology(topo_file)
    if mode == "srv6":
        for cls in ev_classes_for_link(topo, link):
            click.echo(str(cls))
        return
    ev_classes_for_link(topo, link)  # an unknown link: the same error as in srv6 mode
    fabric = compile_fabric(topo, mode="ecmp")
    click.echo(f"ecmp mode: the switches hash each EV, so no EV class follows from {link}; "
               f"if it fails, the controller changes:")
    changes = 0
    for name in fabric.affected_switches([], [link]):
        before, after = fabric.groups_and_routes(name), fabric.groups_and_routes(name, [link])
        old_g, new_g = {g.group_id: g for g in before[0]}, {g.group_id: g for g in after[0]}
        old_r = {r.prefix: r for r in before[1]}
        lines = [f"group {gid}: members {', '.join(map(str, old_g[gid].members)) if gid in old_g else '(new)'} -> "
                 f"{', '.join(map(str, g.members))}" for gid, g in new_g.items() if old_g.get(gid) != g]
        lines += [f"route {r.prefix}: {_target(old_r.get(r.prefix)) or '(new)'} -> {_target(r)}"
                  for r in after[1] if old_r.get(r.prefix) != r]
        for line in lines:
            click.echo(f"  {name}: {line}")
        changes += len(lines)
    if not changes:
        click.echo("  nothing: a host link has no alternative (the host has one port per plane)")


@click.command("paths")
@click.argument("topo_file", metavar="TOPO")
@click.argument("src")
@click.argument("dst")
@click.option("--mode", type=click.Choice(MODES), default="srv6", show_default=True, help=MODE_HELP)
@click.option("--ev", type=INT, help="ecmp: also show the path the switches' hash gives this EV (healthy fabric)")
def paths_cmd(topo_file, src, dst, mode, ev) -> None:
    """Every path from host SRC to host DST (names or NIC addresses): plane, spine, the EVs
    that take it, the uSID DA and the links it crosses."""
    from ..topology import load_topology, paths

    topo = load_topology(topo_file)
    if ev is not None and mode != "ecmp":
        raise click.BadParameter("in srv6 mode the EVs column already says which EVs take each path",
                                 param_hint="--ev")
    s, d = topo.host(src), topo.host(dst)
    if ev is not None:
        _check_ev(topo, s, ev)  # before anything is printed: a bad EV prints one error line only
    found = paths(topo, src, dst)
    if mode == "ecmp":
        _ecmp_paths(topo, s, d, found, ev)
        return
    click.echo(f"{s.name} ({s.nic_address}) -> {d.name} ({d.nic_address}): {len(found)} paths")
    click.echo(f"{'plane':>5}  {'spine':>5}  {'EVs':<10}  {'uSID DA':<34}  links")
    for p in found:
        spine = "-" if p.spine is None else str(p.spine)
        click.echo(f"{p.plane:>5}  {spine:>5}  {p.ev_pattern():<10}  {str(p.da):<34}  {' '.join(p.links)}")


def _check_ev(topo, src_host, ev: int) -> None:
    """Raises ValueError (one ``mrc: error:`` line, exit 2) if ``ev`` is not a 32-bit EV or names
    a plane ``src_host`` has no port on."""
    if not 0 <= ev <= 0xFFFFFFFF:
        raise ValueError(f"--ev {ev:#x} is out of range: an EV is 32 bits (0..0xffffffff)")
    plane, _, _ = ev_unpack(ev)
    if plane >= topo.planes:
        raise ValueError(f"EV 0x{ev:08x} names plane {plane}; {src_host.name} has ports on planes "
                         f"0..{topo.planes - 1}")


def _ecmp_paths(topo, s, d, found, ev) -> None:
    """``mrc paths --mode ecmp``: the same paths; which EVs take them is the switches' hash."""
    from ..topology import compile_fabric, walk

    click.echo(f"{s.name} ({s.nic_address}) -> {d.name} ({d.nic_address}): {len(found)} paths; ecmp mode: "
               f"the EV picks the plane (bits 31..28), the T0's group hashes the EV over the spines, so "
               f"which EVs take a path is not known from the EV's fields (mrckit.wire.ecmp)")
    click.echo(f"{'plane':>5}  {'spine':>5}  {'DA':<24}  links")
    for p in found:
        spine = "-" if p.spine is None else str(p.spine)
        click.echo(f"{p.plane:>5}  {spine:>5}  {str(d.nic_address):<24}  {' '.join(p.links)}")
    if ev is not None:
        tr = walk(compile_fabric(topo, mode="ecmp"), s.name, d.name, ev)
        spine = next((h.switch for h in tr.hops if "-t1-" in h.switch), "none (same leaf)")
        click.echo(f"EV 0x{ev:08x}: plane {ev_plane(ev)}, spine {spine} by the hash of a healthy fabric: "
                   f"{' '.join(tr.links)}{'' if tr.delivered else f' (dropped: {tr.drop})'}")


def _print_trace(tr, planned: list[str] | None, mode: str = "srv6") -> None:
    plane, t1, salt = ev_unpack(tr.ev)
    fields = f"plane {plane}, T1 {t1}, salt 0x{salt:05x}" if mode == "srv6" else \
        f"plane {plane}, the rest hashed by the switches"
    click.echo(f"{tr.src} -> {tr.dst}, EV 0x{tr.ev:08x} ({fields}), DA {tr.da}")
    click.echo(f"  {tr.src} sends on plane{plane} over {tr.links[0] if tr.links else tr.drop_link}")
    for hop in tr.hops:
        acts = []
        for e in hop.hits:
            table = getattr(e, "table", None)
            if table == "my_usid":
                acts.append(f"my_usid: uN -> {hop.da_out}")
            elif table == "usid_fib":
                acts.append(f"usid_fib 0x{e.key:012x} -> port {e.params['port']}")
            elif table == "ipv6_fib":
                acts.append(f"ipv6_fib {e.prefix} -> {' '.join(map(str, e.target))}")
            elif hasattr(e, "group_id"):
                acts.append(f"hash over members {','.join(map(str, e.members))}")
            elif hasattr(e, "member_id"):
                acts.append(f"member {e.member_id} -> port {e.params.get('port', 'drop')}")
        out = f"out {hop.link}" if hop.link else "DROP"
        if hop.link is not None and hop is tr.hops[-1] and tr.drop == "link_down":
            out = f"out {hop.link}, which is down: DROP"
        click.echo(f"  {hop.switch} in port {hop.in_port}, hop limit {hop.hop_limit}, DA {hop.da_in}")
        click.echo(f"      {'; '.join(acts) or 'no match'}; {out}")
    if tr.drop == "link_down":
        click.echo(f"dropped: link_down: sent on {tr.drop_link}, which is down")
    elif tr.drop:
        click.echo(f"dropped: {tr.drop}")
    else:
        click.echo(f"{'delivered to' if tr.delivered else 'reached the wrong host'} {tr.reached} on {tr.port}")
    if planned is not None and tr.drop == "link_down":
        taken = [*tr.links, tr.drop_link]
        click.echo(f"links match mrc paths up to the down link: {'yes' if planned[:len(taken)] == taken else 'NO'}")
    elif planned is not None:
        click.echo(f"links match mrc paths: {'yes' if list(tr.links) == planned else 'NO'}")


@click.command("trace")
@click.argument("topo_file", metavar="TOPO")
@click.argument("src")
@click.argument("dst")
@click.option("--ev", type=INT, required=True, help="the EV, e.g. 0x10100005 (plane 1, T1 1, salt 5)")
@click.option("--target", type=click.Choice(TARGETS), default="ebpf", show_default=True)
@click.option("--mode", type=click.Choice(MODES), default="srv6", show_default=True, help=MODE_HELP)
@click.option("--down", "down", multiple=True, metavar="LINK",
              help="with this link down (repeatable): a packet sent on it is dropped; ecmp: the groups "
                   "are compiled for it too")
def trace_cmd(topo_file, src, dst, ev, target, mode, down) -> None:
    """Walk one packet from SRC to DST with EV through the compiled tables, hop by hop; exit 1
    when it is not delivered (dropped, on a down link too, or at the wrong host)."""
    from ..topology import TopologyError, compile_fabric, load_topology, path_for_ev
    from ..topology.walk import Walker

    topo = load_topology(topo_file)
    tr = Walker(compile_fabric(topo, target, mode), down=down).walk(src, dst, ev)
    try:
        # ecmp: no path follows from the EV's fields; the walk is the answer
        planned = list(path_for_ev(topo, src, dst, ev).links) if mode == "srv6" else None
    except TopologyError:
        planned = None  # an EV naming a T1 the plane lacks has no planned path; the walk shows the drop
    _print_trace(tr, planned, mode)
    if not tr.delivered:
        sys.exit(1)


def register(main: click.Group) -> None:
    """Add ``topo``, ``paths`` and ``trace`` to the ``mrc`` group."""
    main.add_command(topo_group)
    main.add_command(paths_cmd)
    main.add_command(trace_cmd)


def _target(route) -> str:
    """A route's member or group reference as text; empty for no route."""
    return " ".join(map(str, route.target or ())) if route is not None else ""
