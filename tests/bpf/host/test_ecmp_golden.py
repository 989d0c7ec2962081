"""BPF_PROG_TEST_RUN golden tests of EV-hash (ecmp) mode (ECMP contract sections 1
and 5): tc egress writes the EV into the packet as is, with no outer header; XDP ingress
applies feedback and the QP 0x2 rewrite to plain packets and decapsulates nothing."""

from support import host_pkt as pkt
import pytest
from support.host_pkt import Dscp, Ecn, Opcode
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrckit.host.maps import Reason, RxPath
from mrckit.wire.constants import AGENT_UDP_PORT, QP_ENDPOINT_OPS, EvState, MultipathState, NackReason
from mrckit.wire.ev import ev_pack

TC_ACT_OK, TC_ACT_SHOT, TC_ACT_REDIRECT = 0, 2, 7
XDP_DROP, XDP_PASS = 1, 2
EV = ev_pack(1, 2, 0x12345)  # 0x10212345: sport 0x1021, flow label 0x2345


def expected_plain(frame: bytes, ev: int, dscp: int, ecn: int) -> bytes:
    """What tc egress must emit in ecmp mode: the same packet, class set, EV in the flow
    label and UDP source port (checksum kept valid), Ethernet from the EV's plane port to
    its T0."""
    ip = Ether(frame)[IPv6]
    ip.tc, ip.fl = pkt.tclass(dscp, ecn), ev & 0xFFFF
    old_ck = ip[UDP].chksum
    ip[UDP].sport = ev >> 16
    if old_ck:
        del ip[UDP].chksum
    plane = ev >> 28
    return bytes(Ether(src=pkt.MAC[plane], dst=pkt.NEIGH[plane]) / IPv6(bytes(ip)))


def mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


# ---- tc egress ------------------------------------------------------------------------------

def test_write_goes_out_as_is_with_the_ev_written_in(ecmp_dp):
    ecmp_dp.set_template([EV])
    frame = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload())
    res = ecmp_dp.egress.test_run(frame)
    assert res.retval == TC_ACT_REDIRECT
    assert res.data == expected_plain(frame, EV, Dscp.TRIMMABLE, Ecn.ECT0)
    # Spelled out: no outer header (same length, next header UDP), plane 1's MACs, the EV.
    assert len(res.data) == len(frame)
    assert res.data[:12] == mac(pkt.NEIGH[1]) + mac(pkt.MAC[1])
    assert res.data[14:18].hex() == "62a02345"  # version 6, tc 0x2a (DSCP 10, ECT0), fl 0x2345
    assert res.data[20] == 17 and res.data[22:54] == frame[22:54]  # next header, SA and DA kept
    assert res.data[54:58].hex() == "102112b7"  # sport = EV >> 16, dport 4791
    assert res.data[58:] == frame[58:]  # UDP length/checksum 0, BTH onward untouched
    slot = ecmp_dp.peer_set(pkt.NIC_B).slots[0]
    assert (slot.ev, slot.tx_packets, slot.tx_bytes) == (EV, 1, len(res.data))
    assert slot.pending_ns == slot.last_tx_ns > 0
    stats = ecmp_dp.stat_values()
    assert (stats["TX_PLAIN"], stats["TX_ENCAP"]) == (1, 0)


def test_each_ev_leaves_by_its_own_planes_port(ecmp_dp):
    ev0, ev1 = ev_pack(0, 0, 0x1), ev_pack(1, 0, 0x2)
    ecmp_dp.set_template([ev0, ev1])
    frame = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.bth(Opcode.SACK) + pkt.seth(0xDEADBEEF))
    seen = {}
    for _ in range(4):
        res = ecmp_dp.egress.test_run(frame)
        out = Ether(res.data)
        ev = (out[UDP].sport << 16) | out[IPv6].fl
        assert res.data == expected_plain(frame, ev, Dscp.CONTROL, Ecn.NOT_ECT)
        seen[ev] = (out.src, out.dst)
    assert seen == {ev0: (pkt.MAC[0], pkt.NEIGH[0]), ev1: (pkt.MAC[1], pkt.NEIGH[1])}


def test_retransmission_class_and_valid_nonzero_checksum(ecmp_dp):
    ecmp_dp.set_template([EV])
    rtx = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(flags=0x20), chksum=None)
    assert Ether(rtx)[UDP].chksum != 0
    res = ecmp_dp.egress.test_run(rtx)
    assert res.data == expected_plain(rtx, EV, Dscp.TRIMMABLE_RETX, Ecn.ECT0)
    ip = Ether(res.data)[IPv6]
    sent = ip[UDP].chksum
    del ip[UDP].chksum
    assert IPv6(bytes(ip))[UDP].chksum == sent


