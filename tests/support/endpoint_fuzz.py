"""A seeded corpus of generated packets for both endpoints, as data: the same episodes feed the
Python responder and requestor and the C ones through their binding.

An *episode* is a fresh responder (or requestor) and the packets it receives. Most packets are
what a requestor would send (writes of every opcode, with and without the timestamp extension,
in order, reordered, duplicated, far behind or far ahead of the window, across the 24-bit PSN
wrap), the rest is hostile: every other opcode, every length from 0 up, truncations, a wrong
ICRC, a wrong peer or QP, an unknown rkey or a VA outside the region, DMA lengths that lie,
zero-length writes, trimmed DSCPs with stale lengths. A QP that a packet puts in error stays
so, which is why the corpus is many short episodes rather than one long one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from mrckit.endpoint.icrc import IcrcContext
from mrckit.wire.constants import (BTH_FLAG_ACKREQ, BTH_FLAG_RTX, BTH_FLAG_TS, BTH_LEN, ICRC_LEN, IMM_OPCODES,
                                   WRITE_OPCODES, Dscp, Ecn, NackReason, Opcode, PSN_MOD)
from mrckit.wire.headers import (NACK_LEN, PROBE_LEN, SACK_LEN, Nack, Sack, pack_bth, pack_data_headers,
                                 pack_nack, pack_probe, pack_sack)
from mrckit.wire.icrc import ICRC

A, B, OTHER = "2001:db8:100:1::1", "2001:db8:100:1::2", "2001:db8:100:7::9"
REGIONS = ((0x1000, 0x10000, 16384), (0x2000, 0x7FFF_FFFF_F000, 8192))  # (rkey, base VA, length)
MTU = 1024
MPR = 128
QPS = (0x100, 0x101, 0x102)  # responder QPs; the requestor side's remote is QPS[0]
REMOTE_QPN = 0x300


@dataclass(frozen=True, slots=True)
class Arrival:
    """One received UDP payload and what the socket says about it."""

    data: bytes
    tclass: int
    flow: int
    sport: int
    peer: str


@dataclass(frozen=True, slots=True)
class QpSpec:
    qpn: int
    initial_psn: int
    peer: str | None


@dataclass
class Episode:
    """The responder QPs to create and the packets to feed them, in order."""

    qps: tuple[QpSpec, ...]
    arrivals: list[Arrival] = field(default_factory=list)


def _icrc(body: bytes, src: str, dst: str) -> bytes:
    return ICRC.pack(IcrcContext(src, dst).compute(body, total=len(body) + ICRC_LEN))


class _Stream:
    """What one requestor QP would send: PSNs in order from ``next``, messages split into
    packets, VAs walking through a region."""

    def __init__(self, rng: random.Random, spec: QpSpec):
        self.rng, self.spec = rng, spec
        self.next = spec.initial_psn
        self.msn = 0
        self.sent: list[int] = []

    def psn(self) -> int:
        """Mostly the next PSN; sometimes a resend, one far behind or ahead, or any."""
        r, rng = self.rng.random(), self.rng
        if r < 0.70 or not self.sent:
            psn = self.next
            self.next += 1
        elif r < 0.80:
            psn = rng.choice(self.sent[-64:])  # duplicate or late
        elif r < 0.86:
            psn = self.next + rng.randrange(1, 2 * MPR)  # ahead: a gap, or out of the window
        elif r < 0.92:
            psn = self.next - rng.randrange(MPR, 1 << 23)  # far behind
        elif r < 0.96:
            psn = self.next + rng.randrange(MPR, 1 << 23)  # far ahead
        else:
            psn = rng.randrange(PSN_MOD)
        self.sent.append(psn)
        return psn % PSN_MOD


def _data_packet(rng: random.Random, stream: _Stream, hostile: bool) -> tuple[bytes, int]:
    """A write packet (UDP payload, ICRC included) and its traffic class."""
    opcode = rng.choice(sorted(WRITE_OPCODES))
    flags = rng.choice((BTH_FLAG_TS, BTH_FLAG_TS, 0)) | rng.choice((0, BTH_FLAG_RTX, BTH_FLAG_ACKREQ))
    size = rng.choice((0, 1, MTU, rng.randrange(MTU + 1)))
    rkey, base, length = rng.choice(REGIONS)
    va = base + rng.randrange(length - size + 1)
    dma = size
    if hostile:
        r = rng.random()
        if r < 0.25:
            rkey = rng.randrange(1 << 32)
        elif r < 0.5:
            va = rng.randrange(1 << 64)
        elif r < 0.7:
            dma = rng.randrange(1 << 32)
        elif r < 0.85:
            size = MTU + rng.randrange(1, 64)
    buf = bytearray(64)
    pack_bth(buf, opcode, flags, stream.spec.qpn, stream.psn())
    hlen = pack_data_headers(buf, opcode, stream.msn, stream.msn, rng.randrange(1 << 16) if flags & BTH_FLAG_TS else None,
                             va, rkey, dma, rng.randrange(1 << 32) if opcode in IMM_OPCODES else None)
    stream.msn += 1
    body = bytes(buf[:hlen]) + rng.randbytes(size)
    tclass = rng.choice((Dscp.TRIMMABLE << 2 | Ecn.ECT0, Dscp.TRIMMABLE_RETX << 2 | Ecn.ECT0,
                         Dscp.TRIMMABLE << 2 | Ecn.CE))
    return body + _icrc(body, stream.spec.peer or A, B), tclass


def _trimmed(rng: random.Random, stream: _Stream) -> tuple[bytes, int]:
    """A trimmed write: its headers only, or cut anywhere (a switch that trims to a fixed size
    leaves stale lengths), with a TRIMMED DSCP."""
    pkt, _ = _data_packet(rng, stream, False)
    cut = rng.choice((BTH_LEN, 28, 40, rng.randrange(len(pkt) + 1)))
    return pkt[:cut], rng.choice((Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP)) << 2 | Ecn.ECT0


def _hostile(rng: random.Random, stream: _Stream) -> tuple[bytes, int]:
    """Anything else: another opcode, random bytes of any length, a truncation, a bad ICRC."""
    r = rng.random()
    tclass = rng.randrange(256)
    if r < 0.3:
        buf = bytearray(BTH_LEN)
        pack_bth(buf, rng.randrange(256), rng.randrange(256), stream.spec.qpn, stream.psn())
        body = bytes(buf) + rng.randbytes(rng.choice((0, 4, 12, 16, 24, 28, rng.randrange(200))))
        return body + _icrc(body, stream.spec.peer or A, B), tclass
    if r < 0.5:
        return rng.randbytes(rng.randrange(80)), tclass
    pkt, tclass = _data_packet(rng, stream, rng.random() < 0.5)
    if r < 0.75:
        return pkt[:rng.randrange(len(pkt))], tclass  # truncated: the ICRC no longer matches
    i = rng.randrange(len(pkt))
    return pkt[:i] + bytes([pkt[i] ^ (1 << rng.randrange(8))]) + pkt[i + 1:], tclass


def _probe(rng: random.Random, stream: _Stream) -> tuple[bytes, int]:
    buf = bytearray(PROBE_LEN)
    pack_probe(buf, stream.spec.qpn, rng.randrange(1 << 16), rng.randrange(1 << 16))
    body = bytes(buf)
    return body + _icrc(body, stream.spec.peer or A, B), Dscp.CONTROL << 2


def responder_episode(rng: random.Random, packets: int) -> Episode:
    """One episode of ``packets`` arrivals. One in four is hostile from the start; the others
    hold only what a requestor on a lossy, reordering, trimming fabric would send, with a
    little hostility late."""
    qps = tuple(QpSpec(qpn, rng.choice((0, PSN_MOD - rng.randrange(1, 2 * MPR), rng.randrange(PSN_MOD))),
                       rng.choice((A, None))) for qpn in QPS)
    ep = Episode(qps)
    streams = [_Stream(rng, q) for q in qps]
    hostile_from = 0 if rng.random() < 0.25 else int(packets * 0.8)
    for i in range(packets):
        stream = rng.choice(streams)
        r = rng.random()
        if i >= hostile_from and r < 0.3:
            data, tclass = _hostile(rng, stream)
        elif r < 0.08:
            data, tclass = _trimmed(rng, stream)
        elif r < 0.12:
            data, tclass = _probe(rng, stream)
        else:
            data, tclass = _data_packet(rng, stream, i >= hostile_from and rng.random() < 0.1)
        dqpn_peer = stream.spec.peer or rng.choice((A, OTHER))
        peer = OTHER if rng.random() < 0.02 else dqpn_peer
        ep.arrivals.append(Arrival(data, tclass, rng.randrange(1 << 20), rng.randrange(1 << 16), peer))
    return ep


def responder_corpus(seed: int, episodes: int, packets: int) -> list[Episode]:
    """``episodes`` responder episodes of ``packets`` arrivals each, from ``seed``."""
    rng = random.Random(seed)
    return [responder_episode(rng, packets) for _ in range(episodes)]


# --- the requestor's side: replies ---------------------------------------------------------
def reply(rng: random.Random, una: int, next_psn: int, dqpn: int = QPS[0]) -> bytes:
    """A SACK, NACK, ACK or garbage for a requestor whose unacked PSNs are ``una..next_psn-1``:
    PSNs near that range or anywhere in the 24-bit space, any NACK reason, any bitmap."""
    def near() -> int:
        r = rng.random()
        if r < 0.7:
            return (una + rng.randrange(-4, max(next_psn - una, 1) + 4)) % PSN_MOD
        return rng.randrange(PSN_MOD)

    r = rng.random()
    buf = bytearray(64)
    if r < 0.6:
        cack = near()
        n = pack_sack(buf, dqpn, Sack(rng.randrange(4), rng.random() < 0.1, (cack + rng.randrange(64)) % PSN_MOD,
                                      rng.randrange(1 << 32), cack, MPR, (cack + rng.randrange(-4, 64)) % PSN_MOD,
                                      rng.randrange(1 << 64), rng.randrange(1 << 16), rng.randrange(1 << 15),
                                      rng.randrange(1 << 24)))
    elif r < 0.85:
        reason = rng.choice([*NackReason, rng.randrange(256)])
        n = pack_nack(buf, dqpn, Nack(reason, rng.randrange(1 << 32), near(), rng.randrange(1 << 16)))
    elif r < 0.9:
        pack_bth(buf, Opcode.ACK, 0, dqpn, near())
        n = BTH_LEN + rng.randrange(8)
    else:
        pack_bth(buf, rng.choice((Opcode.SACK, Opcode.NACK)), rng.randrange(256), dqpn, near())
        n = BTH_LEN + rng.randrange(max(SACK_LEN, NACK_LEN))
    body = bytes(buf[:n])
    pkt = body + _icrc(body, B, A)
    if rng.random() < 0.05:
        pkt = pkt[:rng.randrange(len(pkt))]
    elif rng.random() < 0.05:
        i = rng.randrange(len(pkt))
        pkt = pkt[:i] + bytes([pkt[i] ^ 0x40]) + pkt[i + 1:]
    return pkt
