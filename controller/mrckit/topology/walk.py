"""The reference walk: forward one packet through the compiled tables, hop by hop.

This is a pure model of design section 4 steps 1-4 and 7 over the entries of
:class:`~mrckit.topology.compile.CompiledFabric` (no queues, so no trimming or ECN):

1. the source host writes the outer DA from the EV and the destination NIC address
   (``mrckit.wire.addressing.path_da``, design 3.3) and sends on the EV's plane port, to the
   MAC of its T0;
2. a switch drops a frame not addressed to the ingress port's MAC, and a packet whose hop
   limit is <= 1 (``hop_limit``);
3. uN: if ``my_usid`` holds the first 48 bits of the DA, shift the uSIDs left by 16 (once);
4. ``usid_fib`` on the first 48 bits gives the egress port, or the packet is dropped
   (``no_route``); the hop limit drops by one; ``port_config`` rewrites the MACs;
5. the link behind the egress port (from the switch's port list) leads to the next node; a
   link given as down drops the packet there (``link_down``), whatever the tables say.

In EV-hash mode (ECMP contract sections 1-3) the source host writes no outer header:
the DA is the destination NIC address and the EV rides in the flow label and UDP source port.
Step 3 becomes ``ipv6_fib``: the longest prefix of the DA gives a member, or a group whose
member the EV hash picks (``mrckit.wire.ecmp.ev_member``); a miss falls back to the uN path.

Tests use it to prove the tables against :mod:`~mrckit.topology.paths`; ``mrc trace`` prints it.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass

from ..wire.addressing import parse_link_name, parse_nic_address, path_da
from ..wire.constants import OUTER_HOP_LIMIT
from ..wire.ecmp import ev_member
from ..wire.ev import ev_unpack
from ..wire.pipeline import DROP, MY_USID, PORT_CONFIG, USID_FIB
from ..wire.usid import active_prefix, un_shift
from .compile import CompiledFabric
from .ecmp import down_t1_links
from .entries import ActionProfileGroup, ActionProfileMember, SwitchConfig, TableEntry
from .model import TopologyError

MAX_SWITCH_HOPS = 8
"""A walk gives up after this many switches (a loop in the tables)."""


Hit = TableEntry | ActionProfileGroup | ActionProfileMember
"""An entry a packet matched: a table entry, or in EV-hash mode the group and member it took."""


@dataclass(frozen=True)
class Hop:
    """One switch on the walk.

    Attributes:
        switch: its name. in_port: the ingress port number.
        da_in, da_out: the outer DA on arrival and after the uN shift (equal if none).
        hop_limit: the outer hop limit on arrival.
        hits: the table entries the packet matched here, in order (EV-hash mode: the
            ``ipv6_fib`` ``TableEntry``, the ``ActionProfileGroup`` if any, and the ``ActionProfileMember``).
        out_port: the egress port, or None when dropped here. link: the link taken out.
    """

    switch: str
    in_port: int
    da_in: ipaddress.IPv6Address
    da_out: ipaddress.IPv6Address
    hop_limit: int
    hits: tuple[Hit, ...]
    out_port: int | None
    link: str | None


@dataclass(frozen=True)
class Trace:
    """The result of a walk.

    Attributes:
        src, dst: host names. ev: the EV. da: the outer DA the source wrote.
        hops: the switches passed. links: every link crossed, in order, host links included.
        reached: the host the packet ended at, and ``port``, its ingress interface; None if dropped.
        delivered: the packet reached the host that owns the destination NIC address.
        drop: why the packet was dropped (``no_route``, ``hop_limit``, ``mac_mismatch``,
            ``loop``, ``link_down``), else None.
        drop_link: for ``link_down``, the down link the packet was sent on (not in ``links``).
    """

    src: str
    dst: str
    ev: int
    da: ipaddress.IPv6Address
    hops: tuple[Hop, ...]
    links: tuple[str, ...]
    reached: str | None
    port: str | None
    delivered: bool
    drop: str | None
    drop_link: str | None = None


class _SwitchView:
    """One switch's compiled entries as lookup dicts, plus its ports by number and ifname."""

    def __init__(self, cfg: SwitchConfig):
        self.cfg = cfg
        self.my = {e.key: e for e in cfg.entries if e.table == MY_USID}
        self.fib = {e.key: e for e in cfg.entries if e.table == USID_FIB}
        self.port_config = {e.key: e for e in cfg.entries if e.table == PORT_CONFIG}
        self.ports = {p.number: p for p in cfg.ports}
        self.by_ifname = {p.ifname: p for p in cfg.ports}
        self.members = {m.member_id: m for m in cfg.members}
        self.groups = {g.group_id: g for g in cfg.groups}
        self.routes: dict[int, dict[int, object]] = {}  # prefix length -> network int -> ipv6_fib entry
        for r in cfg.routes:
            self.routes.setdefault(r.prefix.prefixlen, {})[int(r.prefix.network_address)] = r

    def lpm(self, da: int):
        """The ``ipv6_fib`` route with the longest prefix holding ``da``, or None."""
        for length in sorted(self.routes, reverse=True):
            route = self.routes[length].get(da >> (128 - length) << (128 - length))
            if route is not None:
                return route
        return None


