"""The endpoint's struct codecs and incremental ICRC against the scapy layers and the reference
ICRC of mrckit.wire: build with one, parse with the other, both ways."""

import os

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw

from mrckit.endpoint.icrc import IcrcContext
from mrckit.wire.constants import BTH_FLAG_ACKREQ, BTH_FLAG_RTX, BTH_FLAG_TS, Opcode
from mrckit.wire.headers import (
    Nack, Sack, pack_bth, pack_data_headers, pack_nack, pack_probe, pack_sack, parse_bth,
    parse_data_headers, parse_nack, parse_probe, parse_sack,
)
from mrckit.wire.icrc import ICRC, icrc_compute
from mrckit.wire.layers import CCState, ImmDt, METH, MrcBTH, NETH, PETH, RETH, SETH, TSETH, dissect

A, B = "2001:db8:100:1::1", "2001:db8:100:1::2"


def _inner(udp_payload: bytes, sport: int = 0x1234, tc: int = 0x28, fl: int = 0xABCDE) -> bytes:
    return bytes(IPv6(src=A, dst=B, tc=tc, fl=fl, hlim=7) / UDP(sport=sport, dport=4791, chksum=0)
                 / Raw(udp_payload))


def _udp_payload(pkt) -> bytes:
    return bytes(IPv6(src=A, dst=B) / UDP(sport=4791, dport=4791) / pkt)[48:]


@pytest.mark.parametrize("opcode,ts", [(Opcode.WRITE_FIRST, True), (Opcode.WRITE_MIDDLE, False),
                                       (Opcode.WRITE_LAST_IMM, True), (Opcode.WRITE_ONLY_IMM, False)])
def test_data_packet_struct_to_scapy(opcode, ts):
    buf = bytearray(64)
    flags = BTH_FLAG_ACKREQ | BTH_FLAG_RTX | (BTH_FLAG_TS if ts else 0)
    pack_bth(buf, opcode, flags, 0xABCDEF, 0x123456)
    hlen = pack_data_headers(buf, opcode, 7, 9, 0x4321 if ts else None, 0x1122334455667788, 0xCAFE, 2048, 0xDEAD)
    payload = os.urandom(2048)
    body = bytes(buf[:hlen]) + payload
    crc = IcrcContext(A, B).compute(body, total=len(body) + 4)
    pkt = dissect(_inner(body + ICRC.pack(crc)), IPv6)
    bth = pkt[MrcBTH]
    assert (bth.opcode, bth.dqpn, bth.psn, bth.ackreq, bth.rtx, bth.ts) == (opcode, 0xABCDEF, 0x123456, 1, 1, int(ts))
    assert (pkt[METH].rqmsn, pkt[METH].msn) == (7, 9)
    assert (pkt[RETH].va, pkt[RETH].rkey, pkt[RETH].dma_len) == (0x1122334455667788, 0xCAFE, 2048)
    assert pkt.haslayer(TSETH) == ts
    if ts:
        assert pkt[TSETH].tx_timestamp == 0x4321
    if opcode in (Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM):
        assert pkt[ImmDt].imm == 0xDEAD
    # the reference ICRC over the whole inner packet agrees with the incremental one
    raw = bytes(pkt)
    assert icrc_compute(raw[:-4]) == crc == ICRC.unpack(raw[-4:])[0]


def test_data_packet_scapy_to_struct():
    pkt = (MrcBTH(opcode=Opcode.WRITE_LAST_IMM, dqpn=0x200, psn=0xFFFFFE, rtx=1) / METH(rqmsn=3, msn=4)
           / TSETH(tx_timestamp=99) / RETH(va=0x1000, rkey=0x77, dma_len=5) / ImmDt(imm=0x42) / Raw(b"hello"))
    data = _udp_payload(pkt)
    bth = parse_bth(data)
    assert (bth.opcode, bth.dqpn, bth.psn) == (Opcode.WRITE_LAST_IMM, 0x200, 0xFFFFFE)
    assert bth.flags & BTH_FLAG_RTX and bth.flags & BTH_FLAG_TS
    hdr = parse_data_headers(data, bth.opcode, bth.flags, len(data) - 4)
    assert (hdr.rqmsn, hdr.msn, hdr.ts, hdr.va, hdr.rkey, hdr.dma_len, hdr.imm) == (3, 4, 99, 0x1000, 0x77, 5, 0x42)
    assert data[hdr.hdr_len:-4] == b"hello"
    assert IcrcContext(A, B).check(bytearray(data), len(data))
    # the ICRC masks the UDP source port (the EV), traffic class, flow label and hop limit
    assert icrc_compute(_inner(data[:-4], sport=1)) == icrc_compute(_inner(data[:-4], sport=0xBEEF, tc=0, fl=0))


