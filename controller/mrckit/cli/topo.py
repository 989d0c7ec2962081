"""``mrc topo`` (gen, check, compile, link), ``mrc paths`` and ``mrc trace``: the topology
commands. Printing only; the work is in :mod:`mrckit.topology`."""

from __future__ import annotations

import ipaddress
import json
import sys

import click

from ..wire.ev import ev_unpack
from ..wire.usid import DEFAULT_LOCATOR
from .params import INT

# Defaults shown in --help. mrckit.topology imports numpy, which `mrc` must not load just to
# start, so these repeat mrckit.topology.generate's DEFAULT_* and compile.TARGETS
# (tests/unit/cli checks that they agree).
DEFAULT_PLANES, DEFAULT_SPINES, DEFAULT_LEAVES, DEFAULT_HOSTS_PER_LEAF, DEFAULT_MTU = 2, 2, 3, 2, 3500
TARGETS = ("ebpf", "bmv2")


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
    for e in cfg.entries:
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
    return {"name": cfg.name, "role": cfg.role, "plane": cfg.plane, "index": cfg.index, "usid": cfg.usid,
            "ports": {p.number: p.ifname for p in cfg.ports},
            "entries": [{"table": e.table, "match": e.match, "action": e.action, "params": e.params}
                        for e in cfg.entries]}


@topo_group.command("compile")
@click.argument("topo_file", metavar="TOPO")
@click.option("--target", type=click.Choice(TARGETS), default="ebpf", show_default=True)
@click.option("--switch", "switches", multiple=True, help="only this switch (repeatable)")
@click.option("--host", "hosts", multiple=True, help="only this host (repeatable)")
@click.option("--json", "as_json", is_flag=True, help="switch entries as JSON, one object per line")
def topo_compile(topo_file, target, switches, hosts, as_json) -> None:
    """Compile TOPO and print switch tables and host configs (all, unless --switch/--host)."""
    from ..topology import compile_fabric, load_topology

    fabric = compile_fabric(load_topology(topo_file), target)
    names = list(switches) or ([] if hosts else [s.name for s in fabric.topology.switches])
    for name in names:
        if as_json:
            click.echo(json.dumps(_json_switch(fabric.switch(name))))
        else:
            _print_switch(fabric.switch(name))
    for name in (hosts or ([] if switches or as_json else [h.name for h in fabric.topology.hosts])):
        _print_host(fabric.host(name))


@topo_group.command("link")
@click.argument("topo_file", metavar="TOPO")
@click.argument("link")
def topo_link(topo_file, link) -> None:
    """The EV classes whose paths cross LINK (e.g. p0/t0-1/t1-0), as patterns."""
    from ..topology import ev_classes_for_link, load_topology

    for cls in ev_classes_for_link(load_topology(topo_file), link):
        click.echo(str(cls))


@click.command("paths")
@click.argument("topo_file", metavar="TOPO")
@click.argument("src")
@click.argument("dst")
def paths_cmd(topo_file, src, dst) -> None:
    """Every path from host SRC to host DST (names or NIC addresses): plane, spine, the EVs
    that take it, the uSID DA and the links it crosses."""
    from ..topology import load_topology, paths

    topo = load_topology(topo_file)
    found = paths(topo, src, dst)
    s, d = topo.host(src), topo.host(dst)
    click.echo(f"{s.name} ({s.nic_address}) -> {d.name} ({d.nic_address}): {len(found)} paths")
    click.echo(f"{'plane':>5}  {'spine':>5}  {'EVs':<10}  {'uSID DA':<34}  links")
    for p in found:
        spine = "-" if p.spine is None else str(p.spine)
        click.echo(f"{p.plane:>5}  {spine:>5}  {p.ev_pattern():<10}  {str(p.da):<34}  {' '.join(p.links)}")


def _print_trace(tr, planned: list[str] | None) -> None:
    plane, t1, salt = ev_unpack(tr.ev)
    click.echo(f"{tr.src} -> {tr.dst}, EV 0x{tr.ev:08x} (plane {plane}, T1 {t1}, salt 0x{salt:05x}), DA {tr.da}")
    click.echo(f"  {tr.src} sends on plane{plane} over {tr.links[0]}")
    for hop in tr.hops:
        acts = []
        for e in hop.hits:
            if e.table == "my_usid":
                acts.append(f"my_usid: uN -> {hop.da_out}")
            elif e.table == "usid_fib":
                acts.append(f"usid_fib 0x{e.key:012x} -> port {e.params['port']}")
        out = f"out {hop.link}" if hop.link else "DROP"
        click.echo(f"  {hop.switch} in port {hop.in_port}, hop limit {hop.hop_limit}, DA {hop.da_in}")
        click.echo(f"      {'; '.join(acts) or 'no match'}; {out}")
    if tr.drop:
        click.echo(f"dropped: {tr.drop}")
    else:
        click.echo(f"{'delivered to' if tr.delivered else 'reached the wrong host'} {tr.reached} on {tr.port}")
    if planned is not None:
        click.echo(f"links match mrc paths: {'yes' if list(tr.links) == planned else 'NO'}")


@click.command("trace")
@click.argument("topo_file", metavar="TOPO")
@click.argument("src")
@click.argument("dst")
@click.option("--ev", type=INT, required=True, help="the EV, e.g. 0x10100005 (plane 1, T1 1, salt 5)")
@click.option("--target", type=click.Choice(TARGETS), default="ebpf", show_default=True)
def trace_cmd(topo_file, src, dst, ev, target) -> None:
    """Walk one packet from SRC to DST with EV through the compiled tables, hop by hop."""
    from ..topology import TopologyError, compile_fabric, load_topology, path_for_ev, walk

    topo = load_topology(topo_file)
    tr = walk(compile_fabric(topo, target), src, dst, ev)
    try:
        planned = list(path_for_ev(topo, src, dst, ev).links)
    except TopologyError:
        planned = None  # an EV naming a T1 the plane lacks has no planned path; the walk shows the drop
    _print_trace(tr, planned)
    if not tr.delivered:
        sys.exit(1)


def register(main: click.Group) -> None:
    """Add ``topo``, ``paths`` and ``trace`` to the ``mrc`` group."""
    main.add_command(topo_group)
    main.add_command(paths_cmd)
    main.add_command(trace_cmd)
