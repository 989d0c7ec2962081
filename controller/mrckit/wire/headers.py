"""Struct codecs of the MRC transport headers, BTH through EETH (design section 3.2).

Everything here packs into caller-owned buffers with ``struct.pack_into``, or returns bytes, and
parses with ``struct.unpack_from``: these are the hot-path codecs of the endpoint and of the host
agent's endpoint operations. The scapy layers of :mod:`.layers` describe the same bytes and are
the tests' oracle; this module does not import scapy.

Offsets count from the start of the UDP payload (the BTH). All fields are big-endian. PSNs and
QPs are 24-bit, timestamps 16-bit in units of 1.024 us (``TIME_UNIT_NS``), EVs 32-bit.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .constants import (
    BTH_DEFAULT_PKEY, BTH_FLAG_TS, BTH_LEN, CC_OOO_COUNT_MASK, CC_STATE_LEN, EETH_LEN, EP_OP_MASK,
    EP_OP_SHIFT, EP_STATUS_MASK, EP_STATUS_SHIFT, ERTH_LEN, IMM_OPCODES, IMMDT_LEN, METH_LEN,
    NETH_LEN, PETH_LEN, PSN_BITS, PSN_MOD, QP_ENDPOINT_OPS, RETH_LEN, SETH_LEN, SETH_M_MASK,
    SETH_M_SHIFT, SETH_OFFSET_MAX, SETH_PR, TIME_UNIT_NS, TSETH_FORMAT, TSETH_LEN, WRITE_OPCODES, Opcode,
)

_U24 = (1 << PSN_BITS) - 1
"""The 24-bit fields that share a 32-bit word with a byte: QP, PSN, cack_psn, rcvd_bytes."""
_U16 = 0xFFFF
"""The 16-bit fields packed from wider ints: MSNs, timestamps, probe_id, service time."""
_U32 = 0xFFFFFFFF

# Field order is the wire order; design section 3.2 names every field.
# BTH: opcode, SE|M|PadCnt|TVer, P_Key, reserved(8)|QP(24), flags(8)|PSN(24).
_BTH = struct.Struct(">BBHII")
_METH = struct.Struct(">HH")  # RQMSN, MSN
_TSETH = struct.Struct(">HH")  # tx_timestamp, TSR|reserved|format
_RETH = struct.Struct(">QII")  # VA, R_Key, DMA length
_IMMDT = struct.Struct(">I")
# SETH: word 0 (type|next|M|PR), ack_psn_offset, EV, SPDCID, DPDCID, reserved(8)|cack_psn(24),
# cc_type|cc_flags, MPR, sack_offset, sack_bitmap.
_SETH = struct.Struct(">HhIHHIBBhQ")
_CC_STATE = struct.Struct(">HHI")  # tx_timestamp, ooo_count, restore|pen(8)|rcvd_bytes(24)
# NETH: word 0, nack_reason, vendor_info, EV, SPDCID, DPDCID, reserved(8)|nack_psn(24),
# cc_type|cc_flags, reserved, tx_timestamp.
_NETH = struct.Struct(">HBBIHHIBBH")
# PETH: reserved, vendor_info, probe_id, reserved, SPDCID, DPDCID, tx_timestamp,
# TSR|reserved|format, reserved.
_PETH = struct.Struct(">BBHHHHHHH")
# ERTH: op, vendor_info, probe_id, port_status_mask, resp EV, tx_timestamp, reserved.
_ERTH = struct.Struct(">BBHIIHH")
# EETH: op|status, vendor_info, probe_id, request EV, request tx_timestamp, service time, reserved.
_EETH = struct.Struct(">BBHIHHI")
_DATA_TS = struct.Struct(">BBHII" "HH" "HH" "QII")
"""BTH, METH, TSETH and RETH of a data packet with ts = 1, packed or parsed in one call."""

assert (_BTH.size, _SETH.size, _CC_STATE.size, _NETH.size) == (BTH_LEN, SETH_LEN, CC_STATE_LEN, NETH_LEN)
assert (_PETH.size, _ERTH.size, _EETH.size) == (PETH_LEN, ERTH_LEN, EETH_LEN)
assert _DATA_TS.size == BTH_LEN + METH_LEN + TSETH_LEN + RETH_LEN

SACK_LEN = BTH_LEN + SETH_LEN + CC_STATE_LEN
"""Bytes of a SACK before its ICRC."""
NACK_LEN = BTH_LEN + NETH_LEN
"""Bytes of a NACK before its ICRC."""
PROBE_LEN = BTH_LEN + PETH_LEN
"""Bytes of a PROBE before its ICRC."""
EP_REQ_LEN = BTH_LEN + ERTH_LEN
"""Bytes of an EP_REQ before its ICRC."""
EP_RESP_LEN = BTH_LEN + EETH_LEN
"""Bytes of an EP_RESP before its ICRC."""


def timestamp_units(ns: int) -> int:
    """A 16-bit wire timestamp (tx_timestamp, service time) of ``ns`` nanoseconds: units of
    1.024 us (``TIME_UNIT_NS``), wrapping every 67 ms. Design 3.2."""
    return (ns // TIME_UNIT_NS) & _U16


def unwrap_timestamp(ts: int, now_ns: int) -> int:
    """The time in ns, at or before ``now_ns``, whose 16-bit wire timestamp is ``ts``: the
    latest such time (a timestamp more than one wrap, 67 ms, old is read one wrap late)."""
    now = now_ns // TIME_UNIT_NS
    return (now - ((now - ts) & _U16)) * TIME_UNIT_NS


# --- BTH ---------------------------------------------------------------------------------------
class Bth(NamedTuple):
    """A parsed BTH: opcode, flags byte (AckReq/rtx/ts), destination QP, PSN."""

    opcode: int
    flags: int
    dqpn: int
    psn: int


def _bth_words(flags: int, dqpn: int, psn: int) -> tuple[int, int]:
    return dqpn & _U24, (flags << PSN_BITS) | (psn % PSN_MOD)


def pack_bth(buf, opcode: int, flags: int, dqpn: int, psn: int, off: int = 0) -> None:
    """Write a 12-byte BTH at ``buf[off:]`` (design 3.2, BTH).

    ``flags`` is byte 8 (``BTH_FLAG_*``), ``dqpn`` the 24-bit destination QP, ``psn`` taken
    modulo 2**24. TVer 0, P_Key ``BTH_DEFAULT_PKEY``, byte 4 reserved 0.

    Raises:
        struct.error: ``buf`` too short, or ``opcode``/``flags`` not a byte.
    """
    _BTH.pack_into(buf, off, opcode, 0, BTH_DEFAULT_PKEY, *_bth_words(flags, dqpn, psn))


def bth_header(opcode: int, flags: int, dqpn: int, psn: int) -> bytes:
    """The 12 bytes of a BTH, as :func:`pack_bth` writes them."""
    return _BTH.pack(opcode, 0, BTH_DEFAULT_PKEY, *_bth_words(flags, dqpn, psn))


def parse_bth(buf, off: int = 0) -> Bth:
    """Parse the BTH at ``buf[off:]`` (design 3.2).

    Raises:
        struct.error: fewer than 12 bytes from ``off``.
    """
    opcode, _b1, _pkey, dqpn, fpsn = _BTH.unpack_from(buf, off)
    return Bth(opcode, fpsn >> PSN_BITS, dqpn & _U24, fpsn & _U24)


# --- Data packets: METH, [TSETH], RETH, [ImmDt] -----------------------------------------------
class DataHeader(NamedTuple):
    """The request headers of a data packet after the BTH; ``hdr_len`` is where payload starts.

    ``ts`` is None when the packet carries no TSETH; ``imm`` is None for non-_IMM opcodes.
    """

    rqmsn: int
    msn: int
    ts: int | None
    va: int
    rkey: int
    dma_len: int
    imm: int | None
    hdr_len: int


def data_header_len(opcode: int, ts: bool) -> int:
    """Bytes from the BTH start to the payload of a data packet with ``opcode`` (design 3.2
    table); ``ts`` says whether it carries a TSETH."""
    n = BTH_LEN + METH_LEN + RETH_LEN + (TSETH_LEN if ts else 0)
    return n + IMMDT_LEN if opcode in IMM_OPCODES else n


def pack_data_packet(buf, opcode: int, flags: int, dqpn: int, psn: int, rqmsn: int, msn: int,
                     ts: int, va: int, rkey: int, dma_len: int, imm: int | None) -> int:
    """Write BTH, METH, TSETH, RETH and [ImmDt] at the start of ``buf`` in one pass; return the
    header length in bytes (where the payload goes). Design 3.2.

    ``flags`` must include ``BTH_FLAG_TS`` (a TSETH is written); ``ts`` is the 16-bit
    tx_timestamp (wider values wrap), ``va`` the 64-bit remote address, ``dma_len`` in bytes;
    ``imm`` is written only when not None (the caller passes it for the _IMM opcodes).

    Raises:
        struct.error: ``buf`` too short or a field out of its width.
    """
    _DATA_TS.pack_into(buf, 0, opcode, 0, BTH_DEFAULT_PKEY, *_bth_words(flags, dqpn, psn),
                       rqmsn & _U16, msn & _U16, ts & _U16, TSETH_FORMAT, va, rkey, dma_len)
    if imm is None:
        return _DATA_TS.size
    _IMMDT.pack_into(buf, _DATA_TS.size, imm)
    return _DATA_TS.size + IMMDT_LEN


def pack_data_headers(buf, opcode: int, rqmsn: int, msn: int, ts: int | None, va: int,
                      rkey: int, dma_len: int, imm: int | None) -> int:
    """Write METH, [TSETH], RETH and [ImmDt] right after a BTH in ``buf``; return the length of
    all headers including the BTH. No TSETH when ``ts`` is None; ImmDt (``imm`` or 0) for the
    _IMM opcodes. Design 3.2.

    Raises:
        struct.error: ``buf`` too short or a field out of its width.
    """
    off = BTH_LEN
    _METH.pack_into(buf, off, rqmsn & _U16, msn & _U16)
    off += METH_LEN
    if ts is not None:
        _TSETH.pack_into(buf, off, ts & _U16, TSETH_FORMAT)
        off += TSETH_LEN
    _RETH.pack_into(buf, off, va, rkey, dma_len)
    off += RETH_LEN
    if opcode in IMM_OPCODES:
        _IMMDT.pack_into(buf, off, imm or 0)
        off += IMMDT_LEN
    return off


def parse_data_headers(buf, opcode: int, flags: int, end: int) -> DataHeader | None:
    """Parse the headers that follow the BTH of a data packet whose headers and payload end at
    ``end`` (ICRC excluded). Returns None when the packet is too short for its opcode's headers.
    Design 3.2."""
    has_ts = bool(flags & BTH_FLAG_TS)
    hdr_len = data_header_len(opcode, has_ts)
    if end < hdr_len:
        return None
    imm_off = hdr_len - IMMDT_LEN
    imm = _IMMDT.unpack_from(buf, imm_off)[0] if opcode in IMM_OPCODES else None
    if has_ts:  # the common case, in one call
        f = _DATA_TS.unpack_from(buf)
        return DataHeader(f[5], f[6], f[7], f[9], f[10], f[11], imm, hdr_len)
    rqmsn, msn = _METH.unpack_from(buf, BTH_LEN)
    va, rkey, dma_len = _RETH.unpack_from(buf, BTH_LEN + METH_LEN)
    return DataHeader(rqmsn, msn, None, va, rkey, dma_len, imm, hdr_len)


def data_tx_timestamp(buf, n: int) -> int | None:
    """The TSETH tx_timestamp (16 bits, 1.024 us units) of the UDP payload ``buf[:n]``, or None
    when it is not a data packet with ts = 1 or is too short for the TSETH. Design 3.2."""
    if n < BTH_LEN + METH_LEN + TSETH_LEN or buf[0] not in WRITE_OPCODES:
        return None
    if not parse_bth(buf).flags & BTH_FLAG_TS:
        return None
    return _TSETH.unpack_from(buf, BTH_LEN + METH_LEN)[0]


# --- SACK: SETH + CC_STATE --------------------------------------------------------------------
class Sack(NamedTuple):
    """A parsed SACK (SETH + CC_STATE). PSNs are absolute (24-bit); ``bitmap`` bit 63 is
    ``sack_base``; ``m`` is the MultipathState; ``pr`` the probe-response flag; ``mpr`` in
    units of ``MPR_UNIT_PSNS``; ``rcvd_bytes_units`` in units of ``RCVD_BYTES_UNIT``."""

    m: int
    pr: bool
    ack_psn: int
    ev: int
    cack_psn: int
    mpr: int
    sack_base: int
    bitmap: int
    tx_ts: int
    ooo_count: int
    rcvd_bytes_units: int


def pack_sack(buf, dqpn: int, s: Sack) -> int:
    """Write a complete SACK (BTH + SETH + CC_STATE, PSN 0) into ``buf``; return its length
    (``SACK_LEN``, 48). Design 3.2, SETH and CC_STATE.

    Raises:
        ValueError: ``s.ack_psn`` or ``s.sack_base`` more than a signed 16-bit offset from
            ``s.cack_psn``.
        struct.error: ``buf`` too short or a field out of its width.
    """
    pack_bth(buf, Opcode.SACK, 0, dqpn, 0)
    w0 = (s.m & SETH_M_MASK) << SETH_M_SHIFT | (SETH_PR if s.pr else 0)
    _SETH.pack_into(buf, BTH_LEN, w0, _soff(s.ack_psn, s.cack_psn), s.ev, 0, 0, s.cack_psn,
                    0, s.mpr, _soff(s.sack_base, s.cack_psn), s.bitmap)
    _CC_STATE.pack_into(buf, BTH_LEN + SETH_LEN, s.tx_ts & _U16, s.ooo_count & CC_OOO_COUNT_MASK,
                        s.rcvd_bytes_units & _U24)
    return SACK_LEN


def parse_sack(buf) -> Sack:
    """Parse the SETH + CC_STATE after the BTH at ``buf[0:]``; the offsets come back as
    absolute PSNs.

    Raises:
        struct.error: ``buf`` shorter than ``SACK_LEN`` (the caller checks the length).
    """
    (w0, ack_off, ev, _sp, _dp, cack, _cc, mpr, sack_off, bitmap) = _SETH.unpack_from(buf, BTH_LEN)
    tx_ts, ooo, word = _CC_STATE.unpack_from(buf, BTH_LEN + SETH_LEN)
    cack &= _U24
    return Sack((w0 >> SETH_M_SHIFT) & SETH_M_MASK, bool(w0 & SETH_PR), (cack + ack_off) % PSN_MOD,
                ev, cack, mpr, (cack + sack_off) % PSN_MOD, bitmap, tx_ts, ooo & CC_OOO_COUNT_MASK,
                word & _U24)


def _soff(psn: int, base: int) -> int:
    """Signed 16-bit offset of ``psn`` from ``base`` in 24-bit PSN space."""
    d = (psn - base) % PSN_MOD
    d = d - PSN_MOD if d >= PSN_MOD // 2 else d
    if not -SETH_OFFSET_MAX - 1 <= d <= SETH_OFFSET_MAX:
        raise ValueError(f"PSN {psn} is {d} away from {base}: outside a signed 16-bit offset")
    return d


# --- NACK and PROBE ---------------------------------------------------------------------------
class Nack(NamedTuple):
    """A parsed NACK (NETH): reason (``NackReason``), echoed EV, nack_psn (24-bit), reflected
    tx_timestamp (16-bit)."""

    reason: int
    ev: int
    psn: int
    tx_ts: int


def pack_nack(buf, dqpn: int, n: Nack) -> int:
    """Write a complete NACK (BTH + NETH, PSN 0) into ``buf``; return its length (``NACK_LEN``,
    32). Design 3.2, NETH.

    Raises:
        struct.error: ``buf`` too short or a field out of its width.
    """
    pack_bth(buf, Opcode.NACK, 0, dqpn, 0)
    _NETH.pack_into(buf, BTH_LEN, 0, n.reason, 0, n.ev, 0, 0, n.psn % PSN_MOD, 0, 0, n.tx_ts & _U16)
    return NACK_LEN


def parse_nack(buf) -> Nack:
    """Parse the NETH after the BTH at ``buf[0:]``.

    Raises:
        struct.error: ``buf`` shorter than ``NACK_LEN`` (the caller checks the length).
    """
    _w0, reason, _vi, ev, _sp, _dp, psn, _cc, _r, ts = _NETH.unpack_from(buf, BTH_LEN)
    return Nack(reason, ev, psn & _U24, ts)


def pack_probe(buf, dqpn: int, probe_id: int, tx_ts: int) -> int:
    """Write a reliability PROBE (BTH + PETH, PSN 0: it consumes none) into ``buf``; return its
    length (``PROBE_LEN``, 28). ``probe_id`` and ``tx_ts`` wrap to 16 bits. Design 3.2, PETH.

    Raises:
        struct.error: ``buf`` too short.
    """
    pack_bth(buf, Opcode.PROBE, 0, dqpn, 0)
    _PETH.pack_into(buf, BTH_LEN, 0, 0, probe_id & _U16, 0, 0, 0, tx_ts & _U16, TSETH_FORMAT, 0)
    return PROBE_LEN


def parse_probe(buf) -> tuple[int, int]:
    """Return (probe_id, tx_timestamp) of the PETH after the BTH at ``buf[0:]``.

    Raises:
        struct.error: ``buf`` shorter than ``PROBE_LEN``.
    """
    f = _PETH.unpack_from(buf, BTH_LEN)
    return f[2], f[6]


# --- Endpoint operations: EP_REQ (ERTH) and EP_RESP (EETH) to QP 0x2 ---------------------------
class EpRequest(NamedTuple):
    """A parsed ERTH: op (``EpOp``), probe_id, port_status_mask (bit p = plane port p up),
    resp_ev (the EV the answer must use), tx_timestamp (16 bits, 1.024 us units)."""

    op: int
    probe_id: int
    port_status_mask: int
    resp_ev: int
    tx_timestamp: int


class EpResponse(NamedTuple):
    """A parsed EETH: op, status (``EpStatus``), probe_id, req_ev, req_tx_timestamp,
    service_time (16 bits, 1.024 us units)."""

    op: int
    status: int
    probe_id: int
    req_ev: int
    req_tx_timestamp: int
    service_time: int


def ep_request(op: int, probe_id: int, port_status_mask: int, resp_ev: int, tx_timestamp: int) -> bytes:
    """BTH + ERTH of an EP_REQ to QP ``QP_ENDPOINT_OPS``, PSN 0 (``EP_REQ_LEN``, 28 bytes, no
    ICRC). ``probe_id`` and ``tx_timestamp`` wrap to 16 bits, the mask to 32. Design 3.2, 5.

    Raises:
        struct.error: ``resp_ev`` outside 0..2**32-1.
    """
    byte0 = (op & EP_OP_MASK) << EP_OP_SHIFT
    return bth_header(Opcode.EP_REQ, 0, QP_ENDPOINT_OPS, 0) + _ERTH.pack(
        byte0, 0, probe_id & _U16, port_status_mask & _U32, resp_ev, tx_timestamp & _U16, 0)


def ep_response(op: int, status: int, probe_id: int, req_ev: int, req_tx_timestamp: int,
                service_time: int) -> bytes:
    """BTH + EETH of an EP_RESP to QP ``QP_ENDPOINT_OPS``, PSN 0 (``EP_RESP_LEN``, 28 bytes, no
    ICRC). The 16-bit fields wrap; ``service_time`` in 1.024 us units. Design 3.2, 5.

    Raises:
        struct.error: ``req_ev`` outside 0..2**32-1.
    """
    byte0 = (op & EP_OP_MASK) << EP_OP_SHIFT | (status & EP_STATUS_MASK) << EP_STATUS_SHIFT
    return bth_header(Opcode.EP_RESP, 0, QP_ENDPOINT_OPS, 0) + _EETH.pack(
        byte0, 0, probe_id & _U16, req_ev, req_tx_timestamp & _U16, service_time & _U16, 0)


def parse_ep(payload) -> EpRequest | EpResponse | None:
    """Parse a UDP payload (BTH onward, ICRC optional) as EP_REQ or EP_RESP to QP
    ``QP_ENDPOINT_OPS``; None for anything else or a payload too short. Design 3.2, 5."""
    if len(payload) < EP_REQ_LEN:
        return None
    head = parse_bth(payload)
    if head.dqpn != QP_ENDPOINT_OPS:
        return None
    if head.opcode == Opcode.EP_REQ:
        byte0, _, pid, mask, resp_ev, ts, _ = _ERTH.unpack_from(payload, BTH_LEN)
        return EpRequest(byte0 >> EP_OP_SHIFT & EP_OP_MASK, pid, mask, resp_ev, ts)
    if head.opcode == Opcode.EP_RESP and len(payload) >= EP_RESP_LEN:
        byte0, _, pid, req_ev, req_ts, svc, _ = _EETH.unpack_from(payload, BTH_LEN)
        return EpResponse(byte0 >> EP_OP_SHIFT & EP_OP_MASK, byte0 >> EP_STATUS_SHIFT & EP_STATUS_MASK,
                          pid, req_ev, req_ts, svc)
    return None
