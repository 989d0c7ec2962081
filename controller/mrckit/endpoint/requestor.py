"""The requestor: RDMA WRITE and WRITE_WITH_IMM with selective retransmission (design 6;
reference 3.2, 3.4 and 3.5).

A :class:`RequestorQp` segments posted writes into packets of at most ``mtu`` payload bytes
(FIRST/MIDDLE/LAST or ONLY, METH, TSETH and a RETH in every packet), keeps PSNs inside the MPR
window, paces with an NSCC-style window (:mod:`.cc`) and recovers losses:

- **NACK** TRIMMED, TRIMMED_LASTHOP, NO_BITMAP, NO_PKT_BUFFER, NO_RESOURCE or PSN_OOR_WINDOW:
  the PSN is retransmitted at once; UNEXP_EVENT moves the QP to error;
- **SACK gaps**: each SACK acknowledges its cumulative PSN, its 64-bit bitmap and its
  triggering PSN. A packet still unacknowledged when a packet *sent* ``reorder_packets`` or
  more transmissions after it has been acknowledged (not a timeout's resend, which leaves
  whatever the window and may overtake it), and outstanding for longer than the
  slowest recent round trip (5/4 of a slowly decaying maximum of the RTT samples), is declared
  lost (a RACK-style rule, RFC 8985 section 6.2, ours in detail: sprayed packets cross paths
  whose queueing differs, so neither PSN order nor one path's RTT says a packet is lost);
- **RTO**: when the oldest transmission is older than 1.024 µs × 2^n, that one is
  retransmitted (RFC 6298 section 5.4), whatever the window, and a PROBE is sent; the timer
  restarts (section 5.5-5.6): the next timeout falls due 1.024 µs × 2^n after this one at
  the earliest. Once that resend is acknowledged, a packet sent before it is lost when one
  transmission sent after it (not the resend) was acknowledged, not ``reorder_packets``, and
  it is older than the slowest recent round trip (the tail of a write on a dead path). The
  first ``linear_retries`` timeouts keep n; later ones double the timeout; after
  ``linear_retries + exp_retries`` consecutive timeouts without progress the QP goes to
  error (reference 3.5).

Retransmissions carry the rtx flag and DSCP TRIMMABLE_RETX, oldest PSN first; the host
dataplane gives them a fresh EV. Data is sent ECT(0).
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

from mrckit.wire.constants import (
    BTH_FLAG_ACKREQ, BTH_FLAG_RTX, BTH_FLAG_TS, DEFAULT_PAYLOAD_LEN, ICRC_LEN, MPR_UNIT_PSNS,
    TIME_UNIT_NS, Dscp, Ecn, MultipathState, NackReason, Opcode,
)
from mrckit.wire.headers import (NACK_LEN, SACK_LEN, Nack, Sack, pack_data_packet, pack_probe,
                                 parse_nack, parse_sack)
from mrckit.wire.icrc import ICRC

from .cc import NsccConfig, NsccWindow
from .icrc import IcrcContext
from .psn import unwrap
from .stats import RequestorStats

REORDER_PACKETS = 16
"""A packet is lost once one sent this many transmissions later is acknowledged (ours)..."""
RTT_MAX_DECAY_SHIFT = 6
"""... and it is older than the slowest recent RTT: the running maximum of RTT samples (ns)
loses 1/2**6 of itself per sample, so one slow sample (a descheduled peer) fades within about a
hundred acks, and a loss is detected about one current RTT after its send (docs/endpoint.md)."""
RTO_MAX_RTT_SHIFT = 1
"""The RTO never fires before 2**1 times the slowest RTT of a second, slower tracker (ours; RFC
6298 section 2 keeps its RTO above the measured RTT for the same reason): a software endpoint
shares its cores, and a timer shorter than the RTT it measures only retransmits what is still
on its way."""
RTO_RTT_DECAY_SHIFT = 12
"""That tracker loses 1/2**12 of itself per sample: a stall (the peer or a forwarding softirq
waiting for a core) is remembered for a few thousand acks, so the next one, which comes before
any sample can show it, finds the RTO above it. The SACK-gap rule keeps the fast tracker, so
a loss is still detected about one current RTT after its send."""
TCLASS_DATA = Dscp.TRIMMABLE << 2 | Ecn.ECT0
TCLASS_RETX = Dscp.TRIMMABLE_RETX << 2 | Ecn.ECT0
TCLASS_CONTROL = Dscp.CONTROL << 2
INFINITE_RETRIES = 25
_RESEND_REASONS = {
    NackReason.TRIMMED: "nack_trimmed", NackReason.TRIMMED_LASTHOP: "nack_trimmed_lasthop",
    NackReason.NO_BITMAP: "nack_resource", NackReason.NO_PKT_BUFFER: "nack_resource",
    NackReason.NO_RESOURCE: "nack_resource", NackReason.PSN_OOR_WINDOW: "nack_psn_oor_window",
}

Send = Callable[[list, int], None]
"""Packet sink: (buffers whose concatenation is the UDP payload, IPv6 traffic class)."""


class QpError(Exception):
    """The QP went to the error state; the message says why (retry limit, UNEXP_EVENT...)."""


@dataclass
class RetryConfig:
    """Local ACK timeout 1.024 µs × 2^``timeout_exp`` (0..24), ``linear_retries`` (0..7) at that
    value, then ``exp_retries`` (0..25, 25 = no limit) doubling ones (reference 3.5). The
    default, 2^16 units = 67 ms, suits a software endpoint on a busy host."""

    timeout_exp: int = 16
    linear_retries: int = 7
    exp_retries: int = 7

    def __post_init__(self):
        for name, value, hi in (("timeout_exp", self.timeout_exp, 24), ("linear_retries", self.linear_retries, 7),
                                ("exp_retries", self.exp_retries, INFINITE_RETRIES)):
            if not 0 <= value <= hi:
                raise ValueError(f"{name} must be within 0..{hi}, got {value}")

    def rto_ns(self, retries: int) -> int:
        """The timeout in ns after ``retries`` consecutive timeouts."""
        n = min(24, self.timeout_exp + max(0, retries - self.linear_retries))
        return TIME_UNIT_NS << n

    def exhausted(self, retries: int) -> bool:
        """Whether ``retries`` consecutive timeouts exceed the limit."""
        return self.exp_retries != INFINITE_RETRIES and retries > self.linear_retries + self.exp_retries


class Completion:
    """The completion of one posted write: wait on it from any thread.

    ``nbytes`` is the message length; ``started_ns``/``finished_ns`` are monotonic times.
    """

    def __init__(self, nbytes: int, imm: int | None):
        self.nbytes = nbytes
        self.imm = imm
        self.error: QpError | None = None
        self.started_ns = time.monotonic_ns()
        self.finished_ns: int | None = None
        self._event = threading.Event()
        self._callbacks: list[Callable[["Completion"], None]] = []

    def done(self) -> bool:
        """Whether the write completed or failed."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> "Completion":
        """Block until every byte is placed at the responder (acknowledged).

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
            QpError: the QP went to error before the write completed.
        """
        if not self._event.wait(timeout):
            raise TimeoutError(f"write of {self.nbytes} B not complete after {timeout} s")
        if self.error is not None:
            raise self.error
        return self

    def add_done_callback(self, fn: Callable[["Completion"], None]) -> None:
        """Call ``fn(self)`` on completion (from the endpoint's thread)."""
        self._callbacks.append(fn)

    def _finish(self, error: QpError | None = None) -> None:
        self.error = error
        self.finished_ns = time.monotonic_ns()
        self._event.set()
        for fn in self._callbacks:
            fn(self)


