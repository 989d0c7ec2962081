"""A user's own P4 program on bmv2: compile ``p4/port_forward.p4``, run it with
``mrc_program``, write its table by P4 names, send and expect. Other targets run mrc_switch
only, so this module picks bmv2 with the ``mrc_targets`` marker."""

import subprocess
from pathlib import Path

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mrckit.switch.bmv2 import find_tool
from mrckit.testing import Program

pytestmark = pytest.mark.mrc_targets("bmv2")
HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def mrc_program(tmp_path_factory):
    """Our program instead of mrc_switch.p4 (the plugin's fixture, overridden here)."""
    p4c = find_tool("p4c-bm2-ss")
    if p4c is None:
        pytest.skip("p4c-bm2-ss not found on PATH or in /opt/p4tools/bin")
    out = tmp_path_factory.mktemp("p4out")
    program = Program(out / "port_forward.json", out / "port_forward.p4info.txtpb")
    subprocess.run([p4c, "--std", "p4-16", "--arch", "v1model", "-o", str(program.json),
                    "--p4runtime-files", str(program.p4info), str(HERE / "p4" / "port_forward.p4")],
                   check=True, capture_output=True)
    return program


def test_forward_by_ingress_port(mrc_switch, mrc_tables):
    mrc_tables.add("MyIngress.port_fwd", {"std.ingress_port": 0}, "MyIngress.set_egress", port=2)
    frame = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x88B5) / Raw(b"hello" * 10)
    mrc_switch.send(0, frame)
    mrc_switch.expect(2, frame)
    mrc_switch.expect_nothing_else()
    assert mrc_switch.counter_deltas()[("rx", 0)][0] == 1


def test_default_action_drops(mrc_switch, mrc_tables):
    """Port 1 has no entry: the default action drops. This program has no drop counters, so
    the test checks that nothing comes out, and that the packet came in."""
    mrc_tables.apply({})
    mrc_switch.send(1, Ether(src="02:00:00:00:00:01", type=0x88B5) / Raw(b"x" * 50))
    mrc_switch.expect_nothing_else()
    assert mrc_switch.counter_deltas()[("rx", 1)][0] == 1
