"""Struct codecs for the MRC headers the endpoint sends and parses (design section 3.2).

The hot path packs into preallocated buffers with ``struct.pack_into`` and parses with
``struct.unpack_from``; scapy is used only by the tests, to cross-check these codecs.
Offsets count from the start of the UDP payload (the BTH). All fields are big-endian.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from mrckit.wire.constants import (
    BTH_FLAG_TS, BTH_LEN, CC_STATE_LEN, IMM_OPCODES, IMMDT_LEN, METH_LEN, NETH_LEN, PETH_LEN,
    PSN_MOD, RETH_LEN, SETH_LEN, SETH_OFFSET_MAX, TSETH_FORMAT, TSETH_LEN, Opcode,
)

DEFAULT_PKEY = 0xFFFF
BTH = struct.Struct(">BBHI I")  # opcode, SE|M|pad|tver, pkey, reserved(8)|dqpn(24), flags(8)|psn(24)
METH = struct.Struct(">HH")  # RQMSN, MSN
TSETH = struct.Struct(">HH")  # tx_timestamp, TSR|reserved|format
RETH = struct.Struct(">QII")  # VA, R_Key, DMA length
IMMDT = struct.Struct(">I")
SETH = struct.Struct(">HhIHHIBBhQ")  # see design 3.2 SETH
CC_STATE = struct.Struct(">HHI")  # tx_timestamp, ooo_count, restore|pen(8)|rcvd_bytes(24)
NETH = struct.Struct(">HBBIHHIBBH")
PETH = struct.Struct(">BBHHHHHHH")

DATA_TS = struct.Struct(">BBHII" "HH" "HH" "QII")
"""BTH, METH, TSETH and RETH of a data packet with ts = 1, packed or parsed in one call."""
assert BTH.size == BTH_LEN and SETH.size == SETH_LEN and NETH.size == NETH_LEN
assert CC_STATE.size == CC_STATE_LEN and PETH.size == PETH_LEN

SACK_LEN = BTH_LEN + SETH_LEN + CC_STATE_LEN
NACK_LEN = BTH_LEN + NETH_LEN
PROBE_LEN = BTH_LEN + PETH_LEN


def data_header_len(opcode: int, ts: bool) -> int:
    """Bytes from the BTH start to the payload of a data packet with ``opcode``."""
    n = BTH_LEN + METH_LEN + RETH_LEN + (TSETH_LEN if ts else 0)
    return n + IMMDT_LEN if opcode in IMM_OPCODES else n


class Bth(NamedTuple):
    """A parsed BTH: opcode, flags byte (AckReq/rtx/ts), destination QP, PSN."""

    opcode: int
    flags: int
    dqpn: int
    psn: int


def pack_bth(buf, opcode: int, flags: int, dqpn: int, psn: int, off: int = 0) -> None:
    """Write a 12-byte BTH at ``buf[off:]``: TVer 0, P_Key 0xFFFF, byte 4 reserved 0."""
    BTH.pack_into(buf, off, opcode, 0, DEFAULT_PKEY, dqpn & 0xFFFFFF, (flags << 24) | (psn % PSN_MOD))


def parse_bth(buf, off: int = 0) -> Bth:
    """Parse the BTH at ``buf[off:]`` (the caller checks that 12 bytes are there)."""
    opcode, _b1, _pkey, dqpn, fpsn = BTH.unpack_from(buf, off)
    return Bth(opcode, fpsn >> 24, dqpn & 0xFFFFFF, fpsn & 0xFFFFFF)


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


def pack_data_packet(buf, opcode: int, flags: int, dqpn: int, psn: int, rqmsn: int, msn: int,
                     ts: int, va: int, rkey: int, dma_len: int, imm: int | None) -> int:
    """Write BTH (``flags`` must include ts), METH, TSETH, RETH and [ImmDt] at the start of
    ``buf`` in one pass; return the header length (where the payload goes)."""
    DATA_TS.pack_into(buf, 0, opcode, 0, DEFAULT_PKEY, dqpn & 0xFFFFFF, (flags << 24) | (psn % PSN_MOD),
                      rqmsn & 0xFFFF, msn & 0xFFFF, ts & 0xFFFF, TSETH_FORMAT, va, rkey, dma_len)
    if imm is None:
        return DATA_TS.size
    IMMDT.pack_into(buf, DATA_TS.size, imm)
    return DATA_TS.size + IMMDT_LEN


def pack_data_headers(buf, opcode: int, rqmsn: int, msn: int, ts: int | None, va: int,
                      rkey: int, dma_len: int, imm: int | None) -> int:
    """Write METH, [TSETH], RETH and [ImmDt] right after a BTH in ``buf``; return the length
    of all headers including the BTH (where the payload goes)."""
    off = BTH_LEN
    METH.pack_into(buf, off, rqmsn & 0xFFFF, msn & 0xFFFF)
    off += METH_LEN
    if ts is not None:
        TSETH.pack_into(buf, off, ts & 0xFFFF, TSETH_FORMAT)
        off += TSETH_LEN
    RETH.pack_into(buf, off, va, rkey, dma_len)
    off += RETH_LEN
    if opcode in IMM_OPCODES:
        IMMDT.pack_into(buf, off, imm or 0)
        off += IMMDT_LEN
    return off


def parse_data_headers(buf, opcode: int, flags: int, end: int) -> DataHeader | None:
    """Parse the headers that follow the BTH of a data packet ending at ``end`` (ICRC
    excluded). Returns None when the packet is too short for its opcode's headers."""
    has_ts = bool(flags & BTH_FLAG_TS)
    hdr_len = data_header_len(opcode, has_ts)
    if end < hdr_len:
        return None
    if has_ts:  # the common case, in one call
        f = DATA_TS.unpack_from(buf)
        imm = IMMDT.unpack_from(buf, DATA_TS.size)[0] if opcode in IMM_OPCODES else None
        return DataHeader(f[5], f[6], f[7], f[9], f[10], f[11], imm, hdr_len)
    off = BTH_LEN
    rqmsn, msn = METH.unpack_from(buf, off)
    off += METH_LEN
    ts = None
    if has_ts:
        ts = TSETH.unpack_from(buf, off)[0]
        off += TSETH_LEN
    va, rkey, dma_len = RETH.unpack_from(buf, off)
    off += RETH_LEN
    imm = IMMDT.unpack_from(buf, off)[0] if opcode in IMM_OPCODES else None
    return DataHeader(rqmsn, msn, ts, va, rkey, dma_len, imm, hdr_len)


