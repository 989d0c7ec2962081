"""Golden bytes: mrckit builds exactly the hand-written frames of wire_golden.py, and parses
them back to the same fields (design section 3)."""

import ipaddress

import pytest
from scapy.packet import Raw

from mrckit.wire import (
    ev_pack, ev_to_wire, ev_unpack, container_pack, container_unpack, active_prefix, path_da,
    un_shift, UsidRole, usid_pack,
)
from mrckit.wire.constants import Dscp, Ecn, EpOp, EpStatus, MultipathState, NackReason, Opcode
from mrckit.wire.layers import CCState, EETH, ERTH, METH, MrcBTH, NETH, PETH, RETH, SETH, dissect
from mrckit.wire.packet import mrc_frame

from support.wire_golden import GOLDEN, frame

REQ_NIC, RSP_NIC = "2001:db8:100:0::1", "2001:db8:100:1::3"
REQ_PORT_P1 = "2001:db8:201:0::1"
PATH = "fcbb:bb00:1400:1802:1401:1c02::"
FWD_EV, REV_EV, RESP_EV = 0x10234567, 0x10500001, 0x20300042
FWD = dict(ev=FWD_EV, inner_src=REQ_NIC, inner_dst=RSP_NIC)
REV = dict(ev=REV_EV, inner_src=RSP_NIC, inner_dst=REQ_NIC, dscp=Dscp.CONTROL, ecn=Ecn.NOT_ECT)


def build(name: str) -> bytes:
    if name == "WRITE_ONLY":
        return bytes(mrc_frame(
            MrcBTH(opcode=Opcode.WRITE_ONLY, dqpn=0x123, ackreq=1, psn=0x456)
            / METH(rqmsn=1, msn=2) / RETH(va=0x7F0000001000, rkey=0xCAFE0001, dma_len=8)
            / Raw(b"MRCdata!"),
            outer_src=REQ_PORT_P1, outer_dst=PATH, dscp=Dscp.TRIMMABLE, ecn=Ecn.ECT0, **FWD))
    if name == "SACK":
        return bytes(mrc_frame(
            MrcBTH(dqpn=0x77) / SETH(m=MultipathState.SKIP_ONCE, ack_psn_offset=-2, ev=FWD_EV,
                                     spdcid=0x11, dpdcid=0x22, cack_psn=0x450, mpr=4,
                                     sack_offset=2, sack_bitmap=0xA000000000000001)
            / CCState(tx_timestamp=0x1234, ooo_count=3, restore_cwnd=1, rcv_cwnd_pen=5,
                      rcvd_bytes=0x100), **REV))
    if name == "NACK_TRIMMED":
        return bytes(mrc_frame(
            MrcBTH(dqpn=0x77) / NETH(nack_reason=NackReason.TRIMMED, ev=FWD_EV, spdcid=0x11,
                                     dpdcid=0x22, nack_psn=0x456, tx_timestamp=0x1234), **REV))
    if name == "PROBE":
        return bytes(mrc_frame(
            MrcBTH(dqpn=0x123) / PETH(probe_id=7, spdcid=0x11, dpdcid=0x22, tx_timestamp=0x2345),
            dscp=Dscp.CONTROL, ecn=Ecn.NOT_ECT, **FWD))
    if name == "EP_REQ":
        return bytes(mrc_frame(
            MrcBTH(dqpn=2) / ERTH(op=EpOp.EV_PROBE, probe_id=9, port_status_mask=0xF,
                                  resp_ev=RESP_EV, tx_timestamp=0x3456),
            outer_src=REQ_PORT_P1, outer_dst=PATH, dscp=Dscp.CONTROL, ecn=Ecn.NOT_ECT, **FWD))
    if name == "EP_RESP":
        return bytes(mrc_frame(
            MrcBTH(dqpn=2) / EETH(op=EpOp.EV_PROBE, status=EpStatus.OK, probe_id=9, req_ev=FWD_EV,
                                  req_tx_timestamp=0x3456, service_time=16),
            ev=RESP_EV, inner_src=RSP_NIC, inner_dst=REQ_NIC, dscp=Dscp.CONTROL, ecn=Ecn.NOT_ECT))
    raise KeyError(name)


@pytest.mark.parametrize("name", list(GOLDEN))
def test_build_matches_golden(name):
    assert build(name).hex() == frame(GOLDEN[name]).hex()


@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden_dissects_and_rebuilds(name):
    pkt = dissect(frame(GOLDEN[name]))
    assert Raw not in pkt or name == "WRITE_ONLY"
    assert pkt[MrcBTH].icrc == int.from_bytes(bytes.fromhex(GOLDEN[name]["icrc"]), "little")
    assert bytes(pkt) == frame(GOLDEN[name])


def test_golden_fields_read_back():
    data = dissect(frame(GOLDEN["WRITE_ONLY"]))
    assert data[MrcBTH].opcode == Opcode.WRITE_ONLY and data[MrcBTH].psn == 0x456
    assert (data[RETH].va, data[RETH].rkey, data[RETH].dma_len) == (0x7F0000001000, 0xCAFE0001, 8)
    assert data[Raw].load == b"MRCdata!"
    sack = dissect(frame(GOLDEN["SACK"]))
    assert (sack[SETH].ev, sack[SETH].m, sack[SETH].ack_psn_offset) == (FWD_EV, 1, -2)
    assert sack[SETH].sack_bitmap == 0xA000000000000001 and sack[CCState].rcv_cwnd_pen == 5
    assert dissect(frame(GOLDEN["NACK_TRIMMED"]))[NETH].nack_reason == NackReason.TRIMMED
    assert dissect(frame(GOLDEN["EP_REQ"]))[ERTH].resp_ev == RESP_EV
    assert dissect(frame(GOLDEN["EP_RESP"]))[EETH].req_ev == FWD_EV