class Walker:
    """Walks packets through one :class:`CompiledFabric`, caching the switches it visits.

    Use one walker for many walks; ``walk`` is pure (the cache only saves recompilation).
    ``down``: link names (design 3.3) that are down. A packet sent on one is dropped there
    (``link_down``), in both modes. In EV-hash mode the tables are also compiled for them
    (``CompiledFabric.groups``), so a trace shows whether the groups avoid them; where no path
    is left the groups keep their members (docs/topology.md) and the walk shows the drop.
    In SRv6 mode the tables do not change (hosts steer around down links by retiring EVs).

    Raises:
        TopologyError: a link the fabric does not have. ValueError: a malformed link name.
    """

    def __init__(self, fabric: CompiledFabric, cache_size: int = 256, down=()):
        self.fabric = fabric
        self.mode = getattr(fabric, "mode", "srv6")
        down = tuple(down)
        down_t1_links(fabric.topology, down)  # validates every name, host links included
        self.down = frozenset(str(parse_link_name(link)) for link in down)
        compile_one: Callable[[str], SwitchConfig]
        if self.mode == "ecmp":
            down = fabric.down_links(down)
            compile_one = functools.partial(fabric.switch, down=down)
        else:
            compile_one = fabric.switch
        self._view = functools.lru_cache(maxsize=cache_size)(lambda name: _SwitchView(compile_one(name)))

    def walk(self, src: str, dst: str, ev: int) -> Trace:
        """Forward one packet with EV ``ev`` from host ``src`` towards host ``dst`` (names or
        NIC addresses) through the compiled tables.

        Raises:
            TopologyError: unknown hosts, ``src`` equal to ``dst``, or an EV whose plane the
                source host has no port on. (An EV naming a T1 the plane lacks is walked, and
                ends in a ``no_route`` drop.)
            ValueError: ``ev`` outside 0..2**32-1.
        """
        topo = self.fabric.topology
        s, d = topo.host(src), topo.host(dst)
        if s == d:
            raise TopologyError(f"source and destination are the same host ({s.name})")
        plane, t1, _ = ev_unpack(ev)
        if plane >= topo.planes:
            raise TopologyError(f"EV 0x{ev:08x} names plane {plane}; {s.name} has ports on planes "
                                f"0..{topo.planes - 1}")
        dloc = parse_nic_address(d.nic_address)
        if self.mode == "ecmp":
            da = int(d.nic_address)  # no outer header (ECMP contract section 1)
        else:
            da = int(path_da(plane, t1, s.leaf, dloc.leaf, dloc.downlink, topo.locator))
        uplink = self.fabric.host(s.name).ports[plane]
        state = _Packet(da=da, dst_mac=uplink.t0_mac, hop_limit=OUTER_HOP_LIMIT, links=[uplink.link], ev=ev)
        hops: list[Hop] = []
        if uplink.link in self.down:
            state.links.clear()
            return _end(s.name, d.name, ev, da, hops, state, None, None, False, "link_down", uplink.link)
        node, in_port = uplink.t0, uplink.t0_port
        while True:
            if len(hops) == MAX_SWITCH_HOPS:
                return _end(s.name, d.name, ev, da, hops, state, None, None, False, "loop")
            view = self._view(node)
            hop, nxt = _forward(view, in_port, state, self.down)
            hops.append(hop)
            if nxt is None:
                link = hop.link if state.drop == "link_down" else None
                return _end(s.name, d.name, ev, da, hops, state, None, None, False, state.drop, link)
            port = view.ports[nxt]
            if port.faces_host:
                reached = topo.host(port.peer)
                if state.dst_mac != port.peer_mac:
                    return _end(s.name, d.name, ev, da, hops, state, None, None, False, "mac_mismatch")
                return _end(s.name, d.name, ev, da, hops, state, reached.name, port.peer_ifname,
                            reached.nic_address == d.nic_address, None)
            node, in_port = port.peer, self._view(port.peer).by_ifname[port.peer_ifname].number


