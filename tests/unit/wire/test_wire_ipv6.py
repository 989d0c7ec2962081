"""The Ethernet, IPv6 and UDP builders of mrckit.wire.ipv6 against scapy (the oracle): the
headers byte for byte, and whole frames against mrckit.wire.packet.mrc_frame, which applies
the EV with scapy's layers. Also the masked headers the incremental ICRC starts from."""

import ipaddress
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrckit.wire.constants import (IPPROTO_UDP, IPV6_LEN, UDP_LEN, UDP_PORT_ROCEV2, Dscp, Ecn,
                                   EpOp, Opcode)
from mrckit.wire.ev import ev_to_wire
from mrckit.wire.headers import ep_request
from mrckit.wire.icrc import icrc_check, icrc_compute, masked_headers
from mrckit.wire.ipv6 import (encapsulate, eth_header, ipv6_header, mrc_udp_packet, traffic_class,
                              udp_header)
from mrckit.wire.layers import ERTH, MrcBTH
from mrckit.wire.packet import mrc_frame

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
u8, u16, u20, u32 = (st.integers(0, (1 << b) - 1) for b in (8, 16, 20, 32))
addrs = st.binary(min_size=16, max_size=16)
macs = st.binary(min_size=6, max_size=6)
untrimmed = st.sampled_from([d for d in Dscp if d not in (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP)])


def _text(packed: bytes) -> str:
    return str(ipaddress.IPv6Address(packed))


def _mac(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


@SETTINGS
@given(addrs, addrs, u16, u8, u8, u20, u8)
def test_ipv6_header_matches_scapy(src, dst, plen, nh, tc, fl, hlim):
    oracle = bytes(IPv6(src=_text(src), dst=_text(dst), plen=plen, nh=nh, tc=tc, fl=fl, hlim=hlim))
    assert ipv6_header(src, dst, plen, nh, tc=tc, flow_label=fl, hop_limit=hlim) == oracle


@pytest.mark.parametrize("tc,fl", [(0x100, 0), (0, 0x100000), (-1, 0)])
def test_ipv6_header_rejects_wide_fields(tc, fl):
    with pytest.raises(ValueError, match="wider than 8 or 20 bits"):
        ipv6_header(bytes(16), bytes(16), 0, IPPROTO_UDP, tc=tc, flow_label=fl, hop_limit=64)


@SETTINGS
@given(u16, u16, u16, u16)
def test_udp_header_matches_scapy(sport, dport, length, chksum):
    oracle = bytes(UDP(sport=sport, dport=dport, len=length, chksum=chksum))
    assert udp_header(sport, dport, length, chksum) == oracle


@SETTINGS
@given(macs, macs, u16)
def test_eth_header_matches_scapy(dst, src, ethertype):
    assert eth_header(dst, src, ethertype) == bytes(Ether(dst=_mac(dst), src=_mac(src), type=ethertype))
    assert eth_header(dst, src)[12:] == b"\x86\xdd"


@pytest.mark.parametrize("dscp,ecn", [(Dscp.CONTROL, Ecn.NOT_ECT), (Dscp.TRIMMABLE, Ecn.ECT0), (63, 3)])
def test_traffic_class_reads_back_as_dscp_and_ecn(dscp, ecn):
    ip = IPv6(ipv6_header(bytes(16), bytes(16), 0, IPPROTO_UDP, tc=traffic_class(dscp, ecn), flow_label=0,
                          hop_limit=1))
    assert (ip.tc >> 2, ip.tc & 3) == (dscp, ecn)


def _l4(probe_id: int, resp_ev: int):
    """An EP_REQ twice: scapy layers (ICRC computed when built on IPv6/UDP) and codec bytes."""
    layers = MrcBTH(opcode=Opcode.EP_REQ, dqpn=2, ts=0) / ERTH(op=EpOp.EV_PROBE, probe_id=probe_id,
                                                               resp_ev=resp_ev, tx_timestamp=7)
    return layers, ep_request(EpOp.EV_PROBE, probe_id, 0, resp_ev, 7)


@SETTINGS
@given(addrs, addrs, addrs, addrs, macs, macs, u32, u16, untrimmed, st.sampled_from(list(Ecn)))
def test_frames_match_mrc_frame(nic, peer, port, da, mac, neigh, ev, probe_id, dscp, ecn):
    # Untrimmed classes only: a sender's packet always carries its ICRC; only a switch trims.
    layers, l4 = _l4(probe_id, ev)
    tc = traffic_class(dscp, ecn)
    inner = mrc_udp_packet(nic, peer, ev, l4, tc=tc)
    common = dict(ev=ev, inner_src=_text(nic), inner_dst=_text(peer), dscp=dscp, ecn=ecn,
                  src_mac=_mac(mac), dst_mac=_mac(neigh))
    plain = bytes(mrc_frame(layers.copy(), **common))
    encapped = bytes(mrc_frame(layers.copy(), outer_src=_text(port), outer_dst=_text(da), **common))
    assert eth_header(neigh, mac) + inner == plain
    assert eth_header(neigh, mac) + encapsulate(port, da, ev, inner, tc=tc) == encapped


@SETTINGS
@given(addrs, addrs, u32, st.binary(min_size=12, max_size=64))
def test_mrc_udp_packet_applies_the_ev_and_the_icrc(src, dst, ev, l4):
    pkt = mrc_udp_packet(src, dst, ev, l4, tc=0)
    ip = IPv6(pkt)
    assert (ip.fl, ip[UDP].sport, ip[UDP].dport, ip[UDP].chksum) == (*ev_to_wire(ev), UDP_PORT_ROCEV2, 0)
    assert ip.plen == ip[UDP].len == UDP_LEN + len(l4) + 4
    assert icrc_check(pkt)


def test_encapsulate_rejects_an_ev_outside_32_bits():
    with pytest.raises(ValueError, match="ev="):
        encapsulate(bytes(16), bytes(16), 1 << 32, b"", tc=0)


@SETTINGS
@given(addrs, addrs, u8, u20, u8, u16, st.binary(min_size=12, max_size=64))
def test_masked_headers_start_the_reference_icrc(src, dst, tc, fl, hlim, sport, rest):
    udp_len = UDP_LEN + len(rest) + 4
    hdrs = ipv6_header(src, dst, udp_len, IPPROTO_UDP, tc=tc, flow_label=fl, hop_limit=hlim)
    hdrs += udp_header(sport, UDP_PORT_ROCEV2, udp_len, 0x1234)
    rest = rest[:4] + b"\xff" + rest[5:]  # BTH byte 4 is masked by the reference, not here
    assert zlib.crc32(rest, zlib.crc32(masked_headers(hdrs))) == icrc_compute(hdrs + rest)


def test_masked_headers_need_exactly_ipv6_and_udp():
    with pytest.raises(ValueError, match="48 bytes"):
        masked_headers(bytes(IPV6_LEN))
