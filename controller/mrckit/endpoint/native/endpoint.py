"""The native endpoint: the C requestors and responder over one UDP socket, run by one C thread
(``native/src/endpoint.c``), with :class:`mrckit.endpoint.Endpoint`'s API (design section 6).

>>> ep = NativeEndpoint("2001:db8:100::1")                   # doctest: +SKIP
>>> qp = ep.create_qp("2001:db8:100::2", remote_qpn=0x100)
>>> ep.write(qp, data, remote_va=0, rkey=0x1000).wait()

The C thread owns the socket, the timers (CLOCK_MONOTONIC) and all QP state; API calls take
the endpoint's C mutex. A small Python thread waits (GIL released) for the C thread's
completion events and finishes the :class:`Completion` objects and :meth:`poll_recv`.
"""

from __future__ import annotations

import ctypes as C
import errno
import threading

from mrckit.wire.constants import UDP_PORT_ROCEV2

from ..endpoint import QpSetup, QueuePair, _norm
from ..memory import MemoryRegion, MemoryTable
from ..requestor import Completion
from ..responder import RecvCompletion, SACK_COALESCE_BYTES
from . import _lib
from .state import NativeRequestorQp, NativeResponder, NativeResponderQp, Outbox, packed

EVENT_WAIT_NS = 100_000_000
"""How long the completion thread waits per call before it checks for close (ns)."""


