"""Packets for the host dataplane tests, built with scapy's IPv6/UDP and packed MRC headers.

The expected bytes are built here independently of the BPF program, from design section 3.
"""

import struct

from scapy.layers.inet6 import IPv6
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from mrckit.wire.addressing import nic_address, path_da, port_address  # noqa: F401 (re-exported)
from mrckit.wire.constants import QP_ENDPOINT_OPS, UDP_PORT_ROCEV2, Dscp, Ecn, Opcode
from mrckit.wire.ev import ev_pack

# Host A (under test): leaf 0, downlink 0. Peer B: leaf 1, downlink 2. Peer C: leaf 0, downlink 5.
A_LEAF, A_DOWN = 0, 0
B_LEAF, B_DOWN = 1, 2
C_LEAF, C_DOWN = 0, 5
NIC_A = str(nic_address(A_LEAF, A_DOWN))
NIC_B = str(nic_address(B_LEAF, B_DOWN))
NIC_C = str(nic_address(C_LEAF, C_DOWN))
PLANES = 2
T1_PER_PLANE = 4
MAC = {0: "02:00:00:00:0a:00", 1: "02:00:00:00:0a:01"}
NEIGH = {0: "02:00:00:00:f0:00", 1: "02:00:00:00:f0:01"}
NIC_DEV_MAC_SRC = "02:00:00:00:00:aa"
NIC_DEV_MAC_DST = "02:00:00:00:00:bb"
PORT_IFINDEX = 1  # test runs never redirect for real; any nonzero ifindex will do


def ip(addr: str):
    import ipaddress
    return ipaddress.IPv6Address(addr)


def port_addr(plane: int, leaf: int = A_LEAF, down: int = A_DOWN) -> str:
    return str(port_address(plane, leaf, down))


def bth(opcode: int, dqpn: int = 0x11, psn: int = 7, flags: int = 0) -> bytes:
    return struct.pack(">BBHII", opcode, 0, 0xFFFF, dqpn & 0xFFFFFF, (flags << 24) | psn)


def write_payload(opcode: int = Opcode.WRITE_ONLY, flags: int = 0, payload: bytes = b"\xab" * 64,
                  psn: int = 7, dqpn: int = 0x11) -> bytes:
    meth = struct.pack(">HH", 1, 1)
    reth = struct.pack(">QII", 0x1000, 0x55, len(payload))
    return bth(opcode, dqpn=dqpn, psn=psn, flags=flags) + meth + reth + payload + b"\x00" * 4


def seth(ev: int, m: int = 0) -> bytes:
    return struct.pack(">HhIHHIBBhQ", m << 5, 0, ev, 1, 2, 9, 0, 4, 0, 0) + struct.pack(">HHI", 0, 0, 0)


def neth(ev: int, reason: int, psn: int = 9) -> bytes:
    return struct.pack(">HBBIHHIBBH", 0, reason, 0, ev, 1, 2, psn & 0xFFFFFF, 0, 0, 0)


def plain(src: str, dst: str, l4: bytes, sport: int = 0x1234, dport: int = UDP_PORT_ROCEV2,
          tc: int = 0, fl: int = 0, chksum: int | None = 0) -> bytes:
    """An unencapsulated frame as the endpoint's socket sends it on the NIC device."""
    udp = UDP(sport=sport, dport=dport) if chksum is None else UDP(sport=sport, dport=dport, chksum=chksum)
    return bytes(Ether(src=NIC_DEV_MAC_SRC, dst=NIC_DEV_MAC_DST) /
                 IPv6(src=src, dst=dst, tc=tc, fl=fl, hlim=64) / udp / l4)


def encapped(inner_src: str, inner_dst: str, l4: bytes, *, ev: int, outer_tc: int, inner_tc: int,
             inner_fl: int | None = None, outer_src: str | None = None,
             outer_dst: str = "fcbb:bb00:1c02::", dport: int = UDP_PORT_ROCEV2,
             eth_src: str = NEIGH[0], eth_dst: str = MAC[0], chksum: int | None = 0) -> bytes:
    """An encapsulated frame: Ether | outer IPv6 (nh 41) | inner IPv6 | UDP | l4.
    ``chksum=None`` computes a valid UDP checksum."""
    udp = UDP(sport=ev >> 16, dport=dport) if chksum is None else UDP(sport=ev >> 16, dport=dport, chksum=chksum)
    inner = (IPv6(src=inner_src, dst=inner_dst, tc=inner_tc,
                  fl=ev & 0xFFFF if inner_fl is None else inner_fl, hlim=64) / udp / l4)
    outer = IPv6(src=outer_src or port_addr(0, B_LEAF, B_DOWN), dst=outer_dst, tc=outer_tc,
                 fl=ev & 0xFFFF, nh=41, hlim=64)
    return bytes(Ether(src=eth_src, dst=eth_dst) / outer / inner)


