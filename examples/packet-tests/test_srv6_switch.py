"""Packet tests of the MRC switch program, as a user writes them: a uN shift, a trim, a drop,
counters. Each test runs on every target present (ebpf, bmv2, kernel); the kernel reference
forwards uN only, so the tests that need trimming or drop reasons skip there, saying so."""

from scapy.layers.inet6 import IPv6
from scapy.packet import Raw

from mrckit.testing import Mask
from mrckit.wire.constants import Dscp

from srv6_tables import mrc_write, out_of, port_config


def test_un_shift(switch):
    """My uSID 0x0801 is consumed (NEXT-C-SID shift) and the next one, 0x0401, leads to port 3."""
    pkt = mrc_write("fcbb:bb00:801:401::", in_port=1)
    want = out_of(pkt, 3)
    want[IPv6].dst = "fcbb:bb00:401::"
    switch.send(1, pkt)
    switch.expect(3, want)
    switch.expect_nothing_else()


def test_transit_with_a_mask(switch):
    """Not my uSID: forwarded toward 0x0400 unshifted. The mask says the hop limit may be any."""
    pkt = mrc_write("fcbb:bb00:400:c00::", in_port=3)
    switch.send(3, pkt)
    switch.expect(1, Mask(out_of(pkt, 1)).ignore(IPv6, "hlim"))
    switch.expect_nothing_else()


def test_trim(switch, mrc_tables):
    """Past port 1's trim threshold (0 packets) a trimmable write loses its payload: the same
    headers, DSCP TRIMMED, lengths fixed (scapy recomputes them)."""
    switch.require("trim")
    mrc_tables.modify(port_config(1, trim_threshold=0))
    pkt = mrc_write("fcbb:bb00:400::", in_port=3)
    want = out_of(pkt, 1)
    want[IPv6].tc = Dscp.TRIMMED << 2
    want[IPv6].plen = want[IPv6].payload[IPv6].plen = want["UDP"].len = None
    want[Raw].underlayer.remove_payload()
    switch.send(3, pkt)
    switch.expect(1, want)
    switch.expect_nothing_else()


def test_unknown_usid_is_dropped(switch):
    switch.require("drop_reasons")
    switch.send(1, mrc_write("fcbb:bb00:999::", in_port=1))
    switch.expect_drop(reason="no_route")
    switch.expect_nothing_else()


def test_counters(switch):
    switch.require("counters")
    pkt = mrc_write("fcbb:bb00:400::", in_port=3)
    switch.send(3, pkt)
    switch.expect(1, out_of(pkt, 1))
    switch.expect_nothing_else()
    deltas = switch.counter_deltas()
    assert deltas[("rx_port", 3)][0] == 1 and deltas[("tx_port", 1)][0] == 1
