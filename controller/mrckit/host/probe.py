"""Frames of the host agent's endpoint operations: EP_REQ / EP_RESP on QP 0x2 (design 3.2 and 5).

The agent builds these packets whole, outer header included, and sends them on a plane port,
so they take exactly the path of the EV they probe (tc egress passes them unchanged, and they
do not go through it at all when sent on the plane port). The peer's XDP ingress decapsulates
them and rewrites the UDP port to the agent's, where its agent answers.

In EV-hash (ecmp) mode a probe is the same packet without the outer header
(:func:`plain_frame`): NIC address to the peer's NIC address, the EV in the flow label and
the UDP source port. The switches hash those fields exactly as they hash the data of that EV,
so the probe takes the EV's path, whatever it is.

The headers themselves (BTH + ERTH/EETH, IPv6, UDP, Ethernet) are packed and parsed by
:mod:`mrckit.wire.headers` and :mod:`mrckit.wire.ipv6`; this module chooses the path and class.
"""

from __future__ import annotations

import ipaddress
from typing import NamedTuple

from ..wire.addressing import path_da
from ..wire.constants import Dscp
from ..wire.ev import ev_unpack
from ..wire.ipv6 import encapsulate, eth_header, mrc_udp_packet, traffic_class

CONTROL_TC = traffic_class(Dscp.CONTROL)
"""Traffic class of endpoint operations: DSCP CONTROL, not ECT (design 3.3)."""


class PortView(NamedTuple):
    """What the frame builder needs of a local plane port: MACs and the port address."""

    mac: bytes
    neigh_mac: bytes
    address: ipaddress.IPv6Address


def encapsulated_frame(port: PortView, locator: int, src_leaf: int, nic: ipaddress.IPv6Address,
                       peer: ipaddress.IPv6Address, peer_leaf: int, peer_down: int, ev: int,
                       l4: bytes) -> bytes:
    """A whole frame, as tc egress would have made it, carrying ``l4`` (BTH onward) from NIC
    ``nic`` to NIC ``peer`` on EV ``ev``: Ethernet | outer IPv6 (uSID path of the EV) | inner
    IPv6 | UDP (sport = EV bits 31..16, checksum 0) | l4 | ICRC. Class CONTROL, not ECT.

    Raises:
        ValueError: ``ev`` outside 0..2**32-1, or a path field out of range (see ``path_da``).
    """
    plane, t1, _ = ev_unpack(ev)
    inner = mrc_udp_packet(nic.packed, peer.packed, ev, l4, tc=CONTROL_TC)
    da = path_da(plane, t1, src_leaf, peer_leaf, peer_down, locator)
    return eth_header(port.neigh_mac, port.mac) + encapsulate(port.address.packed, da.packed, ev,
                                                              inner, tc=CONTROL_TC)


def plain_frame(port: PortView, nic: ipaddress.IPv6Address, peer: ipaddress.IPv6Address, ev: int,
                l4: bytes) -> bytes:
    """A whole EV-hash (ecmp) mode frame, as tc egress would have sent it there, carrying
    ``l4`` (BTH onward) from NIC ``nic`` to NIC ``peer`` on EV ``ev``: Ethernet (plane port to
    its T0) | IPv6 (flow label = EV bits 15..0, class CONTROL, hop limit 64) | UDP (sport = EV
    bits 31..16, checksum 0) | l4 | ICRC. No outer header (ECMP contract section 1).

    Raises:
        ValueError: ``ev`` outside 0..2**32-1.
    """
    return eth_header(port.neigh_mac, port.mac) + mrc_udp_packet(nic.packed, peer.packed, ev, l4,
                                                                  tc=CONTROL_TC)


__all__ = ["CONTROL_TC", "PortView", "encapsulated_frame", "plain_frame"]
