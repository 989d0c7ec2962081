"""Golden BPF_PROG_TEST_RUN tests of ``mrc_switch.bpf.c`` against design section 4.

Inputs are built with scapy; every expected frame, length and counter below is written from
the design by hand (uSID values, shifted DAs, trimmed lengths), never taken from the program.
"""

import pytest
from support.switch_harness import (DOWN_2, FABRIC_PORT, FABRIC_PORT_2, HOST_PORT, HOST_PORT_2, T0_0, T0_1, T1_5,
                            XDP_DROP, XDP_REDIRECT, expect_counters, leaf, mac)
from support.switch_frames import container, ipv4_frame, mrc_frame, outer, prefix48

from mrckit.wire.constants import DropReason, Dscp, Ecn, Opcode
from mrckit.topology.entries import TableEntry


# --- uN shift and FIB ------------------------------------------------------------------------

def test_shift_at_t0_t1_t0(switch):
    """One packet along T0_0 -> T1_5 -> T0_1 -> host DOWN_2: one shift per switch."""
    frame = mrc_frame(container(T0_0, T1_5, T0_1, DOWN_2))
    hops = [(T0_0, "fcbb:bb00:805:401:c02::", FABRIC_PORT),
            (T1_5, "fcbb:bb00:401:c02::", FABRIC_PORT_2),
            (T0_1, "fcbb:bb00:c02::", HOST_PORT_2)]
    hlim = 64
    for my_usid, da, port in hops:
        switch.tables.direct.clear("my_usid")
        leaf(switch, my_usid)
        hlim -= 1
        rc, out = switch.run(frame)
        assert rc == XDP_REDIRECT
        assert out == mrc_frame(da, hlim=hlim, src=mac(port), dst=mac(port, True))
        frame = out
    n = len(frame)
    expect_counters(switch, rx_port={HOST_PORT: (3, 3 * n)},
                    tx_port={FABRIC_PORT: (1, n), FABRIC_PORT_2: (1, n), HOST_PORT_2: (1, n)})


def test_shift_happens_once(switch):
    """A container naming this switch twice is shifted once (design 4 step 2)."""
    leaf(switch, T1_5)
    rc, out = switch.run(mrc_frame(container(T1_5, T1_5, DOWN_2)))
    assert rc == XDP_REDIRECT
    assert outer(out).dst == "fcbb:bb00:805:c02::"


def test_no_shift_forwards_on_fib(switch):
    """A DA not naming this switch is forwarded unshifted on the FIB."""
    leaf(switch, T0_0)
    rc, out = switch.run(mrc_frame(container(DOWN_2, 0x1234)))
    assert rc == XDP_REDIRECT
    assert out == mrc_frame(container(DOWN_2, 0x1234), hlim=63, src=mac(3), dst=mac(3, True))


@pytest.mark.parametrize("da", [container(0x0777), container(T0_0), container(T0_0, 0x0999)],
                         ids=["miss", "empty-after-shift", "miss-after-shift"])
def test_fib_miss_drops_no_route(switch, da):
    leaf(switch, T0_0)
    frame = mrc_frame(da)
    assert switch.run(frame)[0] == XDP_DROP
    expect_counters(switch, rx_port={0: (1, len(frame))}, drop_port={0: (1, len(frame))},
                    drop_reason={2: (1, len(frame))})


def test_fib_drop_action_and_default(switch):
    leaf(switch, T0_0)
    switch.tables.direct.write(TableEntry.exact("usid_fib", prefix48(T1_5), "drop"))
    assert switch.run(mrc_frame(container(T0_0, T1_5)))[0] == XDP_DROP
    # A set_egress default catches every miss.
    switch.tables.direct.set_default(TableEntry("usid_fib", {}, "set_egress", {"port": FABRIC_PORT}))
    rc, out = switch.run(mrc_frame(container(0x0777)))
    assert rc == XDP_REDIRECT and outer(out).dst == "fcbb:bb00:777::"
    assert switch.tables.counters.nonzero("drop_reason") == {2: (1, len(mrc_frame(container(T0_0, T1_5))))}


