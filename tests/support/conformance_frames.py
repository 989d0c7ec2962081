"""Input frames (scapy, with mrckit's MRC layers) and the expected output of design section 4,
computed from the design's rules on the bytes, never from a switch's output.

Offsets are those of design section 3: Ethernet 14 B, outer IPv6 at 14, inner IPv6 at 54,
UDP at 94, BTH at 102.
"""

from __future__ import annotations

import ipaddress
import struct

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mrckit.wire.constants import IMM_OPCODES, WRITE_OPCODES, Dscp, Ecn, Opcode
from mrckit.wire.layers import CCState, ImmDt, METH, MrcBTH, NETH, RETH, SETH, TSETH

LOCATOR = 0xFCBBBB00
OFF_OUTER, OFF_INNER, OFF_UDP = 14, 54, 94
TESTER_MAC = "02:00:00:00:00:ee"
SWITCH_IN_MAC = "02:00:00:00:00:aa"
HOST_A, HOST_B = "2001:db8:100:0::1", "2001:db8:100:1::2"
PORT_SA = "2001:db8:200:0::1"


def container(*usids: int) -> str:
    """``fcbb:bb00:<uSID>:...``: the locator then up to six 16-bit uSIDs, zero-padded."""
    words = list(usids) + [0] * (6 - len(usids))
    value = (LOCATOR << 96) | int.from_bytes(b"".join(w.to_bytes(2, "big") for w in words), "big")
    return str(ipaddress.IPv6Address(value))


def prefix48(usid: int) -> int:
    """The 48-bit table key of a uSID: locator << 16 | uSID."""
    return (LOCATOR << 16) | usid


def write_headers(opcode: int, *, ts: bool) -> MrcBTH:
    """BTH | METH | [TSETH] | RETH | [ImmDt] of an RDMA write (design section 3.2)."""
    bth = MrcBTH(opcode=opcode, dqpn=0x123, psn=7, ts=int(ts))
    stack = bth / METH(rqmsn=1, msn=2)
    if ts:
        stack = stack / TSETH(tx_timestamp=0x1234)
    stack = stack / RETH(va=0x1000, rkey=0xABCD, dma_len=4096)
    if opcode in IMM_OPCODES:
        stack = stack / ImmDt(imm=0xDEADBEEF)
    return stack


def mrc_frame(da: str, *, opcode: int = Opcode.WRITE_ONLY, dscp: int = Dscp.TRIMMABLE, ecn: int = Ecn.NOT_ECT,
              hlim: int = 64, ts: bool = False, payload: int = 256) -> bytes:
    """An encapsulated MRC frame with payload and ICRC: writes carry their headers and
    ``payload`` bytes; SACK and NACK carry their ETHs (payload ignored)."""
    pkt = (Ether(src=TESTER_MAC, dst=SWITCH_IN_MAC) /
           IPv6(src=PORT_SA, dst=da, nh=41, hlim=hlim, tc=(dscp << 2) | ecn, fl=0x1234) /
           IPv6(src=HOST_A, dst=HOST_B, nh=17, hlim=64) /
           UDP(sport=0xC000, dport=4791, chksum=0) / mrc_body(opcode, ts=ts, payload=payload))
    return bytes(pkt)


def mrc_body(opcode: int, *, ts: bool = False, payload: int = 256):
    """BTH onwards: a write's headers and ``payload`` bytes, or a SACK's / NACK's ETHs."""
    if opcode in WRITE_OPCODES:
        return write_headers(opcode, ts=ts) / Raw(bytes((i * 7) & 0xFF for i in range(payload)))
    if opcode == Opcode.SACK:
        return MrcBTH(opcode=opcode, dqpn=0x123) / SETH(ev=0x10020003, cack_psn=5) / CCState()
    if opcode == Opcode.NACK:
        return MrcBTH(opcode=opcode, dqpn=0x123) / NETH(nack_reason=1, ev=0x10020003, nack_psn=5)
    raise ValueError(f"no builder for opcode {opcode:#x}")


