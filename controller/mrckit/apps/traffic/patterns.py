"""The flows of a traffic pattern: each flow is one QP that moves ``size`` bytes from ``src``
to ``dst`` as one RDMA WRITE_WITH_IMM.

| pattern | flows among N hosts |
|---|---|
| ``all-to-all`` | every ordered pair: N × (N − 1) |
| ``ring`` | host i to host i + 1 (mod N), the step of a ring all-reduce: N |
| ``incast`` | k senders to one receiver (the first host unless ``dst`` is given): k |
| ``permutation`` | a random permutation with no fixed point, seeded: N |
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ...errors import MrcError

PATTERNS = ("all-to-all", "ring", "incast", "permutation")
MAX_FLOWS = 1 << 16
"""Flows per run: each takes a QP number and an rkey from a 16-bit range (``worker``)."""


@dataclass(frozen=True)
class Flow:
    """One QP of a pattern: ``id`` (0..), ``src`` and ``dst`` host names, ``size`` bytes,
    moved as ``writes`` WRITE_WITH_IMMs of equal size (:func:`chunks`), one after another."""

    id: int
    src: str
    dst: str
    size: int
    writes: int = 1


def chunks(size: int, writes: int) -> list[tuple[int, int]]:
    """The (offset, length) in bytes of each of the ``writes`` writes that move ``size`` bytes:
    equal lengths, the last one shorter when ``writes`` does not divide ``size``."""
    step = -(-size // max(1, writes))
    return [(off, min(step, size - off)) for off in range(0, size, step)]


def make_flows(pattern: str, hosts: list[str], size: int, *, k: int = 7, dst: str | None = None,
               seed: int = 0) -> list[Flow]:
    """The flows of ``pattern`` over ``hosts`` (names, in order), each of ``size`` bytes.

    Raises:
        MrcError: an unknown pattern, fewer than 2 hosts, a size below 1 byte, ``k`` outside
            1..N − 1 for incast, an unknown ``dst``, or more than :data:`MAX_FLOWS` flows.
    """
    if pattern not in PATTERNS:
        raise MrcError(f"pattern {pattern!r}: use one of {', '.join(PATTERNS)}")
    if len(hosts) < 2:
        raise MrcError(f"pattern {pattern}: needs at least 2 hosts, got {len(hosts)}")
    if size < 1:
        raise MrcError(f"size {size}: must be at least 1 byte")
    pairs = _pairs(pattern, list(hosts), k, dst, seed)
    if len(pairs) > MAX_FLOWS:
        raise MrcError(f"pattern {pattern} over {len(hosts)} hosts makes {len(pairs)} flows; at most {MAX_FLOWS}")
    return [Flow(i, s, d, size) for i, (s, d) in enumerate(pairs)]


def _pairs(pattern: str, hosts: list[str], k: int, dst: str | None, seed: int) -> list[tuple[str, str]]:
    n = len(hosts)
    if pattern == "all-to-all":
        return [(s, d) for s in hosts for d in hosts if s != d]
    if pattern == "ring":
        return [(hosts[i], hosts[(i + 1) % n]) for i in range(n)]
    if pattern == "incast":
        target = hosts[0] if dst is None else dst
        if target not in hosts:
            raise MrcError(f"incast receiver {target!r} is not a host of the fabric")
        if not 1 <= k <= n - 1:
            raise MrcError(f"incast k = {k}: must be within 1..{n - 1} for {n} hosts")
        return [(s, target) for s in [h for h in hosts if h != target][:k]]
    return list(zip(hosts, _derangement(hosts, random.Random(seed))))


def _derangement(hosts: list[str], rng: random.Random) -> list[str]:
    """A uniformly random permutation of ``hosts`` that moves every host (rejection sampling;
    about e tries on average)."""
    while True:
        perm = hosts[:]
        rng.shuffle(perm)
        if all(a != b for a, b in zip(hosts, perm)):
            return perm
