"""The tables and packets of the example: a T1 switch of plane 0 with uSID 0x0801 in an SRv6
uSID fabric (locator fcbb:bb00::/32, design section 3). Port 1 faces a T0 (uSID 0x0400), port 3
another (0x0401); every port rewrites the MACs to its neighbour's."""

from __future__ import annotations

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mrckit.testing import TableEntry, tables_of
from mrckit.wire.constants import Dscp, Opcode
from mrckit.wire.layers import METH, RETH, MrcBTH

LOCATOR = 0xFCBBBB00
MY_USID = 0x0801
NEXT_HOP = {1: 0x0400, 3: 0x0401}        # port -> the uSID of the T0 behind it
NEVER = 1_000_000                        # a queue threshold no test reaches (packets)


def key(usid: int) -> int:
    """The 48-bit key of a uSID in my_usid and usid_fib: locator << 16 | uSID."""
    return LOCATOR << 16 | usid


def port_mac(port: int) -> str:
    return f"02:00:00:00:0a:{port:02x}"


def neighbour_mac(port: int) -> str:
    return f"02:00:00:00:0b:{port:02x}"


def port_config(port: int, *, trim_threshold: int = NEVER) -> TableEntry:
    return TableEntry.exact("port_config", port, "set_port", {
        "src_mac": int(port_mac(port).replace(":", ""), 16),
        "dst_mac": int(neighbour_mac(port).replace(":", ""), 16),
        "faces_host": 0, "trim_threshold": trim_threshold, "ecn_threshold": NEVER})


def tables(ports, **port_overrides):
    """my_usid, usid_fib toward both T0s, and port_config of every port."""
    return tables_of(TableEntry.exact("my_usid", key(MY_USID), "usid_un"),
                     *(TableEntry.exact("usid_fib", key(usid), "set_egress", {"port": port})
                       for port, usid in NEXT_HOP.items()),
                     *(port_overrides.get(p) or port_config(p) for p in ports))


def mrc_write(outer_da: str, *, in_port: int, hlim: int = 64, payload: int = 256, dscp: int = Dscp.TRIMMABLE):
    """An encapsulated RDMA WRITE ONLY: outer IPv6 (uSID container) | inner IPv6 | UDP 4791 |
    BTH | METH | RETH | payload, addressed to the switch's MAC on ``in_port``."""
    return (Ether(src="02:00:00:00:00:ee", dst=port_mac(in_port)) /
            IPv6(src="2001:db8:200::1", dst=outer_da, nh=41, hlim=hlim, tc=dscp << 2) /
            IPv6(src="2001:db8:100::1", dst="2001:db8:100:1::2", nh=17) /
            UDP(sport=0xC000, dport=4791, chksum=0) /
            MrcBTH(opcode=Opcode.WRITE_ONLY, dqpn=0x123, psn=7) / METH(rqmsn=1, msn=2) /
            RETH(va=0x1000, rkey=0xABCD, dma_len=payload) / Raw(bytes(range(256))[:payload]))


def out_of(pkt, port: int):
    """``pkt`` as it leaves through ``port``: the port's MACs, outer hop limit - 1."""
    out = pkt.copy()
    out[Ether].src, out[Ether].dst = port_mac(port), neighbour_mac(port)
    out[IPv6].hlim -= 1
    return out