def test_port_without_device_is_no_route(switch):
    leaf(switch, T0_0)
    switch.tables.direct.write(TableEntry.exact("usid_fib", prefix48(0x0777), "set_egress", {"port": 9}))
    assert switch.run(mrc_frame(container(0x0777)))[0] == XDP_DROP
    assert switch.tables.counters.nonzero("drop_reason") == {2: (1, len(mrc_frame(container(0x0777))))}


# --- hop limit, not IPv6, malformed, admin state ----------------------------------------------

@pytest.mark.parametrize("hlim", [0, 1])
def test_hop_limit_drop(switch, hlim):
    leaf(switch)
    frame = mrc_frame(container(T0_0, T1_5), hlim=hlim)
    assert switch.run(frame)[0] == XDP_DROP
    expect_counters(switch, rx_port={0: (1, len(frame))}, drop_port={0: (1, len(frame))},
                    drop_reason={1: (1, len(frame))})


def test_hop_limit_2_leaves_with_1(switch):
    leaf(switch)
    rc, out = switch.run(mrc_frame(container(T0_0, T1_5), hlim=2))
    assert rc == XDP_REDIRECT and outer(out).hlim == 1


def test_not_ipv6(switch):
    leaf(switch)
    frame = ipv4_frame()
    assert switch.run(frame)[0] == XDP_DROP
    expect_counters(switch, rx_port={0: (1, len(frame))}, drop_port={0: (1, len(frame))},
                    drop_reason={0: (1, len(frame))})


@pytest.mark.parametrize("length", [14, 30, 53])
def test_short_ipv6_is_malformed(switch, length):
    leaf(switch)
    frame = mrc_frame(container(T0_0, T1_5))[:length]
    assert switch.run(frame)[0] == XDP_DROP
    expect_counters(switch, rx_port={0: (1, length)}, drop_port={0: (1, length)},
                    drop_reason={5: (1, length)})


def test_headers_only_ipv6_is_forwarded(switch):
    """54 bytes (Ethernet + IPv6) is the shortest frame the switch forwards."""
    leaf(switch)
    frame = mrc_frame(container(T0_0, T1_5))[:54]
    rc, out = switch.run(frame)
    assert rc == XDP_REDIRECT and len(out) == 54


def test_port_down_ingress_and_egress(switch):
    leaf(switch)
    frame = mrc_frame(container(T0_0, T1_5))
    switch.tables.ports.set_up(HOST_PORT, False)
    assert not switch.tables.ports.is_up(HOST_PORT)
    assert switch.run(frame)[0] == XDP_DROP
    switch.tables.ports.set_up(HOST_PORT, True)
    switch.tables.ports.set_up(FABRIC_PORT, False)
    assert switch.run(frame)[0] == XDP_DROP
    switch.tables.ports.set_up(FABRIC_PORT, True)
    assert switch.run(frame)[0] == XDP_REDIRECT
    n = len(frame)
    expect_counters(switch, rx_port={0: (3, 3 * n)}, drop_port={HOST_PORT: (1, n), FABRIC_PORT: (1, n)},
                    drop_reason={4: (2, 2 * n)}, tx_port={FABRIC_PORT: (1, n)})


def test_port_without_config_no_mac_rewrite_never_congested(switch):
    leaf(switch, trim=0, ecn=0)
    switch.tables.direct.delete(TableEntry.exact("port_config", FABRIC_PORT))
    frame = mrc_frame(container(T0_0, T1_5), ecn=Ecn.ECT0, src="02:00:00:00:01:01")
    rc, out = switch.run(frame)
    assert rc == XDP_REDIRECT
    assert out == mrc_frame(container(T1_5), hlim=63, ecn=Ecn.ECT0, src="02:00:00:00:01:01")


# --- trimming ---------------------------------------------------------------------------------

