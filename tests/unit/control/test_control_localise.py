"""Failure localisation (mrckit.control.localise): hand-made evidence, and every link of real
topologies under all-pairs evidence."""

import itertools

import pytest

from mrckit.control import localise
from mrckit.topology import generate_clos, paths

A, B, C, D, E = "p0/t0-0/t1-0", "p0/t0-1/t1-0", "p0/t0-0/down-0", "p0/t0-1/down-0", "p0/t0-2/t1-0"


def test_no_failing_path_is_no_answer():
    loc = localise([], [[A, B]])
    assert loc.failed == frozenset() and loc.candidates == () and not loc.ambiguous
    assert loc.describe() == "no failed link found"


def test_the_link_shared_by_failing_paths_that_no_good_path_crosses():
    loc = localise(failing=[[C, A, B, D], [C, A, E]], good=[[C, "p0/t0-0/t1-1"], [B, D]])
    assert loc.failed == {A} and loc.candidates == (frozenset({A}),) and not loc.ambiguous
    assert loc.suspects == {A} and loc.describe() == f"failed: {A}"


def test_two_links_always_seen_together_are_ambiguous():
    loc = localise(failing=[[C, A, B, D]], good=[[C], [D]])
    assert loc.ambiguous and loc.failed == frozenset()
    assert loc.candidates == (frozenset({A}), frozenset({B}))
    assert loc.suspects == {A, B}
    assert "ambiguous: 2 link sets" in loc.describe()


def test_without_good_evidence_every_link_of_a_lone_path_is_a_candidate():
    loc = localise(failing=[[C, A, B, D]], good=[])
    assert loc.suspects == {A, B, C, D} and len(loc.candidates) == 4


def test_two_independent_failures_need_two_links():
    x, y = ["h1", "x", "h2"], ["h3", "y", "h4"]
    loc = localise(failing=[x, y], good=[["h1"], ["h2"], ["h3"], ["h4"]])
    assert loc.failed == {"x", "y"} and not loc.ambiguous


def test_a_failing_path_over_proven_links_is_unexplained_not_blamed():
    loc = localise(failing=[[A, B], [A, E], [C, D]], good=[[C], [D], [B]])
    assert loc.failed == {A}
    assert loc.unexplained == (frozenset({C, D}),)


def test_a_path_superset_adds_no_ambiguity():
    # [A, B] already requires A or B; [A] alone forces A: the answer is A, not {A, B} or B.
    loc = localise(failing=[[A], [A, B]], good=[])
    assert loc.failed == {A} and not loc.ambiguous


def test_duplicate_evidence_counts_once():
    loc = localise(failing=[[A, B], [B, A], (A, B)], good=[[B]])
    assert loc.failing_paths == 1 and loc.failed == {A}


def test_more_failures_than_searched_gives_no_answer():
    paths_ = [[f"l{i}"] for i in range(4)]
    assert localise(paths_, [], max_links=3).candidates == ()
    assert localise(paths_, [], max_links=4).failed == {"l0", "l1", "l2", "l3"}


def _evidence(topo, down: set[str]):
    """All-pairs evidence: every path between every host pair, failing if it crosses ``down``."""
    failing, good = [], []
    for src, dst in itertools.permutations([h.name for h in topo.hosts], 2):
        for p in paths(topo, src, dst):
            (failing if down & set(p.links) else good).append(p.links)
    return failing, good


@pytest.mark.parametrize("kind", ["t1", "down"])
def test_every_link_of_the_default_fabric_is_localised_exactly(kind):
    topo = generate_clos()  # 2 planes, 2 T1 and 3 T0 per plane, 2 hosts per leaf
    links = [ln.name for ln in topo.links() if f"/{kind}-" in ln.name]
    assert links
    for link in links:
        loc = localise(*_evidence(topo, {link}))
        assert loc.failed == {link} and not loc.ambiguous, (link, loc.describe())


def test_two_failed_links_in_different_planes_are_both_found():
    topo = generate_clos()
    down = {"p0/t0-0/t1-1", "p1/t0-2/t1-0"}
    loc = localise(*_evidence(topo, down))
    assert loc.failed == down and not loc.ambiguous


def test_with_two_leaves_a_spines_two_links_cannot_be_told_apart():
    # With two leaves every path through a spine crosses both of its links in one plane, so
    # no evidence can tell the two apart: localisation must name both, never guess one.
    topo = generate_clos(leaves=2)
    loc = localise(*_evidence(topo, {"p0/t0-0/t1-1"}))
    assert loc.ambiguous
    assert loc.candidates == (frozenset({"p0/t0-0/t1-1"}), frozenset({"p0/t0-1/t1-1"}))
