"""The same every-pair, every-plane traffic on the bmv2 target (skipped where bmv2 or p4c's
outputs are absent; design section 9: neither comes from a registry)."""

import pytest
from fabric_helpers import REPO, RUN_PREFIX, fabric_name, leftovers

from mrckit.fabric import traffic
from mrckit.fabric.fabric import Fabric
from mrckit.switch.bmv2 import find_tool
from mrckit.topology import generate_clos

pytestmark = [pytest.mark.root, pytest.mark.bmv2]

BMV2_PPS = 500
"""Send rate for the bmv2 fabric: ten simple_switch_grpc processes share two cores here."""


def test_every_host_pair_over_every_plane_on_bmv2(need_root):
    if find_tool("simple_switch_grpc") is None:
        pytest.skip("simple_switch_grpc not found on PATH or in /opt/p4tools/bin")
    for out in ("mrc_switch.json", "mrc_switch.p4info.txtpb"):
        if not (REPO / "p4src/build" / out).exists():
            pytest.skip(f"p4src/build/{out} missing: p4c's outputs are needed to program bmv2")
    name = fabric_name("bmv2")
    with Fabric.up(generate_clos(), name=name, target="bmv2", prefix=RUN_PREFIX) as fab:
        # bmv2 reads its ports through libpcap rings; an unpaced burst overflows them, and
        # packets that never reach the switch tell nothing about its forwarding.
        results = traffic.pairwise_udp(fab, pps=BMV2_PPS)
        bad = [r for r in results if not r.ok]
        assert len(results) == 30 and not bad, traffic.summary(results)
    assert leftovers(RUN_PREFIX + name, name) == {}
