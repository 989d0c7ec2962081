"""ICRC of the mrckit MRC profile (design section 3.1): the RoCEv2 invariant CRC for IPv6.

The ICRC covers the *inner* packet, from the first byte of the inner IPv6 header to the last
byte of the payload, with RoCEv2's rules (InfiniBand Architecture Specification, Annex A17
"RoCEv2", section A17.3.3; the same computation as Linux ``rxe_icrc.c`` and scapy's
``scapy.contrib.roce.BTH.compute_icrc``):

- 8 bytes of all ones are prepended (the place of the InfiniBand LRH);
- the variant fields are replaced by all ones: the IPv6 traffic class, flow label and hop
  limit, the UDP checksum, and BTH byte 4 (FECN/BECN/reserved);
- **mrckit deviation**: the UDP source port is masked to all ones too, because the host
  dataplane writes the EV into it after the endpoint computed the CRC;
- the CRC is CRC-32 as in Ethernet (polynomial 0x04C11DB7, reflected, initial value and final
  XOR 0xFFFFFFFF), i.e. :func:`zlib.crc32`;
- it is carried least-significant byte first, the one little-endian field of the format.

Trimmed packets carry no ICRC (design section 3.1).
"""

import struct
import zlib

from .constants import BTH_LEN, ICRC_LEN, ICRC_PREFIX_LEN, IPPROTO_UDP, IPV6_LEN, UDP_LEN

ICRC = struct.Struct("<I")
"""The ICRC trailer, 32 bits least-significant byte first: ``ICRC.pack_into`` and
``ICRC.unpack_from`` for hot paths that hold the value as an int."""
assert ICRC.size == ICRC_LEN

ICRC_PREFIX = b"\xff" * ICRC_PREFIX_LEN
"""Stands in for the InfiniBand LRH, which RoCEv2 does not carry."""

_MIN_LEN = IPV6_LEN + UDP_LEN + BTH_LEN
# (offset, length) of every field masked to all ones, relative to the inner IPv6 header.
_MASKS = (
    (1, 3),                      # traffic class low nibble and the flow label
    (7, 1),                      # hop limit
    (IPV6_LEN + 0, 2),           # UDP source port (the EV): mrckit's deviation
    (IPV6_LEN + 6, 2),           # UDP checksum
    (IPV6_LEN + UDP_LEN + 4, 1),  # BTH byte 4
)


def masked(inner: bytes) -> bytes:
    """The bytes the CRC runs over: the prefix, then ``inner`` with the variant fields set to 0xFF.

    ``inner`` is the inner IPv6 header, UDP, BTH and everything after it, without the ICRC.

    Raises:
        ValueError: ``inner`` shorter than IPv6 + UDP + BTH (60 bytes), not IPv6, or not UDP.
    """
    if len(inner) < _MIN_LEN:
        raise ValueError(f"inner packet is {len(inner)} bytes; the ICRC needs at least {_MIN_LEN} "
                         "(IPv6 40 + UDP 8 + BTH 12)")
    if inner[0] >> 4 != 6:
        raise ValueError(f"inner packet starts with IP version {inner[0] >> 4}, expected 6")
    if inner[6] != IPPROTO_UDP:
        raise ValueError(f"inner IPv6 next header is {inner[6]}, expected {IPPROTO_UDP} (UDP)")
    buf = bytearray(inner)
    buf[0] |= 0x0F  # traffic class high nibble lives in byte 0's low nibble
    for offset, length in _MASKS:
        buf[offset:offset + length] = b"\xff" * length
    return ICRC_PREFIX + bytes(buf)


def masked_headers(ip6_udp: bytes) -> bytes:
    """What the ICRC runs over before the BTH: the prefix, then the inner IPv6 and UDP headers
    (``ip6_udp``, 48 bytes) with their variant fields set to 0xFF, as :func:`masked` sets them.
    An incremental ICRC starts from the CRC of these bytes and continues over the BTH onward.

    Raises:
        ValueError: ``ip6_udp`` not 48 bytes, not IPv6, or not UDP.
    """
    if len(ip6_udp) != IPV6_LEN + UDP_LEN:
        raise ValueError(f"IPv6 + UDP headers are {IPV6_LEN + UDP_LEN} bytes, got {len(ip6_udp)}")
    return masked(ip6_udp + bytes(BTH_LEN))[:-BTH_LEN]


def icrc_compute(inner: bytes) -> int:
    """The ICRC of ``inner`` (inner IPv6 header .. end of payload, ICRC excluded), as a 32-bit int.

    Raises:
        ValueError: see :func:`masked`.
    """
    return zlib.crc32(masked(inner)) & 0xFFFFFFFF


def icrc_bytes(value: int) -> bytes:
    """The 4 wire bytes of an ICRC value, least-significant byte first."""
    return ICRC.pack(value)


def icrc_append(inner: bytes) -> bytes:
    """``inner`` followed by its ICRC. Raises ValueError as :func:`masked`."""
    return inner + icrc_bytes(icrc_compute(inner))


def icrc_check(packet: bytes) -> bool:
    """True if the last 4 bytes of ``packet`` (inner IPv6 .. ICRC) are its correct ICRC.

    Raises:
        ValueError: shorter than IPv6 + UDP + BTH + ICRC, not IPv6, or not UDP.
    """
    if len(packet) < _MIN_LEN + ICRC_LEN:
        raise ValueError(f"packet is {len(packet)} bytes; an ICRC-carrying packet has at least "
                         f"{_MIN_LEN + ICRC_LEN}")
    return icrc_bytes(icrc_compute(packet[:-ICRC_LEN])) == packet[-ICRC_LEN:]
