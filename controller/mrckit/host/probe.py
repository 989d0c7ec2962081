"""Endpoint operations of the host agent: EP_REQ / EP_RESP on QP 0x2 (design 3.2 and 5).

The agent builds these packets whole, outer header included, and sends them on a plane port,
so they take exactly the path of the EV they probe (tc egress passes them unchanged, and they
do not go through it at all when sent on the plane port). The peer's XDP ingress decapsulates
them and rewrites the UDP port to the agent's, where its agent answers.

In EV-hash (ecmp) mode a probe is the same packet without the outer header
(:func:`plain_frame`): NIC address to the peer's NIC address, the EV in the flow label and
the UDP source port. The switches hash those fields exactly as they hash the data of that EV,
so the probe takes the EV's path, whatever it is.

Layouts (design 3.2): BTH 12 B, then ERTH 16 B (op, vendor_info, probe_id, port_status_mask,
response EV, tx_timestamp, reserved) or EETH 16 B (op|status, vendor_info, probe_id, request
EV, request tx_timestamp, service time, reserved). The hot path packs with ``struct``.
"""

from __future__ import annotations

import ipaddress
import struct
import time
from typing import NamedTuple

from ..wire.addressing import path_da
from ..wire.constants import (BTH_LEN, EETH_LEN, ERTH_LEN, ETHERTYPE_IPV6, IPPROTO_IPV6,
                              IPPROTO_UDP, OUTER_HOP_LIMIT, QP_ENDPOINT_OPS, TIME_UNIT_NS,
                              UDP_PORT_ROCEV2, Dscp, EpOp, EpStatus, Opcode)
from ..wire.ev import ev_unpack
from ..wire.icrc import icrc_append

_BTH = struct.Struct(">BBHII")
_ERTH = struct.Struct(">BBHIIHH")
_EETH = struct.Struct(">BBHIHHI")
PKEY = 0xFFFF
CONTROL_TC = int(Dscp.CONTROL) << 2


class EpRequest(NamedTuple):
    """A parsed ERTH: op (``EpOp``), probe_id, port_status_mask, resp_ev, tx_timestamp."""

    op: int
    probe_id: int
    port_status_mask: int
    resp_ev: int
    tx_timestamp: int


class EpResponse(NamedTuple):
    """A parsed EETH: op, status (``EpStatus``), probe_id, req_ev, req_tx_timestamp,
    service_time (units of 1.024 us)."""

    op: int
    status: int
    probe_id: int
    req_ev: int
    req_tx_timestamp: int
    service_time: int


def timestamp_units(ns: int | None = None) -> int:
    """A 16-bit timestamp in units of 1.024 us (design 3.2), wrapping."""
    return ((time.monotonic_ns() if ns is None else ns) // TIME_UNIT_NS) & 0xFFFF


def _bth(opcode: int, psn: int = 0) -> bytes:
    return _BTH.pack(opcode, 0, PKEY, QP_ENDPOINT_OPS, psn & 0xFFFFFF)


def ep_request(op: int, probe_id: int, port_status_mask: int, resp_ev: int,
               tx_timestamp: int | None = None) -> bytes:
    """BTH + ERTH of an EP_REQ to QP 0x2 (28 bytes)."""
    ts = timestamp_units() if tx_timestamp is None else tx_timestamp
    return _bth(Opcode.EP_REQ) + _ERTH.pack((op & 3) << 6, 0, probe_id & 0xFFFF,
                                            port_status_mask & 0xFFFFFFFF, resp_ev, ts & 0xFFFF, 0)


def ep_response(op: int, status: int, probe_id: int, req_ev: int, req_tx_timestamp: int,
                service_time: int) -> bytes:
    """BTH + EETH of an EP_RESP (28 bytes)."""
    return _bth(Opcode.EP_RESP) + _EETH.pack(((op & 3) << 6) | ((status & 3) << 4), 0,
                                             probe_id & 0xFFFF, req_ev, req_tx_timestamp & 0xFFFF,
                                             service_time & 0xFFFF, 0)


def parse_ep(payload: bytes) -> EpRequest | EpResponse | None:
    """Parse a UDP payload (BTH onward, ICRC optional) as EP_REQ or EP_RESP; None otherwise."""
    if len(payload) < BTH_LEN + ERTH_LEN:
        return None
    opcode, _, _, dqpn, _ = _BTH.unpack_from(payload)
    if dqpn & 0xFFFFFF != QP_ENDPOINT_OPS:
        return None
    if opcode == Opcode.EP_REQ:
        op, _, pid, mask, resp_ev, ts, _ = _ERTH.unpack_from(payload, BTH_LEN)
        return EpRequest(op >> 6, pid, mask, resp_ev, ts)
    if opcode == Opcode.EP_RESP and len(payload) >= BTH_LEN + EETH_LEN:
        opst, _, pid, req_ev, req_ts, svc, _ = _EETH.unpack_from(payload, BTH_LEN)
        return EpResponse(opst >> 6, (opst >> 4) & 3, pid, req_ev, req_ts, svc)
    return None


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
    IPv6 | UDP (sport = EV >> 16, checksum 0) | l4 | ICRC. Class CONTROL, not ECT."""
    plane, t1, _ = ev_unpack(ev)
    inner = _ipv6_udp(nic, peer, ev, l4)
    da = path_da(plane, t1, src_leaf, peer_leaf, peer_down, locator)
    outer = _word0(ev) + struct.pack(">HBB", len(inner), IPPROTO_IPV6, OUTER_HOP_LIMIT) + port.address.packed + da.packed
    return port.neigh_mac + port.mac + struct.pack(">H", ETHERTYPE_IPV6) + outer + inner


def plain_frame(port: PortView, nic: ipaddress.IPv6Address, peer: ipaddress.IPv6Address, ev: int,
                l4: bytes) -> bytes:
    """A whole EV-hash (ecmp) mode frame, as tc egress would have sent it there, carrying
    ``l4`` (BTH onward) from NIC ``nic`` to NIC ``peer`` on EV ``ev``: Ethernet (plane port to
    its T0) | IPv6 (flow label = EV bits 15..0, class CONTROL, hop limit 64) | UDP (sport = EV
    bits 31..16, checksum 0) | l4 | ICRC. No outer header (ECMP contract section 1)."""
    return port.neigh_mac + port.mac + struct.pack(">H", ETHERTYPE_IPV6) + _ipv6_udp(nic, peer, ev, l4)


def _word0(ev: int) -> bytes:
    return struct.pack(">I", (6 << 28) | (CONTROL_TC << 20) | (ev & 0xFFFF))


def _ipv6_udp(nic: ipaddress.IPv6Address, peer: ipaddress.IPv6Address, ev: int, l4: bytes) -> bytes:
    """IPv6 | UDP | l4 | ICRC from ``nic`` to ``peer`` with the EV written in (design 3.1)."""
    udp = struct.pack(">HHHH", ev >> 16, UDP_PORT_ROCEV2, 8 + len(l4) + 4, 0)
    hdr = _word0(ev) + struct.pack(">HBB", len(udp) + len(l4) + 4, IPPROTO_UDP, 64) + nic.packed + peer.packed
    return icrc_append(hdr + udp + l4)


__all__ = ["EpOp", "EpStatus", "EpRequest", "EpResponse", "ep_request", "ep_response", "parse_ep",
           "encapsulated_frame", "plain_frame", "PortView", "timestamp_units"]
