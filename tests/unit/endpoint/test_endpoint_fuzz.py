"""No packet can crash an endpoint: a seeded corpus of 100,000 generated arrivals for the
responders and 20,000 replies for the requestors (endpoint_fuzz.py), the same for the Python
endpoint and the C one. Every packet ends in exactly one counted outcome, no exception escapes,
no byte lands outside a region, and the two implementations agree byte for byte on every
reply, counter, completion and region. Hypothesis then explores short episodes and shrinks
what fails; each failure it found became a case of test_endpoint_bad_input.py or above."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, fields

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.endpoint_fuzz import (A, B, MPR, MTU, QPS, REGIONS, REMOTE_QPN, Episode, reply, responder_corpus,
                           responder_episode)
from support.endpoint_harness import NATIVE_MISSING
from mrckit.endpoint.memory import MemoryTable
from mrckit.endpoint.native import NativeRequestorQp, NativeResponder
from mrckit.endpoint.requestor import RequestorQp, RetryConfig
from mrckit.endpoint.responder import Responder, ResponderQp

RESPONDER_EPISODES, ARRIVALS = 500, 200  # 100,000 arrivals
REQUESTOR_EPISODES, REPLIES = 100, 200   # 20,000 replies
FILL = 0x5A
FLUSH_EVERY = 7  # the socket loop flushes coalesced SACKs when drained: here every 7 arrivals


def counters(stats) -> dict:
    """A stats dataclass as a plain dict (its Counters as dicts, without zero entries)."""
    out = {}
    for f in fields(stats):
        v = getattr(stats, f.name)
        out[f.name] = {k: n for k, n in v.items() if n} if isinstance(v, Counter) else v
    return out


@dataclass
class Outcome:
    """What one responder made of one episode."""

    replies: list
    stats: dict
    regions: list
    completions: list


def run_responder(impl: str, ep: Episode) -> Outcome:
    memory = MemoryTable()
    regions = [memory.register(length, base_va=base, rkey=rkey) for rkey, base, length in REGIONS]
    for r in regions:
        r.buf[:] = bytes([FILL]) * r.length
    replies = []
    cls = NativeResponder if impl == "native" else Responder
    resp = cls(B, memory, lambda pkt, peer: replies.append((bytes(pkt), peer)))
    for q in ep.qps:
        resp.add_qp(ResponderQp(q.qpn, REMOTE_QPN, MPR, MTU, q.initial_psn, peer=q.peer))
    for i, a in enumerate(ep.arrivals):
        resp.handle(bytearray(a.data), len(a.data), a.tclass, a.flow, a.sport, a.peer)
        if i % FLUSH_EVERY == FLUSH_EVERY - 1:
            resp.flush()
    resp.flush()
    out = Outcome(replies, counters(resp.stats), [bytes(r.buf) for r in regions],
                  [tuple(c) for c in resp.completions])
    if impl == "native":
        resp.close()
    return out


def outcomes_accounted(stats: dict, arrivals: int) -> None:
    """Every arrival ends in exactly one counted outcome."""
    nacks = stats["nacks"]
    ended = (stats["malformed"] + stats["unknown_qp"] + stats["bad_icrc"] + stats["trimmed"]
             + stats["placed_packets"] + stats["duplicates"] + stats["probes"]
             + nacks.get("PSN_OOR_WINDOW", 0) + nacks.get("UNEXP_EVENT", 0))
    assert stats["packets"] == arrivals, stats
    assert ended == arrivals, stats


def no_byte_outside_what_was_placed(out: Outcome) -> None:
    touched = sum(sum(b != FILL for b in r) for r in out.regions)
    assert touched <= out.stats["placed_bytes"]


IMPLS = ["python"] + ([] if NATIVE_MISSING else ["native"])


def test_responder_corpus_both_endpoints_agree_and_count_every_packet():
    corpus = responder_corpus(seed=2026, episodes=RESPONDER_EPISODES, packets=ARRIVALS)
    assert sum(len(ep.arrivals) for ep in corpus) >= 100_000
    seen = {"placed": 0, "oor": 0, "error": 0, "trimmed": 0, "bad_icrc": 0, "malformed": 0, "unknown_qp": 0}
    for n, ep in enumerate(corpus):
        outs = {impl: run_responder(impl, ep) for impl in IMPLS}
        for impl, out in outs.items():
            outcomes_accounted(out.stats, len(ep.arrivals))
            no_byte_outside_what_was_placed(out)
        if "native" in outs:
            assert outs["native"] == outs["python"], f"episode {n}: the C responder differs from the Python one"
        st_ = outs["python"].stats
        seen["placed"] += st_["placed_packets"]
        seen["oor"] += st_["nacks"].get("PSN_OOR_WINDOW", 0)
        seen["error"] += st_["nacks"].get("UNEXP_EVENT", 0)
        for k in ("trimmed", "bad_icrc", "malformed", "unknown_qp"):
            seen[k] += st_[k]
    # The corpus reaches every outcome, often: it is not all bounced at the ICRC check.
    assert all(v >= 500 for v in seen.values()), seen


def run_requestor(impl: str, seed: int, replies: int) -> tuple[list, dict, list]:
    rng = random.Random(seed)
    sent = []
    cls = NativeRequestorQp if impl == "native" else RequestorQp
    initial = rng.choice((0, (1 << 24) - 5, rng.randrange(1 << 24)))
    req = cls(REMOTE_QPN, QPS[0], A, B, lambda parts, tclass: sent.append((b"".join(bytes(p) for p in parts), tclass)),
              mtu=MTU, mpr=MPR, initial_psn=initial,
              retry=RetryConfig(timeout_exp=8, linear_retries=7, exp_retries=7))
    comps = [req.post(rng.randbytes(rng.choice((0, 1, MTU, 5 * MTU + 3))), 0, 0x1000,
                      imm=rng.choice((None, 7))) for _ in range(4)]
    now = 1_000_000
    req.pump(now, budget=64)
    for _ in range(replies):
        una = initial + rng.randrange(0, 8)
        req.on_reply(reply(rng, una % (1 << 24), (una + 8) % (1 << 24)), now)
        now += rng.choice((1_000, 50_000, 2_000_000))
        req.on_timer(now)
        req.pump(now, budget=8)
    stats = counters(req.stats)
    states = [(c.done(), type(c.error).__name__ if c.error else None) for c in comps]
    return sent, stats, states


@pytest.mark.parametrize("seed", range(REQUESTOR_EPISODES))
def test_requestor_replies_both_endpoints_agree_and_count_every_reply(seed):
    outs = {impl: run_requestor(impl, seed, REPLIES) for impl in IMPLS}
    for sent, stats, _ in outs.values():
        got = stats["sacks"] + sum(stats["nacks"].values()) + stats["bad_icrc"] + stats["malformed"]
        assert stats["icrc_checked"] == REPLIES
        # A QP in error ignores later replies uncounted, like any that arrive after close.
        assert got <= REPLIES and (got == REPLIES or stats["nacks"].get("UNEXP_EVENT", 0) >= 1), stats
    if "native" in outs:
        assert outs["native"] == outs["python"], f"seed {seed}: the C requestor differs from the Python one"


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), arrivals=st.integers(1, 60))
def test_hypothesis_short_responder_episodes(seed, arrivals):
    """Short episodes from hypothesis-chosen seeds; a failure shrinks to the fewest arrivals."""
    ep = responder_episode(random.Random(seed), arrivals)
    outs = {impl: run_responder(impl, ep) for impl in IMPLS}
    for out in outs.values():
        outcomes_accounted(out.stats, arrivals)
    if "native" in outs:
        assert outs["native"] == outs["python"]