def test_data_headers_short_for_opcode():
    pkt = _udp_payload(MrcBTH(opcode=Opcode.WRITE_ONLY_IMM, dqpn=1, psn=1) / METH() / RETH())
    bth = parse_bth(pkt)
    assert parse_data_headers(pkt, bth.opcode, bth.flags, len(pkt) - 4) is None


def test_sack_both_ways():
    s = Sack(m=2, pr=True, ack_psn=5, ev=0xDEADBEEF, cack_psn=0xFFFFFF, mpr=8, sack_base=0,
             bitmap=0x8000_0000_0000_0001, tx_ts=0x1234, ooo_count=77, rcvd_bytes_units=0x123456)
    buf = bytearray(64)
    n = pack_sack(buf, 0x100, s)
    pkt = MrcBTH(bytes(buf[:n]) + b"\0" * 4)
    seth, cc = pkt[SETH], pkt[CCState]
    assert (pkt.opcode, pkt.dqpn) == (Opcode.SACK, 0x100)
    assert (seth.m, seth.pr, seth.ev, seth.cack_psn, seth.mpr) == (2, 1, 0xDEADBEEF, 0xFFFFFF, 8)
    assert (seth.ack_psn_offset, seth.sack_offset, seth.sack_bitmap) == (6, 1, 0x8000_0000_0000_0001)
    assert (cc.tx_timestamp, cc.ooo_count, cc.rcvd_bytes) == (0x1234, 77, 0x123456)
    again = _udp_payload(MrcBTH(dqpn=0x100) / SETH(m=1, ack_psn_offset=-3, ev=7, cack_psn=10, mpr=8,
                                                   sack_offset=2, sack_bitmap=3) / CCState(tx_timestamp=5))
    p = parse_sack(again)
    assert (p.m, p.pr, p.ack_psn, p.ev, p.cack_psn, p.sack_base, p.bitmap, p.tx_ts) == (1, False, 7, 7, 10, 12, 3, 5)


def test_nack_and_probe_both_ways():
    buf = bytearray(64)
    n = pack_nack(buf, 0x100, Nack(0x0B, 0xCAFEF00D, 0xABCDEF, 0x55))
    pkt = MrcBTH(bytes(buf[:n]) + b"\0" * 4)
    assert (pkt.opcode, pkt[NETH].nack_reason, pkt[NETH].ev, pkt[NETH].nack_psn, pkt[NETH].tx_timestamp) == (
        Opcode.NACK, 0x0B, 0xCAFEF00D, 0xABCDEF, 0x55)
    data = _udp_payload(MrcBTH(dqpn=3) / NETH(nack_reason=1, ev=9, nack_psn=8, tx_timestamp=4))
    assert parse_nack(data) == Nack(1, 9, 8, 4)
    n = pack_probe(buf, 0x100, 0x4242, 0x99)
    pkt = MrcBTH(bytes(buf[:n]) + b"\0" * 4)
    assert (pkt.opcode, pkt[PETH].probe_id, pkt[PETH].tx_timestamp, pkt[PETH].ts_format) == (Opcode.PROBE, 0x4242, 0x99, 1)
    assert parse_probe(_udp_payload(MrcBTH(dqpn=3) / PETH(probe_id=5, tx_timestamp=6))) == (5, 6)


def test_icrc_detects_a_flipped_payload_bit():
    data = bytearray(_udp_payload(MrcBTH(opcode=Opcode.WRITE_ONLY, dqpn=1) / METH() / RETH(dma_len=4) / Raw(b"abcd")))
    ctx = IcrcContext(A, B)
    assert ctx.check(data, len(data))
    data[-6] ^= 1
    assert not ctx.check(data, len(data))
    assert not IcrcContext(B, A).check(bytes(_udp_payload(MrcBTH(dqpn=1))), 16)