class NativeEndpoint(QpSetup[NativeRequestorQp, NativeResponderQp]):
    """The native MRC endpoint bound to ``nic_addr`` (IPv6) port ``port``, sending to peers'
    ``peer_port``; arguments and methods as :class:`mrckit.endpoint.Endpoint`. With
    ``start=False`` no thread runs and a test drives :meth:`dispatch` and :meth:`turn`. With
    ``busy_poll=True`` the C thread spins on a non-blocking ``recvmmsg`` between turns instead
    of sleeping in ``ppoll``: lower latency, one core kept fully busy (docs/endpoint.md).

    Raises:
        ValueError: ``nic_addr`` is not an IPv6 address.
        OSError: the address is not configured in this network namespace, or the port is taken.
        mrckit.endpoint.native.NativeUnavailable: the library is not built.
    """

    SUPPORTS_RC = True

    responder: NativeResponder

    def __init__(self, nic_addr: str, *, port: int = UDP_PORT_ROCEV2, peer_port: int = UDP_PORT_ROCEV2,
                 sack_coalesce_bytes: int = SACK_COALESCE_BYTES, start: bool = True, busy_poll: bool = False):
        self.lib = _lib.lib()
        self.nic_addr = _norm(nic_addr)
        err = C.create_string_buffer(160)
        self.busy_poll = bool(busy_poll)
        self.ptr = self.lib.mrcep_ep_new(packed(self.nic_addr), port, peer_port, sack_coalesce_bytes,
                                         int(self.busy_poll), err, len(err))
        if not self.ptr:
            code, _, text = err.value.decode().partition(":")
            raise OSError(int(code) if code.isdigit() else errno.EIO, text)
        self.memory = MemoryTable()
        self.outbox = Outbox(self.lib.mrcep_ep_outbox(self.ptr))
        self.responder = NativeResponder(self.nic_addr, self.memory, outbox=self.outbox,
                                         ptr=self.lib.mrcep_ep_resp(self.ptr))
        self.qps: dict[int, QueuePair[NativeRequestorQp, NativeResponderQp]] = {}
        self._next_qpn = 0x100
        self._recv_cv = threading.Condition()
        self._closed = False
        self._events = threading.Thread(target=self._run_events, name=f"mrc-native-{self.nic_addr}", daemon=True)
        if start:
            if self.lib.mrcep_ep_start(self.ptr):
                self.lib.mrcep_ep_free(self.ptr)
                raise OSError(errno.EAGAIN, "cannot start the native endpoint thread")
            self._events.start()

    # --- locking ------------------------------------------------------------------------
    def _guard(self):
        return self._lock()

    def _lock(self):
        lib, ptr = self.lib, self.ptr

        class _Held:
            def __enter__(self_):
                lib.mrcep_ep_lock(ptr)

            def __exit__(self_, *exc):
                lib.mrcep_ep_unlock(ptr)
        return _Held()

    # --- set-up -------------------------------------------------------------------------
    def register_mr(self, length: int, *, base_va: int = 0, rkey: int | None = None) -> MemoryRegion:
        """Register a zero-filled memory region that peers may write (see
        :meth:`MemoryTable.register`; the same errors)."""
        with self._lock():
            return self.memory.register(length, base_va=base_va, rkey=rkey)

    def _add_requestor(self, qp: QueuePair[NativeRequestorQp, NativeResponderQp], remote_qpn: int) -> None:
        c = qp.config
        rq = qp.requestor = NativeRequestorQp(qp.qpn, remote_qpn, self.nic_addr, qp.peer, mtu=c.mtu, mpr=c.mpr,
                                              initial_psn=c.initial_psn, retry=c.retry, cc=c.cc,
                                              outbox=self.outbox, rc=c.transport == "rc")
        self.lib.mrcep_ep_add_req(self.ptr, qp.qpn, rq.ptr)

    # --- data path API ------------------------------------------------------------------
    def write(self, qp: QueuePair[NativeRequestorQp, NativeResponderQp], data, remote_va: int, rkey: int,
              imm: int | None = None) -> Completion:
        """RDMA WRITE ``data`` to ``remote_va``/``rkey`` at the peer (WRITE_WITH_IMM when ``imm``
        is given); returns a :class:`Completion` at once. ``data`` must stay unchanged until
        completion.

        Raises:
            ValueError: the QP is not connected, or VA/rkey/imm out of range.
            QpError: the QP is in error.
        """
        if qp.requestor is None:
            raise ValueError(f"QP {qp.qpn:#x} has no remote QP number: call connect() first")
        with self._lock():
            comp = qp.requestor.post(data, remote_va, rkey, imm)
            self.lib.mrcep_ep_kick(self.ptr, qp.qpn)
        return comp

    def poll_recv(self, timeout: float | None = None) -> RecvCompletion | None:
        """The next WRITE_WITH_IMM completion at this endpoint's responder, waiting up to
        ``timeout`` seconds; None on timeout."""
        comps = self.responder.completions
        with self._recv_cv:
            if not comps:
                self._recv_cv.wait_for(lambda: comps, timeout)
            return comps.popleft() if comps else None

    @property
    def send_errors(self) -> int:
        """Packets the socket refused (ENOBUFS, unreachable...): counted as lost."""
        return self.lib.mrcep_ep_send_errors(self.ptr)

    # --- the arrival log ----------------------------------------------------------------
    def log_arrivals(self, on: bool = True) -> None:
        """Start (or stop) noting every datagram handed to the responder: see :meth:`arrivals`."""
        with self._lock():
            self.lib.mrcep_ep_log_arrivals(self.ptr, int(on))

    def arrivals(self) -> list[tuple[int, int, int | None]]:
        """The datagrams the responder was handed since the last call, oldest first, while the
        log is on: ``(EV, arrival time ns CLOCK_MONOTONIC, TSETH tx_timestamp or None)``; the
        timestamp (16 bits, 1.024 us units, design 3.2) is there for a data packet with BTH
        ts = 1. Entries the log could not keep (out of memory) are counted by
        :attr:`arrivals_lost`."""
        out: list[tuple[int, int, int | None]] = []
        chunk = (_lib.Arrival * 4096)()
        while True:
            with self._lock():
                n = self.lib.mrcep_ep_arrivals(self.ptr, chunk, len(chunk))
            out.extend((a.ev, a.arrival_ns, a.tx_timestamp if a.has_ts else None) for a in chunk[:n])
            if n < len(chunk):
                return out

    @property
    def arrivals_lost(self) -> int:
        """Arrivals the log could not keep (it could not grow)."""
        return self.lib.mrcep_ep_arrivals_lost(self.ptr)

    # --- the completion thread ----------------------------------------------------------
    def _run_events(self) -> None:
        ev = _lib.EpEvent()
        while not self._closed:
            got = self.lib.mrcep_ep_wait(self.ptr, C.byref(ev), EVENT_WAIT_NS)
            if got < 0:
                break
            if got:
                self._event(ev)

    def _event(self, ev) -> None:
        if ev.kind == _lib.EV_RECV:
            r = ev.recv
            recv = RecvCompletion(r.qpn, r.imm, r.rqmsn, r.psn)
            with self._recv_cv:
                self.responder.completions.append(recv)
                self._recv_cv.notify_all()
            return
        rq = self.qps[ev.qpn].requestor
        # The C thread completes only writes posted through the QP's requestor, and a QP
        # keeps its requestor once connected.
        assert rq is not None, f"a completion on QP {ev.qpn:#x}, which has no requestor"
        comp, _keeper = rq._pending.pop(ev.wr_id)
        if ev.status == 0:
            comp._finish()
        else:
            from ..requestor import QpError
            comp._finish(QpError(f"QP {rq.qpn:#x} to {rq.peer}: {rq.error}"))

    # --- driving without the thread (tests) ---------------------------------------------
    def dispatch(self, buf, n: int, tclass: int, flow: int, sport: int, peer: str, now: int) -> None:
        """Route one received UDP payload as the C thread would (``start=False`` only)."""
        addr, _keep = _lib.buffer_address(buf)
        self.lib.mrcep_ep_dispatch(self.ptr, addr, n, tclass, flow, sport, packed(peer), now)

    def turn(self, now: int) -> int:
        """Run one loop turn (receive, timers, pumps, send) in this thread (``start=False``)."""
        with self._lock():
            n = self.lib.mrcep_ep_turn(self.ptr, now)
        ev = _lib.EpEvent()
        while self.lib.mrcep_ep_wait(self.ptr, C.byref(ev), 0) > 0:
            self._event(ev)
        return n

    # --- teardown -----------------------------------------------------------------------
    def close(self) -> None:
        """Stop the thread and close the socket; pending writes fail with QpError."""
        if self._closed:
            return
        self._closed = True
        self.lib.mrcep_ep_stop(self.ptr)
        if self._events.is_alive():
            self._events.join(5)
        ev = _lib.EpEvent()
        while self.lib.mrcep_ep_wait(self.ptr, C.byref(ev), 0) > 0:
            self._event(ev)
        for qp in self.qps.values():
            rq = qp.requestor
            if rq is not None:
                if rq.busy():
                    rq.fail("endpoint closed")
                rq.complete_finished()
        for qp in self.qps.values():
            if qp.requestor is not None:
                qp.requestor.close()
        self.responder.close()
        self.lib.mrcep_ep_free(self.ptr)
        self.ptr = None

    def __enter__(self) -> "NativeEndpoint":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
