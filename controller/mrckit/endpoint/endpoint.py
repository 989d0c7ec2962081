"""An MRC endpoint on one NIC address: requestor and responder over one UDP socket, run by
one background thread (design section 6).

>>> ep = Endpoint("2001:db8:100::1")                       # doctest: +SKIP
>>> qp = ep.create_qp("2001:db8:100::2", remote_qpn=0x100)  # out of band: MRC has no CM
>>> ep.write(qp, data, remote_va=0, rkey=0x1000).wait()

All QP state is touched only by the endpoint thread; the API posts work to it.
"""

from __future__ import annotations

import ipaddress
import os
import select
import threading
import time
from collections import deque
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from mrckit.wire.constants import (
    BTH_LEN, DEFAULT_PAYLOAD_LEN, ICRC_LEN, MPR_UNIT_PSNS, PSN_MOD, UDP_PORT_ROCEV2, Opcode,
)
from mrckit.wire.headers import parse_bth

from .cc import NsccConfig
from .choices import RC_NEEDS_NATIVE, TRANSPORTS
from .memory import MemoryRegion, MemoryTable
from .requestor import Completion, RequestorQp, RetryConfig, TCLASS_CONTROL
from .responder import RecvCompletion, Responder, ResponderQp, SACK_COALESCE_BYTES
from .transport import UdpTransport

RX_BUDGET = 256
"""Datagrams read per loop turn before the endpoint sends again."""
IDLE_POLL_MS = 50


@dataclass
class QpConfig:
    """Per-QP transport settings: payload bytes per packet, MPR in PSNs (multiple of 128),
    initial PSNs (send and receive), timers, congestion window, and ``transport``: ``mrc``
    or ``rc`` (the RC baseline, native endpoint only; docs/endpoint.md)."""

    mtu: int = DEFAULT_PAYLOAD_LEN
    mpr: int = 1024
    initial_psn: int = 0
    remote_initial_psn: int = 0
    retry: RetryConfig | None = None
    cc: NsccConfig | None = None
    transport: str = "mrc"

    def __post_init__(self):
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport {self.transport!r}: use {' or '.join(TRANSPORTS)}")
        if not 0 < self.mtu <= 4096:
            raise ValueError(f"path MTU payload must be within 1..4096 B, got {self.mtu}")
        if self.mpr < MPR_UNIT_PSNS or self.mpr % MPR_UNIT_PSNS or self.mpr > 255 * MPR_UNIT_PSNS:
            raise ValueError(f"MPR {self.mpr} is not a multiple of {MPR_UNIT_PSNS} PSNs within "
                             f"{MPR_UNIT_PSNS}..{255 * MPR_UNIT_PSNS}")
        for name in ("initial_psn", "remote_initial_psn"):
            if not 0 <= getattr(self, name) < PSN_MOD:
                raise ValueError(f"{name} {getattr(self, name)} is not a 24-bit PSN")


class QpRequestor(Protocol):
    """What :class:`QueuePair` reads of its requestor, whichever endpoint made it (a
    :class:`RequestorQp`, or the native endpoint's)."""

    @property
    def remote_qpn(self) -> int: ...


class QpReceiver(Protocol):
    """What :class:`QpSetup` sets on a QP's receive state, whichever responder made it (a
    :class:`ResponderQp`, or the native responder's view of one)."""

    remote_qpn: int

    def set_rc(self) -> None: ...


RQ = TypeVar("RQ", bound=QpRequestor)
"""The kind of requestor of an endpoint's QPs."""
RS = TypeVar("RS", bound=QpReceiver)
"""The kind of receive state of an endpoint's QPs."""
RS_co = TypeVar("RS_co", bound=QpReceiver, covariant=True)


class QueuePair(Generic[RQ, RS]):
    """A QP between this endpoint and ``peer``: ``qpn`` here, ``remote_qpn`` there.
    ``requestor`` sends writes; ``responder`` receives them. Set ``remote_qpn`` with
    :meth:`Endpoint.connect` when it is not known at creation. Both are of the endpoint's own
    kind (``RQ``, ``RS``): the Python or the native state machines."""

    def __init__(self, qpn: int, peer: str, config: QpConfig):
        self.qpn, self.peer, self.config = qpn, peer, config
        self.requestor: RQ | None = None
        self.responder: RS | None = None

    @property
    def remote_qpn(self) -> int | None:
        """The peer's QP number, once connected."""
        return self.requestor.remote_qpn if self.requestor else None


def _norm(addr: str) -> str:
    try:
        return ipaddress.IPv6Address(addr).compressed
    except ValueError:
        raise ValueError(f"{addr!r} is not an IPv6 NIC address") from None


class _QpResponder(Protocol[RS_co]):
    """The responder side of an endpoint, as :class:`QpSetup` uses it: it takes a QP's
    settings and returns the QP's receive state."""

    def add_qp(self, qp: ResponderQp) -> RS_co: ...


