"""An in-memory link between one RequestorQp and one Responder, without sockets: packets pass
through a fault function (drop, duplicate, permute, trim, a silent EV) under a fake clock, so
tests can feed the responder permuted, repeated, trimmed and malformed packets directly.

``impl`` picks the requestor ("python", the reference, or "native", the C one through its
binding) and ``resp_impl`` the responder (default: the same), so every test here can run
either endpoint, or one of each against the other."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from mrckit.wire.headers import data_header_len, parse_bth, parse_nack, parse_sack
from mrckit.endpoint.memory import MemoryTable
from mrckit.endpoint.requestor import RequestorQp, RetryConfig
from mrckit.endpoint.responder import Responder, ResponderQp
from mrckit.endpoint.native import NativeRequestorQp, NativeResponder, available
from mrckit.wire.constants import BTH_FLAG_TS, Dscp, Opcode

A, B = "2001:db8:100:1::1", "2001:db8:100:1::2"
QPN_A, QPN_B, RKEY = 0x100, 0x200, 0x1000
IMPLS = ("python", "native")
NATIVE_MISSING = available()
"""None when the C endpoint is built, else why its tests skip."""


def impl_param(name: str):
    """A pytest param for implementation ``name``, skipped when it is native and not built."""
    import pytest
    marks = [pytest.mark.skipif(NATIVE_MISSING is not None, reason=str(NATIVE_MISSING))] if name == "native" else []
    return pytest.param(name, marks=marks, id=name)


@dataclass
class Faults:
    """What happens to data packets on the way to the responder (rates are 0..1)."""

    drop: float = 0.0
    duplicate: float = 0.0
    trim: float = 0.0
    permute: bool = False
    silent_ev: int | None = None
    seed: int = 1
    rng: random.Random = field(init=False)

    def __post_init__(self):
        self.rng = random.Random(self.seed)

    def apply(self, batch: list) -> list:
        out = []
        for pkt, tclass, ev in batch:
            if ev == self.silent_ev:
                continue
            r = self.rng.random()
            if r < self.drop:
                continue
            if r < self.drop + self.trim:
                out.append((trimmed(pkt), Dscp.TRIMMED << 2, ev))
                continue
            out.append((pkt, tclass, ev))
            if self.rng.random() < self.duplicate:
                out.append((pkt, tclass, ev))
        if self.permute:
            self.rng.shuffle(out)
        return out


def trimmed(pkt: bytes) -> bytes:
    """The trimmed form of a data packet: its headers only, no payload and no ICRC (design 4)."""
    bth = parse_bth(pkt)
    return pkt[:data_header_len(bth.opcode, bool(bth.flags & BTH_FLAG_TS))]


class Link:
    """Requestor ``req`` at A writes into region ``mr`` of responder ``resp`` at B.

    The requestor's packets get EVs round-robin from ``evs`` (as the host dataplane would pick
    a fresh one per packet); the responder's replies pass
    through ``reply_faults`` (drop, duplicate, permute).
    """

    def __init__(self, size: int, *, faults: Faults | None = None, mtu: int = 2048, mpr: int = 1024,
                 retry: RetryConfig | None = None, evs=(0x10000001, 0x10100002, 0x20000003, 0x20100004),
                 coalesce: int = 8192, reply_faults: Faults | None = None, impl: str = "python",
                 resp_impl: str | None = None, initial_psn: int = 0, rc: bool = False):
        self.faults = faults or Faults()
        self.reply_faults = reply_faults or Faults()
        self.memory = MemoryTable()
        self.mr = self.memory.register(size, rkey=RKEY)
        self.replies: list[bytes] = []
        resp_cls = NativeResponder if (resp_impl or impl) == "native" else Responder
        self.resp = resp_cls(B, self.memory, lambda pkt, peer: self.replies.append(pkt), sack_coalesce_bytes=coalesce)
        self.rqp = self.resp.add_qp(ResponderQp(QPN_B, QPN_A, mpr, mtu, initial_psn))
        if rc:  # the RC baseline: native only (docs/endpoint.md)
            self.rqp.set_rc()
        self.wire: list = []
        self.evs, self.k = list(evs), 0
        req_cls = NativeRequestorQp if impl == "native" else RequestorQp
        self.req = req_cls(QPN_A, QPN_B, A, B, self._send, mtu=mtu, mpr=mpr, initial_psn=initial_psn,
                           retry=retry or RetryConfig(timeout_exp=12, linear_retries=7, exp_retries=7),
                           **(dict(rc=True) if rc else {}))
        self.sent: list = []  # every (packet, tclass, ev) the requestor sent, for golden tests
        self.answered: list = []  # every reply that reached the requestor
        self.now = 1_000_000

    def _send(self, parts, tclass):
        ev = self.evs[self.k % len(self.evs)]
        self.k += 1
        self.wire.append((b"".join(bytes(p) for p in parts), tclass, ev))
        self.sent.append(self.wire[-1])

    def deliver(self, batch) -> None:
        """Hand (packet, tclass, ev) tuples to the responder as the socket would."""
        for pkt, tclass, ev in batch:
            self.resp.handle(bytearray(pkt), len(pkt), tclass, ev & 0xFFFF, ev >> 16, A)

    def feedback(self) -> None:
        """Hand the responder's replies to the requestor."""
        replies, self.replies = self.replies, []
        replies = [p for p, _, _ in self.reply_faults.apply([(p, 0, 0) for p in replies])]
        for pkt in replies:
            self.answered.append(pkt)
            if isinstance(self.req, NativeRequestorQp):
                self.req.on_reply(pkt, self.now)
                continue
            op = pkt[0]
            if op == Opcode.SACK:
                self.req.on_sack(parse_sack(pkt), self.now)
            elif op == Opcode.NACK:
                self.req.on_nack(parse_nack(pkt), self.now)

    def step(self, dt_ns: int = 200_000) -> None:
        """One round: timers, send what the window allows, deliver with faults, feed back."""
        self.req.on_timer(self.now)
        self.req.pump(self.now, budget=64)
        batch, self.wire = self.wire, []
        self.deliver(self.faults.apply(batch))
        self.resp.flush()
        self.feedback()
        self.now += dt_ns

    def run(self, completions, max_steps: int = 20000) -> int:
        """Step until every completion is done; returns the number of steps."""
        for i in range(max_steps):
            if all(c.done() for c in completions):
                return i
            self.step()
        raise AssertionError(f"not complete after {max_steps} steps: {self.req.stats}")
