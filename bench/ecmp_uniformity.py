#!/usr/bin/env python3
"""How evenly the EV hash spreads EVs over the members of an ECMP group, against a
fair die rolled in the same run.

The hash is ``mrckit.wire.ecmp`` (CRC-32 of the selector fields, member = hash % k), the choice
both switch targets make (``tests/conformance/test_conformance_ecmp*.py`` prove that packet by
packet). Two measures, for group sizes k:

- **chi-square** of the member counts over all EVs of a population, averaged over ROLLS
  populations, divided by the same for a fair die (each EV gets a uniformly random member;
  same n and k). A ratio near 1 means the hash spreads like chance; much above 1 means
  clumping; near 0, more evenly than chance.
- **per-host imbalance**: each host's 128-EV set (``build_template(opaque=True)``, what a host
  sprays in EV-hash mode) is split over k uplinks; the busiest member's load over the mean
  load, averaged over HOSTS hosts, divided by the same for the fair die. This is what a host
  sees: a few more EVs on one uplink than on another.

Populations (ROLLS of each, seeded): ``random`` (N uniform 32-bit EVs), ``hosts`` (HOSTS opaque
templates of plane 0, 128 EVs each), ``sequential`` (plane 0, N consecutive EV values:
structured input, a stress case). No root needed; ~30 s. Prints a table and BENCH lines;
exits 0.
"""

from __future__ import annotations

import random
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_result import result  # noqa: E402

from mrckit.host.evset import build_template  # noqa: E402
from mrckit.wire.ecmp import ecmp_hash_input  # noqa: E402
from mrckit.wire.ev import ev_to_wire  # noqa: E402

N = 100_000
HOSTS = 800
EVS_PER_HOST = 128
GROUP_SIZES = (2, 4, 7, 8, 16, 64)
ROLLS = 5
SEED = 11


def ev_hash(ev: int) -> int:
    """The selector's CRC-32 of an EV's flow label and UDP source port."""
    return zlib.crc32(ecmp_hash_input(*ev_to_wire(ev)))


def chi_square(members: list[int], k: int) -> float:
    counts = [0] * k
    for m in members:
        counts[m] += 1
    mean = len(members) / k
    return sum((c - mean) ** 2 for c in counts) / mean


def imbalance(members: list[int], k: int) -> float:
    """Busiest member's load over the mean load."""
    counts = [0] * k
    for m in members:
        counts[m] += 1
    return max(counts) / (len(members) / k)


def populations(roll: int) -> dict[str, list[list[int]]]:
    """name -> EV sets of one roll (one set for random/sequential, one per host for hosts)."""
    rng = random.Random(SEED + roll)
    first_host = HOSTS * roll
    hosts = [build_template({0: 4}, EVS_PER_HOST, 0, seed=h, opaque=True).active
             for h in range(first_host, first_host + HOSTS)]
    return {"random": [rng.sample(range(1 << 32), N)], "hosts": hosts,
            "sequential": [list(range(N * roll + 1, N * (roll + 1) + 1))]}


def measure(rolls: list[list[list[int]]], k: int, rng: random.Random) -> tuple[float, float, float, float]:
    """Means over the rolls of (chi-square hash, chi-square fair die, imbalance hash, imbalance
    fair die); a roll is a list of EV sets."""
    sums = [0.0] * 4
    for sets in rolls:
        hashed = [[ev_hash(ev) % k for ev in evs] for evs in sets]
        rolled = [[rng.randrange(k) for _ in evs] for evs in sets]
        sums[0] += chi_square([m for ms in hashed for m in ms], k)
        sums[1] += chi_square([m for ms in rolled for m in ms], k)
        sums[2] += sum(imbalance(ms, k) for ms in hashed) / len(hashed)
        sums[3] += sum(imbalance(ms, k) for ms in rolled) / len(rolled)
    return tuple(v / len(rolls) for v in sums)


def main() -> int:
    rng = random.Random(SEED + 1)
    print(f"{'population':<11} {'k':>3} {'EVs':>7} {'chi2 hash':>10} {'chi2 die':>9} {'ratio':>6} "
          f"{'imb hash':>9} {'imb die':>8} {'ratio':>6}")
    rolls = [populations(r) for r in range(ROLLS)]
    for name in rolls[0]:
        sets = [roll[name] for roll in rolls]
        n = sum(map(len, sets[0]))
        for k in GROUP_SIZES:
            chi_h, chi_d, imb_h, imb_d = measure(sets, k, rng)
            print(f"{name:<11} {k:>3} {n:>7} {chi_h:>10.1f} {chi_d:>9.1f} {chi_h / chi_d:>6.2f} "
                  f"{imb_h:>9.3f} {imb_d:>8.3f} {imb_h / imb_d:>6.3f}")
            if k in (4, 7):
                result(f"EV hash chi-square, {name} EVs, group of {k}", chi_h, "chi2", "fair die", chi_d,
                       goal="~1x")
                if name == "hosts":
                    result(f"EV hash per-host busiest/mean member, group of {k}", imb_h, "ratio",
                           "fair die", imb_d, goal="~1x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
