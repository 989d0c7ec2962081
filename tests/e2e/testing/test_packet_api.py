"""mrckit.testing's public API on every target present, through its own pytest plugin: negative
checks wait one quiet period for all ports together (counted, not timed), features a target
lacks skip with the reason, and a failed check leaves a diff and pcaps."""

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import rdpcap

from mrckit.errors import MrcError
from mrckit.testing import PacketCheckFailed

LOCAL_EXPERIMENTAL = 0x88B5
"""An ethertype no target forwards: ebpf and bmv2 drop it (not IPv6), the kernel ignores it."""


def _junk(port: int) -> bytes:
    return bytes(Ether(src="02:00:00:00:00:01", dst=f"02:00:00:00:0a:{port:02x}", type=LOCAL_EXPERIMENTAL)
                 / Raw(bytes(46)))


def test_negative_checks_wait_one_quiet_period_for_all_ports(mrc_switch, monkeypatch):
    waits = []
    collect = mrc_switch.tester.collect
    monkeypatch.setattr(mrc_switch.tester, "collect", lambda window: waits.append(window) or collect(window))
    for port in mrc_switch.ports:
        mrc_switch.send(port, _junk(port))
    mrc_switch.expect_nothing_else()
    assert waits == [mrc_switch.target.quiet_period]     # one wait, not one per port
    assert mrc_switch.quiet_waits == 1
    assert len(mrc_switch.ports) == 4


def test_a_missing_feature_skips_with_the_reason(mrc_switch):
    if mrc_switch.name != "kernel":
        mrc_switch.require("trim", "drop_reasons", "counters")    # ours have them all
        return
    with pytest.raises(MrcError, match="kernel target has no trim: the kernel reference"):
        mrc_switch.require("trim")


def test_unexpected_frames_fail_with_their_summary_and_pcaps(mrc_switch):
    mrc_switch.require("counters")
    mrc_switch.tester.send(1, _junk(1))      # behind the session's back: not in sent.pcap
    mrc_switch.tables.apply({})
    # A frame the switch did not send but that the tester's port 2 receives (from the switch
    # side of the veth): the check must report it, whoever sent it.
    from mrckit import netns
    with netns.enter(mrc_switch.wiring.sw):
        import socket
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as raw:
            raw.bind((mrc_switch.wiring.sw_if(2), 0))
            raw.send(_junk(2))
    with pytest.raises(PacketCheckFailed) as failed:
        mrc_switch.expect_nothing_else()
    assert "frames nobody expected" in str(failed.value) and "port 2: 60 B" in str(failed.value)
    assert (failed.value.pcap_dir / "port2.pcap").is_file()
    assert len(rdpcap(str(failed.value.pcap_dir / "port2.pcap"))) == 1