# (opcode, ts, frame length after the trim): 14 Ethernet + 40 + 40 + 8 UDP + 12 BTH + 4 METH
# + [4 TSETH] + 16 RETH + [4 ImmDt] (design sections 3.2 and 4).
TRIM_CASES = [
    (Opcode.WRITE_ONLY, False, 134),
    (Opcode.WRITE_FIRST, False, 134),
    (Opcode.WRITE_MIDDLE, False, 134),
    (Opcode.WRITE_LAST, False, 134),
    (Opcode.WRITE_ONLY_IMM, False, 138),
    (Opcode.WRITE_LAST_IMM, False, 138),
    (Opcode.WRITE_ONLY, True, 138),
    (Opcode.WRITE_ONLY_IMM, True, 142),
    (Opcode.WRITE_LAST_IMM, True, 142),
]


@pytest.mark.parametrize("opcode,ts,length", TRIM_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("dscp", [Dscp.TRIMMABLE, Dscp.TRIMMABLE_RETX])
def test_trim_exact_length_fabric_port(switch, opcode, ts, length, dscp):
    leaf(switch, trim=0)
    frame = mrc_frame(container(T0_0, T1_5), opcode=opcode, ts=ts, dscp=dscp, ecn=Ecn.ECT1, payload=300)
    rc, out = switch.run(frame)
    assert rc == XDP_REDIRECT
    assert len(out) == length
    # Hand-written lengths: outer payload = length - 54, inner payload = UDP length = length - 94.
    assert int.from_bytes(out[18:20], "big") == length - 54
    assert int.from_bytes(out[58:60], "big") == length - 94
    assert int.from_bytes(out[98:100], "big") == length - 94
    assert out == mrc_frame(container(T1_5), opcode=opcode, ts=ts, dscp=Dscp.TRIMMED, ecn=Ecn.ECT1,
                            payload=0, icrc=False, hlim=63, src=mac(1), dst=mac(1, True))
    expect_counters(switch, rx_port={0: (1, len(frame))}, tx_port={1: (1, length)},
                    trim_port={1: (1, length)})


def test_trim_on_host_port_is_lasthop(switch):
    leaf(switch, T0_1, trim=1)
    frame = mrc_frame(container(T0_1, DOWN_2), opcode=Opcode.WRITE_ONLY_IMM, ts=True)
    rc, out = switch.run(frame)
    assert rc == XDP_REDIRECT and len(out) == 142
    assert out == mrc_frame(container(DOWN_2), opcode=Opcode.WRITE_ONLY_IMM, ts=True,
                            dscp=Dscp.TRIMMED_LASTHOP, payload=0, icrc=False, hlim=63,
                            src=mac(3), dst=mac(3, True))
    assert outer(out).tc >> 2 == 13


def test_trim_of_headers_only_write(switch):
    """A write with no payload and no ICRC is already its headers: no cut, but remarked."""
    leaf(switch, trim=0)
    frame = mrc_frame(container(T0_0, T1_5), payload=0, icrc=False)
    rc, out = switch.run(frame)
    assert rc == XDP_REDIRECT
    assert out == mrc_frame(container(T1_5), dscp=Dscp.TRIMMED, payload=0, icrc=False, hlim=63,
                            src=mac(1), dst=mac(1, True))
    assert switch.tables.counters.nonzero("trim_port") == {1: (1, 134)}


@pytest.mark.parametrize("case", ["no-trim-class", "not-mrc-port", "not-a-write", "short-headers",
                                  "best-effort"])
def test_congested_non_trimmable_is_dropped(switch, case):
    leaf(switch, trim=0)
    da = container(T0_0, T1_5)
    frame = {
        "no-trim-class": lambda: mrc_frame(da, dscp=Dscp.NO_TRIM),
        "not-mrc-port": lambda: mrc_frame(da, dport=4792),
        "not-a-write": lambda: mrc_frame(da, opcode=Opcode.ACK),
        "short-headers": lambda: mrc_frame(da, opcode=Opcode.WRITE_ONLY_IMM, ts=True)[:141],
        "best-effort": lambda: mrc_frame(da, dscp=0),
    }[case]()
    assert switch.run(frame)[0] == XDP_DROP
    n = len(frame)
    expect_counters(switch, rx_port={0: (1, n)}, drop_port={FABRIC_PORT: (1, n)},
                    drop_reason={3: (1, n)})


@pytest.mark.parametrize("dscp,opcode", [(Dscp.CONTROL, Opcode.SACK), (Dscp.CONTROL, Opcode.NACK),
                                         (Dscp.TRIMMED, Opcode.WRITE_ONLY),
                                         (Dscp.TRIMMED_LASTHOP, Opcode.WRITE_ONLY)])
def test_control_and_trimmed_pass_congestion_untouched(switch, dscp, opcode):
    leaf(switch, trim=0)
    trimmed = dscp in (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP)
    kw = dict(opcode=opcode, dscp=dscp, payload=0, icrc=not trimmed)
    frame = mrc_frame(container(T0_0, T1_5), **kw)
    rc, out = switch.run(frame)
    assert rc == XDP_REDIRECT
    assert out == mrc_frame(container(T1_5), hlim=63, src=mac(1), dst=mac(1, True), **kw)
    expect_counters(switch, rx_port={0: (1, len(frame))}, tx_port={1: (1, len(frame))})


def test_queue_depth_counts_packets(switch):
    """Drain rate 0 (never drains), trim threshold 3: packets 1 and 2 pass whole, 3 and 4 are
    trimmed, because the depth counting the packet reaches 3 (design section 4, step 5). The
    trimmed headers ride the priority queue: the data queue holds the 2 whole packets."""
    leaf(switch, trim=3)
    switch.tables.queues.set_rate(FABRIC_PORT, 0)
    frame = mrc_frame(container(T0_0, T1_5))
    lengths = [len(switch.run(frame)[1]) for _ in range(4)]
    assert lengths == [len(frame), len(frame), 134, 134]
    assert switch.tables.queues.depth(FABRIC_PORT) == 2.0
    switch.tables.queues.reset([FABRIC_PORT])
    assert len(switch.run(frame)[1]) == len(frame)


def test_priority_packets_leave_data_queue_alone(switch):
    """CONTROL and already-trimmed packets ride the priority queue: however many cross a port
    that never drains, the next data packet finds the data queue empty and passes whole."""
    leaf(switch, trim=2)
    switch.tables.queues.set_rate(FABRIC_PORT, 0)
    control = mrc_frame(container(T0_0, T1_5), dscp=Dscp.CONTROL, opcode=Opcode.SACK, payload=0)
    trimmed = mrc_frame(container(T0_0, T1_5), dscp=Dscp.TRIMMED, payload=0, icrc=False)
    for frame in (control, trimmed) * 3:
        assert switch.run(frame)[0] == XDP_REDIRECT
    assert switch.tables.queues.depth(FABRIC_PORT) == 0
    frame = mrc_frame(container(T0_0, T1_5))
    assert len(switch.run(frame)[1]) == len(frame)


def test_control_never_dropped_when_queue_full(switch):
    leaf(switch, trim=1)
    switch.tables.queues.set_rate(FABRIC_PORT, 0)
    for _ in range(5):
        assert switch.run(mrc_frame(container(T0_0, T1_5), dscp=Dscp.NO_TRIM))[0] == XDP_DROP
        assert switch.run(mrc_frame(container(T0_0, T1_5), dscp=Dscp.CONTROL,
                                    opcode=Opcode.SACK, payload=0))[0] == XDP_REDIRECT


def test_full_queue_drops_whole_data_packets_with_trimming_off(switch):
    """Trim threshold NONE (trimming off), capacity 2, a queue that never drains: packets 1
    and 2 pass whole, 3 and 4 find the queue full and are dropped (congestion); CONTROL
    packets still pass; a trimmed header never occupies the queue. Capacity 0 is unbounded."""
    leaf(switch)  # both thresholds NONE: only the capacity makes the port congested
    switch.tables.queues.set_rate(FABRIC_PORT, 0)
    switch.tables.queues.set_capacity(FABRIC_PORT, 2)
    assert switch.tables.queues.capacity(FABRIC_PORT) == 2 and switch.tables.queues.rate(FABRIC_PORT) == 0
    frame = mrc_frame(container(T0_0, T1_5))
    assert [switch.run(frame)[0] for _ in range(4)] == [XDP_REDIRECT, XDP_REDIRECT, XDP_DROP, XDP_DROP]
    control = mrc_frame(container(T0_0, T1_5), dscp=Dscp.CONTROL, opcode=Opcode.SACK, payload=0)
    assert switch.run(control)[0] == XDP_REDIRECT
    assert switch.tables.queues.depth(FABRIC_PORT) == 2
    n, c = len(frame), len(control)
    expect_counters(switch, rx_port={HOST_PORT: (5, 4 * n + c)}, tx_port={FABRIC_PORT: (3, 2 * n + c)},
                    drop_port={FABRIC_PORT: (2, 2 * n)}, drop_reason={DropReason.CONGESTION: (2, 2 * n)})
    switch.tables.queues.set_capacity(FABRIC_PORT, 0)
    assert switch.run(frame)[0] == XDP_REDIRECT


def test_trimming_comes_before_the_capacity(switch):
    """Trim threshold 2 below capacity 3: the queue fills to the threshold and then every data
    packet is trimmed, never dropped (the trimmed header rides the priority queue)."""
    leaf(switch, trim=2)
    switch.tables.queues.set_rate(FABRIC_PORT, 0)
    switch.tables.queues.set_capacity(FABRIC_PORT, 3)
    frame = mrc_frame(container(T0_0, T1_5))
    assert [len(switch.run(frame)[1]) for _ in range(4)] == [len(frame), 134, 134, 134]
    assert switch.tables.queues.depth(FABRIC_PORT) == 1


def test_set_rate_keeps_the_capacity(switch):
    leaf(switch)
    switch.tables.queues.set_capacity(FABRIC_PORT, 7)
    switch.tables.queues.set_rate(FABRIC_PORT, 1000)
    assert switch.tables.queues.capacity(FABRIC_PORT) == 7 and switch.tables.queues.rate(FABRIC_PORT) == 1000


# --- ECN ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("ecn_in,ecn_out", [(Ecn.ECT0, Ecn.CE), (Ecn.ECT1, Ecn.CE),
                                            (Ecn.NOT_ECT, Ecn.NOT_ECT), (Ecn.CE, Ecn.CE)])
