"""Failure localisation from path evidence (design section 7). Pure: no I/O, no clock.

Evidence comes from many hosts: a *failing* path is the link list of an (host, peer, EV) that
went ASSUMED_BAD; a *good* path one that demonstrably carried traffic (acks grew, a probe was
answered) after the trouble began. A failed link lies on failing paths and on no good path.

The answer is the smallest set of links, none crossed by a good path, that meets every failing
path (a minimum hitting set). With one failed link that is the one link shared by all failing
paths that no good path crosses. When several sets of that size are consistent (say two links
always appear together in the evidence), the result says so: ``ambiguous`` is true and
``candidates`` lists each set; ``suspects`` is their union, the links that may be down.
Failing paths that only cross links proven good are ``unexplained`` (contradictory evidence,
e.g. a flap): they are reported and otherwise ignored.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MAX_FAILED_LINKS = 3
"""Largest set of simultaneously failed links searched for. Paths have at most 4 links, so the
search visits at most 4**3 branches."""

PathLinks = frozenset[str]


@dataclass(frozen=True)
class Localisation:
    """The result of :func:`localise`.

    Attributes:
        failed: the unique smallest consistent link set, or empty when there is none or it is
            ambiguous.
        candidates: every smallest consistent link set (sorted); more than one = ambiguous.
        suspects: the union of ``candidates``: every link that may be down.
        unexplained: failing paths whose every link is proven good.
        failing_paths, good_paths: how much evidence there was (distinct link sets).
    """

    failed: frozenset[str]
    candidates: tuple[frozenset[str], ...]
    suspects: frozenset[str]
    unexplained: tuple[PathLinks, ...]
    failing_paths: int
    good_paths: int

    @property
    def ambiguous(self) -> bool:
        """More than one link set is consistent with the evidence."""
        return len(self.candidates) > 1

    def describe(self) -> str:
        """One line for humans."""
        if not self.candidates:
            return "no failed link found" + (f" ({len(self.unexplained)} failing paths unexplained)"
                                             if self.unexplained else "")
        if self.ambiguous:
            sets = " | ".join("{" + ", ".join(sorted(c)) + "}" for c in self.candidates)
            return f"ambiguous: {len(self.candidates)} link sets fit the evidence: {sets}"
        return "failed: " + ", ".join(sorted(self.failed))


def _hitting_sets(paths: list[frozenset[str]], k: int) -> set[frozenset[str]]:
    """Every set of at most ``k`` links that meets every path (paths non-empty)."""
    if not paths:
        return {frozenset()}
    if k == 0:
        return set()
    pivot = min(paths, key=len)  # branch on the path with the fewest choices
    out: set[frozenset[str]] = set()
    for link in pivot:
        rest = [p for p in paths if link not in p]
        out |= {s | {link} for s in _hitting_sets(rest, k - 1)}
    return out


def localise(failing: Iterable[Iterable[str]], good: Iterable[Iterable[str]],
             max_links: int = MAX_FAILED_LINKS) -> Localisation:
    """Localise failed links.

    Args:
        failing: the link names (design 3.3) of each failing path.
        good: the link names of each path that carried traffic.
        max_links: the largest failed-link set searched for.

    Returns:
        a :class:`Localisation`. No failing path -> empty, not ambiguous.
    """
    failing_sets = {frozenset(p) for p in failing}
    good_sets = {frozenset(p) for p in good}
    proven = frozenset().union(*good_sets) if good_sets else frozenset()
    reduced = {p: p - proven for p in failing_sets}
    unexplained = tuple(sorted((p for p, r in reduced.items() if not r), key=sorted))
    # A path that contains another's remaining links adds nothing: keep the minimal ones.
    remaining = sorted({r for r in reduced.values() if r}, key=len)
    minimal = [r for i, r in enumerate(remaining) if not any(o < r for o in remaining[:i])]
    candidates: set[frozenset[str]] = set()
    for k in range(1, max_links + 1):
        if not minimal:
            break
        found = {s for s in _hitting_sets(minimal, k) if len(s) == k}
        if found:
            candidates = found
            break
    ordered = tuple(sorted(candidates, key=sorted))
    failed = ordered[0] if len(ordered) == 1 else frozenset()
    suspects = frozenset().union(*ordered) if ordered else frozenset()
    return Localisation(failed, ordered, suspects, unexplained, len(failing_sets), len(good_sets))
