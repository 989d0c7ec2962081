"""The native state machines behind the same interfaces as the Python ones (design 6):
:class:`NativeRequestorQp` mirrors :class:`mrckit.endpoint.RequestorQp` and
:class:`NativeResponder` mirrors :class:`mrckit.endpoint.Responder`. Neither touches a socket
or a clock: callers pass ``now`` in ns, exactly as to the Python ones, so tests drive both
under one fake clock and compare their packets byte for byte.
"""

from __future__ import annotations

import ctypes as C
import ipaddress
from collections import deque
from typing import Callable

from mrckit.wire.constants import DEFAULT_PAYLOAD_LEN, MPR_UNIT_PSNS, NackReason

from ..cc import NsccConfig
from ..memory import MemoryRegion, MemoryTable
from ..requestor import REORDER_PACKETS, Completion, QpError, RetryConfig
from ..responder import SACK_COALESCE_BYTES, RecvCompletion
from ..stats import RequestorStats, ResponderStats
from . import _lib


NATIVE_TIMEOUT_EXP = 8
"""The native endpoint's default local ACK timeout exponent: 1.024 µs × 2^8 = 262 µs, as in the
OCP examples (design 6). The Python endpoint keeps 2^16 (67 ms): a Python thread on a loaded
host cannot hold a 262 µs timer."""


def default_retry() -> RetryConfig:
    """The native default: RTO 262 µs, 7 linear then 7 exponential retries."""
    return RetryConfig(timeout_exp=NATIVE_TIMEOUT_EXP)


def packed(addr) -> bytes:
    """16-byte form of an IPv6 address given as text or bytes."""
    if isinstance(addr, (bytes, bytearray)) and len(addr) == 16:
        return bytes(addr)
    return ipaddress.IPv6Address(addr).packed


class Outbox:
    """The packets a native state machine produced, in order (``struct mrc_outbox``).
    ``ptr`` wraps one that a native endpoint owns (then :meth:`close` leaves it)."""

    def __init__(self, ptr=None):
        self.lib = _lib.lib()
        self._owned = ptr is None
        self.ptr = ptr if ptr is not None else self.lib.mrcep_outbox_new()
        if not self.ptr:
            raise MemoryError("cannot allocate the native outbox")

    def drain(self) -> list[tuple[bytes, int, bytes]]:
        """Take every packet: [(UDP payload with ICRC, traffic class, 16-byte peer), ...]."""
        ob = self.ptr.contents
        if not ob.count:
            return []
        out, base, stride = [], ob.pkts, _lib.PKT_STRIDE
        for i in range(ob.count):
            head = _lib.OutPkt.from_address(base + i * stride)
            out.append((C.string_at(base + i * stride + _lib.PKT_DATA, head.len), head.tclass, bytes(head.peer)))
        self.lib.mrcep_outbox_clear(self.ptr)
        return out

    def close(self) -> None:
        """Free the outbox (unless an endpoint owns it)."""
        if self.ptr and self._owned:
            self.lib.mrcep_outbox_free(self.ptr)
        self.ptr = None

    __del__ = close


def _nack_names(counts) -> dict[str, int]:
    names = {}
    for code, n in enumerate(counts):
        if n:
            try:
                names[NackReason(code).name] = n
            except ValueError:
                names[f"unknown_{code:#x}"] = n
    return names


class _CwndView:
    def __init__(self, qp):
        self._qp = qp
        self._last = 0.0

    @property
    def cwnd(self) -> float:
        """The congestion window in bytes (its last value once the QP is closed)."""
        if self._qp.ptr:
            self._last = self._qp.lib.mrcep_req_cwnd(self._qp.ptr)
        return self._last

    @cwnd.setter
    def cwnd(self, value: float) -> None:
        self._qp.lib.mrcep_req_set_cwnd(self._qp.ptr, float(value))


class _Outstanding:
    """``psn in qp.outstanding``: whether an absolute PSN is sent and unacknowledged."""

    def __init__(self, qp):
        self._qp = qp

    def __contains__(self, psn: int) -> bool:
        return bool(self._qp.lib.mrcep_req_outstanding(self._qp.ptr, psn))