def tclass(dscp: int, ecn: int = Ecn.NOT_ECT) -> int:
    return (int(dscp) << 2) | int(ecn)


def expected_encap(frame: bytes, ev: int, dscp: int, ecn: int, dst_leaf: int, dst_down: int) -> bytes:
    """What tc egress must emit for ``frame`` on EV ``ev`` (design 3.1 and 3.3)."""
    pkt = Ether(frame)
    inner = pkt[IPv6]
    inner.tc, inner.fl = tclass(dscp, ecn), ev & 0xFFFF
    old_ck = inner[UDP].chksum
    inner[UDP].sport = ev >> 16
    if old_ck:
        del inner[UDP].chksum  # scapy recomputes it, as bpf_l4_csum_replace must
    plane, t1 = ev >> 28, (ev >> 20) & 0xFF
    outer = IPv6(src=port_addr(plane), dst=str(path_da(plane, t1, A_LEAF, dst_leaf, dst_down)),
                 tc=tclass(dscp, ecn), fl=ev & 0xFFFF, nh=41, hlim=64)
    return bytes(Ether(src=MAC[plane], dst=NEIGH[plane]) / outer / IPv6(bytes(inner)))


__all__ = ["Dscp", "Ecn", "Opcode", "QP_ENDPOINT_OPS"]


def configure_host_a(dp, mode: str = "srv6", **policy) -> None:
    """Configure a loaded ``HostDataplane`` as host A (leaf A_LEAF, downlink A_DOWN, PLANES
    plane ports on PORT_IFINDEX, default locator, agent on AGENT_UDP_PORT, forwarding ``mode``),
    marked configured; ``policy`` goes to ``set_host`` (path_retire, pinned, min_active).
    Shared by the host BPF tests and ``bench/host_spray.py``."""
    from mrckit.host.dataplane import PortSetting, addr_bytes, mac_bytes
    from mrckit.wire.constants import AGENT_UDP_PORT
    from mrckit.wire.usid import DEFAULT_LOCATOR

    dp.set_host(NIC_A, DEFAULT_LOCATOR, A_LEAF, A_DOWN, PLANES, AGENT_UDP_PORT, mode, **policy)
    for plane in range(PLANES):
        dp.set_port(PortSetting(plane, PORT_IFINDEX, mac_bytes(MAC[plane]), mac_bytes(NEIGH[plane]),
                                addr_bytes(port_addr(plane))))
    dp.set_configured(True)


def sack_frame(ev: int, ack_psn: int, peer: str = NIC_B, ecmp: bool = False) -> bytes:
    """A SACK from ``peer`` to host a, triggered by ``ack_psn`` on ``ev``: cack_psn 3 below it,
    ack_psn_offset +3, as it reaches host a's XDP (encapsulated; ``ecmp``: plain, EV-hash mode)."""
    seth_ = struct.pack(">HhIHHIBBhQ", 0, 3, ev, 0, 0, (ack_psn - 3) & 0xFFFFFF, 0, 4, 0, 0)
    l4 = bth(Opcode.SACK, dqpn=0x77) + seth_ + bytes(8)
    peer_ev, tc = ev_pack(0, 3, 0xABCDE), tclass(Dscp.CONTROL)
    if ecmp:
        return plain(peer, NIC_A, l4, sport=peer_ev >> 16, fl=peer_ev & 0xFFFF, tc=tc)
    return encapped(peer, NIC_A, l4, ev=peer_ev, outer_tc=tc, inner_tc=tc)


def sent_ev(out: bytes) -> int:
    """The EV tc egress put on a frame it redirected (UDP source port, flow label)."""
    frame = Ether(out)
    return (frame[UDP].sport << 16) | (frame.payload.fl & 0xFFFF)


def deliver_later(dp, psn: int, dst: str = NIC_B, dqpn: int = 0x42, ecmp: bool = False) -> int:
    """PSN ``psn`` sent to ``dst`` now and SACKed: a packet sent after every earlier one was
    delivered, so a retransmission of an earlier PSN is a loss, not a stall (the RACK rule of
    loss retirement, docs/host.md). Returns the EV it went on."""
    res = dp.egress.test_run(plain(NIC_A, dst, write_payload(psn=psn, dqpn=dqpn)))
    assert res.retval == 7  # TC_ACT_REDIRECT
    ev = sent_ev(res.data)
    assert dp.ingress.test_run(sack_frame(ev, psn, peer=dst, ecmp=ecmp)).retval == 2  # XDP_PASS
    return ev