def test_ce_on_fabric_port_only_for_ect(switch, ecn_in, ecn_out):
    leaf(switch, ecn=0)
    frame = mrc_frame(container(T0_0, T1_5), ecn=ecn_in)
    rc, out = switch.run(frame)
    assert rc == XDP_REDIRECT
    assert out == mrc_frame(container(T1_5), ecn=ecn_out, hlim=63, src=mac(1), dst=mac(1, True))
    marked = {1: (1, len(frame))} if ecn_in in (Ecn.ECT0, Ecn.ECT1) else {}
    expect_counters(switch, rx_port={0: (1, len(frame))}, tx_port={1: (1, len(frame))}, ecn_port=marked)


def test_no_ce_on_host_port(switch):
    leaf(switch, T0_1, ecn=0)
    frame = mrc_frame(container(T0_1, DOWN_2), ecn=Ecn.ECT0)
    rc, out = switch.run(frame)
    assert rc == XDP_REDIRECT and outer(out).tc == (Dscp.TRIMMABLE << 2) | Ecn.ECT0
    assert switch.tables.counters.nonzero("ecn_port") == {}


def test_ce_threshold_counts_depth(switch):
    """ECN threshold 2 with a queue that never drains: the first packet is not marked, the
    second is (depth counting it = 2)."""
    leaf(switch, ecn=2)
    switch.tables.queues.set_rate(FABRIC_PORT, 0)
    frame = mrc_frame(container(T0_0, T1_5), ecn=Ecn.ECT0)
    assert outer(switch.run(frame)[1]).tc & 3 == Ecn.ECT0
    assert outer(switch.run(frame)[1]).tc & 3 == Ecn.CE


def test_trimmed_and_ce_together(switch):
    leaf(switch, trim=0, ecn=0)
    rc, out = switch.run(mrc_frame(container(T0_0, T1_5), ecn=Ecn.ECT0))
    assert rc == XDP_REDIRECT and len(out) == 134
    assert outer(out).tc == (Dscp.TRIMMED << 2) | Ecn.CE
    assert switch.tables.counters.nonzero("ecn_port") == {1: (1, 134)}
    assert switch.tables.counters.nonzero("trim_port") == {1: (1, 134)}