class NativeRequestorQp:
    """The C requestor of one QP, with :class:`mrckit.endpoint.RequestorQp`'s constructor and
    methods (post, busy, pump, on_sack, on_nack, on_timer, send_probe, fail, una). SACKs and
    NACKs may also be handed over raw with :meth:`on_reply` (ICRC checked there). With
    ``rc=True`` it is an RC baseline requestor (AETH ACK/NAK, go-back-N; docs/endpoint.md).
    ``send(buffers, tclass)`` receives each packet; ``outbox`` shares one with an endpoint
    instead (then ``send`` is unused and the caller drains it).

    Raises:
        ValueError: MTU, MPR or retry settings out of range.
        mrckit.endpoint.native.NativeUnavailable: the library is not built.
    """

    def __init__(self, qpn: int, remote_qpn: int, local_addr, peer, send=None, *,
                 mtu: int = DEFAULT_PAYLOAD_LEN, mpr: int = 1024, initial_psn: int = 0,
                 retry: RetryConfig | None = None, cc: NsccConfig | None = None,
                 reorder_packets: int = REORDER_PACKETS, outbox: Outbox | None = None, rc: bool = False):
        self.lib = _lib.lib()
        if not 0 < mtu <= 4096:
            raise ValueError(f"path MTU payload must be within 1..4096 B, got {mtu}")
        if mpr < MPR_UNIT_PSNS or mpr % MPR_UNIT_PSNS:
            raise ValueError(f"MPR {mpr} is not a positive multiple of {MPR_UNIT_PSNS} PSNs")
        self.qpn, self.remote_qpn, self.peer, self.send = qpn, remote_qpn, peer, send
        self.mtu, self.mpr = mtu, mpr
        self.retry = retry or default_retry()
        ccfg = cc or NsccConfig(mtu=mtu, initial_cwnd=64 * mtu, max_cwnd=mpr * mtu)
        cfg = _lib.ReqCfg(qpn=qpn, remote_qpn=remote_qpn, mtu=mtu, mpr=mpr, initial_psn=initial_psn,
                          timeout_exp=self.retry.timeout_exp, linear_retries=self.retry.linear_retries,
                          exp_retries=self.retry.exp_retries, reorder_packets=reorder_packets,
                          cc=_lib.CcCfg(ccfg.mtu, ccfg.initial_cwnd, ccfg.max_cwnd, ccfg.target_qdelay,
                                        ccfg.eta, ccfg.fi, ccfg.gamma, ccfg.max_md), rc=int(rc))
        cfg.local[:] = packed(local_addr)
        cfg.peer[:] = packed(peer)
        self._own_outbox = outbox is None
        self.outbox = outbox or Outbox()
        err = C.create_string_buffer(160)
        self.ptr = self.lib.mrcep_req_new(C.byref(cfg), self.outbox.ptr, err, len(err))
        if not self.ptr:
            raise ValueError(err.value.decode())
        self.cc = _CwndView(self)
        self.outstanding = _Outstanding(self)
        self._last_stats = RequestorStats()
        self._pending: dict[int, tuple[Completion, object]] = {}
        self._comp = _lib.Completion()

    # --- posting --------------------------------------------------------------------------
    def post(self, data, remote_va: int, rkey: int, imm: int | None = None) -> Completion:
        """Queue a WRITE (WRITE_WITH_IMM when ``imm`` is given); see RequestorQp.post.

        Raises:
            ValueError: VA, rkey or imm out of range (64, 32, 32 bits).
            QpError: the QP is in error.
        """
        view = memoryview(data).cast("B")
        if remote_va < 0 or remote_va + len(view) > 1 << 64:
            raise ValueError(f"remote VA {remote_va:#x} + {len(view)} B exceeds 64 bits")
        if not 0 <= rkey <= 0xFFFFFFFF or (imm is not None and not 0 <= imm <= 0xFFFFFFFF):
            raise ValueError("rkey and imm must be 32-bit values")
        if self.error is not None:
            raise QpError(f"QP {self.qpn:#x} is in error: {self.error}")
        addr, keeper = _lib.buffer_address(data)
        wr = self.lib.mrcep_req_post(self.ptr, addr, len(view), remote_va, rkey, imm is not None, imm or 0)
        if wr < 0:
            raise QpError(f"QP {self.qpn:#x}: cannot post (out of memory)")
        comp = Completion(len(view), imm)
        self._pending[wr] = (comp, keeper)
        return comp

    def busy(self) -> bool:
        """Whether writes are queued or unacknowledged."""
        return bool(self.lib.mrcep_req_busy(self.ptr))

    # --- the state machine ----------------------------------------------------------------
    def pump(self, now: int, budget: int = 32) -> int:
        """Send up to ``budget`` packets the windows allow (retransmissions first)."""
        n = self.lib.mrcep_req_pump(self.ptr, now, budget)
        self._after()
        return n

    def on_reply(self, buf, now: int) -> None:
        """Apply one received SACK or NACK (UDP payload with ICRC); bad ones are counted."""
        raw = bytes(buf)
        self.lib.mrcep_req_on_reply(self.ptr, raw, len(raw), now)
        self._after()

    def on_sack(self, s, now: int) -> None:
        """Apply a parsed :class:`mrckit.wire.headers.Sack` (as RequestorQp.on_sack)."""
        from mrckit.wire.headers import pack_sack
        buf = bytearray(64)
        pack_sack(buf, self.qpn, s)
        self.lib.mrcep_req_on_sack(self.ptr, bytes(buf), now)
        self._after()

    def on_nack(self, nk, now: int) -> None:
        """Apply a parsed :class:`mrckit.wire.headers.Nack` (as RequestorQp.on_nack)."""
        from mrckit.wire.headers import pack_nack
        buf = bytearray(64)
        pack_nack(buf, self.qpn, nk)
        self.lib.mrcep_req_on_nack(self.ptr, bytes(buf), now)
        self._after()

    def on_timer(self, now: int) -> int | None:
        """Run the RTO; the next deadline in ns, or None when nothing is in flight."""
        d = self.lib.mrcep_req_on_timer(self.ptr, now)
        self._after()
        return None if d < 0 else d

    def send_probe(self, now: int) -> None:
        """Send a reliability PROBE."""
        self.lib.mrcep_req_send_probe(self.ptr, now)
        self._after()

    def fail(self, why: str) -> None:
        """Move the QP to error: every pending write fails with :class:`QpError`."""
        self.lib.mrcep_req_fail(self.ptr, why.encode())
        self._after()

    def una(self) -> int:
        """The lowest unacknowledged absolute PSN."""
        return self.lib.mrcep_req_una(self.ptr)

    def _after(self) -> None:
        if self._own_outbox and self.send is not None:
            for pkt, tclass, _peer in self.outbox.drain():
                self.send([pkt], tclass)
        self.complete_finished()

    def complete_finished(self) -> None:
        """Finish the Completions of writes the C side completed or failed."""
        while self.lib.mrcep_req_poll(self.ptr, C.byref(self._comp)):
            comp, _keeper = self._pending.pop(self._comp.wr_id)
            if self._comp.status == 0:
                comp._finish()
            else:
                comp._finish(QpError(f"QP {self.qpn:#x} to {self.peer}: {self.error}"))

    # --- state ----------------------------------------------------------------------------
    @property
    def error(self) -> str | None:
        """Why the QP is in error, or None."""
        e = self.lib.mrcep_req_error(self.ptr)
        return e.decode() if e is not None else None

    @property
    def next_psn(self) -> int:
        """The next absolute PSN to assign."""
        return self.lib.mrcep_req_next_psn(self.ptr)

    @property
    def inflight(self) -> int:
        """Payload bytes sent and neither acknowledged nor declared lost."""
        return self.lib.mrcep_req_inflight(self.ptr)

    @property
    def stats(self) -> RequestorStats:
        """A snapshot of the counters, as the Python requestor keeps them (the last one once
        the QP is closed)."""
        if not self.ptr:
            return self._last_stats
        s = self.lib.mrcep_req_stats(self.ptr).contents
        out = RequestorStats(**{n: getattr(s, n) for n in ("packets", "payload_bytes", "acked_bytes", "sacks",
                                                           "ecn_sacks", "timeouts", "probes", "icrc_checked",
                                                           "bad_icrc", "completions", "malformed",
                                                           "acks", "seq_naks")})
        for i, name in enumerate(_lib.RTX_REASONS):
            if name and s.retransmits[i]:
                out.retransmits[name] = s.retransmits[i]
        out.nacks.update(_nack_names(s.nacks))
        self._last_stats = out
        return out

    def close(self) -> None:
        """Free the C state (pending writes are failed first)."""
        if self.ptr:
            if self.busy():
                self.fail("QP closed")
            self.stats, self.cc.cwnd  # noqa: B018 - keep the last values readable
            self.lib.mrcep_req_free(self.ptr)
            self.ptr = None
        if self._own_outbox:
            self.outbox.close()

    def __del__(self):
        if getattr(self, "ptr", None):
            self.close()


