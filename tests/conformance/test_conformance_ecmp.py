"""EV-hash (ECMP) mode conformance (docs/ecmp-mode.md): ``ipv6_fib`` LPM routes to
members and groups of ``ecmp_selector``, the group member that ``mrckit.wire.ecmp`` predicts for
every frame, the fall-through to the uN tables on a miss, and trim, ECN and hop limit on packets
without an outer header. Same frame in, same bytes out on the same port, same counter deltas, on
ebpf and on bmv2; the kernel reference has no ECMP and is skipped."""

import pytest

from mrckit.wire.ecmp import ecmp_member

from support.conformance_ecmp_cases import (GROUPS, MODIFIED_THREE, THREE, ecmp_base_tables, ecmp_cases,
                                    group_picks, modified_picks)
from support.conformance_harness import run_case

CASES = ecmp_cases()

@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_ev_hash_case(mrc_switch, case, tmp_path):
    mrc_switch.require("ecmp")   # the kernel reference has no ipv6_fib or ECMP groups
    run_case(mrc_switch, case, ecmp_base_tables(), tmp_path / f"{mrc_switch.name}-{case.name}")


def test_group_cases_reach_every_member():
    """The seeded EVs of the group cases make each group pick each of its members (the drop
    member too), so the cases prove every member's choice on both targets."""
    for name, _da, group, _port, picks in group_picks():
        chosen = {ecmp_member(GROUPS[group], fl, sport) for fl, sport in picks}
        assert chosen == set(GROUPS[group]), name


def test_modified_group_cases_see_the_modify():
    """Some EVs of the modified-group cases would take another member in the original group,
    so those cases fail on a target that ignores the modify."""
    picks = modified_picks()
    assert {ecmp_member(MODIFIED_THREE, fl, sp) for fl, sp in picks} == set(MODIFIED_THREE)
    assert any(ecmp_member(MODIFIED_THREE, fl, sp) != ecmp_member(GROUPS[THREE], fl, sp) for fl, sp in picks)


def test_case_names_unique():
    assert len({c.name for c in CASES}) == len(CASES)
