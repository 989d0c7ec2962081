"""The chaos soak's seeded schedule and its report's pass rules (mrckit.apps.chaos), pure."""

import pytest

from mrckit.apps.chaos import ChaosReport, make_schedule
from mrckit.apps.chaos.report import Decision, FaultResult
from mrckit.errors import MrcError
from mrckit.topology import generate_clos

TOPO = generate_clos()
SPINE_LINKS = [(link.a, link.b) for link in map(TOPO.fabric_link, range(len(TOPO.fabric_links)))]
HOSTS = [h.name for h in TOPO.hosts]


def test_the_fabrics_t0_t1_links_are_the_candidates():
    assert len(SPINE_LINKS) == 12 and all("-t0-" in a and "-t1-" in b for a, b in SPINE_LINKS)


def test_one_seed_gives_one_schedule_and_another_seed_another():
    a, b = make_schedule(7, 60, SPINE_LINKS, HOSTS), make_schedule(7, 60, SPINE_LINKS, HOSTS)
    assert a == b
    assert make_schedule(8, 60, SPINE_LINKS, HOSTS) != a


@pytest.mark.parametrize("seed", range(20))
def test_every_fault_once_inside_its_window_and_the_links_differ(seed):
    faults = make_schedule(seed, 60, SPINE_LINKS, HOSTS)
    by_kind = {f.kind: f for f in faults}
    assert sorted(by_kind) == ["agent", "controller", "flap", "loss", "switches"]
    assert [f.start_s for f in faults] == sorted(f.start_s for f in faults)
    assert by_kind["loss"].target != by_kind["flap"].target
    assert by_kind["loss"].target in SPINE_LINKS and by_kind["flap"].target in SPINE_LINKS
    assert by_kind["agent"].target[0] in HOSTS
    assert (by_kind["loss"].start_s, by_kind["loss"].end_s, by_kind["loss"].value) == (6.0, 54.0, 1.0)
    assert (by_kind["flap"].start_s, by_kind["flap"].end_s, by_kind["flap"].value) == (33.0, 45.0, 10.0)
    assert 9.0 <= by_kind["controller"].start_s <= 15.0 and by_kind["controller"].value == 0.5
    assert 16.8 <= by_kind["agent"].start_s <= 22.8
    assert 25.2 <= by_kind["switches"].start_s <= 30.0
    assert all(f.end_s >= f.start_s for f in faults)


def test_a_soak_too_short_or_a_fabric_too_small_is_one_error():
    with pytest.raises(MrcError, match="at least 10 s"):
        make_schedule(1, 5, SPINE_LINKS, HOSTS)
    with pytest.raises(MrcError, match="two T0-T1 links"):
        make_schedule(1, 60, SPINE_LINKS[:1], HOSTS)


def _report(**kw) -> ChaosReport:
    base = dict(seed=1, duration_s=60, fabric="f", endpoint="native", qp_size=1 << 20, rounds=2, flows=12,
                flows_ok=12, bytes_verified=12 << 20, reconcile_writes={"p0-t0-0": 0},
                faults=[FaultResult(kind="loss", target=["a", "b"], value=1, planned_s=6, applied_s=6.1,
                                    evidence={"dropped": 40, "first_drop_s": 6.2}),
                        FaultResult(kind="flap", target=["c", "d"], value=10, planned_s=33, applied_s=34,
                                    evidence={"flaps": 80}),
                        FaultResult(kind="switches", target=[], value=1, planned_s=27, applied_s=27,
                                    evidence={"down_s": 3.1, "crossed_while_down": 900}),
                        FaultResult(kind="controller", target=[], value=0.5, planned_s=12, applied_s=12,
                                    evidence={"down_s": 2.0})])
    base.update(kw)
    return ChaosReport(**base)


def test_a_soak_passes_only_with_every_byte_every_fault_and_no_write():
    assert _report().passed
    assert not _report(bytes_lost=1 << 20, flows_ok=11).passed
    assert not _report(reconcile_writes={"p0-t0-0": 3}).passed
    assert not _report(reconcile_writes=None).passed
    r = _report()
    r.faults[0].evidence["dropped"] = 0  # the loss program dropped nothing: it did not happen
    assert not r.passed and r.checks()["every fault happened"] is False
    r = _report()
    r.faults[2].evidence["crossed_while_down"] = 0  # nothing crossed the switches while the server was down
    assert not r.passed


def test_the_text_says_how_late_each_fault_came_and_why_each_deny():
    r = _report(decisions=[Decision(kind="LOCALISED", t_s=7.0, links=["p0/t0-0/t1-1"],
                                    why="failed: p0/t0-0/t1-1; p0/t0-0/t1-1: 30 failing EVs of h0-0 name it alone"),
                           Decision(kind="LOCALISED", t_s=34.0, links=["p1/t0-1/t1-1"], why="link report: down (flap)"),
                           Decision(kind="DENY", t_s=7.1, links=["p0/t0-0/t1-1"], why="")])
    text = "\n".join(r.lines())
    assert "flap         33.00    34.00  1000 ms flaps 80" in text
    assert "2 localised, 1 DENY, 0 LIFT: 1 from link reports (p1/t0-1/t1-1), 1 from host evidence:" in text
    assert "p0/t0-0/t1-1: failed: p0/t0-0/t1-1; p0/t0-0/t1-1: 30 failing EVs of h0-0 name it alone" in text
    assert text.endswith("PASSED")