def _set_class(mr: object, cls: type[MemoryRegion]) -> None:
    """Switch a region's class in place: the application keeps its object, and only
    ``placed_bytes`` changes where it reads from."""
    mr.__class__ = cls


class _NativeRegion(MemoryRegion):
    """A region the native responder places into: ``placed_bytes`` reads the C counter live.
    Regions switch to this class when the responder starts following them, and back after."""

    @property
    def placed_bytes(self) -> int:
        resp = self.__dict__.get("_native")
        if resp is not None and resp.ptr:
            self.__dict__["_placed"] = resp.lib.mrcep_resp_mr_placed(resp.ptr, self.rkey)
        return self.__dict__.get("_placed", 0)

    @placed_bytes.setter
    def placed_bytes(self, value: int) -> None:
        self.__dict__["_placed"] = value


class NativeResponderQp:
    """What :meth:`NativeResponder.add_qp` returns: a live view of one QP's receive state."""

    def __init__(self, resp: "NativeResponder", qpn: int, remote_qpn: int, mpr: int, mtu: int,
                 initial_psn: int, peer):
        self._resp, self.qpn, self.mpr, self.mtu, self.peer = resp, qpn, mpr, mtu, peer
        self.initial_psn = initial_psn
        self._remote_qpn = remote_qpn

    @property
    def remote_qpn(self) -> int:
        """The requestor's QP number (the replies' destination)."""
        return self._remote_qpn

    @remote_qpn.setter
    def remote_qpn(self, value: int) -> None:
        self._remote_qpn = value
        self._resp.lib.mrcep_resp_set_remote_qpn(self._resp.ptr, self.qpn, value)

    def set_rc(self) -> None:
        """Make this QP an RC baseline QP: in-order placement only, AETH ACKs, one NAK
        sequence error per gap (docs/endpoint.md "The RC baseline")."""
        self._resp.lib.mrcep_resp_set_rc(self._resp.ptr, self.qpn, 1)

    @property
    def epsn(self) -> int:
        """Absolute PSN below which every packet has landed."""
        return self._resp.lib.mrcep_resp_qp_epsn(self._resp.ptr, self.qpn)

    @property
    def high(self) -> int:
        """The highest absolute PSN received."""
        return self._resp.lib.mrcep_resp_qp_high(self._resp.ptr, self.qpn)

    @property
    def ooo_count(self) -> int:
        """Packets placed out of order."""
        return self._resp.lib.mrcep_resp_qp_ooo(self._resp.ptr, self.qpn)

    @property
    def error(self) -> str | None:
        """Why the QP is in error, or None."""
        e = self._resp.lib.mrcep_resp_qp_error(self._resp.ptr, self.qpn)
        return e.decode() if e is not None else None


