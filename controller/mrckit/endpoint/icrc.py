"""Incremental ICRC for the endpoint's hot path (design section 3.1).

The ICRC is the RoCEv2 invariant CRC-32 over: 8 bytes of ones, the inner IPv6 header with its
traffic class, flow label and hop limit set to ones, the UDP header with its checksum **and
source port** set to ones (our deviation: the host dataplane writes the EV into the source port
after the endpoint computed the CRC), the BTH with byte 4 set to ones, and the rest of the packet.
It travels least-significant byte first.

This is the incremental form of :func:`mrckit.wire.icrc.icrc_compute` (the reference, which
needs the whole inner packet; the tests check that both agree). The endpoint sees only the UDP
payload, so this module CRCs a pseudo-header prefix built from the
addresses and the length, cached per (source, destination, length), then continues the CRC over
the BTH and the rest with ``zlib.crc32``'s running value: no copy of the payload is made.
"""

from __future__ import annotations

import ipaddress
import zlib

from mrckit.wire.constants import IPPROTO_UDP, UDP_LEN, UDP_PORT_ROCEV2
from mrckit.wire.icrc import ICRC, masked_headers
from mrckit.wire.ipv6 import ipv6_header, udp_header

_ONES = b"\xff"


class IcrcContext:
    """ICRC calculator for one (source NIC, destination NIC) address pair, both IPv6 text or
    bytes. Packets are UDP payloads (BTH first) to or from UDP port 4791."""

    def __init__(self, src: str | bytes, dst: str | bytes):
        self._src, self._dst = _packed(src), _packed(dst)
        self._prefix: dict[int, int] = {}

    def _prefix_crc(self, udp_payload_len: int) -> int:
        crc = self._prefix.get(udp_payload_len)
        if crc is None:
            udp_len = UDP_LEN + udp_payload_len
            # The fields left 0 here are variant: the ICRC masks them to ones.
            ip6 = ipv6_header(self._src, self._dst, udp_len, IPPROTO_UDP, tc=0, flow_label=0, hop_limit=0)
            crc = zlib.crc32(masked_headers(ip6 + udp_header(0, UDP_PORT_ROCEV2, udp_len)))
            self._prefix[udp_payload_len] = crc
        return crc

    def compute(self, *parts, total: int) -> int:
        """CRC of a packet whose UDP payload (ICRC included) is ``total`` bytes long and whose
        bytes before the ICRC are the concatenation of ``parts`` (buffers; the first holds the
        whole BTH). Returns the 32-bit value (pack it with :data:`mrckit.wire.icrc.ICRC`)."""
        first = memoryview(parts[0])
        crc = zlib.crc32(first[:4], self._prefix_crc(total))
        crc = zlib.crc32(_ONES, crc)
        crc = zlib.crc32(first[5:], crc)
        for part in parts[1:]:
            crc = zlib.crc32(part, crc)
        return crc

    def check(self, buf, n: int) -> bool:
        """Whether the UDP payload ``buf[:n]`` (ICRC in its last 4 bytes) has a good ICRC."""
        if n < 16:
            return False
        view = memoryview(buf)
        return self.compute(view[:n - 4], total=n) == ICRC.unpack_from(view, n - 4)[0]


def _packed(addr: str | bytes) -> bytes:
    if isinstance(addr, bytes) and len(addr) == 16:
        return addr
    return ipaddress.IPv6Address(addr).packed
