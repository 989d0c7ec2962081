"""The addressing plan and link names of design section 3.3 (ours).

- NIC address of the host on downlink D of leaf L: ``2001:db8:100:L::H`` with H = D + 1,
  L and H written as hexadecimal hextets. The same in every plane (rail-aligned leaves).
- Port address of that host on plane p: ``2001:db8:2PP:L::H``, PP = p in two hex digits.
- The uSID path from a host on leaf Ls, plane p, EV (p, t), to NIC (L, D):
  ``locator | T0(p, Ls) | T1(p, t) | T0(p, L) | DOWN(p, D)``, or ``locator | T0(p, L) | DOWN(p, D)``
  when Ls = L.
- Link names: ``p<plane>/t0-<L>/t1-<t>`` (T0-T1) and ``p<plane>/t0-<L>/down-<D>`` (host link).
"""

import functools
import ipaddress
import re
from typing import NamedTuple

from ._check import check_range
from .constants import UsidRole
from .usid import DEFAULT_LOCATOR, container_pack, usid_pack

NIC_HEXTET = 0x100
PORT_HEXTET_BASE = 0x200
ADDR_PREFIX = 0x20010DB8  # 2001:db8::/32, the first 32 bits of every host address
_PREFIX = ADDR_PREFIX


class HostLocation(NamedTuple):
    """Where a host sits: leaf index L (0..1023) and downlink D on that leaf (0..1022)."""

    leaf: int
    downlink: int


def _host_addr(hextet3: int, leaf: int, downlink: int) -> ipaddress.IPv6Address:
    check_range("leaf", leaf, 0, 1023)
    check_range("downlink", downlink, 0, 1022)
    value = (_PREFIX << 96) | (hextet3 << 80) | (leaf << 64) | (downlink + 1)
    return ipaddress.IPv6Address(value)


def nic_address(leaf: int, downlink: int) -> ipaddress.IPv6Address:
    """NIC address ``2001:db8:100:L::H``, H = D + 1.

    Raises:
        ValueError: leaf outside 0..1023 or downlink outside 0..1022.
    """
    return _host_addr(NIC_HEXTET, leaf, downlink)


def port_address(plane: int, leaf: int, downlink: int) -> ipaddress.IPv6Address:
    """Port address ``2001:db8:2PP:L::H`` of a host's port on ``plane``.

    Raises:
        ValueError: plane outside 0..15, leaf outside 0..1023, downlink outside 0..1022.
    """
    check_range("plane", plane, 0, 15)
    return _host_addr(PORT_HEXTET_BASE + plane, leaf, downlink)


def _split(addr: ipaddress.IPv6Address | str) -> tuple[int, int, int]:
    value = int(ipaddress.IPv6Address(addr))
    if value >> 96 != _PREFIX or (value >> 16) & ((1 << 48) - 1) != 0:
        raise ValueError(f"{addr} is not an mrckit host address (2001:db8:X:L::H)")
    host = value & 0xFFFF
    if host == 0:
        raise ValueError(f"{addr} has H=0; host addresses have H = downlink + 1 >= 1")
    return (value >> 80) & 0xFFFF, (value >> 64) & 0xFFFF, host - 1


@functools.lru_cache(maxsize=4096)
def parse_nic_address(addr: ipaddress.IPv6Address | str) -> HostLocation:
    """(leaf, downlink) of a NIC address. Cached: a host agent asks it of its peers for
    every EV of every sweep.

    Raises:
        ValueError: not of the form ``2001:db8:100:L::H`` with L <= 1023 and 1 <= H <= 1023.
    """
    hextet3, leaf, downlink = _split(addr)
    if hextet3 != NIC_HEXTET:
        raise ValueError(f"{addr} is not a NIC address (third hextet must be 100)")
    check_range("leaf", leaf, 0, 1023)
    check_range("downlink", downlink, 0, 1022)
    return HostLocation(leaf, downlink)


def parse_port_address(addr: ipaddress.IPv6Address | str) -> tuple[int, HostLocation]:
    """(plane, (leaf, downlink)) of a port address.

    Raises:
        ValueError: not of the form ``2001:db8:2PP:L::H``.
    """
    hextet3, leaf, downlink = _split(addr)
    if not PORT_HEXTET_BASE <= hextet3 <= PORT_HEXTET_BASE + 15:
        raise ValueError(f"{addr} is not a port address (third hextet must be 200..20f)")
    check_range("leaf", leaf, 0, 1023)
    check_range("downlink", downlink, 0, 1022)
    return hextet3 - PORT_HEXTET_BASE, HostLocation(leaf, downlink)