def test_only_good_evs_are_used_and_denied_links_do_not_apply(ecmp_dp):
    evs = [ev_pack(0, 1, 5), ev_pack(0, 2, 6), ev_pack(0, 1, 9), ev_pack(1, 1, 7), ev_pack(1, 3, 8)]
    ecmp_dp.set_template(evs, states=[EvState.GOOD, EvState.SKIP, EvState.GOOD,
                                      EvState.ASSUMED_BAD, EvState.DENIED])
    # In ecmp mode an EV's T1 field names no spine: a denied link must not hide EVs.
    ecmp_dp.deny_link(0, pkt.B_LEAF, "t1", 1, True)
    frame = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload())
    assert ecmp_dp.egress.test_run(frame).retval == TC_ACT_REDIRECT  # creates peer B's set
    peer = ecmp_dp.peer_set(pkt.NIC_B)
    peer.slots[1].skip_until_rot = 0xFFFFFFFF  # SKIP normally ends after a rotation: pin it
    ecmp_dp.put_peer_set(pkt.NIC_B, peer)
    used = set()
    for _ in range(50):
        out = Ether(ecmp_dp.egress.test_run(frame).data)
        used.add((out[UDP].sport << 16) | out[IPv6].fl)
    assert used == {evs[0], evs[2]}


def test_no_good_ev_drops_and_encapsulated_packets_pass(ecmp_dp):
    ecmp_dp.set_template([EV], states=[EvState.ASSUMED_BAD])
    assert ecmp_dp.egress.test_run(pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload())).retval == TC_ACT_SHOT
    already = pkt.encapped(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(), ev=EV,
                           outer_tc=pkt.tclass(Dscp.CONTROL), inner_tc=0)
    res = ecmp_dp.egress.test_run(already)
    assert (res.retval, res.data) == (TC_ACT_OK, already)
    st = ecmp_dp.stat_values()
    assert (st["TX_DROP_NO_GOOD_EV"], st["TX_PASS_ENCAPPED"], st["TX_PLAIN"]) == (1, 1, 0)


# ---- XDP ingress ----------------------------------------------------------------------------

EVS = [ev_pack(0, 1, 0x111), ev_pack(0, 2, 0x222), ev_pack(1, 1, 0x333), ev_pack(1, 3, 0x444)]
PEER_EV = ev_pack(0, 3, 0xABCDE)  # the EV peer B chose for its own packet to us


def from_b(l4: bytes, tc: int = pkt.tclass(Dscp.CONTROL), chksum: int | None = 0) -> bytes:
    """A plain packet from B to A as the fabric delivers it in ecmp mode."""
    return pkt.plain(pkt.NIC_B, pkt.NIC_A, l4, sport=PEER_EV >> 16, fl=PEER_EV & 0xFFFF, tc=tc,
                     chksum=chksum)


@pytest.fixture
def fb(ecmp_dp):
    """ecmp_dp with a peer set for B (made by one packet through tc egress)."""
    ecmp_dp.set_template(EVS)
    assert ecmp_dp.egress.test_run(pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload())).retval == 7
    ecmp_dp.poll_events()
    return ecmp_dp


def slot_of(dp, ev):
    s = dp.peer_set(pkt.NIC_B)
    return next(s.slots[i] for i in range(s.n) if s.slots[i].ev == ev)


def test_data_passes_up_unchanged_with_its_marks(ecmp_dp):
    frame = from_b(pkt.write_payload(), tc=pkt.tclass(Dscp.TRIMMED, Ecn.CE))
    res = ecmp_dp.ingress.test_run(frame)
    assert (res.retval, res.data) == (XDP_PASS, frame)  # nothing to decapsulate or copy
    st = ecmp_dp.stat_values()
    assert (st["RX_PLAIN"], st["RX_DECAP"], st["RX_DROP_CE_NOT_ECT"]) == (1, 0, 0)
    assert ecmp_dp.rx_path_counts() == {}  # data: not an arrival


def test_sack_on_a_plain_packet_acks_its_ev(fb):
    sent = next(slot_of(fb, ev) for ev in EVS if slot_of(fb, ev).tx_packets)
    frame = from_b(pkt.bth(Opcode.SACK) + pkt.seth(sent.ev))
    res = fb.ingress.test_run(frame)
    assert (res.retval, res.data) == (XDP_PASS, frame)
    after = slot_of(fb, sent.ev)
    assert (after.state, after.acked, after.pending_ns, after.unacked_tx) == (EvState.GOOD, 1, 0, 0)
    assert fb.stat_values()["FB_SACK"] == 1 and fb.poll_events() == []