class Sack(NamedTuple):
    """A parsed SACK (SETH + CC_STATE). PSNs are absolute (24-bit); ``bitmap`` bit 63 is
    ``sack_base``; ``m`` is the MultipathState; ``pr`` the probe-response flag."""

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
    """Write a complete SACK (BTH + SETH + CC_STATE) into ``buf``; return its length (40)."""
    pack_bth(buf, Opcode.SACK, 0, dqpn, 0)
    w0 = (s.m & 3) << 5 | (0x10 if s.pr else 0)
    SETH.pack_into(buf, BTH_LEN, w0, _soff(s.ack_psn, s.cack_psn), s.ev, 0, 0, s.cack_psn,
                   0, s.mpr, _soff(s.sack_base, s.cack_psn), s.bitmap)
    CC_STATE.pack_into(buf, BTH_LEN + SETH_LEN, s.tx_ts & 0xFFFF, s.ooo_count & 0x7FFF,
                       s.rcvd_bytes_units & 0xFFFFFF)
    return SACK_LEN


def parse_sack(buf) -> Sack:
    """Parse SETH + CC_STATE after the BTH (the caller checks the length)."""
    (w0, ack_off, ev, _sp, _dp, cack, _cc, mpr, sack_off, bitmap) = SETH.unpack_from(buf, BTH_LEN)
    tx_ts, ooo, word = CC_STATE.unpack_from(buf, BTH_LEN + SETH_LEN)
    cack &= 0xFFFFFF
    return Sack((w0 >> 5) & 3, bool(w0 & 0x10), (cack + ack_off) % PSN_MOD, ev, cack, mpr,
                (cack + sack_off) % PSN_MOD, bitmap, tx_ts, ooo & 0x7FFF, word & 0xFFFFFF)


class Nack(NamedTuple):
    """A parsed NACK (NETH): reason, echoed EV, nack_psn, reflected tx_timestamp."""

    reason: int
    ev: int
    psn: int
    tx_ts: int


def pack_nack(buf, dqpn: int, n: Nack) -> int:
    """Write a complete NACK (BTH + NETH) into ``buf``; return its length (32)."""
    pack_bth(buf, Opcode.NACK, 0, dqpn, 0)
    NETH.pack_into(buf, BTH_LEN, 0, n.reason, 0, n.ev, 0, 0, n.psn % PSN_MOD, 0, 0, n.tx_ts & 0xFFFF)
    return NACK_LEN


def parse_nack(buf) -> Nack:
    """Parse the NETH after the BTH (the caller checks the length)."""
    _w0, reason, _vi, ev, _sp, _dp, psn, _cc, _r, ts = NETH.unpack_from(buf, BTH_LEN)
    return Nack(reason, ev, psn & 0xFFFFFF, ts)


def pack_probe(buf, dqpn: int, probe_id: int, tx_ts: int) -> int:
    """Write a reliability PROBE (BTH + PETH, PSN 0: it consumes none); return its length."""
    pack_bth(buf, Opcode.PROBE, 0, dqpn, 0)
    PETH.pack_into(buf, BTH_LEN, 0, 0, probe_id & 0xFFFF, 0, 0, 0, tx_ts & 0xFFFF, TSETH_FORMAT, 0)
    return PROBE_LEN


def parse_probe(buf) -> tuple[int, int]:
    """Return (probe_id, tx_timestamp) of the PETH after the BTH."""
    f = PETH.unpack_from(buf, BTH_LEN)
    return f[2], f[6]


def _soff(psn: int, base: int) -> int:
    """Signed 16-bit offset of ``psn`` from ``base`` in 24-bit PSN space."""
    d = (psn - base) % PSN_MOD
    d = d - PSN_MOD if d >= PSN_MOD // 2 else d
    if not -SETH_OFFSET_MAX - 1 <= d <= SETH_OFFSET_MAX:
        raise ValueError(f"PSN {psn} is {d} away from {base}: outside a signed 16-bit offset")
    return d
