"""`mrc experiment chaos`: a short soak on the default fabric. The controller, one agent and the
switches' P4Runtime server are killed and restarted, one T0-T1 link flaps and another loses
1 %, while rings of MRC QPs write across the fabric: every byte verifies, every fault shows in
the dataplane's counters or the restarted process, the restarted controller writes nothing,
and nothing is left behind."""

import os

import pytest
from support.fabric_helpers import RUN_PREFIX, fabric_name, leftovers, mrc

from mrckit.apps.chaos import ChaosOptions, run_chaos


@pytest.fixture
def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces and BPF")


def test_a_short_soak_loses_nothing_and_every_fault_happens(need_root):
    name = fabric_name("chaos")
    opts = ChaosOptions(seed=3, duration_s=12.0, endpoint="native", qp_size=4 << 20, name=name, prefix=RUN_PREFIX)
    try:
        report = run_chaos(opts)
    finally:
        assert leftovers(RUN_PREFIX + name, name) == {}
    assert report.rounds >= 1 and report.flows == 6 * report.rounds
    assert report.bytes_lost == 0 and report.flows_ok == report.flows, report.flow_errors
    assert report.bytes_verified == report.flows * (4 << 20)
    faults = {f.kind: f for f in report.faults}
    assert sorted(faults) == ["agent", "controller", "flap", "loss", "switches"]
    assert all(f.error is None and f.applied_s is not None for f in faults.values()), report.faults
    assert faults["loss"].evidence["dropped"] > 0          # the loss program dropped packets
    assert faults["flap"].evidence["flaps"] > 0            # the link went down at least once
    assert faults["switches"].evidence["crossed_while_down"] > 0  # forwarded with no P4Runtime server
    assert report.reconcile_writes and not any(report.reconcile_writes.values())
    assert all(d.why for d in report.decisions if d.kind == "LOCALISED")  # every DENY says why
    assert report.passed, "\n".join(report.lines())


def test_a_duration_below_the_minimum_is_one_error_line(need_root):
    out = mrc("experiment", "chaos", "--duration", "3")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "--duration" in out.stderr
