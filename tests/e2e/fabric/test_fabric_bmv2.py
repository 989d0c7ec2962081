"""The same every-pair, every-plane traffic on the bmv2 target (skipped where bmv2 or p4c's
outputs are absent; design section 9: neither comes from a registry)."""

import pytest
from support.fabric_helpers import RUN_PREFIX, fabric_name, leftovers, mrc
from support.paths import ROOT as REPO

from mrckit.apps import pairwise
from mrckit.fabric.fabric import Fabric
from mrckit.switch.bmv2 import find_tool
from mrckit.topology import generate_clos

pytestmark = [pytest.mark.root, pytest.mark.bmv2]

BMV2_PPS = pairwise.BMV2_PPS


def test_every_host_pair_over_every_plane_on_bmv2(need_root):
    if find_tool("simple_switch_grpc") is None:
        pytest.skip("simple_switch_grpc not found on PATH or in /opt/p4tools/bin")
    for out in ("mrc_switch.json", "mrc_switch.p4info.txtpb"):
        if not (REPO / "p4src/build" / out).exists():
            pytest.skip(f"p4src/build/{out} missing: p4c's outputs are needed to program bmv2")
    name = fabric_name("bmv2")
    # The fabric's bmv2 defaults probe gently (mrckit.fabric.fabric.BMV2_PROBE_INTERVAL_NS):
    # once the downed link below is denied, every host probes its denied EVs.
    with Fabric.up(generate_clos(), name=name, target="bmv2", prefix=RUN_PREFIX) as fab:
        # bmv2 reads its ports through libpcap rings; an unpaced burst overflows them, and
        # packets that never reach the switch tell nothing about its forwarding.
        results = pairwise.pairwise_udp(fab, pps=BMV2_PPS)
        bad = [r for r in results if not r.ok]
        assert len(results) == 30 and not bad, pairwise.summary(results)
        check = mrc("fabric", "check", name, "--packets", "64", timeout=300)  # paced by default on bmv2
        assert check.returncode == 0 and "30/30 host pairs OK" in check.stdout, check.stdout + check.stderr
        _down_link_leaves_the_rest_of_both_switches_forwarding(fab)
    assert leftovers(RUN_PREFIX + name, name) == {}


def _down_link_leaves_the_rest_of_both_switches_forwarding(fab):
    """A down T0-T1 link must not stop the two bmv2 switches on its other ports (libpcap
    blocks bmv2 on a port that goes admin-down; mrckit.fabric.linkstate blackholes it
    instead), and after restore the link carries traffic again."""
    fab.fail_link("p0-t0-1", "p0-t1-1", "down")
    # The link is reported down and the SRv6 controller DENIES it on every host (bounded wait:
    # the DENY follows the report at the reactor's next decision); from then on no host sends
    # across it.
    assert _until(lambda: "p0/t0-1/t1-1" in _denials(fab)), _denials(fab)
    same_leaf = pairwise.pairwise_udp(fab, hosts=["h1-0", "h1-1"], pps=BMV2_PPS)
    assert all(r.ok for r in same_leaf), pairwise.summary(same_leaf)
    across = pairwise.pairwise_udp(fab, hosts=["h1-0", "h0-0"], pps=BMV2_PPS)
    assert all(r.ok for r in across), (pairwise.summary(across), across)  # the other spine of plane 0, plane 1
    fab.restore("p0-t0-1", "p0-t1-1")
    assert _until(lambda: "p0/t0-1/t1-1" not in _denials(fab)), _denials(fab)
    across = pairwise.pairwise_udp(fab, hosts=["h1-0", "h0-0"], pps=BMV2_PPS)
    assert all(r.ok for r in across), pairwise.summary(across)


def _denials(fab) -> dict:
    from mrckit.control import read_status

    return read_status(fab.name)["denials"]


def _until(cond, seconds: float = 10.0) -> bool:
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()
