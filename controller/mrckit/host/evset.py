"""EV set provisioning (design sections 3.3 and 5): the template set and its backups.

A host has one template: ``count`` EVs (128..256, equal per plane) spread round-robin over the
T1 switches of each plane, plus ``backups_per_plane`` spare EVs per plane. Every EV is
``plane | T1 | salt`` (``mrckit.wire.ev``); the salt is random and unique within the host, so
that two EVs on the same path stay distinct on the wire. A peer's set starts as a copy of the
template (the dataplane copies it on the first packet) and diverges as EVs are replaced.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..wire.ev import PLANE_SHIFT, SALT_MASK, ev_pack, ev_unpack

MIN_EVS, MAX_EVS = 128, 256
"""An EV set holds 128..256 EVs per peer [H: P1], equal per plane."""
MAX_T1_DRAWS = 256
"""``t1_draws`` per plane: at most one per EV slot of a 256-EV set's plane."""


@dataclass
class Template:
    """The template EV set: ``active`` (slot order, grouped by plane) and ``backups`` per plane."""

    active: list[int]
    backups: dict[int, list[int]] = field(default_factory=dict)

    def planes(self) -> list[int]:
        """Planes present in the active set, ascending."""
        return sorted({ev_unpack(ev).plane for ev in self.active})


def build_template(t1_counts: dict[int, int], count: int = 128, backups_per_plane: int = 16,
                   *, seed: int | None = None, check_range: bool = True,
                   opaque: bool = False, t1_draws: int = 0, draw_seed: str | None = None) -> Template:
    """Build a template: ``count`` EVs split equally over the planes of ``t1_counts``
    (plane -> number of T1 switches in that plane), plus ``backups_per_plane`` per plane.

    Within a plane, EV k uses T1 ``k % t1_count`` so every spine carries an equal share; the
    backups continue the same round-robin, so a replacement keeps the spread even.

    With ``t1_draws`` N > 0, the plane's EVs and backups go round-robin over N T1s drawn
    uniformly at random, with replacement (seeded by ``draw_seed``, None: random), instead of
    over every T1: a host whose every peer set is a copy of this template then crosses a given
    T1 of the plane with probability 1 - (1 - 1/S)^N (S T1s), as a NIC whose N EVs per plane
    each land on a random T1 would (the T1 failure experiment), and no replacement widens that.

    With ``opaque`` (EV-hash mode) the switches hash the whole EV, so below the plane
    bits (31..28) every EV is 28 random bits, unique within the host: no T1 field, and the
    most entropy for the hash. The T1 counts are then not used.

    Raises:
        ValueError: no planes; a T1 count outside 1..256; ``count`` outside 128..256 (when
            ``check_range``) or not a multiple of the number of planes; negative backups;
            ``t1_draws`` outside 0..256.
    """
    if not t1_counts:
        raise ValueError("t1_counts is empty: a host needs at least one plane")
    for plane, t1 in t1_counts.items():
        if not 1 <= t1 <= 256:
            raise ValueError(f"plane {plane}: T1 count {t1} outside 1..256")
    if check_range and not MIN_EVS <= count <= MAX_EVS:
        raise ValueError(f"EV count {count} outside {MIN_EVS}..{MAX_EVS}")
    if not 1 <= count <= MAX_EVS:
        raise ValueError(f"EV count {count} outside 1..{MAX_EVS}")
    if count % len(t1_counts):
        raise ValueError(f"EV count {count} is not a multiple of the {len(t1_counts)} planes "
                         "(EV sets are equal per plane)")
    if backups_per_plane < 0:
        raise ValueError(f"backups_per_plane {backups_per_plane} is negative")
    if not 0 <= t1_draws <= MAX_T1_DRAWS:
        raise ValueError(f"t1_draws {t1_draws} outside 0..{MAX_T1_DRAWS}")
    rng = random.Random(seed)
    if opaque:
        return _opaque_template(rng, sorted(t1_counts), count, backups_per_plane)
    salts = _unique_salts(rng, count + backups_per_plane * len(t1_counts))
    per_plane = count // len(t1_counts)
    active, backups = [], {}
    draws = random.Random(draw_seed)
    for plane in sorted(t1_counts):
        n_t1 = t1_counts[plane]
        t1s = sorted(draws.randrange(n_t1) for _ in range(t1_draws)) or list(range(n_t1))
        evs = [ev_pack(plane, t1s[k % len(t1s)], next(salts)) for k in range(per_plane + backups_per_plane)]
        active += evs[:per_plane]
        backups[plane] = evs[per_plane:]
    return Template(active, backups)


OPAQUE_MASK = (1 << PLANE_SHIFT) - 1
"""EV bits below the plane: all of them are random in EV-hash mode."""


def _opaque_template(rng: random.Random, planes: list[int], count: int, backups: int) -> Template:
    per_plane = count // len(planes)
    values = iter(_unique_values(rng, count + backups * len(planes), OPAQUE_MASK))
    active, spare = [], {}
    for plane in planes:
        evs = [(plane << PLANE_SHIFT) | next(values) for _ in range(per_plane + backups)]
        active += evs[:per_plane]
        spare[plane] = evs[per_plane:]
    return Template(active, spare)


def _unique_values(rng: random.Random, n: int, mask: int):
    seen: set[int] = set()
    while len(seen) < n:
        value = rng.randint(1, mask)
        if value not in seen:
            seen.add(value)
            yield value


def _unique_salts(rng: random.Random, n: int):
    seen: set[int] = set()
    while len(seen) < n:
        salt = rng.randint(1, SALT_MASK)
        if salt not in seen:
            seen.add(salt)
            yield salt