def path_usids(plane: int, t1: int, src_leaf: int, dst_leaf: int, dst_downlink: int) -> list[int]:
    """The uSIDs of the path from leaf ``src_leaf`` to NIC (dst_leaf, dst_downlink).

    Returns ``[T0(p,Ls), T1(p,t), T0(p,L), DOWN(p,D)]``, or ``[T0(p,L), DOWN(p,D)]`` when
    Ls = L (then ``t1`` is ignored but still range-checked).

    Raises:
        ValueError: naming the argument out of range: plane 0..15, t1 0..255, src_leaf and
            dst_leaf 0..1023, dst_downlink 0..1022 (the hosts that have a NIC address).
    """
    check_range("plane", plane, 0, 15)
    check_range("t1", t1, 0, 255)
    check_range("src_leaf", src_leaf, 0, 1023)
    check_range("dst_leaf", dst_leaf, 0, 1023)
    check_range("dst_downlink", dst_downlink, 0, 1022)
    if src_leaf == dst_leaf:
        return [usid_pack(plane, UsidRole.T0, dst_leaf), usid_pack(plane, UsidRole.DOWN, dst_downlink)]
    return [
        usid_pack(plane, UsidRole.T0, src_leaf),
        usid_pack(plane, UsidRole.T1, t1),
        usid_pack(plane, UsidRole.T0, dst_leaf),
        usid_pack(plane, UsidRole.DOWN, dst_downlink),
    ]


def path_da(plane: int, t1: int, src_leaf: int, dst_leaf: int, dst_downlink: int,
            locator: int = DEFAULT_LOCATOR) -> ipaddress.IPv6Address:
    """The outer IPv6 DA (uSID container) of a path; see :func:`path_usids`."""
    return ipaddress.IPv6Address(container_pack(path_usids(plane, t1, src_leaf, dst_leaf, dst_downlink), locator))


class LinkName(NamedTuple):
    """A parsed link name. ``kind`` is ``"t1"`` (T0-T1 link) or ``"down"`` (host link);
    ``index`` is the T1 index or the downlink index."""

    plane: int
    leaf: int
    kind: str
    index: int  # type: ignore[assignment]  # the link name's field (design 3.3) shadows tuple.index

    def __str__(self) -> str:
        return f"p{self.plane}/t0-{self.leaf}/{self.kind}-{self.index}"


def t1_link_name(plane: int, leaf: int, t1: int) -> str:
    """``p<plane>/t0-<L>/t1-<t>``. Raises ValueError on out-of-range fields."""
    check_range("plane", plane, 0, 15)
    check_range("leaf", leaf, 0, 1023)
    check_range("t1", t1, 0, 255)
    return str(LinkName(plane, leaf, "t1", t1))


def host_link_name(plane: int, leaf: int, downlink: int) -> str:
    """``p<plane>/t0-<L>/down-<D>``. Raises ValueError on out-of-range fields."""
    check_range("plane", plane, 0, 15)
    check_range("leaf", leaf, 0, 1023)
    check_range("downlink", downlink, 0, 1022)
    return str(LinkName(plane, leaf, "down", downlink))


@functools.lru_cache(maxsize=65536)
def path_links(plane: int, t1: int, src: HostLocation, dst: HostLocation) -> frozenset[str]:
    """The names of the links (design 3.3) that the SRv6 path of plane ``plane`` and T1
    ``t1`` takes from the host at ``src`` to the host at ``dst``: both host links, and both
    T0-T1 links when the hosts sit under different leaves (under one leaf the path turns at
    the T0 and ``t1`` is unused). Cached: a host agent asks it for every EV of every sweep.

    Raises:
        ValueError: a field out of range (see :func:`t1_link_name`).
    """
    links = {host_link_name(plane, src.leaf, src.downlink), host_link_name(plane, dst.leaf, dst.downlink)}
    if src.leaf != dst.leaf:
        links |= {t1_link_name(plane, src.leaf, t1), t1_link_name(plane, dst.leaf, t1)}
    return frozenset(links)


_LINK_RE = re.compile(r"p(\d+)/t0-(\d+)/(t1|down)-(\d+)")


def parse_link_name(name: str) -> LinkName:
    """Parse ``p<plane>/t0-<L>/t1-<t>`` or ``p<plane>/t0-<L>/down-<D>``.

    Raises:
        ValueError: the name does not match either form, or a field is out of range.
    """
    m = _LINK_RE.fullmatch(name)
    if not m:
        raise ValueError(f"link name {name!r} is not p<plane>/t0-<L>/t1-<t> or p<plane>/t0-<L>/down-<D>")
    plane, leaf, kind, index = int(m[1]), int(m[2]), m[3], int(m[4])
    check_range("plane", plane, 0, 15)
    check_range("leaf", leaf, 0, 1023)
    check_range("t1" if kind == "t1" else "downlink", index, 0, 255 if kind == "t1" else 1022)
    return LinkName(plane, leaf, kind, index)
