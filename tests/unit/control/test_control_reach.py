"""Connectivity under denied links (mrckit.control.reach): the reactor's guard against denying
a host pair's last path. Checked against a brute force over every host pair."""

import itertools
import random

import pytest

from mrckit.control.reach import connected, is_host_link, newly_cut, safe_subset
from mrckit.topology import generate_clos

TOPO = generate_clos()  # 2 planes, 2 T1 per plane, 3 leaves, 2 hosts per leaf


def all_links(topo):
    return [link.name for link in topo.links()]


def brute_cut(topo, before, after):
    return {(a.name, b.name) for a, b in itertools.combinations(topo.hosts, 2)
            if connected(topo, a, b, before) and not connected(topo, a, b, after)}


def test_nothing_denied_connects_every_pair():
    assert all(connected(TOPO, a, b, set()) for a, b in itertools.combinations(TOPO.hosts, 2))
    assert newly_cut(TOPO, [], []) == []


def test_a_host_without_any_host_link_is_cut_off():
    cut = newly_cut(TOPO, [], ["p0/t0-0/down-0", "p1/t0-0/down-0"])
    assert cut and all("h0-0" in pair for pair in cut)


def test_one_plane_left_keeps_everyone_connected():
    assert newly_cut(TOPO, [], ["p0/t0-0/t1-0", "p0/t0-0/t1-1", "p0/t0-0/down-0"]) == []


def test_leaves_without_a_common_plane_are_cut_apart():
    cut = newly_cut(TOPO, [], ["p0/t0-0/t1-0", "p0/t0-0/t1-1", "p1/t0-1/t1-0", "p1/t0-1/t1-1"])
    assert cut
    for a, b in cut:
        assert {a[:2], b[:2]} == {"h0", "h1"}  # leaf 0 against leaf 1 only; leaf 2 reaches both


def test_a_pair_already_cut_is_not_counted_again():
    before = ["p0/t0-0/down-0", "p1/t0-0/down-0"]
    assert newly_cut(TOPO, before, before + ["p0/t0-2/t1-0"]) == []


@pytest.mark.parametrize("shape", [(2, 2, 3, 2), (1, 1, 2, 1), (2, 1, 3, 3), (3, 2, 2, 2)])
def test_matches_a_brute_force_over_every_pair(shape):
    topo = generate_clos(*shape)
    links = all_links(topo)
    rng = random.Random(sum(shape))
    for _ in range(150):
        before = set(rng.sample(links, rng.randint(0, 2)))
        after = before | set(rng.sample(links, rng.randint(1, min(5, len(links)))))
        expected = brute_cut(topo, before, after)
        got = newly_cut(topo, before, after)
        assert bool(got) == bool(expected), (before, after, expected)
        assert {tuple(sorted(p)) for p in got} <= {tuple(sorted(p)) for p in expected}


def test_safe_subset_keeps_the_links_that_cut_no_one():
    wanted = ["p0/t0-0/down-0", "p1/t0-0/down-0", "p0/t0-1/t1-0"]
    deny, withheld = safe_subset(TOPO, [], wanted)
    assert deny == ("p0/t0-0/down-0", "p0/t0-1/t1-0") and withheld == ("p1/t0-0/down-0",)


def test_is_host_link():
    assert is_host_link("p1/t0-2/down-0") and not is_host_link("p1/t0-2/t1-0") and not is_host_link("x")