class _Message:
    __slots__ = ("completion", "data", "remote_va", "rkey", "imm", "msn", "rqmsn", "first_psn",
                 "last_psn", "npkts", "next_idx")

    def __init__(self, completion, data, remote_va, rkey, imm, msn, rqmsn, mtu):
        self.completion, self.data, self.remote_va, self.rkey, self.imm = completion, data, remote_va, rkey, imm
        self.msn, self.rqmsn = msn, rqmsn
        self.npkts = max(1, -(-len(data) // mtu))
        self.first_psn = self.last_psn = -1
        self.next_idx = 0


class _Packet:
    __slots__ = ("psn", "msg", "off", "size", "opcode", "tx_seq", "sent_at", "lost", "reason", "last")

    def __init__(self, psn, msg, off, size, opcode, last):
        self.psn, self.msg, self.off, self.size, self.opcode, self.last = psn, msg, off, size, opcode, last
        self.tx_seq = 0
        self.sent_at = 0
        self.lost = False
        self.reason = ""


def _slowest(tracker: int, sample: int, shift: int) -> int:
    """A slowest-RTT tracker (ns) after one RTT ``sample`` (ns): the sample, or the tracker
    less 1/2**``shift`` of itself, whichever is larger."""
    return max(sample, tracker - (tracker >> shift))


def _opcode(idx: int, npkts: int, imm: bool) -> int:
    if npkts == 1:
        return Opcode.WRITE_ONLY_IMM if imm else Opcode.WRITE_ONLY
    if idx == 0:
        return Opcode.WRITE_FIRST
    if idx == npkts - 1:
        return Opcode.WRITE_LAST_IMM if imm else Opcode.WRITE_LAST
    return Opcode.WRITE_MIDDLE


class RequestorQp:
    """Send state of one QP from ``local_addr`` to ``peer`` (NIC addresses), whose responder QP
    is ``remote_qpn``. ``mtu`` is the payload per packet in bytes, ``mpr`` the window in PSNs.
    ``send(buffers, tclass)`` puts one packet on the wire."""

    def __init__(self, qpn: int, remote_qpn: int, local_addr: str, peer: str, send: Send, *,
                 mtu: int = DEFAULT_PAYLOAD_LEN, mpr: int = 1024, initial_psn: int = 0,
                 retry: RetryConfig | None = None, cc: NsccConfig | None = None,
                 reorder_packets: int = REORDER_PACKETS):
        if not 0 < mtu <= 4096:
            raise ValueError(f"path MTU payload must be within 1..4096 B, got {mtu}")
        if mpr < MPR_UNIT_PSNS or mpr % MPR_UNIT_PSNS:
            raise ValueError(f"MPR {mpr} is not a positive multiple of {MPR_UNIT_PSNS} PSNs")
        self.qpn, self.remote_qpn, self.peer, self.send = qpn, remote_qpn, peer, send
        self.mtu, self.mpr, self.retry = mtu, mpr, retry or RetryConfig()
        self.reorder_packets = reorder_packets
        self.cc = NsccWindow(cc or NsccConfig(mtu=mtu, initial_cwnd=64 * mtu, max_cwnd=mpr * mtu))
        self.icrc = IcrcContext(local_addr, peer)
        self.icrc_rx = IcrcContext(peer, local_addr)
        self.stats = RequestorStats()
        self.error: str | None = None
        self.next_psn = initial_psn
        self._una_seen = initial_psn
        self.outstanding: dict[int, _Packet] = {}  # unacknowledged, in PSN order
        self.order: dict[int, _Packet] = {}  # unacknowledged and not lost, in send order
        self.rtxq: list[int] = []
        self.inflight = 0
        self.tx_seq = 0
        self.max_rtt_ns = 0  # slowest recent RTT (ns), RTT_MAX_DECAY_SHIFT: the SACK-gap rule
        self.rto_rtt_ns = 0  # slowest RTT (ns), RTO_RTT_DECAY_SHIFT: the RTO floor
        self.retries = 0
        # The timer restarts at each timeout: no timeout falls due sooner than an RTO after it.
        self.last_timeout_ns = 0
        self.rto_acked_tx = 0  # the latest timeout resend acknowledged (its transmission number)
        # The latest transmission acknowledged that the window let out: a timeout's resend
        # is not (sent whatever the window, it may overtake a window held up on its way), so
        # its ack says nothing of the packets sent before it.
        self.window_acked_tx = 0
        self.rto_credit = False  # a timeout's resend goes out whatever the window
        self.msn = 0
        self.rqmsn = 0
        self.queue: deque[_Message] = deque()
        self.active: deque[_Message] = deque()
        self._hdr = bytearray(64)
        self._hview = memoryview(self._hdr)
        self._probe_id = 0

    # --- posting ------------------------------------------------------------------------
    def post(self, data, remote_va: int, rkey: int, imm: int | None = None) -> Completion:
        """Queue a WRITE (or WRITE_WITH_IMM when ``imm`` is given) of ``data`` (bytes-like) to
        ``remote_va`` under ``rkey``. Returns its :class:`Completion`.

        Raises:
            ValueError: VA, rkey or imm out of range (64, 32, 32 bits).
            QpError: the QP is in error.
        """
        data = memoryview(data).cast("B")
        if remote_va < 0 or remote_va + len(data) > 1 << 64:
            raise ValueError(f"remote VA {remote_va:#x} + {len(data)} B exceeds 64 bits")
        if not 0 <= rkey <= 0xFFFFFFFF or (imm is not None and not 0 <= imm <= 0xFFFFFFFF):
            raise ValueError("rkey and imm must be 32-bit values")
        if self.error is not None:
            raise QpError(f"QP {self.qpn:#x} is in error: {self.error}")
        comp = Completion(len(data), imm)
        self.msn += 1
        if imm is not None:
            self.rqmsn += 1
        self.queue.append(_Message(comp, data, remote_va, rkey, imm, self.msn, self.rqmsn, self.mtu))
        return comp

    def busy(self) -> bool:
        """Whether writes are queued or unacknowledged."""
        return bool(self.queue or self.active)

    # --- sending ------------------------------------------------------------------------
    def una(self) -> int:
        """The lowest unacknowledged absolute PSN (``next_psn`` when all are acknowledged)."""
        self._una_seen = next(iter(self.outstanding), self.next_psn)
        return self._una_seen

    def _mpr_full(self) -> bool:
        # una never decreases, so a PSN inside the last seen window needs no fresh look-up.
        return self.next_psn >= self._una_seen + self.mpr and self.next_psn >= self.una() + self.mpr

    def pump(self, now: int, budget: int = 32) -> int:
        """Send up to ``budget`` packets that the window allows, retransmissions first (oldest
        PSN first). Returns how many were sent."""
        sent = 0
        while sent < budget and self.error is None:
            pkt, rtx = self._next_packet()
            if pkt is None:
                break
            self._transmit(pkt, rtx, now)
            sent += 1
        return sent

    def _window_allows(self, size: int) -> bool:
        return self.inflight == 0 or self.inflight + size <= self.cc.cwnd

    def _next_packet(self) -> tuple[_Packet | None, bool]:
        while self.rtxq:
            pkt = self.outstanding.get(self.rtxq[0])
            if pkt is None or not pkt.lost:
                heapq.heappop(self.rtxq)
                continue
            if not self._window_allows(pkt.size) and not self.rto_credit:
                return None, True
            self.rto_credit = False
            heapq.heappop(self.rtxq)
            return pkt, True
        if not self.queue or self._mpr_full():
            return None, False
        msg = self.queue[0]
        size = min(self.mtu, len(msg.data) - msg.next_idx * self.mtu)
        if not self._window_allows(size):
            return None, False
        return self._segment(msg, size), False

    def _segment(self, msg: _Message, size: int) -> _Packet:
        idx = msg.next_idx
        if idx == 0:
            msg.first_psn = self.next_psn
            msg.last_psn = self.next_psn + msg.npkts - 1
            self.active.append(msg)
        msg.next_idx += 1
        if msg.next_idx == msg.npkts:
            self.queue.popleft()
        pkt = _Packet(self.next_psn, msg, idx * self.mtu, size, _opcode(idx, msg.npkts, msg.imm is not None),
                      idx == msg.npkts - 1)
        self.outstanding[pkt.psn] = pkt
        self.next_psn += 1
        return pkt

    def _transmit(self, pkt: _Packet, rtx: bool, now: int) -> None:
        self.tx_seq += 1
        pkt.tx_seq, pkt.sent_at, pkt.lost = self.tx_seq, now, False
        self.order.pop(pkt.psn, None)
        self.order[pkt.psn] = pkt
        self.inflight += pkt.size
        flags = BTH_FLAG_TS
        if rtx:
            flags |= BTH_FLAG_RTX
            self.stats.retransmits[pkt.reason] += 1
        if pkt.last or self.inflight + self.mtu > self.cc.cwnd or self._mpr_full():
            flags |= BTH_FLAG_ACKREQ
        msg = pkt.msg
        hlen = pack_data_packet(self._hdr, pkt.opcode, flags, self.remote_qpn, pkt.psn, msg.rqmsn, msg.msn,
                                now // TIME_UNIT_NS, msg.remote_va + pkt.off, msg.rkey, pkt.size,
                                msg.imm if pkt.last else None)
        hdr = self._hview[:hlen]
        payload = msg.data[pkt.off:pkt.off + pkt.size]
        crc = self.icrc.compute(hdr, payload, total=hlen + pkt.size + ICRC_LEN)
        try:
            self.send([hdr, payload, ICRC.pack(crc)], TCLASS_RETX if rtx else TCLASS_DATA)
        except OSError as exc:
            self.fail(f"cannot send: {exc.strerror or exc}")
            return
        self.stats.packets += 1
        self.stats.payload_bytes += pkt.size

    def send_probe(self, now: int) -> None:
        """Send a reliability PROBE (PETH); the responder answers with a SACK with PR = 1."""
        self._probe_id += 1
        buf = bytearray(64)
        n = pack_probe(buf, self.remote_qpn, self._probe_id, now // TIME_UNIT_NS)
        crc = self.icrc.compute(memoryview(buf)[:n], total=n + ICRC_LEN)
        self.send([memoryview(buf)[:n], ICRC.pack(crc)], TCLASS_CONTROL)
        self.stats.probes += 1

    # --- feedback -----------------------------------------------------------------------
    def on_reply(self, buf, now: int) -> None:
        """Apply one received reply ``buf`` (the UDP payload, BTH first, ICRC last; any
        length): a SACK or NACK with a good ICRC is applied, anything else is counted
        (``bad_icrc``, ``malformed``) and dropped. ``now`` is monotonic ns."""
        n = len(buf)
        self.stats.icrc_checked += 1
        if not self.icrc_rx.check(buf, n):
            self.stats.bad_icrc += 1
            return
        if buf[0] == Opcode.SACK and n >= SACK_LEN + ICRC_LEN:
            self.on_sack(parse_sack(buf), now)
        elif buf[0] == Opcode.NACK and n >= NACK_LEN + ICRC_LEN:
            self.on_nack(parse_nack(buf), now)
        else:
            self.stats.malformed += 1

    def on_sack(self, s: Sack, now: int) -> None:
        """Apply a SACK: acknowledge, detect losses, adapt the window, complete writes."""
        if self.error is not None:
            return
        self.stats.sacks += 1
        ecn = s.m != MultipathState.NONE
        if ecn:
            self.stats.ecn_sacks += 1
        ref = self.una()
        acked = 0
        cack = unwrap(s.cack_psn, ref)
        od = self.outstanding
        while od:
            psn = next(iter(od))
            if psn > cack:
                break
            acked += self._ack(psn, now)
        bm, base = s.bitmap, unwrap(s.sack_base, ref)
        while bm:
            b = bm.bit_length() - 1
            bm ^= 1 << b
            psn = base + 63 - b
            if psn in od:
                acked += self._ack(psn, now)
        psn = unwrap(s.ack_psn, ref)
        if psn in od:
            acked += self._ack(psn, now)
        rtt = ((now // TIME_UNIT_NS - s.tx_ts) & 0xFFFF) * TIME_UNIT_NS
        self.cc.on_ack(acked, rtt, ecn, now)
        if acked:
            self.retries = 0
        self._detect_losses(now, self.window_acked_tx - self.reorder_packets)
        self._complete()

    def _ack(self, psn: int, now: int) -> int:
        pkt = self.outstanding.pop(psn)
        if not pkt.reason:  # Karn: only a first transmission gives an RTT sample
            sample = now - pkt.sent_at
            self.max_rtt_ns = _slowest(self.max_rtt_ns, sample, RTT_MAX_DECAY_SHIFT)
            self.rto_rtt_ns = _slowest(self.rto_rtt_ns, sample, RTO_RTT_DECAY_SHIFT)
        self.order.pop(psn, None)
        if not pkt.lost:
            self.inflight -= pkt.size
        self.stats.acked_bytes += pkt.size
        if pkt.reason == "rto":
            self.rto_acked_tx = max(self.rto_acked_tx, pkt.tx_seq)
        else:
            self.window_acked_tx = max(self.window_acked_tx, pkt.tx_seq)
        return pkt.size or 1

    def _detect_losses(self, now: int, last_tx: int) -> None:
        """Mark lost, oldest first, the packets last sent as transmission ``last_tx`` or
        earlier, once older than 5/4 of the slowest recent RTT."""
        sent_before = now - self.max_rtt_ns - (self.max_rtt_ns >> 2)
        order = self.order
        while order:
            pkt = next(iter(order.values()))
            if pkt.tx_seq > last_tx or pkt.sent_at > sent_before:
                break
            self._mark_lost(pkt, "sack_gap")

    def _mark_lost(self, pkt: _Packet, reason: str) -> None:
        if pkt.lost:
            return
        pkt.lost, pkt.reason = True, reason
        self.inflight -= pkt.size
        self.order.pop(pkt.psn, None)
        heapq.heappush(self.rtxq, pkt.psn)

    def on_nack(self, nk: Nack, now: int) -> None:
        """Apply a NACK: retransmit its PSN, or go to error on UNEXP_EVENT (reference 2.6)."""
        if self.error is not None:
            return
        try:
            reason = NackReason(nk.reason)
        except ValueError:
            self.stats.nacks[f"unknown_{nk.reason:#x}"] += 1
            return
        self.stats.nacks[reason.name] += 1
        if reason == NackReason.UNEXP_EVENT:
            self.fail(f"responder answered PSN {nk.psn} with NACK UNEXP_EVENT")
            return
        if reason in (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP):
            self.cc.on_trim(now)
        pkt = self.outstanding.get(unwrap(nk.psn, self.una()))
        if pkt is not None:
            self._mark_lost(pkt, _RESEND_REASONS[reason])

    def on_timer(self, now: int) -> int | None:
        """Run the RTO. Returns the next deadline in ns, or None when nothing is in flight."""
        if self.error is not None or not self.order:
            return None
        # A timeout's resend came back: before it, one later transmission acked is enough,
        # not reorder_packets, to lose a packet older than the slowest recent RTT (the tail
        # of a write on a dead path, which the restarted timer would otherwise resend one
        # RTO apart). The resend's own ack is no such evidence: sent whatever the window, it
        # may have overtaken a whole window held up on a path whose forwarding waits for a
        # core. Judged here, after the socket was drained, so every ack of a batch counts first.
        if self.rto_acked_tx:
            self._detect_losses(now, min(self.rto_acked_tx, self.window_acked_tx) - 1)
            if not self.order:
                return None
        rto = self._rto_ns()
        oldest = next(iter(self.order.values()))
        due = max(oldest.sent_at, self.last_timeout_ns) + rto
        if now < due:
            return due
        self.retries += 1
        self.stats.timeouts += 1
        # The timer restarts (RFC 6298 section 5.5-5.6). The packets sent with the one resent
        # below are about as old as it: timed out one per turn, each would halve the window
        # again and blame its EV's path, a dozen within a few hundred µs of one stall.
        self.last_timeout_ns = now
        if self.retry.exhausted(self.retries):
            self.fail(f"retry counter exceeded: {self.retries - 1} timeouts without progress")
            return None
        self.cc.on_timeout()
        # Only the oldest packet is resent (RFC 6298 section 5.4). A timeout on this fabric
        # is mostly a stall (a path's queue waiting for a busy core), not a loss, and each
        # resent packet is judged by the host dataplane, which retires the EV, and with it
        # the EV's whole path, when a later packet was delivered: resending every packet
        # past its RTO blamed up to every path at once. The rest follow by the SACK-gap rule
        # once the resent one is acked, or by the next timeout.
        self._mark_lost(oldest, "rto")
        # The one resend goes out whatever the window (RFC 5681 section 3.1: after a timeout
        # the sender sends one segment): the window has just halved while the packets not
        # resent still count in flight, and a resend held behind them could never leave.
        self.rto_credit = True
        self.send_probe(now)
        return now + self._rto_ns()

    def _rto_ns(self) -> int:
        """The timeout now, ns: the profile's timer after ``retries`` timeouts
        (:meth:`RetryConfig.rto_ns`), but never below 2**:data:`RTO_MAX_RTT_SHIFT` times the
        slowest RTT of the slow tracker (:data:`RTO_RTT_DECAY_SHIFT`)."""
        return max(self.retry.rto_ns(self.retries), self.rto_rtt_ns << RTO_MAX_RTT_SHIFT)

    def _complete(self) -> None:
        una = self.una()
        while self.active and self.active[0].last_psn < una:
            msg = self.active.popleft()
            self.stats.completions += 1
            msg.completion._finish()

    def fail(self, why: str) -> None:
        """Move the QP to error: every pending write fails with :class:`QpError`."""
        self.error = why
        err = QpError(f"QP {self.qpn:#x} to {self.peer}: {why}")
        for msg in list(self.active) + list(self.queue):
            msg.completion._finish(err)
        self.active.clear()
        self.queue.clear()
        self.outstanding.clear()
        self.order.clear()
        self.rtxq.clear()
        self.inflight = 0
