"""Builders of the Ethernet, IPv6 and UDP headers that carry MRC (design section 3.1).

A frame is ``Ethernet | [outer IPv6, next header 41] | inner IPv6 | UDP :4791 | BTH ... | ICRC``.
The EV is written into both IPv6 flow labels (EV bits 15..0) and the UDP source port (EV bits
31..16) through :mod:`.ev`. These build whole headers as bytes for the host agent's endpoint
operations and the endpoint's ICRC; the scapy layers of :mod:`.packet` build the same bytes and
are the tests' oracle. This module does not import scapy.

Addresses are 16-byte packed IPv6 addresses (``ipaddress.IPv6Address.packed``), MACs 6 bytes.
"""

from __future__ import annotations

import struct

from .constants import (ETHERTYPE_IPV6, ICRC_LEN, IPPROTO_IPV6, IPPROTO_UDP, IPV6_DSCP_SHIFT,
                        IPV6_FLOW_LABEL_MASK, OUTER_HOP_LIMIT, UDP_LEN, UDP_PORT_ROCEV2, Ecn)
from .ev import ev_to_wire
from .icrc import icrc_append

_ETH = struct.Struct(">6s6sH")  # destination MAC, source MAC, EtherType
_IPV6 = struct.Struct(">IHBB16s16s")  # word 0, payload length, next header, hop limit, src, dst
_UDP = struct.Struct(">HHHH")  # source port, destination port, length, checksum
_IP_VERSION = 6
# IPv6 word 0 (RFC 8200 section 3): version(31..28) traffic class(27..20) flow label(19..0).
_VERSION_SHIFT = 28
_TC_SHIFT = 20


def traffic_class(dscp: int, ecn: int = Ecn.NOT_ECT) -> int:
    """The 8-bit IPv6 traffic class of a 6-bit DSCP and a 2-bit ECN codepoint (RFC 2474, 3168)."""
    return dscp << IPV6_DSCP_SHIFT | ecn


def eth_header(dst_mac: bytes, src_mac: bytes, ethertype: int = ETHERTYPE_IPV6) -> bytes:
    """The 14-byte Ethernet II header.

    Raises:
        struct.error: ``ethertype`` outside 0..65535.
    """
    return _ETH.pack(dst_mac, src_mac, ethertype)


def ipv6_header(src: bytes, dst: bytes, payload_len: int, next_header: int, *, tc: int,
                flow_label: int, hop_limit: int) -> bytes:
    """The 40-byte IPv6 header (RFC 8200 section 3) from ``src`` to ``dst`` (16 bytes each).

    ``payload_len`` counts the bytes after this header; ``tc`` is the 8-bit traffic class (see
    :func:`traffic_class`), ``flow_label`` 20 bits.

    Raises:
        ValueError: ``tc`` or ``flow_label`` wider than its field.
        struct.error: ``payload_len``, ``next_header`` or ``hop_limit`` out of its width.
    """
    if not 0 <= tc <= 0xFF or not 0 <= flow_label <= IPV6_FLOW_LABEL_MASK:
        raise ValueError(f"tc={tc} or flow_label={flow_label} is wider than 8 or 20 bits")
    word0 = _IP_VERSION << _VERSION_SHIFT | tc << _TC_SHIFT | flow_label
    return _IPV6.pack(word0, payload_len, next_header, hop_limit, src, dst)


def udp_header(sport: int, dport: int, length: int, checksum: int = 0) -> bytes:
    """The 8-byte UDP header (RFC 768); ``length`` counts this header and its payload. A zero
    checksum is allowed for these tunnelled packets, which the ICRC protects (design 3.1).

    Raises:
        struct.error: a field outside 0..65535.
    """
    return _UDP.pack(sport, dport, length, checksum)


def mrc_udp_packet(src: bytes, dst: bytes, ev: int, l4: bytes, *, tc: int,
                   hop_limit: int = OUTER_HOP_LIMIT) -> bytes:
    """The inner packet ``IPv6 | UDP | l4 | ICRC`` from NIC ``src`` to NIC ``dst`` on EV ``ev``
    (design 3.1): flow label = EV bits 15..0, UDP source port = EV bits 31..16, destination
    port 4791, UDP checksum 0. ``l4`` is the BTH onward, without the ICRC, which is appended
    (a sender's packet always has one: only a switch trims).

    Raises:
        ValueError: ``ev`` outside 0..2**32-1 or ``tc`` wider than 8 bits.
    """
    flow_label, sport = ev_to_wire(ev)
    udp_len = UDP_LEN + len(l4) + ICRC_LEN
    ip6 = ipv6_header(src, dst, udp_len, IPPROTO_UDP, tc=tc, flow_label=flow_label, hop_limit=hop_limit)
    return icrc_append(ip6 + udp_header(sport, UDP_PORT_ROCEV2, udp_len) + l4)


def encapsulate(src: bytes, dst: bytes, ev: int, inner: bytes, *, tc: int,
                hop_limit: int = OUTER_HOP_LIMIT) -> bytes:
    """The outer IPv6 header (next header 41, no SRH) from port address ``src`` to the uSID
    container ``dst``, followed by the inner packet ``inner``; its flow label is EV bits 15..0,
    as the inner one's (design 3.1).

    Raises:
        ValueError: ``ev`` outside 0..2**32-1 or ``tc`` wider than 8 bits.
    """
    flow_label, _sport = ev_to_wire(ev)
    return ipv6_header(src, dst, len(inner), IPPROTO_IPV6, tc=tc, flow_label=flow_label,
                       hop_limit=hop_limit) + inner