class QpSetup(Generic[RQ, RS]):
    """Creating and connecting QPs, shared by :class:`Endpoint` and the native endpoint. The
    host class provides ``qps``, ``_next_qpn``, ``responder``, ``_guard()`` (the context that
    holds its lock) and ``_add_requestor(qp, remote_qpn)`` (its kind of requestor);
    ``SUPPORTS_RC`` says whether its QPs can be RC baseline QPs (``QpConfig.transport``)."""

    SUPPORTS_RC = False

    qps: dict[int, QueuePair[RQ, RS]]
    _next_qpn: int
    responder: _QpResponder[RS]

    def _guard(self) -> AbstractContextManager[object]:
        raise NotImplementedError  # the host class's lock

    def _add_requestor(self, qp: QueuePair[RQ, RS], remote_qpn: int) -> None:
        raise NotImplementedError  # the host class's kind of requestor

    def create_qp(self, peer: str, *, qpn: int | None = None, remote_qpn: int | None = None,
                  config: QpConfig | None = None) -> QueuePair[RQ, RS]:
        """Create a QP to NIC address ``peer``. It can receive at once (from ``peer`` only,
        or from anyone when ``peer`` is ``::``); it can write after :meth:`connect` (or when
        ``remote_qpn`` is given here).

        Raises:
            ValueError: bad address, a QP number in use or outside 1..2**24-1 (0x2 is reserved),
                or the rc transport on an endpoint without it.
        """
        config = config or QpConfig()
        if config.transport == "rc" and not self.SUPPORTS_RC:
            raise ValueError(RC_NEEDS_NATIVE)
        peer = _norm(peer)
        if remote_qpn is not None and not 0 < remote_qpn < 1 << 24:
            raise ValueError(f"remote QP number {remote_qpn} is outside 1..2**24-1")
        with self._guard():
            if qpn is None:
                while self._next_qpn in self.qps:
                    self._next_qpn += 1
                qpn = self._next_qpn
            if qpn == 0x2:
                raise ValueError("QP 0x2 is reserved for endpoint operations")
            qp: QueuePair[RQ, RS] = QueuePair(qpn, peer, config)
            qp.responder = self.responder.add_qp(ResponderQp(
                qpn, remote_qpn or 0, config.mpr, config.mtu, config.remote_initial_psn,
                peer=None if peer == "::" else peer))
            if config.transport == "rc":
                qp.responder.set_rc()
            self.qps[qpn] = qp
            if remote_qpn is not None:
                self._connect_locked(qp, remote_qpn)
        return qp

    def _connect_locked(self, qp: QueuePair[RQ, RS], remote_qpn: int) -> None:
        if qp.requestor is not None:
            raise ValueError(f"QP {qp.qpn:#x} is connected already")
        if not 0 < remote_qpn < 1 << 24:
            raise ValueError(f"remote QP number {remote_qpn} is outside 1..2**24-1")
        if qp.responder is None:
            raise ValueError(f"QP {qp.qpn:#x} has no responder side")
        qp.responder.remote_qpn = remote_qpn
        self._add_requestor(qp, remote_qpn)


