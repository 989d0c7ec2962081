"""Paths between hosts, the EV <-> path mapping, and the EVs that cross a link (design 3.3).

A path is fixed by the EV's plane and T1 fields (bits 31..28 and 27..20); the 20-bit salt only
spreads packets of one path over queues and is ignored here. Between hosts on the same leaf
there is one path per plane and the T1 field is ignored. Everything here is derived from the
addressing plan through ``mrckit.wire``, independently of the compiled tables, so that the
reference walk (``walk.py``) can check the tables against it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from ..wire.addressing import HostLocation, host_link_name, parse_link_name, path_da, path_usids, t1_link_name
from ..wire.ev import ev_pack, ev_unpack
from .model import Host, Topology, TopologyError
from .plan import Role

EV_PLANE_MASK = ev_pack(0xF, 0)
"""EV bits that hold the plane (0xf0000000)."""
EV_PATH_MASK = ev_pack(0xF, 0xFF)
"""EV bits that hold the plane and the T1 index (0xfff00000): the bits that pick a path."""


@dataclass(frozen=True)
class Path:
    """One path from host ``src`` to host ``dst``.

    Attributes:
        plane: the plane. spine: the T1 index, or None between hosts on the same leaf.
        ev_value, ev_mask: the EVs that take this path: ``ev & ev_mask == ev_value``.
        da: the outer destination address (uSID container) the source host writes.
        usids: the uSIDs in the container, in order.
        nodes: node names from ``src`` to ``dst``.
        links: the link names crossed, in order (design 3.3).
    """

    plane: int
    spine: int | None
    ev_value: int
    ev_mask: int
    da: ipaddress.IPv6Address
    usids: tuple[int, ...]
    nodes: tuple[str, ...]
    links: tuple[str, ...]

    def takes(self, ev: int) -> bool:
        """Whether EV ``ev`` follows this path."""
        return ev & self.ev_mask == self.ev_value

    def ev_pattern(self) -> str:
        """The EVs of this path as hex with ``x`` for free nibbles, e.g. ``0x102xxxxx``."""
        text = f"{self.ev_value:08x}"
        return "0x" + "".join(c if (self.ev_mask >> (28 - 4 * i)) & 0xF else "x" for i, c in enumerate(text))


def _host_pair(topo: Topology, src: str, dst: str) -> tuple[Host, Host]:
    s, d = topo.host(src), topo.host(dst)
    if s == d:
        raise TopologyError(f"source and destination are the same host ({s.name})")
    return s, d


def _path(topo: Topology, src: Host, dst: Host, plane: int, spine: int | None) -> Path:
    same_leaf = src.leaf == dst.leaf
    t1 = 0 if spine is None else spine
    usids = path_usids(plane, t1, src.leaf, dst.leaf, dst.downlink)
    da = path_da(plane, t1, src.leaf, dst.leaf, dst.downlink, topo.locator)
    src_t0, dst_t0 = _switch(topo, Role.T0, plane, src.leaf), _switch(topo, Role.T0, plane, dst.leaf)
    if same_leaf:
        nodes: tuple[str, ...] = (src.name, src_t0, dst.name)
        links: tuple[str, ...] = (host_link_name(plane, src.leaf, src.downlink),
                                  host_link_name(plane, dst.leaf, dst.downlink))
        return Path(plane, None, ev_pack(plane, 0), EV_PLANE_MASK, da, tuple(usids), nodes, links)
    if spine is None:
        raise TopologyError(f"{src.name} -> {dst.name}: a path between two leaves crosses a T1: give its index")
    nodes = (src.name, src_t0, _switch(topo, Role.T1, plane, spine), dst_t0, dst.name)
    links = (host_link_name(plane, src.leaf, src.downlink), t1_link_name(plane, src.leaf, spine),
             t1_link_name(plane, dst.leaf, spine), host_link_name(plane, dst.leaf, dst.downlink))
    return Path(plane, spine, ev_pack(plane, spine), EV_PATH_MASK, da, tuple(usids), nodes, links)


def _switch(topo: Topology, role: Role, plane: int, index: int) -> str:
    """The name of the T0 or T1 a path crosses. Raises TopologyError if the topology lacks it."""
    sw = topo.switch_at(role, plane, index)
    if sw is None:
        raise TopologyError(f"plane {plane} has no {Role(role).name} {index}")
    return sw.name


def paths(topo: Topology, src: str, dst: str) -> list[Path]:
    """Every path from host ``src`` to host ``dst`` (names or NIC addresses), by plane then T1:
    ``planes x T1-per-plane`` paths between leaves, ``planes`` paths within a leaf.

    Raises:
        TopologyError: an unknown host, or ``src`` equal to ``dst``.
    """
    s, d = _host_pair(topo, src, dst)
    if s.leaf == d.leaf:
        return [_path(topo, s, d, p, None) for p in range(topo.planes)]
    return [_path(topo, s, d, p, t) for p in range(topo.planes) for t in range(topo.t1_per_plane[p])]


def path_for_ev(topo: Topology, src: str, dst: str, ev: int) -> Path:
    """The path that EV ``ev`` takes from ``src`` to ``dst`` (design 3.3).

    Raises:
        TopologyError: unknown hosts, or an EV whose plane or T1 the fabric does not have.
        ValueError: ``ev`` outside 0..2**32-1.
    """
    s, d = _host_pair(topo, src, dst)
    plane, t1, _ = ev_unpack(ev)
    if plane >= topo.planes:
        raise TopologyError(f"EV 0x{ev:08x} names plane {plane}; the fabric has planes 0..{topo.planes - 1}")
    if s.leaf == d.leaf:
        return _path(topo, s, d, plane, None)
    if t1 >= topo.t1_per_plane[plane]:
        raise TopologyError(f"EV 0x{ev:08x} names T1 {t1}; plane {plane} has T1 0..{topo.t1_per_plane[plane] - 1}")
    return _path(topo, s, d, plane, t1)


@dataclass(frozen=True)
class EvClass:
    """A set of (source, destination, EV) triples, as a pattern; None means any.

    It matches EVs of ``plane`` (and of T1 ``t1`` unless None) sent from a host on
    ``src_leaf`` (on downlink ``src_downlink`` unless None) to a host on ``dst_leaf`` (on
    ``dst_downlink`` unless None). A pattern that names a T1 only matches host pairs on
    different leaves: between hosts of one leaf the T1 field is ignored and no T1 is crossed.
    """

    plane: int
    t1: int | None
    src_leaf: int | None
    dst_leaf: int | None
    src_downlink: int | None = None
    dst_downlink: int | None = None

    def matches(self, ev: int, src: HostLocation, dst: HostLocation) -> bool:
        """Whether EV ``ev`` from the host at ``src`` to the host at ``dst`` is in this class."""
        plane, t1, _ = ev_unpack(ev)
        if plane != self.plane or (self.t1 is not None and (t1 != self.t1 or src.leaf == dst.leaf)):
            return False
        return all(want is None or want == have for want, have in (
            (self.src_leaf, src.leaf), (self.dst_leaf, dst.leaf),
            (self.src_downlink, src.downlink), (self.dst_downlink, dst.downlink)))

    def __str__(self) -> str:
        def end(leaf, downlink):
            return "*" if leaf is None else f"{leaf}" if downlink is None else f"{leaf}/down-{downlink}"

        t1 = "*" if self.t1 is None else str(self.t1)
        return f"plane {self.plane}, T1 {t1}, leaf {end(self.src_leaf, self.src_downlink)} -> " \
               f"leaf {end(self.dst_leaf, self.dst_downlink)}"


def ev_classes_for_link(topo: Topology, link: str) -> list[EvClass]:
    """The EV classes whose paths cross ``link`` (a design-3.3 link name), as patterns over
    (plane, T1, source leaf, destination leaf), never one entry per host pair:

    - ``p<p>/t0-<L>/t1-<t>``: (p, t, L, any) and (p, t, any, L);
    - ``p<p>/t0-<L>/down-<D>``: (p, any, L/D, any) and (p, any, any, L/D).

    Raises:
        TopologyError: the fabric has no such link.
        ValueError: a malformed link name.
    """
    name = parse_link_name(link)
    p, leaf = name.plane, name.leaf
    if name.kind == "t1":
        if (topo.switch_at(Role.T0, p, leaf) is None or topo.switch_at(Role.T1, p, name.index) is None):
            raise TopologyError(f"no link {link} in this fabric")
        return [EvClass(p, name.index, leaf, None), EvClass(p, name.index, None, leaf)]
    if p >= topo.planes or topo.host_at(leaf, name.index) is None:
        raise TopologyError(f"no link {link} in this fabric")
    return [EvClass(p, None, leaf, None, src_downlink=name.index),
            EvClass(p, None, None, leaf, dst_downlink=name.index)]
