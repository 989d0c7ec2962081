"""BPF_PROG_TEST_RUN golden tests of tc egress (design sections 3.1, 3.3 and 5)."""

from support import host_pkt as pkt
from support.host_pkt import Dscp, Ecn, Opcode
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrckit.host.maps import Stat
from mrckit.wire.constants import EvState
from mrckit.wire.ev import ev_pack

TC_ACT_OK, TC_ACT_SHOT, TC_ACT_REDIRECT = 0, 2, 7
EV = ev_pack(1, 2, 0x12345)


def run(dp, frame):
    return dp.egress.test_run(frame)


def test_write_is_encapsulated_on_the_templates_ev(dp):
    dp.set_template([EV])
    frame = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload())
    res = run(dp, frame)
    assert res.retval == TC_ACT_REDIRECT
    assert res.data == pkt.expected_encap(frame, EV, Dscp.TRIMMABLE, Ecn.ECT0, pkt.B_LEAF, pkt.B_DOWN)
    # The uSID DA, spelled out: locator | T0(1,0) | T1(1,2) | T0(1,1) | DOWN(1,2) | 0 | 0.
    assert Ether(res.data)[IPv6].dst == "fcbb:bb00:1400:1802:1401:1c02::"
    assert res.data[14:18].hex() == "62a02345"  # version 6, tc 0x2a (DSCP 10, ECT0), fl 0x2345
    assert Ether(res.data)[UDP].sport == EV >> 16
    slot = dp.peer_set(pkt.NIC_B).slots[0]
    assert (slot.ev, slot.tx_packets, slot.tx_bytes) == (EV, 1, len(res.data))
    assert slot.last_tx_ns > 0 and slot.pending_ns == slot.last_tx_ns
    assert dp.stat_values()["TX_ENCAP"] == 1


def test_same_leaf_path_has_two_usids_and_ignores_t1(dp):
    dp.set_template([EV])
    frame = pkt.plain(pkt.NIC_A, pkt.NIC_C, pkt.write_payload())
    res = run(dp, frame)
    assert res.data == pkt.expected_encap(frame, EV, Dscp.TRIMMABLE, Ecn.ECT0, pkt.C_LEAF, pkt.C_DOWN)
    assert Ether(res.data)[IPv6].dst == "fcbb:bb00:1400:1c05::"


def test_retransmission_and_control_classes(dp):
    dp.set_template([EV])
    rtx = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(flags=0x20))
    res = run(dp, rtx)
    assert res.data == pkt.expected_encap(rtx, EV, Dscp.TRIMMABLE_RETX, Ecn.ECT0, pkt.B_LEAF, pkt.B_DOWN)
    sack = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.bth(Opcode.SACK) + pkt.seth(0xDEADBEEF))
    res = run(dp, sack)
    assert res.data == pkt.expected_encap(sack, EV, Dscp.CONTROL, Ecn.NOT_ECT, pkt.B_LEAF, pkt.B_DOWN)


def test_nonzero_udp_checksum_stays_valid(dp):
    dp.set_template([EV])
    frame = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(), chksum=None)
    assert Ether(frame)[UDP].chksum != 0
    res = run(dp, frame)
    out = Ether(res.data)
    assert res.data == pkt.expected_encap(frame, EV, Dscp.TRIMMABLE, Ecn.ECT0, pkt.B_LEAF, pkt.B_DOWN)
    inner = out[IPv6].payload
    sent = inner[UDP].chksum
    del inner[UDP].chksum
    assert IPv6(bytes(inner))[UDP].chksum == sent


def test_udp_checksum_that_sums_to_zero_is_sent_as_ffff(dp):
    """RFC 768 / RFC 8200 section 8.1: a UDP checksum that computes to zero is sent as 0xFFFF;
    over IPv6 a zero checksum means none and the receiver drops the datagram."""
    dp.set_template([EV])
    zeros = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(payload=bytes(64)),
                      sport=EV >> 16, chksum=None)
    # Two payload bytes equal to that checksum make the one's complement sum 0xFFFF, whose
    # checksum is zero: after the sport rewrite the frame must carry 0xFFFF.
    fill = Ether(zeros)[UDP].chksum.to_bytes(2, "big")
    frame = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(payload=fill + bytes(62)), chksum=None)
    res = run(dp, frame)
    assert res.retval == TC_ACT_REDIRECT
    inner = Ether(res.data)[IPv6].payload
    assert (inner[UDP].sport, inner[UDP].chksum) == (EV >> 16, 0xFFFF)
    del inner[UDP].chksum
    assert IPv6(bytes(inner))[UDP].chksum == 0xFFFF


def test_encapsulated_and_foreign_packets_pass_unchanged(dp):
    dp.set_template([EV])
    already = pkt.encapped(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(), ev=EV,
                           outer_tc=pkt.tclass(Dscp.CONTROL), inner_tc=0)
    other_port = pkt.plain(pkt.NIC_A, pkt.NIC_B, b"hello", dport=5000)
    other_src = pkt.plain(pkt.NIC_B, pkt.NIC_C, pkt.write_payload())
    for frame in (already, other_port, other_src):
        res = run(dp, frame)
        assert (res.retval, res.data) == (TC_ACT_OK, frame)
    stats = dp.stat_values()
    assert (stats["TX_PASS_ENCAPPED"], stats["TX_PASS_OTHER"], stats["TX_ENCAP"]) == (1, 2, 0)


def test_no_good_ev_drops_and_counts(dp):
    dp.set_template([EV, ev_pack(0, 1, 7)],
                   states=[EvState.ASSUMED_BAD, EvState.DENIED])
    res = run(dp, pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload()))
    assert res.retval == TC_ACT_SHOT
    assert dp.stat_values()[Stat.TX_DROP_NO_GOOD_EV.name] == 1


def test_down_plane_and_denied_link_are_skipped(dp):
    ev0, ev1 = ev_pack(0, 1, 5), ev_pack(1, 3, 6)
    dp.set_template([ev0, ev1])
    frame = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload())
    dp.set_port_up(1, False)
    assert {Ether(run(dp, frame).data)[UDP].sport for _ in range(6)} == {ev0 >> 16}
    dp.set_port_up(1, True)
    dp.deny_link(0, pkt.B_LEAF, "t1", 1, True)  # peer B's leaf uplink to T1 1 of plane 0
    assert {Ether(run(dp, frame).data)[UDP].sport for _ in range(6)} == {ev1 >> 16}
    dp.deny_link(1, pkt.A_LEAF, "down", pkt.A_DOWN, True)  # our own host link on plane 1
    assert run(dp, frame).retval == TC_ACT_SHOT
    dp.deny_link(0, pkt.B_LEAF, "t1", 1, False)
    assert Ether(run(dp, frame).data)[UDP].sport == ev0 >> 16


def test_bad_destination_is_dropped_and_counted(dp):
    dp.set_template([EV])
    res = run(dp, pkt.plain(pkt.NIC_A, "2001:db8:5::1", pkt.write_payload()))
    assert res.retval == TC_ACT_SHOT
    assert dp.stat_values()["TX_DROP_BAD_DST"] == 1


def test_unconfigured_dataplane_drops_mrc_traffic(dp):
    dp.set_template([EV])
    dp.set_configured(False)
    assert run(dp, pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload())).retval == TC_ACT_SHOT
    assert dp.stat_values()["TX_DROP_NOT_CONFIGURED"] == 1
