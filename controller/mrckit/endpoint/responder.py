"""The responder: placement by RETH in any order, a PSN bitmap, SACK/NACK generation and the
WRITE_WITH_IMM barrier (design section 6; reference sections 2.5, 2.6 and 4).

It is a pure state machine: :meth:`Responder.handle` takes one received UDP payload and its
metadata (traffic class, flow label, UDP source port, peer address), and hands every reply to
the ``emit`` callback. The tests feed it permuted, repeated, trimmed and malformed packets
directly; :class:`mrckit.endpoint.Endpoint` feeds it from a socket.

Prescribed responses (design 6, reference 2.6; "ours" where no source fixes them):

============================================  ===========================================
input                                         response
============================================  ===========================================
shorter than a BTH (+ ICRC unless trimmed)    dropped, ``malformed`` counted
ICRC mismatch                                 dropped, ``bad_icrc`` counted (sender recovers)
unknown destination QP, or another sender     dropped, ``unknown_qp`` counted
DSCP TRIMMED / TRIMMED_LASTHOP                NACK TRIMMED / TRIMMED_LASTHOP for the PSN
PSN beyond the MPR window                     NACK PSN_OOR_WINDOW, nothing written
PSN already received                          nothing written, acknowledged (SACK)
opcode not a write or PROBE                   NACK UNEXP_EVENT, QP to error (ours)
headers short for the opcode, DMA length      NACK UNEXP_EVENT, QP to error (ours)
  different from the payload, payload > MTU
unknown rkey or VA range outside the region   NACK UNEXP_EVENT, QP to error (ours; MRC
                                                has no access-error reason)
any packet to a QP in error                   NACK UNEXP_EVENT
============================================  ===========================================
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, NamedTuple

from mrckit.wire.constants import (
    ALWAYS_SKIP_CE_MIN, ALWAYS_SKIP_WINDOW, BTH_FLAG_ACKREQ, BTH_FLAG_RTX, BTH_LEN,
    DEFAULT_PAYLOAD_LEN, ICRC_LEN, IMM_OPCODES, MPR_UNIT_PSNS, PETH_LEN, PSN_MOD, RCVD_BYTES_UNIT,
    SETH_OFFSET_MAX, WRITE_OPCODES, Dscp, Ecn, MultipathState, NackReason, Opcode,
)
from mrckit.wire.ev import ev_from_flowinfo
from mrckit.wire.headers import Nack, Sack, pack_nack, pack_sack, parse_bth, parse_data_headers, parse_probe
from mrckit.wire.icrc import ICRC

from .icrc import IcrcContext
from .memory import MemoryTable
from .psn import unwrap
from .stats import ResponderStats

SACK_COALESCE_BYTES = 8192
"""Send a SACK once this many bytes arrived since the last one (ours; EMU uses 4 KiB)."""
SACK_MIN_PACKET_BYTES = 1024
"""Each packet counts at least this many bytes toward coalescing [L/M: EMU, UET]."""
ALWAYS_SKIP_HISTORY_MASK = (1 << ALWAYS_SKIP_WINDOW) - 1
"""Per EV, one bit per packet received (1 = CE-marked), the last ALWAYS_SKIP_WINDOW kept."""
_BITS01 = bytes.maketrans(b"\x00\x01", b"01")

Emit = Callable[[bytes, str], None]
"""Reply sink: (UDP payload with ICRC, peer address). Replies always use DSCP CONTROL."""


class RecvCompletion(NamedTuple):
    """A WRITE_WITH_IMM completion at the responder: QP, immediate value, RQMSN, last PSN."""

    qpn: int
    imm: int
    rqmsn: int
    psn: int


@dataclass
class ResponderQp:
    """Receive state of one QP. ``remote_qpn`` is the requestor's QP (the replies' BTH
    destination); ``mpr`` the window in PSNs (a multiple of 128); ``mtu`` the largest payload;
    ``peer`` the requestor's NIC address (packets from any other are dropped as ``unknown_qp``),
    or None to accept any sender."""

    qpn: int
    remote_qpn: int
    mpr: int = 1024
    mtu: int = DEFAULT_PAYLOAD_LEN
    initial_psn: int = 0
    peer: str | None = None
    error: str | None = None

    def __post_init__(self):
        if self.mpr < MPR_UNIT_PSNS or self.mpr % MPR_UNIT_PSNS:
            raise ValueError(f"MPR {self.mpr} is not a positive multiple of {MPR_UNIT_PSNS} PSNs")
        self.epsn = self.initial_psn  # absolute: every PSN below it has landed
        self.high = self.initial_psn - 1  # highest absolute PSN received
        self.ring = bytearray(self.mpr)
        self.pending_imm: list[tuple[int, int, int]] = []  # (abs psn, imm, rqmsn)
        self.sack_bytes = 0
        self.trigger: tuple[int, int, int, bool] | None = None  # psn, ev, ts, ce
        self.ooo_count = 0
        self.rcvd_bytes = 0
        self.ev_ce: dict[int, int] = {}

    def set_rc(self) -> None:
        """The RC baseline is the native endpoint's alone (docs/endpoint.md "The RC baseline").

        Raises:
            ValueError: always: this is the Python reference responder.
        """
        raise ValueError("transport rc: the Python endpoint has no RC mode (use the native endpoint)")


class Responder:
    """The responder half of an endpoint at NIC address ``local_addr``.

    ``emit(packet, peer)`` sends a reply; ``memory`` holds the regions that writes may touch.
    WRITE_WITH_IMM completions are appended to :attr:`completions` (a deque of
    :class:`RecvCompletion`) and passed to ``on_completion`` when given.
    """

    def __init__(self, local_addr: str, memory: MemoryTable, emit: Emit, *,
                 sack_coalesce_bytes: int = SACK_COALESCE_BYTES,
                 on_completion: Callable[[RecvCompletion], None] | None = None):
        self.local_addr = local_addr
        self.memory = memory
        self.emit = emit
        self.sack_coalesce_bytes = sack_coalesce_bytes
        self.on_completion = on_completion
        self.qps: dict[int, ResponderQp] = {}
        self.stats = ResponderStats()
        self.completions: deque[RecvCompletion] = deque()
        self._rx_icrc: dict[str, IcrcContext] = {}
        self._tx_icrc: dict[str, IcrcContext] = {}
        self._dirty: dict[int, tuple[ResponderQp, str]] = {}
        self._reply = bytearray(64)

    def add_qp(self, qp: ResponderQp) -> ResponderQp:
        """Register receive state for ``qp.qpn`` (out-of-band set-up: MRC has no CM).

        Raises:
            ValueError: the QP number is in use or outside 24 bits.
        """
        if not 0 < qp.qpn < 1 << 24 or qp.qpn in self.qps:
            raise ValueError(f"QP number {qp.qpn:#x} is in use or not a 24-bit non-zero value")
        self.qps[qp.qpn] = qp
        return qp

    # --- receive ------------------------------------------------------------------------
    def handle(self, buf, n: int, tclass: int, flowinfo: int, sport: int, peer: str) -> None:
        """Process one UDP payload ``buf[:n]`` (BTH first, ICRC last) from ``peer``.

        ``tclass`` is the received IPv6 traffic class (DSCP << 2 | ECN), ``flowinfo`` the flow
        label (its low 16 bits are EV bits 15..0) and ``sport`` the UDP source port (EV bits
        31..16, design 3.3)."""
        st = self.stats
        st.packets += 1
        if n < BTH_LEN:
            st.malformed += 1
            return
        bth = parse_bth(buf)
        qp = self.qps.get(bth.dqpn)
        if qp is None or (qp.peer is not None and peer != qp.peer):
            st.unknown_qp += 1
            return
        ev = ev_from_flowinfo(flowinfo, sport)
        dscp = tclass >> 2
        if dscp == Dscp.TRIMMED or dscp == Dscp.TRIMMED_LASTHOP:
            # A trimmed packet keeps its headers but loses payload and ICRC (design 3.1, 4).
            st.trimmed += 1
            reason = NackReason.TRIMMED if dscp == Dscp.TRIMMED else NackReason.TRIMMED_LASTHOP
            self._nack(qp, peer, reason, unwrap(bth.psn, qp.epsn), ev, 0)
            return
        if n < BTH_LEN + ICRC_LEN:
            st.malformed += 1
            return
        if not self._icrc_ok(buf, n, peer):
            st.bad_icrc += 1
            return
        if qp.error is not None:
            self._nack(qp, peer, NackReason.UNEXP_EVENT, unwrap(bth.psn, qp.epsn), ev, 0)
            return
        if bth.opcode in WRITE_OPCODES:
            self._data(qp, buf, n, bth, ev, (tclass & 3) == Ecn.CE, peer)
        elif bth.opcode == Opcode.PROBE and n >= BTH_LEN + PETH_LEN + ICRC_LEN:
            st.probes += 1
            _probe_id, ts = parse_probe(buf)
            self._send_sack(qp, peer, (qp.epsn - 1, ev, ts, False), pr=True)
        else:
            self._fail(qp, peer, f"unexpected opcode {bth.opcode:#04x}", bth.psn, ev)

    def _data(self, qp: ResponderQp, buf, n: int, bth, ev: int, ce: bool, peer: str) -> None:
        st = self.stats
        end = n - ICRC_LEN
        hdr = parse_data_headers(buf, bth.opcode, bth.flags, end)
        if hdr is None:
            return self._fail(qp, peer, f"headers short for opcode {bth.opcode:#04x}", bth.psn, ev)
        size = end - hdr.hdr_len
        if size != hdr.dma_len or size > qp.mtu:
            return self._fail(qp, peer, f"payload {size} B vs DMA length {hdr.dma_len} B, MTU {qp.mtu} B",
                              bth.psn, ev)
        psn = unwrap(bth.psn, qp.epsn)
        ts = hdr.ts or 0
        if psn >= qp.epsn + qp.mpr:
            self._nack(qp, peer, NackReason.PSN_OOR_WINDOW, psn, ev, ts)
            return
        if ce:
            st.ce_marked += 1
        duplicate = psn < qp.epsn or qp.ring[psn % qp.mpr]
        if duplicate:
            st.duplicates += 1
        else:
            # IBTA C9-88: a zero-length WRITE need not carry a valid R_Key or VA, and touches
            # no memory; it still takes its PSN (and delivers its immediate).
            if size:
                mr = self.memory.lookup(hdr.rkey)
                if mr is None or not mr.contains(hdr.va, size):
                    what = "unknown rkey" if mr is None else "VA range outside the region"
                    return self._fail(qp, peer, f"{what}: rkey {hdr.rkey:#x} VA {hdr.va:#x} +{size}", bth.psn, ev)
                off = hdr.va - mr.base_va
                mr.view[off:off + size] = memoryview(buf)[hdr.hdr_len:end]
                mr.placed_bytes += size
            st.placed_packets += 1
            st.placed_bytes += size
            self._mark(qp, psn, size, bth.opcode, hdr)
        self._after_arrival(qp, peer, psn, ev, ts, ce, size, bth.flags)

    def _mark(self, qp: ResponderQp, psn: int, size: int, opcode: int, hdr) -> None:
        qp.ring[psn % qp.mpr] = 1
        qp.rcvd_bytes += size
        if psn > qp.high:
            qp.high = psn
        if opcode in IMM_OPCODES:
            qp.pending_imm.append((psn, hdr.imm, hdr.rqmsn))
            qp.pending_imm.sort()
        if psn != qp.epsn:
            qp.ooo_count += 1
            return
        ring, mpr, e = qp.ring, qp.mpr, qp.epsn
        while ring[e % mpr]:
            ring[e % mpr] = 0
            e += 1
        qp.epsn = e
        while qp.pending_imm and qp.pending_imm[0][0] < e:
            self._complete(qp, *qp.pending_imm.pop(0))

    def _complete(self, qp: ResponderQp, psn: int, imm: int, rqmsn: int) -> None:
        # The barrier: a WRITE_WITH_IMM completes only once every PSN up to its own has landed.
        comp = RecvCompletion(qp.qpn, imm, rqmsn, psn % PSN_MOD)
        self.stats.imm_completions += 1
        self.completions.append(comp)
        if self.on_completion is not None:
            self.on_completion(comp)

    def _after_arrival(self, qp, peer, psn, ev, ts, ce, size, flags) -> None:
        hist = qp.ev_ce.get(ev, 0)
        qp.ev_ce[ev] = ((hist << 1) | ce) & ALWAYS_SKIP_HISTORY_MASK
        qp.trigger = (psn, ev, ts, ce)
        qp.sack_bytes += max(size, SACK_MIN_PACKET_BYTES)
        if ce or flags & (BTH_FLAG_RTX | BTH_FLAG_ACKREQ) or qp.sack_bytes >= self.sack_coalesce_bytes:
            self._send_sack(qp, peer, qp.trigger)
        else:
            self._dirty[qp.qpn] = (qp, peer)

    def flush(self) -> None:
        """Send the coalesced SACKs still owed (the endpoint calls this when its socket is
        drained, so a lone packet is never left unacknowledged)."""
        dirty, self._dirty = self._dirty, {}
        for qp, peer in dirty.values():
            if qp.sack_bytes and qp.trigger is not None:
                self._send_sack(qp, peer, qp.trigger)

    # --- replies ------------------------------------------------------------------------
    def _send_sack(self, qp: ResponderQp, peer: str, trigger, pr: bool = False) -> None:
        psn, ev, ts, ce = trigger
        ce_count = bin(qp.ev_ce.get(ev, 0)).count("1")
        if ce_count >= ALWAYS_SKIP_CE_MIN:
            m = MultipathState.ALWAYS_SKIP
        else:
            m = MultipathState.SKIP_ONCE if ce else MultipathState.NONE
        base, cack = max(qp.epsn, qp.high - 63), qp.epsn - 1
        if not -SETH_OFFSET_MAX - 1 <= psn - cack <= SETH_OFFSET_MAX:
            psn = cack  # a duplicate too far behind for the 16-bit offset: acknowledge nothing new
        sack = Sack(m, pr, psn % PSN_MOD, ev, cack % PSN_MOD, qp.mpr // MPR_UNIT_PSNS,
                    base % PSN_MOD, self._bitmap(qp, base), ts, qp.ooo_count,
                    qp.rcvd_bytes // RCVD_BYTES_UNIT)
        n = pack_sack(self._reply, qp.remote_qpn, sack)
        qp.sack_bytes = 0
        self._dirty.pop(qp.qpn, None)
        self.stats.sacks += 1
        self._emit(self._reply, n, peer)

    @staticmethod
    def _bitmap(qp: ResponderQp, base: int) -> int:
        start = base % qp.mpr
        bits = qp.ring[start:start + 64]
        if len(bits) < 64:
            bits += qp.ring[:64 - len(bits)]
        limit = qp.high - base + 1  # ring slots past the highest PSN belong to no PSN yet
        if limit < 64:
            bits[max(limit, 0):] = bytes(64 - max(limit, 0))
        return int(bits.translate(_BITS01), 2)

    def _nack(self, qp: ResponderQp, peer: str, reason: int, psn: int, ev: int, ts: int) -> None:
        n = pack_nack(self._reply, qp.remote_qpn, Nack(reason, ev, psn, ts))
        self.stats.nacks[NackReason(reason).name] += 1
        self._emit(self._reply, n, peer)

    def _fail(self, qp: ResponderQp, peer: str, why: str, psn: int, ev: int) -> None:
        qp.error = why
        self._nack(qp, peer, NackReason.UNEXP_EVENT, unwrap(psn, qp.epsn), ev, 0)

    def _emit(self, buf, n: int, peer: str) -> None:
        ctx = self._tx_icrc.get(peer)
        if ctx is None:
            ctx = self._tx_icrc[peer] = IcrcContext(self.local_addr, peer)
        view = memoryview(buf)
        crc = ctx.compute(view[:n], total=n + ICRC_LEN)
        self.emit(bytes(view[:n]) + ICRC.pack(crc), peer)

    def _icrc_ok(self, buf, n: int, peer: str) -> bool:
        ctx = self._rx_icrc.get(peer)
        if ctx is None:
            ctx = self._rx_icrc[peer] = IcrcContext(peer, self.local_addr)
        self.stats.icrc_checked += 1
        return ctx.check(buf, n)