class NativeResponder:
    """The C responder at ``local_addr``, with :class:`mrckit.endpoint.Responder`'s interface.

    It places into the regions of ``memory`` (a :class:`MemoryTable`; regions registered
    later are followed). ``emit(packet, peer)`` receives each reply with the peer
    as text, unless ``outbox`` is shared with an endpoint that drains it.
    """

    def __init__(self, local_addr, memory: MemoryTable, emit: Callable[[bytes, str], None] | None = None, *,
                 sack_coalesce_bytes: int = SACK_COALESCE_BYTES,
                 on_completion: Callable[[RecvCompletion], None] | None = None, outbox: Outbox | None = None,
                 ptr=None):
        self.lib = _lib.lib()
        self.local_addr = local_addr
        self.memory, self.emit, self.on_completion = memory, emit, on_completion
        self._own_outbox = outbox is None
        self.outbox = outbox or Outbox()
        self._owned = ptr is None  # a native endpoint's responder is freed with the endpoint
        self.ptr = ptr or self.lib.mrcep_resp_new(packed(local_addr), sack_coalesce_bytes, self.outbox.ptr)
        if not self.ptr:
            raise MemoryError("cannot allocate the native responder")
        self.qps: dict[int, NativeResponderQp] = {}
        self._last_stats = ResponderStats()
        self.completions: deque[RecvCompletion] = deque()
        self._regions: dict[int, tuple[C.Array[C.c_uint8], MemoryRegion]] = {}
        self._peers: dict[bytes, str] = {}
        self._rc = _lib.RecvComp()
        memory.add_listener(self._region_added)
        for mr in memory.regions():
            self._region_added(mr)

    def _region_added(self, mr) -> None:
        arr = (C.c_uint8 * len(mr.buf)).from_buffer(mr.buf)
        self._regions[mr.rkey] = (arr, mr)
        self.lib.mrcep_resp_mr_add(self.ptr, mr.rkey, mr.base_va, C.addressof(arr), len(mr.buf))
        placed = mr.placed_bytes
        _set_class(mr, _NativeRegion)
        mr.__dict__["_native"], mr.__dict__["_placed"] = self, placed

    @staticmethod
    def _release(mr) -> None:
        if isinstance(mr, _NativeRegion):
            placed = mr.placed_bytes
            mr.__dict__.pop("_native", None)
            _set_class(mr, MemoryRegion)
            mr.placed_bytes = placed

    def add_qp(self, qp) -> NativeResponderQp:
        """Register receive state for ``qp`` (a :class:`mrckit.endpoint.ResponderQp` giving the
        settings). Returns the native view.

        Raises:
            ValueError: the QP number is in use or outside 24 bits, or the MPR is invalid.
        """
        if qp.qpn in self.qps:
            raise ValueError(f"QP number {qp.qpn:#x} is in use or not a 24-bit non-zero value")
        peer = packed(qp.peer) if qp.peer is not None else None
        if self.lib.mrcep_resp_add_qp(self.ptr, qp.qpn, qp.remote_qpn, qp.mpr, qp.mtu, qp.initial_psn, peer):
            raise ValueError(f"QP number {qp.qpn:#x} is in use or not a 24-bit non-zero value")
        view = NativeResponderQp(self, qp.qpn, qp.remote_qpn, qp.mpr, qp.mtu, qp.initial_psn, qp.peer)
        self.qps[qp.qpn] = view
        return view

    def handle(self, buf, n: int, tclass: int, flowinfo: int, sport: int, peer) -> None:
        """Process one UDP payload ``buf[:n]`` from ``peer`` (see Responder.handle)."""
        addr, _keep = _lib.buffer_address(buf)
        self.lib.mrcep_resp_handle(self.ptr, addr, n, tclass, flowinfo & 0xFFFFFFFF, sport, packed(peer))
        self._after()

    def flush(self) -> None:
        """Send the coalesced SACKs still owed."""
        self.lib.mrcep_resp_flush(self.ptr)
        self._after()

    def _after(self) -> None:
        if self._own_outbox and self.emit is not None:
            for pkt, _tclass, peer in self.outbox.drain():
                self.emit(pkt, self._peer_text(peer))
        self.take_completions()

    def _peer_text(self, peer: bytes) -> str:
        text = self._peers.get(peer)
        if text is None:
            text = self._peers[peer] = ipaddress.IPv6Address(peer).compressed
        return text

    def take_completions(self) -> None:
        """Move WRITE_WITH_IMM completions from C to :attr:`completions` (and the callback)."""
        rc = self._rc
        while self.lib.mrcep_resp_poll(self.ptr, C.byref(rc)):
            comp = RecvCompletion(rc.qpn, rc.imm, rc.rqmsn, rc.psn)
            self.completions.append(comp)
            if self.on_completion is not None:
                self.on_completion(comp)

    @property
    def stats(self) -> ResponderStats:
        """A snapshot of the counters, as the Python responder keeps them (the last snapshot
        once closed)."""
        if not self.ptr:
            return self._last_stats
        s = self.lib.mrcep_resp_stats(self.ptr).contents
        out = ResponderStats(**{n: getattr(s, n) for n in (
            "packets", "icrc_checked", "bad_icrc", "malformed", "unknown_qp", "duplicates", "placed_packets",
            "placed_bytes", "ce_marked", "trimmed", "probes", "sacks", "imm_completions", "acks", "seq_naks",
            "out_of_sequence")})
        out.nacks.update(_nack_names(s.nacks))
        self._last_stats = out
        return out

    def close(self) -> None:
        """Free the C state and stop following the memory table."""
        if self.ptr:
            self.stats  # noqa: B018 - keep the last counters readable
            self.memory.remove_listener(self._region_added)
            for _arr, mr in self._regions.values():
                self._release(mr)
            if self._owned:
                self.lib.mrcep_resp_free(self.ptr)
            self.ptr = None
            self._regions.clear()
        if self._own_outbox:
            self.outbox.close()

    def __del__(self):
        if getattr(self, "ptr", None):
            self.close()