@pytest.mark.parametrize("l4, state, reason", [
    (pkt.bth(Opcode.SACK) + pkt.seth(EVS[1], MultipathState.SKIP_ONCE), EvState.SKIP, Reason.SACK_SKIP_ONCE),
    (pkt.bth(Opcode.NACK) + pkt.neth(EVS[1], NackReason.TRIMMED), EvState.SKIP, Reason.NACK_TRIMMED),
    (pkt.bth(Opcode.SACK) + pkt.seth(EVS[1], MultipathState.ALWAYS_SKIP), EvState.ASSUMED_BAD,
     Reason.SACK_ALWAYS_SKIP),
])
def test_feedback_on_a_plain_packet_changes_the_ev_state(fb, l4, state, reason):
    assert fb.ingress.test_run(from_b(l4)).retval == XDP_PASS
    s = slot_of(fb, EVS[1])
    assert (s.state, s.reason) == (state, reason)
    [event] = fb.poll_events()
    assert (event.ev, event.old_state, event.new_state, event.reason) == (EVS[1], EvState.GOOD, state, reason)
    assert [slot_of(fb, ev).state for ev in EVS if ev != EVS[1]] == [EvState.GOOD] * 3


def test_trimmed_lasthop_nack_does_not_penalise(fb):
    fb.ingress.test_run(from_b(pkt.bth(Opcode.NACK) + pkt.neth(EVS[2], NackReason.TRIMMED_LASTHOP)))
    s = slot_of(fb, EVS[2])
    assert (s.state, s.nacks) == (EvState.GOOD, 1)
    assert fb.stat_values()["FB_NACK_LASTHOP"] == 1


def test_qp2_on_a_plain_packet_goes_to_the_agent_port(ecmp_dp):
    erth = pkt.bth(Opcode.EP_REQ, dqpn=QP_ENDPOINT_OPS) + bytes(16)
    frame = from_b(erth)
    res = ecmp_dp.ingress.test_run(frame)
    want = Ether(frame)
    want[UDP].dport = AGENT_UDP_PORT
    assert (res.retval, res.data) == (XDP_PASS, bytes(want))
    assert res.data[56:58] == AGENT_UDP_PORT.to_bytes(2, "big") and res.data[60:62] == b"\0\0"
    # A nonzero checksum is updated incrementally (RFC 1624) and equals a fresh one.
    frame = from_b(erth, chksum=None)
    res = ecmp_dp.ingress.test_run(frame)
    want = Ether(frame)
    want[UDP].dport = AGENT_UDP_PORT
    del want[UDP].chksum
    assert res.data == bytes(want)
    assert ecmp_dp.stat_values()["RX_AGENT"] == 2
    assert ecmp_dp.rx_path_counts() == {RxPath(0, 3, pkt.B_LEAF, pkt.B_DOWN): 2}  # the sender's EV path bits, the sender


def test_foreign_truncated_and_encapsulated_frames(ecmp_dp):
    elsewhere = pkt.plain(pkt.NIC_B, pkt.NIC_C, pkt.write_payload())
    other_port = pkt.plain(pkt.NIC_B, pkt.NIC_A, b"hello", dport=5000)
    encapped = pkt.encapped(pkt.NIC_B, pkt.NIC_A, pkt.write_payload(), ev=PEER_EV, outer_tc=0, inner_tc=0)
    for frame in (elsewhere, other_port, encapped):  # not this mode's MRC packets: untouched
        res = ecmp_dp.ingress.test_run(frame)
        assert (res.retval, res.data) == (XDP_PASS, frame)
    truncated = from_b(pkt.write_payload())[:80]  # payload length says more than the frame holds
    assert ecmp_dp.ingress.test_run(truncated).retval == XDP_DROP
    ecmp_dp.set_configured(False)
    assert ecmp_dp.ingress.test_run(from_b(pkt.write_payload())).retval == XDP_DROP
    st = ecmp_dp.stat_values()
    assert (st["RX_PASS_OTHER"], st["RX_DROP_MALFORMED"], st["RX_DROP_NOT_CONFIGURED"]) == (3, 1, 1)
    assert (st["RX_DECAP"], st["RX_PLAIN"]) == (0, 0)
    assert ecmp_dp.rx_path_counts() == {}
