"""The RC baseline across a fabric whose host agents run in pinned-EV mode (`mrc fabric up
--transport rc`): every byte arrives through 2 % random loss on the writer's T0-T1 links, by
go-back-N, and the host dataplane's per-EV counters show each QP on one EV."""

import dataclasses
import os

import pytest
from support.fabric_helpers import RUN_PREFIX, controller_args, fabric_name, leftovers, mrc

from mrckit.apps.traffic import run_traffic
from mrckit.apps.traffic.patterns import Flow
from mrckit.fabric.fabric import Fabric, fabric_settings
from mrckit.topology import generate_clos

SIZE = 1 << 20
TIMEOUT_S = 240.0


@pytest.fixture(scope="module")
def rc_fabric():
    """2 planes x 2 spines x 2 leaves x 1 host, host agents in pinned-EV mode."""
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces and BPF")
    settings = dataclasses.replace(fabric_settings(), pinned_ev=True)
    fab = Fabric.up(generate_clos(2, 2, 2, 1), name=fabric_name("rc"), target="ebpf", prefix=RUN_PREFIX,
                    settings=settings, controller_args=controller_args())
    yield fab
    fab.down()
    assert leftovers(RUN_PREFIX + fab.name, fab.name) == {}


def _evs_used(fab, src: str, dst: str) -> dict[int, int]:
    """EV -> packets the sender's dataplane sent on it toward ``dst``."""
    stats = fab.host(src).stats(include_evs=True, peer=fab.host(dst).nic_address)
    return {e.ev: e.tx_packets for p in stats.peers for e in p.evs if e.tx_packets}


def test_rc_qps_deliver_every_byte_through_loss_each_on_one_ev(rc_fabric):
    fab = rc_fabric
    for a, b in (("p0-t0-0", "p0-t1-0"), ("p0-t0-0", "p0-t1-1"), ("p1-t0-0", "p1-t1-0"), ("p1-t0-0", "p1-t1-1")):
        fab.fail_link(a, b, "loss", 2.0)
    try:
        flows = [Flow(0, "h0-0", "h1-0", SIZE), Flow(1, "h0-0", "h1-0", SIZE)]
        report = run_traffic(fab, "rc", flows, endpoint="native", timeout=TIMEOUT_S, transport="rc")
    finally:
        fab.restore_all()
    assert [f.error for f in report.flows if not f.ok] == [] and all(f.verified for f in report.flows)
    assert report.transport == "rc"
    used = _evs_used(fab, "h0-0", "h1-0")
    assert 1 <= len(used) <= 2, f"2 RC QPs, each pinned to one EV: {used}"
    counters = fab.host("h0-0").stats().counters
    assert counters["dp_tx_pinned"] >= 2 * SIZE // 2048
    assert counters.get("dp_tx_drop_pinned_down", 0) == 0


def test_rc_with_the_python_endpoint_is_one_error_line(rc_fabric):
    out = mrc("traffic", "ring", "--fabric", rc_fabric.name, "--endpoint", "python", "--transport", "rc")
    assert out.returncode == 2 and "native endpoint only" in out.stderr and "Traceback" not in out.stderr