class Endpoint(QpSetup[RequestorQp, ResponderQp]):
    """The MRC endpoint bound to ``nic_addr`` (IPv6) port ``port`` (4791), sending to peers'
    ``peer_port``. ``sack_coalesce_bytes`` tunes the responder; ``start=False`` runs no thread
    (a test then drives :meth:`dispatch` itself).

    Raises:
        ValueError: ``nic_addr`` is not an IPv6 address.
        OSError: the address is not configured in this network namespace, or the port is taken.
    """

    responder: Responder

    def __init__(self, nic_addr: str, *, port: int = UDP_PORT_ROCEV2, peer_port: int = UDP_PORT_ROCEV2,
                 sack_coalesce_bytes: int = SACK_COALESCE_BYTES, start: bool = True):
        self.nic_addr = _norm(nic_addr)
        self.transport = UdpTransport(self.nic_addr, port, peer_port=peer_port)
        self.memory = MemoryTable()
        self.qps: dict[int, QueuePair[RequestorQp, ResponderQp]] = {}
        self._recv_cv = threading.Condition()
        self.responder = Responder(self.nic_addr, self.memory, self._emit_control,
                                   sack_coalesce_bytes=sack_coalesce_bytes, on_completion=self._on_recv)
        self._lock = threading.Lock()
        self._posted: deque = deque()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._stop = threading.Event()
        self._next_qpn = 0x100
        self._rx = bytearray(9216)
        self._thread = threading.Thread(target=self._run, name=f"mrc-endpoint-{self.nic_addr}", daemon=True)
        if start:
            self._thread.start()

    def _guard(self) -> threading.Lock:
        return self._lock

    # --- set-up -------------------------------------------------------------------------
    def register_mr(self, length: int, *, base_va: int = 0, rkey: int | None = None) -> MemoryRegion:
        """Register a zero-filled memory region that peers may write (see
        :meth:`MemoryTable.register`)."""
        with self._lock:
            return self.memory.register(length, base_va=base_va, rkey=rkey)

    def _add_requestor(self, qp: QueuePair[RequestorQp, ResponderQp], remote_qpn: int) -> None:
        c = qp.config
        qp.requestor = RequestorQp(qp.qpn, remote_qpn, self.nic_addr, qp.peer, self._sender(qp.peer),
                                   mtu=c.mtu, mpr=c.mpr, initial_psn=c.initial_psn, retry=c.retry, cc=c.cc)

    def _sender(self, peer: str):
        send = self.transport.send
        return lambda parts, tclass: send(parts, tclass, peer)

    # --- data path API ------------------------------------------------------------------
    def write(self, qp: QueuePair[RequestorQp, ResponderQp], data, remote_va: int, rkey: int,
              imm: int | None = None) -> Completion:
        """RDMA WRITE ``data`` to ``remote_va``/``rkey`` at the peer, or WRITE_WITH_IMM when
        ``imm`` (32 bits) is given. Returns a :class:`Completion` at once (asynchronous); call
        ``.wait()`` for the synchronous form. ``data`` must stay unchanged until completion.

        Raises:
            ValueError: the QP is not connected, or VA/rkey/imm out of range.
            QpError: the QP is in error.
        """
        if qp.requestor is None:
            raise ValueError(f"QP {qp.qpn:#x} has no remote QP number: call connect() first")
        with self._lock:
            comp = qp.requestor.post(data, remote_va, rkey, imm)
            self._posted.append(qp.requestor)
        os.write(self._wake_w, b"x")
        return comp

    def poll_recv(self, timeout: float | None = None) -> RecvCompletion | None:
        """The next WRITE_WITH_IMM completion at this endpoint's responder, waiting up to
        ``timeout`` seconds; None on timeout."""
        with self._recv_cv:
            if not self.responder.completions:
                self._recv_cv.wait_for(lambda: self.responder.completions, timeout)
            return self.responder.completions.popleft() if self.responder.completions else None

    def _on_recv(self, _comp: RecvCompletion) -> None:
        with self._recv_cv:
            self._recv_cv.notify_all()

    def _emit_control(self, packet: bytes, peer: str) -> None:
        self.transport.send([packet], TCLASS_CONTROL, peer)

    # --- the loop -----------------------------------------------------------------------
    def _run(self) -> None:
        poller = select.poll()
        poller.register(self.transport.fileno(), select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        active: list[RequestorQp] = []
        try:
            while not self._stop.is_set():
                with self._lock:
                    got = self._receive()
                    self.responder.flush()
                    active = self._active(active)
                    now = time.monotonic_ns()
                    sent, deadline = 0, None
                    for rq in active:
                        # Timers run only once the socket is drained: acks queued while this
                        # thread was descheduled must count before a timeout is declared.
                        d = rq.on_timer(now) if got < RX_BUDGET else None
                        sent += rq.pump(now)
                        if d is not None:
                            deadline = d if deadline is None else min(deadline, d)
                if got or sent:
                    continue
                wait_ms = IDLE_POLL_MS if deadline is None else max(0, min(IDLE_POLL_MS, (deadline - now) // 1_000_000 + 1))
                for fd, _ev in poller.poll(wait_ms):
                    if fd == self._wake_r:
                        try:
                            os.read(self._wake_r, 4096)
                        except BlockingIOError:
                            pass
        except BaseException as exc:
            # Fail every write in flight now rather than let its caller wait for a timeout;
            # the thread's exception hook reports the crash.
            for qp in self.qps.values():
                if qp.requestor is not None:
                    qp.requestor.fail(f"endpoint loop crashed: {exc!r}")
            raise

    def _active(self, active: list[RequestorQp]) -> list[RequestorQp]:
        while self._posted:
            rq = self._posted.popleft()
            if rq not in active:
                active.append(rq)
        return [rq for rq in active if rq.busy()]

    def _receive(self) -> int:
        recv = self.transport.recv_into
        buf = self._rx
        got = 0
        while got < RX_BUDGET:
            r = recv(buf)
            if r is None:
                break
            got += 1
            self.dispatch(buf, *r)
        return got

    def dispatch(self, buf, n: int, tclass: int, flow: int, sport: int, peer: str) -> None:
        """Route one received UDP payload: SACK and NACK to the requestor of their QP, the rest
        to the responder. Called by the loop; tests may call it (endpoint created with
        ``start=False``)."""
        if n < BTH_LEN + ICRC_LEN:
            self.responder.handle(buf, n, tclass, flow, sport, peer)
            return
        opcode = buf[0]
        if opcode not in (Opcode.SACK, Opcode.NACK, Opcode.ACK):
            self.responder.handle(buf, n, tclass, flow, sport, peer)
            return
        qp = self.qps.get(parse_bth(buf).dqpn)
        rq = qp.requestor if qp else None
        if rq is None or opcode == Opcode.ACK:
            return
        rq.on_reply(memoryview(buf)[:n], time.monotonic_ns())

    # --- teardown -----------------------------------------------------------------------
    def close(self) -> None:
        """Stop the thread and close the socket; pending writes fail with QpError."""
        self._stop.set()
        os.write(self._wake_w, b"x")
        if self._thread.is_alive():
            self._thread.join(5)
        for qp in self.qps.values():
            if qp.requestor is not None and qp.requestor.busy():
                qp.requestor.fail("endpoint closed")
        self.transport.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def __enter__(self) -> "Endpoint":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
