"""Frames the P4Runtime tests send through the real XDP program, and its verdicts."""

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

XDP_DROP, XDP_REDIRECT = 1, 4
"""The XDP verdicts (linux/bpf.h) the switch returns."""
IN_MAC, SW_MAC = "02:00:00:00:01:01", "02:00:00:00:00:aa"
DST = "2001:db8:100:1::2"
"""The destination of EV-hash mode frames."""


def frame(da: str, dscp: int = 46) -> bytes:
    """Ether | IPv6 (DA = uSID container, nh 41) | IPv6 | payload: CONTROL class by default."""
    return bytes(Ether(src=IN_MAC, dst=SW_MAC) /
                 IPv6(src="2001:db8:200:0::1", dst=da, nh=41, hlim=64, tc=dscp << 2) /
                 IPv6(src="2001:db8:100:0::1", dst="2001:db8:100:1::2", nh=59) / Raw(b"m" * 64))


def ecmp_frame(ev: int, dst: str = DST, udp: bool = True) -> bytes:
    """An EV-hash mode packet (no outer header): flow label = EV bits 15..0, UDP source port =
    EV bits 31..16, dport 4791; CONTROL class, so congestion never touches it."""
    ip = IPv6(src="2001:db8:100:0::1", dst=dst, fl=ev & 0xFFFF, tc=46 << 2, hlim=64)
    body = UDP(sport=ev >> 16, dport=4791, chksum=0) / Raw(bytes(12) + b"p" * 32) if udp else Raw(b"p" * 40)
    return bytes(Ether(src="02:00:00:00:01:01", dst="02:00:00:00:00:aa") / ip / body)
