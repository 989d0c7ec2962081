"""Host-to-host connectivity under a set of denied links (design 3.3 and 7). Pure: no I/O.

The failure reactor must never deny a link set that leaves a host pair without a usable path
(docs/controller.md, "Connectivity guard"). The paths follow from the addressing plan
(``topology/paths.py``): between leaves, one path per plane and T1, crossing
``p/t0-Ls/down-Ds, p/t0-Ls/t1-t, p/t0-Ld/t1-t, p/t0-Ld/down-Dd``; within a leaf one path per
plane, crossing the two host links. A pair is connected while one of its paths crosses no
denied link.

Checking every host pair of a large fabric is out of the question (131,072 hosts), and not
needed: a path crosses only links of its two leaves, so a pair of hosts on leaves that no
denied link touches is always connected, and hosts on one leaf whose own host links are denied
alike are interchangeable. The check therefore looks at one or two hosts per such class
(:func:`_representatives`): at most a few dozen pairs for a handful of denied links.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from ..topology import Host, Topology
from ..wire.addressing import host_link_name, parse_link_name, t1_link_name


def is_host_link(link: str) -> bool:
    """Whether ``link`` is a host link (``p<p>/t0-<L>/down-<D>``, design 3.3); False for a
    T0-T1 link or a malformed name."""
    try:
        return parse_link_name(link).kind != "t1"
    except ValueError:
        return False


def connected(topo: Topology, a: Host, b: Host, denied: set[str] | frozenset[str]) -> bool:
    """Whether host ``a`` reaches host ``b`` (and back: paths are symmetric) over some plane
    and T1 whose links are all outside ``denied`` (link names, design 3.3)."""
    for p in range(topo.planes):
        if host_link_name(p, a.leaf, a.downlink) in denied or host_link_name(p, b.leaf, b.downlink) in denied:
            continue
        if a.leaf == b.leaf:
            return True
        for t in range(topo.t1_per_plane[p]):
            if t1_link_name(p, a.leaf, t) not in denied and t1_link_name(p, b.leaf, t) not in denied:
                return True
    return False


@functools.lru_cache(maxsize=8)
def _hosts_by_leaf(topo: Topology) -> dict[int, tuple[Host, ...]]:
    out: dict[int, list[Host]] = {}
    for h in topo.hosts:
        out.setdefault(h.leaf, []).append(h)
    return {leaf: tuple(hs) for leaf, hs in out.items()}


def _leaves(links: Iterable[str]) -> set[int]:
    out = set()
    for link in links:
        try:
            out.add(parse_link_name(link).leaf)
        except ValueError:
            continue  # not a link of the plan: it cuts nothing
    return out


def _representatives(topo: Topology, sets: list[frozenset[str]]) -> list[Host]:
    """Hosts such that every pair cut under one of ``sets`` and not another shows up among
    them: per leaf touched by any set, up to two hosts per class of hosts whose own host links
    each set denies alike; plus one host of an untouched leaf."""
    by_leaf = _hosts_by_leaf(topo)
    touched = set().union(*(_leaves(s) for s in sets))
    reps: list[Host] = []
    for leaf in sorted(touched & by_leaf.keys()):
        classes: dict[tuple, list[Host]] = {}
        for h in by_leaf[leaf]:
            key = tuple(frozenset(p for p in range(topo.planes) if host_link_name(p, leaf, h.downlink) in s)
                        for s in sets)
            members = classes.setdefault(key, [])
            if len(members) < 2:  # two: the pair within a class is checked too
                members.append(h)
        for members in classes.values():
            reps += members
    other = next((leaf for leaf in sorted(by_leaf) if leaf not in touched), None)
    if other is not None:
        reps.append(by_leaf[other][0])
    return reps


def newly_cut(topo: Topology, before: Iterable[str], after: Iterable[str]) -> list[tuple[str, str]]:
    """Host pairs (names, one representative pair per class) connected with ``before`` denied
    and not with ``after`` denied; empty when ``after`` cuts no one whom ``before`` did not.

    A pair already cut by ``before`` (say a host whose every port went down) is not counted:
    the guard keeps what connectivity there is, it cannot bring back what the fabric lost.
    """
    b, a = frozenset(before), frozenset(after) | frozenset(before)
    reps = _representatives(topo, [b, a])
    out = []
    for i, x in enumerate(reps):
        for y in reps[i + 1:]:
            if connected(topo, x, y, b) and not connected(topo, x, y, a):
                out.append((x.name, y.name))
    return out


def safe_subset(topo: Topology, base: Iterable[str], wanted: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split ``wanted`` (in order of preference) into the links that can be denied on top of
    ``base`` without cutting any host pair that ``base`` leaves connected, and the rest.

    Greedy: each link in turn is kept if, with the links kept so far, no pair is newly cut.
    Returns ``(deny, withheld)``, both in the order given.
    """
    base = frozenset(base)
    deny: list[str] = []
    withheld: list[str] = []
    for link in wanted:
        if newly_cut(topo, base, base | set(deny) | {link}):
            withheld.append(link)
        else:
            deny.append(link)
    return tuple(deny), tuple(withheld)
