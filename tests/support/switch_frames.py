"""Scapy builders for the frames that the switch tests feed in and expect out.

Everything here follows design section 3 directly (offsets and lengths written out), so an
expected frame is built from the design, never from the switch program's output.
"""

from __future__ import annotations

import ipaddress
import struct

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mrckit.wire.constants import Dscp, Opcode

LOCATOR = "fcbb:bb00"
SWITCH_MAC = "02:00:00:00:00:aa"
HOST_A = "2001:db8:100:0::1"
HOST_B = "2001:db8:100:1::2"
PORT_SA = "2001:db8:200:0::1"
ICRC = b"\x11\x22\x33\x44"

IMM = {Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM}


def container(*usids: int) -> str:
    """The DA ``fcbb:bb00:<usid>:...`` with up to six 16-bit uSIDs, zero-padded."""
    words = list(usids) + [0] * (6 - len(usids))
    value = (0xFCBBBB00 << 96) | int.from_bytes(b"".join(w.to_bytes(2, "big") for w in words), "big")
    return str(ipaddress.IPv6Address(value))


def prefix48(*usids: int) -> int:
    """The 48-bit table key: locator << 16 | first uSID."""
    return (0xFCBBBB00 << 16) | (usids[0] if usids else 0)


def mrc_headers(opcode: int, *, ts: bool = False, rtx: bool = False, psn: int = 7) -> bytes:
    """BTH | METH | [TSETH] | RETH | [ImmDt] for a write (design section 3.2), or BTH | 28-byte
    SETH + 8-byte CC_STATE for SACK, BTH | 20-byte NETH for NACK."""
    flags = (0x10 if ts else 0) | (0x20 if rtx else 0)
    bth = bytes([opcode, 0]) + b"\xff\xff" + b"\x00" + (0x123).to_bytes(3, "big") + bytes([flags]) \
        + psn.to_bytes(3, "big")
    if opcode == Opcode.SACK:
        return bth + bytes(range(1, 29)) + bytes(8)
    if opcode == Opcode.NACK:
        return bth + bytes(range(1, 21))
    out = bth + struct.pack("!HH", 1, 2)
    if ts:
        out += struct.pack("!HH", 0x1234, 1)
    out += struct.pack("!QII", 0x1000, 0xABCD, 4096)
    if opcode in IMM:
        out += b"\xde\xad\xbe\xef"
    return out


def mrc_frame(da: str, *, opcode: int = Opcode.WRITE_ONLY, dscp: int = Dscp.TRIMMABLE, ecn: int = 0,
              hlim: int = 64, ts: bool = False, payload: int = 256, icrc: bool = True,
              src: str = "02:00:00:00:01:01", dst: str = SWITCH_MAC, sport: int = 0xC000,
              dport: int = 4791, inner_dst: str = HOST_B, psn: int = 7) -> bytes:
    """An encapsulated MRC frame: Ether | IPv6 (nh 41) | IPv6 | UDP | headers | payload | ICRC.
    Lengths are filled by scapy; the UDP checksum is 0 as in RoCEv2."""
    body = mrc_headers(opcode, ts=ts, psn=psn) + bytes((i * 7) & 0xFF for i in range(payload))
    if icrc:
        body += ICRC
    pkt = (Ether(src=src, dst=dst) /
           IPv6(src=PORT_SA, dst=da, nh=41, hlim=hlim, tc=(dscp << 2) | ecn, fl=0x1234) /
           IPv6(src=HOST_A, dst=inner_dst, nh=17, hlim=64) /
           UDP(sport=sport, dport=dport, chksum=0) / Raw(body))
    return bytes(pkt)


def ecmp_frame(da: str = HOST_B, *, fl: int = 0x5678, sport: int = 0x1234, opcode: int = Opcode.WRITE_ONLY,
               dscp: int = Dscp.TRIMMABLE, ecn: int = 0, hlim: int = 64, ts: bool = False, payload: int = 256,
               icrc: bool = True, src: str = "02:00:00:00:01:01", dst: str = SWITCH_MAC,
               dport: int = 4791) -> bytes:
    """An EV-hash mode MRC frame (docs/ecmp-mode.md): Ether | IPv6 (nh 17, flow label
    ``fl``) | UDP (source port ``sport``) | headers | payload | ICRC, no outer header."""
    body = mrc_headers(opcode, ts=ts) + bytes((i * 7) & 0xFF for i in range(payload))
    if icrc:
        body += ICRC
    pkt = (Ether(src=src, dst=dst) /
           IPv6(src=HOST_A, dst=da, nh=17, hlim=hlim, tc=(dscp << 2) | ecn, fl=fl) /
           UDP(sport=sport, dport=dport, chksum=0) / Raw(body))
    return bytes(pkt)


def ipv4_frame() -> bytes:
    """An IPv4 frame, for not_ipv6."""
    return bytes(Ether(src="02:00:00:00:01:01", dst=SWITCH_MAC) / IP(src="192.0.2.1", dst="192.0.2.2") /
                 UDP(sport=1, dport=2) / Raw(b"x" * 20))


def outer(frame: bytes) -> IPv6:
    """The outer IPv6 layer of ``frame``."""
    return Ether(frame)[IPv6]
