"""One conformance suite for every switch target (design section 4, tests section 8): the
same frame in, the same bytes out on the same ports, the same counter deltas. The switches come
from mrckit.testing's pytest plugin (``mrc_switch``: one per target and module)."""

import pytest

from support.conformance_cases import all_cases, base_tables
from support.conformance_harness import run_case

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(mrc_switch, case, tmp_path):
    if mrc_switch.name == "kernel" and not case.kernel:
        pytest.skip("kernel reference (seg6local End next-csid) runs the uN cases only")
    run_case(mrc_switch, case, base_tables(), tmp_path / f"{mrc_switch.name}-{case.name}")


def test_cases_cover_every_drop_reason_but_port_down():
    """port_down is an eBPF-target admin setting (design section 4), tested there."""
    reasons = {idx for c in CASES for (name, idx) in c.counts if name == "drop_reason"}
    assert reasons == {0, 1, 2, 3, 5}
