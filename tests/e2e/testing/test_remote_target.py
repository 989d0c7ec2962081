"""The remote target: an existing P4Runtime server whose ports the user wired to tester
interfaces. Here the "remote" switch is a bmv2 that this test starts itself in a namespace,
with mrc_switch.p4; mrckit.testing only connects to its P4Runtime socket, writes tables by P4
names, sends and expects through the given interfaces, and deletes what it wrote at the end."""

import os

import pytest
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mrckit import netns
from mrckit.switch.bmv2 import DEFAULT_JSON, Bmv2Switch
from mrckit.testing import Remote, SwitchUnderTest, TableEntry, build_wiring, remove_wiring, skip_reason

RUN_PREFIX = f"mrct{os.getpid() % 100000}"
"""tests/conftest.py's run prefix, so its session-end cleanup covers our namespaces too."""
LOCATOR = 0xFCBBBB00

pytestmark = [pytest.mark.root, pytest.mark.bmv2]


@pytest.fixture
def remote_bmv2():
    reason = skip_reason("bmv2")
    if reason:
        pytest.skip(reason)
    wiring = build_wiring(RUN_PREFIX, kernel_switch=False, ports=(1, 2))
    switch = None
    try:
        switch = Bmv2Switch(netns.unique_name("mrcrem"), wiring.sw, {p: wiring.sw_if(p) for p in wiring.ports})
        switch.start()
        # bmv2 loads the JSON but has no P4Runtime pipeline yet: the session pushes it, as for a
        # hardware switch given its device config.
        yield Remote(switch.grpc_address, {p: wiring.tester_if(p) for p in wiring.ports}, tester_ns=wiring.tester,
                     device_config=DEFAULT_JSON)
    finally:
        if switch is not None:
            switch.stop()
        remove_wiring(wiring)


def test_a_remote_p4runtime_switch_forwards_and_counts(remote_bmv2):
    with SwitchUnderTest("remote", remote=remote_bmv2) as sut:
        assert sut.target is not None and sut.target.features >= {"counters", "drop_reasons", "trim"}
        sut.tables.insert(TableEntry.exact("usid_fib", LOCATOR << 16 | 0x0400, "set_egress", {"port": 2}))
        pkt = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") /
               IPv6(src="2001:db8::1", dst="fcbb:bb00:400::", hlim=9) / Raw(b"r" * 40))
        want = pkt.copy()
        want[IPv6].hlim = 8
        sut.send(1, pkt)
        sut.expect(2, want)
        sut.expect_nothing_else()
        assert sut.counter_deltas()[("tx_port", 2)][0] == 1
        sut.send(1, Ether(dst="02:00:00:00:00:02") / IPv6(dst="fcbb:bb00:999::") / Raw(b"x" * 40))
        sut.expect_drop("no_route")
        installed = dict(sut.tables.installed)
    assert installed and not sut.target     # closed: the session's entries were deleted