# --- EV-hash (ECMP) mode: no outer header (docs/ecmp-mode.md, "The packet") ---

NOENCAP_OFF_UDP = 54
"""The UDP header of a packet without an outer header follows the only IPv6 header."""


def ecmp_frame(da: str, *, flow_label: int, udp_sport: int | None, opcode: int = Opcode.WRITE_ONLY,
               dscp: int = Dscp.TRIMMABLE, ecn: int = Ecn.NOT_ECT, hlim: int = 64, ts: bool = False,
               payload: int = 256, dport: int = 4791) -> bytes:
    """A packet of EV-hash mode: ``Ethernet | IPv6 (flow label) | UDP (source port) | MRC``.

    ``udp_sport`` None: no UDP header at all (next header 59, ``payload`` raw bytes), so the
    selector hashes the flow label alone. ``dport`` other than 4791: UDP that is not MRC.
    """
    ip = IPv6(src=HOST_A, dst=da, hlim=hlim, tc=(dscp << 2) | ecn, fl=flow_label)
    head = Ether(src=TESTER_MAC, dst=SWITCH_IN_MAC) / ip
    if udp_sport is None:
        ip.nh = 59
        return bytes(head / Raw(bytes((i * 5) & 0xFF for i in range(payload))))
    udp = UDP(sport=udp_sport, dport=dport, chksum=0)
    if dport != 4791:
        return bytes(head / udp / Raw(bytes((i * 3) & 0xFF for i in range(payload))))
    return bytes(head / udp / mrc_body(opcode, ts=ts, payload=payload))


def truncated_udp_frame(da: str, *, flow_label: int, udp_head: bytes) -> bytes:
    """Next header 17 but only ``udp_head`` (fewer than 8 bytes) after the IPv6 header: the
    parser extracts no UDP header, so the selector hashes the flow label alone."""
    if len(udp_head) >= 8:
        raise ValueError("a truncated UDP header has fewer than 8 bytes")
    return bytes(Ether(src=TESTER_MAC, dst=SWITCH_IN_MAC) /
                 IPv6(src=HOST_A, dst=da, nh=17, hlim=64, tc=Dscp.TRIMMABLE << 2, fl=flow_label) /
                 Raw(udp_head))


def with_selector_fields(frame: bytes, flow_label: int, udp_sport: int, *, off_udp: int) -> bytes:
    """``frame`` with the first IPv6 header's flow label and the UDP source port at ``off_udp``
    replaced: the selector fields of ``ecmp_selector``. The ICRC masks both in the inner packet
    and does not cover an outer header, so it stays valid."""
    out = bytearray(frame)
    word = int.from_bytes(out[OFF_OUTER:OFF_OUTER + 4], "big")
    out[OFF_OUTER:OFF_OUTER + 4] = ((word & ~0xFFFFF) | flow_label).to_bytes(4, "big")
    out[off_udp:off_udp + 2] = udp_sport.to_bytes(2, "big")
    return bytes(out)


def ev_fields(ev: int) -> tuple[int, int]:
    """(flow label, UDP source port) that carry a 32-bit EV (docs/ecmp-mode.md, "The packet")."""
    return ev & 0xFFFF, ev >> 16


def ecmp_trimmed(frame: bytes, length: int, *, lasthop: bool) -> bytes:
    """Step 5 without an outer header: cut to ``length``, fix the IPv6 payload length and the
    UDP length, set DSCP TRIMMED (TRIMMED_LASTHOP toward a host) in the only IPv6 header."""
    out = bytearray(frame[:length])
    struct.pack_into("!H", out, OFF_OUTER + 4, length - NOENCAP_OFF_UDP)
    struct.pack_into("!H", out, NOENCAP_OFF_UDP + 4, length - NOENCAP_OFF_UDP)
    return with_tclass(bytes(out), dscp=Dscp.TRIMMED_LASTHOP if lasthop else Dscp.TRIMMED)