@dataclass
class _Packet:
    da: int
    dst_mac: int
    hop_limit: int
    links: list[str]
    ev: int = 0
    drop: str | None = None


def _forward(view: _SwitchView, in_port: int, pkt: _Packet, down: frozenset[str] = frozenset()
             ) -> tuple[Hop, int | None]:
    """One switch: returns the hop and the egress port, or (hop, None) when dropped (on a link
    in ``down``: the hop names the link, which is not added to ``pkt.links``)."""
    da_in, hop_limit = pkt.da, pkt.hop_limit
    hits: list[Hit] = []

    def hop(out_port=None, link=None):
        return Hop(view.cfg.name, in_port, ipaddress.IPv6Address(da_in), ipaddress.IPv6Address(pkt.da),
                   hop_limit, tuple(hits), out_port, link)

    ingress = view.ports.get(in_port)
    if ingress is None or pkt.dst_mac != ingress.mac:
        pkt.drop = "mac_mismatch"
        return hop(), None
    if pkt.hop_limit <= 1:
        pkt.drop = "hop_limit"
        return hop(), None
    out_port = _ipv6_fib(view, pkt, hits)
    if out_port is None and not hits:
        mine = view.my.get(active_prefix(pkt.da))
        if mine is not None:
            hits.append(mine)
            pkt.da = un_shift(pkt.da)
        route = view.fib.get(active_prefix(pkt.da))
        if route is not None:
            hits.append(route)
            out_port = route.params["port"]
    if out_port is None:
        pkt.drop = "no_route"
        return hop(), None
    pkt.hop_limit -= 1
    rewrite = view.port_config.get(out_port)
    if rewrite is not None:
        hits.append(rewrite)
        pkt.dst_mac = rewrite.params["dst_mac"]
    link = view.ports[out_port].link if out_port in view.ports else None
    if link is None:
        pkt.drop = "no_route"
        return hop(out_port), None
    if link in down:
        pkt.drop = "link_down"
        return hop(out_port, link), None
    pkt.links.append(link)
    return hop(out_port, link), out_port


def _ipv6_fib(view: _SwitchView, pkt: _Packet, hits: list[Hit]) -> int | None:
    """EV-hash mode's ``ipv6_fib`` (ECMP contract section 2): the egress port of the longest
    matching route's member (a group's member picked by the EV hash), or None: on a miss
    (``hits`` stays empty: the uN path runs) or on a ``drop`` member."""
    route = view.lpm(pkt.da) if view.routes else None
    if route is None:
        return None
    hits.append(route)
    member_id = route.member
    if route.group is not None:
        group = view.groups[route.group]
        hits.append(group)
        member_id = ev_member(group.members, pkt.ev)
    member = view.members[member_id]
    hits.append(member)
    return None if member.action == DROP else member.params["port"]


def _end(src, dst, ev, da, hops, pkt, reached, port, delivered, drop, drop_link=None) -> Trace:
    return Trace(src, dst, ev, ipaddress.IPv6Address(da), tuple(hops), tuple(pkt.links), reached, port,
                 delivered, drop, drop_link)


def walk(fabric: CompiledFabric, src: str, dst: str, ev: int) -> Trace:
    """One walk with a fresh :class:`Walker`; see :meth:`Walker.walk`."""
    return Walker(fabric).walk(src, dst, ev)
