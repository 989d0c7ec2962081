"""The struct codecs of mrckit.wire.headers against the scapy layers of mrckit.wire.layers (the
oracle): what one packs the other builds byte for byte, what scapy builds the codecs parse back,
and pack then parse is the identity."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.packet import Raw

from mrckit.wire.constants import (
    BTH_FLAG_TS, BTH_LEN, ICRC_LEN, IMM_OPCODES, PSN_MOD, QP_ENDPOINT_OPS, SETH_OFFSET_MAX,
    TIME_UNIT_NS, WRITE_OPCODES, Opcode,
)
from mrckit.wire.headers import (
    EP_REQ_LEN, EP_RESP_LEN, NACK_LEN, PROBE_LEN, SACK_LEN, Bth, DataHeader, EpRequest, EpResponse,
    Nack, Sack, bth_header, data_header_len, data_tx_timestamp, ep_request, ep_response,
    pack_bth, pack_data_headers, pack_data_packet, pack_nack, pack_probe, pack_sack, parse_bth,
    parse_data_headers, parse_ep, parse_nack, parse_probe, parse_sack, timestamp_units,
    unwrap_timestamp,
)
from mrckit.wire.layers import (
    CCState, EETH, ERTH, ImmDt, METH, MrcBTH, NETH, PETH, RETH, SETH, TSETH,
)

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
u8, u16, u24, u32, u64 = (st.integers(0, (1 << b) - 1) for b in (8, 16, 24, 32, 64))
write_opcodes = st.sampled_from(sorted(WRITE_OPCODES))
offsets = st.integers(-SETH_OFFSET_MAX - 1, SETH_OFFSET_MAX)


def _scapy_bth(opcode: int, flags: int, dqpn: int, psn: int, **kw) -> MrcBTH:
    """The scapy BTH with byte 8 split into its named bits (AckReq r rtx ts reserved)."""
    return MrcBTH(opcode=opcode, dqpn=dqpn, psn=psn, ackreq=flags >> 7, resv1=flags >> 6 & 1,
                  rtx=flags >> 5 & 1, ts=flags >> 4 & 1, resv4=flags & 0xF, **kw)


def _wire(pkt) -> bytes:
    """Bytes of a scapy MRC stack without the ICRC trailer (0 here: no IPv6/UDP below)."""
    raw = bytes(pkt)
    assert raw[-ICRC_LEN:] == bytes(ICRC_LEN)
    return raw[:-ICRC_LEN]


@SETTINGS
@given(u8, u8, u24, u24)
def test_bth_matches_scapy(opcode, flags, dqpn, psn):
    buf = bytearray(BTH_LEN + 3)
    pack_bth(buf, opcode, flags, dqpn, psn, off=3)
    oracle = _wire(_scapy_bth(opcode, flags, dqpn, psn))
    assert bytes(buf[3:]) == bth_header(opcode, flags, dqpn, psn) == oracle
    assert parse_bth(buf, 3) == parse_bth(oracle) == Bth(opcode, flags, dqpn, psn)


def test_bth_wraps_the_psn_and_keeps_the_qp_to_24_bits():
    assert parse_bth(bth_header(Opcode.SACK, 0, 0x1ABCDEF, PSN_MOD + 5)) == Bth(Opcode.SACK, 0, 0xABCDEF, 5)


@SETTINGS
@given(write_opcodes, u8, u24, u24, u16, u16, u16, u64, u32, u32, u32)
def test_data_packet_matches_scapy(opcode, flags, dqpn, psn, rqmsn, msn, ts, va, rkey, dma_len, imm):
    flags |= BTH_FLAG_TS
    has_imm = opcode in IMM_OPCODES
    buf = bytearray(64)
    n = pack_data_packet(buf, opcode, flags, dqpn, psn, rqmsn, msn, ts, va, rkey, dma_len,
                         imm if has_imm else None)
    stack = (_scapy_bth(opcode, flags, dqpn, psn) / METH(rqmsn=rqmsn, msn=msn)
             / TSETH(tx_timestamp=ts) / RETH(va=va, rkey=rkey, dma_len=dma_len))
    oracle = _wire(stack / ImmDt(imm=imm) if has_imm else stack)
    assert bytes(buf[:n]) == oracle and n == data_header_len(opcode, True)
    payload = oracle + b"data"
    assert parse_data_headers(payload, opcode, flags, len(payload)) == DataHeader(
        rqmsn, msn, ts, va, rkey, dma_len, imm if has_imm else None, n)
    assert data_tx_timestamp(payload, len(payload)) == ts


@SETTINGS
@given(write_opcodes, u8, u24, u24, u16, u16, u64, u32, u32, u32)
def test_data_headers_without_tseth_match_scapy(opcode, flags, dqpn, psn, rqmsn, msn, va, rkey, dma_len, imm):
    flags &= ~BTH_FLAG_TS
    has_imm = opcode in IMM_OPCODES
    buf = bytearray(64)
    pack_bth(buf, opcode, flags, dqpn, psn)
    n = pack_data_headers(buf, opcode, rqmsn, msn, None, va, rkey, dma_len, imm)
    stack = (_scapy_bth(opcode, flags, dqpn, psn) / METH(rqmsn=rqmsn, msn=msn)
             / RETH(va=va, rkey=rkey, dma_len=dma_len))
    assert bytes(buf[:n]) == _wire(stack / ImmDt(imm=imm) if has_imm else stack)
    assert parse_data_headers(buf, opcode, flags, n) == DataHeader(
        rqmsn, msn, None, va, rkey, dma_len, imm if has_imm else None, n)
    assert data_tx_timestamp(buf, n) is None


def test_data_headers_with_tseth_and_short_packets():
    buf = bytearray(64)
    pack_bth(buf, Opcode.WRITE_ONLY_IMM, BTH_FLAG_TS, 1, 2)
    n = pack_data_headers(buf, Opcode.WRITE_ONLY_IMM, 1, 2, 0x1234, 0x10, 0x20, 3, None)
    assert n == data_header_len(Opcode.WRITE_ONLY_IMM, True)
    assert parse_data_headers(buf, Opcode.WRITE_ONLY_IMM, BTH_FLAG_TS, n) == DataHeader(
        1, 2, 0x1234, 0x10, 0x20, 3, 0, n)
    assert parse_data_headers(buf, Opcode.WRITE_ONLY_IMM, BTH_FLAG_TS, n - 1) is None
    assert data_tx_timestamp(buf, BTH_LEN + 7) is None
    assert data_tx_timestamp(bth_header(Opcode.SACK, BTH_FLAG_TS, 1, 2) + bytes(8), 20) is None


@SETTINGS
@given(st.integers(0, 3), st.booleans(), u24, offsets, offsets, u32, u8, u64, u16,
       st.integers(0, (1 << 15) - 1), u24, u24)
def test_sack_matches_scapy(m, pr, cack, ack_off, sack_off, ev, mpr, bitmap, tx_ts, ooo, rcvd, dqpn):
    s = Sack(m, pr, (cack + ack_off) % PSN_MOD, ev, cack, mpr, (cack + sack_off) % PSN_MOD, bitmap,
             tx_ts, ooo, rcvd)
    buf = bytearray(SACK_LEN)
    assert pack_sack(buf, dqpn, s) == SACK_LEN
    oracle = _wire(MrcBTH(opcode=Opcode.SACK, dqpn=dqpn, psn=0, ts=0)
                   / SETH(m=m, pr=int(pr), ack_psn_offset=ack_off, ev=ev, cack_psn=cack, mpr=mpr,
                          sack_offset=sack_off, sack_bitmap=bitmap)
                   / CCState(tx_timestamp=tx_ts, ooo_count=ooo, rcvd_bytes=rcvd))
    assert bytes(buf) == oracle
    assert parse_sack(oracle) == s


@pytest.mark.parametrize("field", ["ack_psn", "sack_base"])
def test_sack_offset_outside_16_bits_raises(field):
    s = Sack(0, False, 0, 0, 0, 0, 0, 0, 0, 0, 0)._replace(**{field: SETH_OFFSET_MAX + 1})
    with pytest.raises(ValueError, match="signed 16-bit offset"):
        pack_sack(bytearray(SACK_LEN), 1, s)


@SETTINGS
@given(u8, u32, u24, u16, u24)
def test_nack_matches_scapy(reason, ev, psn, tx_ts, dqpn):
    buf = bytearray(NACK_LEN)
    assert pack_nack(buf, dqpn, Nack(reason, ev, psn, tx_ts)) == NACK_LEN
    oracle = _wire(MrcBTH(opcode=Opcode.NACK, dqpn=dqpn, ts=0)
                   / NETH(nack_reason=reason, ev=ev, nack_psn=psn, tx_timestamp=tx_ts))
    assert bytes(buf) == oracle
    assert parse_nack(oracle) == Nack(reason, ev, psn, tx_ts)


@SETTINGS
@given(u16, u16, u24)
def test_probe_matches_scapy(probe_id, tx_ts, dqpn):
    buf = bytearray(PROBE_LEN)
    assert pack_probe(buf, dqpn, probe_id, tx_ts) == PROBE_LEN
    oracle = _wire(MrcBTH(opcode=Opcode.PROBE, dqpn=dqpn, ts=0) / PETH(probe_id=probe_id, tx_timestamp=tx_ts))
    assert bytes(buf) == oracle
    assert parse_probe(oracle) == (probe_id, tx_ts)


@SETTINGS
@given(st.integers(0, 3), u16, u32, u32, u16)
def test_ep_request_matches_scapy(op, probe_id, mask, resp_ev, tx_ts):
    req = ep_request(op, probe_id, mask, resp_ev, tx_ts)
    oracle = _wire(MrcBTH(opcode=Opcode.EP_REQ, dqpn=QP_ENDPOINT_OPS, ts=0)
                   / ERTH(op=op, probe_id=probe_id, port_status_mask=mask, resp_ev=resp_ev,
                          tx_timestamp=tx_ts))
    assert req == oracle and len(req) == EP_REQ_LEN
    assert parse_ep(oracle) == parse_ep(oracle + bytes(ICRC_LEN)) == EpRequest(
        op, probe_id, mask, resp_ev, tx_ts)


@SETTINGS
@given(st.integers(0, 3), st.integers(0, 3), u16, u32, u16, u16)
def test_ep_response_matches_scapy(op, status, probe_id, req_ev, req_ts, service):
    resp = ep_response(op, status, probe_id, req_ev, req_ts, service)
    oracle = _wire(MrcBTH(opcode=Opcode.EP_RESP, dqpn=QP_ENDPOINT_OPS, ts=0)
                   / EETH(op=op, status=status, probe_id=probe_id, req_ev=req_ev,
                          req_tx_timestamp=req_ts, service_time=service))
    assert resp == oracle and len(resp) == EP_RESP_LEN
    assert parse_ep(oracle) == EpResponse(op, status, probe_id, req_ev, req_ts, service)


def test_parse_ep_rejects_other_packets():
    req = ep_request(1, 2, 3, 4, 5)
    assert parse_ep(req[:EP_REQ_LEN - 1]) is None
    assert parse_ep(bth_header(Opcode.EP_REQ, 0, QP_ENDPOINT_OPS + 1, 0) + req[BTH_LEN:]) is None
    assert parse_ep(bth_header(Opcode.PROBE, 0, QP_ENDPOINT_OPS, 0) + req[BTH_LEN:]) is None
    assert parse_ep(_wire(MrcBTH(opcode=Opcode.EP_REQ, dqpn=QP_ENDPOINT_OPS) / Raw(bytes(4)))) is None


def test_ep_fields_wrap_to_their_widths():
    assert parse_ep(ep_request(5, 0x10001, 1 << 32 | 7, 9, 0x10002)) == EpRequest(1, 1, 7, 9, 2)
    assert parse_ep(ep_response(4, 6, 0x10001, 9, 0x10002, 0x10003)) == EpResponse(0, 2, 1, 9, 2, 3)


@SETTINGS
@given(st.integers(0, 1 << 62), st.integers(0, 0xFFFF * TIME_UNIT_NS))
def test_timestamps_wrap_and_unwrap(now_ns, age_ns):
    sent_ns = max(0, now_ns - age_ns)
    ts = timestamp_units(sent_ns)
    assert ts == (sent_ns // TIME_UNIT_NS) % (1 << 16)
    assert unwrap_timestamp(ts, now_ns) == sent_ns // TIME_UNIT_NS * TIME_UNIT_NS