def ecmp_trimmed_length(opcode: int, *, ts: bool) -> int:
    """Frame length of a trimmed write without an outer header: 40 bytes less than
    :func:`trimmed_length` (94 up to the RETH, docs/ecmp-mode.md, "The packet")."""
    return trimmed_length(opcode, ts=ts) - 40


def ipv6_udp_frame(da: str, *, hlim: int = 64, dscp: int = Dscp.NO_TRIM) -> bytes:
    """A plain IPv6/UDP frame (not MRC) to ``da``."""
    return bytes(Ether(src=TESTER_MAC, dst=SWITCH_IN_MAC) /
                 IPv6(src=PORT_SA, dst=da, hlim=hlim, tc=dscp << 2) / UDP(sport=1000, dport=2000) /
                 Raw(b"plain ipv6 payload"))


def ipv4_frame() -> bytes:
    """An IPv4 frame: not_ipv6."""
    return bytes(Ether(src=TESTER_MAC, dst=SWITCH_IN_MAC) / IP(src="192.0.2.1", dst="192.0.2.2") /
                 UDP(sport=1, dport=2) / Raw(b"x" * 20))


def short_ipv6_frame() -> bytes:
    """EtherType IPv6 but only 20 bytes of IPv6 header: malformed."""
    return bytes(Ether(src=TESTER_MAC, dst=SWITCH_IN_MAC, type=0x86DD)) + bytes(IPv6(dst=container(0x400)))[:20]


# --- the rules of design section 4, applied to bytes ---

def forwarded(frame: bytes, *, src_mac: str | None, dst_mac: str | None, shift: bool = False) -> bytes:
    """Steps 2 and 4: the optional uN shift, hop limit - 1, and the MAC rewrite (None: no
    port_config entry, MACs unchanged)."""
    out = bytearray(frame)
    if dst_mac is not None:
        out[0:6] = bytes.fromhex(dst_mac.replace(":", ""))
        out[6:12] = bytes.fromhex(src_mac.replace(":", ""))
    out[OFF_OUTER + 7] -= 1
    if shift:
        da = OFF_OUTER + 24
        out[da + 4:da + 16] = out[da + 6:da + 16] + b"\x00\x00"
    return bytes(out)


def trimmed_length(opcode: int, *, ts: bool) -> int:
    """Frame length of a trimmed write: up to RETH, ImmDt for _IMM, TSETH when ts = 1."""
    return 134 + (4 if ts else 0) + (4 if opcode in IMM_OPCODES else 0)


def trimmed(frame: bytes, length: int, *, lasthop: bool) -> bytes:
    """Step 5: cut to ``length``, fix the outer/inner payload lengths and the UDP length, and
    set DSCP TRIMMED (TRIMMED_LASTHOP toward a host) in the outer header."""
    out = bytearray(frame[:length])
    struct.pack_into("!H", out, OFF_OUTER + 4, length - OFF_INNER)
    struct.pack_into("!H", out, OFF_INNER + 4, length - OFF_UDP)
    struct.pack_into("!H", out, OFF_UDP + 4, length - OFF_UDP)
    return with_tclass(bytes(out), dscp=Dscp.TRIMMED_LASTHOP if lasthop else Dscp.TRIMMED)


def with_tclass(frame: bytes, *, dscp: int | None = None, ecn: int | None = None) -> bytes:
    """``frame`` with the outer DSCP and/or ECN replaced."""
    out = bytearray(frame)
    tclass = ((out[OFF_OUTER] & 0x0F) << 4) | (out[OFF_OUTER + 1] >> 4)
    if dscp is not None:
        tclass = (dscp << 2) | (tclass & 3)
    if ecn is not None:
        tclass = (tclass & 0xFC) | ecn
    out[OFF_OUTER] = (out[OFF_OUTER] & 0xF0) | (tclass >> 4)
    out[OFF_OUTER + 1] = (out[OFF_OUTER + 1] & 0x0F) | ((tclass & 0x0F) << 4)
    return bytes(out)