def test_echoed_ev_sits_4_bytes_after_bth():
    for name, offset in (("SACK", 14 + 40 + 8 + 12 + 4), ("NACK_TRIMMED", 14 + 40 + 8 + 12 + 4)):
        assert frame(GOLDEN[name])[offset:offset + 4] == bytes.fromhex("10234567")


# uSID DA after every hop of host -> T0(1,0) -> T1(1,2) -> T0(1,1) -> host (leaf 1, downlink 2).
HOPS = [
    # (switch uSID the DA must match, DA as it arrives there), hand-written
    (0x1400, "fcbb:bb00:1400:1802:1401:1c02::"),
    (0x1802, "fcbb:bb00:1802:1401:1c02::"),
    (0x1401, "fcbb:bb00:1401:1c02::"),
]
AT_HOST = "fcbb:bb00:1c02::"


def test_usid_da_after_every_hop():
    da = int(path_da(plane=1, t1=2, src_leaf=0, dst_leaf=1, dst_downlink=2))
    assert ipaddress.IPv6Address(da) == ipaddress.IPv6Address(PATH)
    for usid, expected in HOPS:
        assert ipaddress.IPv6Address(da) == ipaddress.IPv6Address(expected)
        assert active_prefix(da) == (0xFCBBBB00 << 16) | usid  # my_usid key: locator + uSID
        da = un_shift(da)
    assert ipaddress.IPv6Address(da) == ipaddress.IPv6Address(AT_HOST)
    assert active_prefix(da) == 0xFCBBBB001C02  # the last T0's usid_fib key -> downlink port
    assert ipaddress.IPv6Address(un_shift(da)) == ipaddress.IPv6Address("fcbb:bb00::")
    assert container_unpack(un_shift(da)) == (0xFCBBBB00, [])


def test_usid_values_by_hand():
    assert usid_pack(1, UsidRole.T0, 0) == 0x1400
    assert usid_pack(1, UsidRole.T1, 2) == 0x1802
    assert usid_pack(1, UsidRole.DOWN, 2) == 0x1C02
    assert usid_pack(15, UsidRole.DOWN, 1023) == 0xFFFF
    assert usid_pack(0, UsidRole.T0, 0) == 0x0400
    assert container_pack([0x1401, 0x1C02]) == 0xFCBBBB00_1401_1C02_0000_0000_0000_0000
    assert container_pack([1, 2, 3, 4, 5, 6], locator=0xFCBBBB01) == 0xFCBBBB01_0001_0002_0003_0004_0005_0006
    same_leaf = path_da(plane=1, t1=9, src_leaf=1, dst_leaf=1, dst_downlink=2)
    assert same_leaf == ipaddress.IPv6Address("fcbb:bb00:1401:1c02::")


# EV packing at the field boundaries: (plane, t1, salt) -> EV -> (flow label, UDP sport), by hand.
EV_CASES = [
    (0, 0, 0, 0x00000000, 0x0000, 0x0000),
    (0, 0, 1, 0x00000001, 0x0001, 0x0000),
    (0, 0, 0xFFFFF, 0x000FFFFF, 0xFFFF, 0x000F),
    (0, 1, 0, 0x00100000, 0x0000, 0x0010),
    (0, 255, 0, 0x0FF00000, 0x0000, 0x0FF0),
    (1, 0, 0, 0x10000000, 0x0000, 0x1000),
    (15, 0, 0, 0xF0000000, 0x0000, 0xF000),
    (15, 255, 0xFFFFF, 0xFFFFFFFF, 0xFFFF, 0xFFFF),
    (1, 2, 0x34567, 0x10234567, 0x4567, 0x1023),
]


@pytest.mark.parametrize("plane,t1,salt,ev,flow_label,sport", EV_CASES)
def test_ev_boundaries(plane, t1, salt, ev, flow_label, sport):
    assert ev_pack(plane, t1, salt) == ev
    assert tuple(ev_unpack(ev)) == (plane, t1, salt)
    assert ev_to_wire(ev) == (flow_label, sport)


@pytest.mark.parametrize("kwargs,field", [
    (dict(plane=16, t1=0, salt=0), "plane=16 is out of range 0..15"),
    (dict(plane=-1, t1=0, salt=0), "plane=-1 is out of range 0..15"),
    (dict(plane=0, t1=256, salt=0), "t1=256 is out of range 0..255"),
    (dict(plane=0, t1=0, salt=0x100000), "salt=1048576 is out of range 0..1048575"),
])
def test_ev_out_of_range_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        ev_pack(**kwargs)


def test_ev_on_the_wire_at_the_top_boundary():
    raw = bytes(mrc_frame(MrcBTH(dqpn=1) / PETH(), ev=0xFFFFFFFF, inner_src=REQ_NIC,
                          inner_dst=RSP_NIC, dscp=Dscp.CONTROL, ecn=Ecn.NOT_ECT))
    assert raw[14:18].hex() == "6b80ffff"      # version 6, tc 0xb8, flow label 0x0ffff
    assert raw[54:56].hex() == "ffff"          # UDP source port
    with pytest.raises(ValueError, match="ev=4294967296 is out of range"):
        mrc_frame(MrcBTH(), ev=1 << 32, inner_src=REQ_NIC, inner_dst=RSP_NIC)
