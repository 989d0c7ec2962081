"""BPF_PROG_TEST_RUN golden tests of XDP ingress: decap and feedback (design 3.1 and 5)."""

from support import host_pkt as pkt
from support.host_pkt import Dscp, Ecn, Opcode
import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrckit.host.maps import Reason, RxPath, rx_path_key, split_rx_path_key
from mrckit.wire.constants import AGENT_UDP_PORT, QP_ENDPOINT_OPS, EvState, MultipathState, NackReason
from mrckit.wire.ev import ev_pack

XDP_DROP, XDP_PASS = 1, 2
EVS = [ev_pack(0, 1, 0x111), ev_pack(0, 2, 0x222), ev_pack(1, 1, 0x333), ev_pack(1, 3, 0x444)]
PEER_EV = ev_pack(0, 3, 0xABCDE)  # the EV peer B chose for its own packet to us


def decap_of(frame: bytes, inner_tc: int, inner_fl: int, dport: int | None = None) -> bytes:
    """The expected decap: the frame without its outer header, inner tc/fl replaced."""
    pkt_ = Ether(frame)
    inner = pkt_[IPv6].payload
    inner.tc, inner.fl = inner_tc, inner_fl
    if dport is not None:
        inner[UDP].dport = dport
    return bytes(Ether(src=pkt_.src, dst=pkt_.dst) / IPv6(bytes(inner)))


def test_decap_copies_dscp_ce_and_flow_label(dp):
    frame = pkt.encapped(pkt.NIC_B, pkt.NIC_A, pkt.write_payload(), ev=PEER_EV,
                         outer_tc=pkt.tclass(Dscp.TRIMMED, Ecn.CE),
                         inner_tc=pkt.tclass(Dscp.TRIMMABLE, Ecn.ECT0), inner_fl=0x777)
    res = dp.ingress.test_run(frame)
    assert res.retval == XDP_PASS
    assert res.data == decap_of(frame, pkt.tclass(Dscp.TRIMMED, Ecn.CE), PEER_EV & 0xFFFF)
    assert res.data[14:18].hex() == "62f" + f"{PEER_EV & 0xFFFF:05x}"  # tc 0x2f: DSCP 11, CE
    assert dp.stat_values()["RX_DECAP"] == 1


def test_decap_keeps_inner_ect_without_ce(dp):
    frame = pkt.encapped(pkt.NIC_B, pkt.NIC_A, pkt.write_payload(), ev=PEER_EV,
                         outer_tc=pkt.tclass(Dscp.TRIMMABLE, Ecn.ECT0),
                         inner_tc=pkt.tclass(Dscp.TRIMMABLE, Ecn.ECT1))
    res = dp.ingress.test_run(frame)
    assert res.data == decap_of(frame, pkt.tclass(Dscp.TRIMMABLE, Ecn.ECT1), PEER_EV & 0xFFFF)


def test_ce_on_not_ect_inner_is_dropped_and_counted(dp):
    """RFC 6040 section 4.2: outer CE over a Not-ECT inner packet must be dropped."""
    frame = pkt.encapped(pkt.NIC_B, pkt.NIC_A, pkt.write_payload(), ev=PEER_EV,
                         outer_tc=pkt.tclass(Dscp.CONTROL, Ecn.CE), inner_tc=0)
    assert dp.ingress.test_run(frame).retval == XDP_DROP
    assert dp.stat_values()["RX_DROP_CE_NOT_ECT"] == 1


def test_qp2_goes_to_the_agent_port(dp):
    erth = pkt.bth(Opcode.EP_REQ, dqpn=QP_ENDPOINT_OPS) + bytes(16)
    control = pkt.tclass(Dscp.CONTROL)
    frame = pkt.encapped(pkt.NIC_B, pkt.NIC_A, erth, ev=PEER_EV, outer_tc=control, inner_tc=0)
    res = dp.ingress.test_run(frame)
    assert res.data == decap_of(frame, control, PEER_EV & 0xFFFF, dport=AGENT_UDP_PORT)
    # A nonzero UDP checksum is updated incrementally (RFC 1624) and must equal a fresh one.
    frame = pkt.encapped(pkt.NIC_B, pkt.NIC_A, erth, ev=PEER_EV, outer_tc=control, inner_tc=0,
                         chksum=None)
    assert Ether(frame)[UDP].chksum != 0
    res = dp.ingress.test_run(frame)
    want = Ether(decap_of(frame, control, PEER_EV & 0xFFFF, dport=AGENT_UDP_PORT))
    del want[UDP].chksum
    assert res.data == bytes(want)
    assert dp.stat_values()["RX_AGENT"] == 2


def test_not_local_and_truncated_are_dropped_plain_ipv6_passes(dp):
    other = pkt.encapped(pkt.NIC_B, pkt.NIC_C, pkt.write_payload(), ev=PEER_EV,
                         outer_tc=0, inner_tc=0)
    assert dp.ingress.test_run(other).retval == XDP_DROP
    assert dp.ingress.test_run(other[:70]).retval == XDP_DROP
    plain = pkt.plain(pkt.NIC_B, pkt.NIC_A, pkt.write_payload())
    res = dp.ingress.test_run(plain)
    assert (res.retval, res.data) == (XDP_PASS, plain)
    stats = dp.stat_values()
    assert (stats["RX_DROP_NOT_LOCAL"], stats["RX_DROP_MALFORMED"], stats["RX_PASS_OTHER"]) == (1, 1, 1)


def test_probes_are_counted_by_plane_t1_and_sender(dp):
    """rx_paths counts the QP 0x2 packets (probes, their answers) XDP ingress accepted for this
    host, by the sender's EV path bits and the sender; data, and frames it drops or that are
    not this host's, count nowhere."""
    erth = pkt.bth(Opcode.EP_REQ, dqpn=QP_ENDPOINT_OPS) + bytes(16)
    control = pkt.tclass(Dscp.CONTROL)
    probe = pkt.encapped(pkt.NIC_B, pkt.NIC_A, erth, ev=PEER_EV, outer_tc=control, inner_tc=0)
    same_leaf = pkt.encapped(pkt.NIC_C, pkt.NIC_A, erth, ev=ev_pack(1, 2, 5), outer_tc=control, inner_tc=0)
    data = pkt.encapped(pkt.NIC_B, pkt.NIC_A, pkt.write_payload(), ev=PEER_EV, outer_tc=0, inner_tc=0)
    for frame in (probe, probe, same_leaf, data):
        assert dp.ingress.test_run(frame).retval == XDP_PASS
    not_local = pkt.encapped(pkt.NIC_B, pkt.NIC_C, erth, ev=PEER_EV, outer_tc=control, inner_tc=0)
    ce_not_ect = pkt.encapped(pkt.NIC_B, pkt.NIC_A, erth, ev=PEER_EV,
                              outer_tc=pkt.tclass(Dscp.CONTROL, Ecn.CE), inner_tc=0)
    for frame in (not_local, ce_not_ect, probe[:70]):
        assert dp.ingress.test_run(frame).retval == XDP_DROP
    assert dp.rx_path_counts() == {RxPath(0, 3, pkt.B_LEAF, pkt.B_DOWN): 2,
                                   RxPath(1, 2, pkt.C_LEAF, pkt.C_DOWN): 1}


def test_rx_path_key_round_trips():
    key = rx_path_key(15, 255, 1023, 1023)
    assert key == 0xFFFFFFFF
    assert split_rx_path_key(key) == RxPath(15, 255, 1023, 1023)
    assert split_rx_path_key(rx_path_key(1, 2, 3, 4)) == RxPath(1, 2, 3, 4)
    with pytest.raises(ValueError, match="src_leaf=1024"):
        rx_path_key(0, 0, 1024, 0)


# ---- feedback -------------------------------------------------------------------------------

@pytest.fixture
def fb(dp):
    """dp with a peer set for B (made by one packet through tc egress)."""
    dp.set_template(EVS)
    assert dp.egress.test_run(pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload())).retval == 7
    dp.poll_events()
    return dp


def feedback(dp, l4: bytes) -> None:
    frame = pkt.encapped(pkt.NIC_B, pkt.NIC_A, l4, ev=PEER_EV,
                         outer_tc=pkt.tclass(Dscp.CONTROL), inner_tc=pkt.tclass(Dscp.CONTROL))
    res = dp.ingress.test_run(frame)
    assert res.retval == XDP_PASS  # feedback still reaches the endpoint


def sack(ev: int, m: int = MultipathState.NONE) -> bytes:
    return pkt.bth(Opcode.SACK) + pkt.seth(ev, m)


def nack(ev: int, reason: int) -> bytes:
    return pkt.bth(Opcode.NACK) + pkt.neth(ev, reason)


def slot_of(dp, ev):
    s = dp.peer_set(pkt.NIC_B)
    return next(s.slots[i] for i in range(s.n) if s.slots[i].ev == ev)


def test_plain_sack_refreshes_last_ack(fb):
    sent = next(slot_of(fb, ev) for ev in EVS if slot_of(fb, ev).tx_packets)
    assert sent.pending_ns
    feedback(fb, sack(sent.ev))
    after = slot_of(fb, sent.ev)
    assert (after.state, after.acked, after.pending_ns) == (EvState.GOOD, 1, 0)
    assert after.last_ack_ns >= sent.last_tx_ns
    assert fb.poll_events() == []


@pytest.mark.parametrize("l4, state, reason, stat", [
    (sack(EVS[1], MultipathState.SKIP_ONCE), EvState.SKIP, Reason.SACK_SKIP_ONCE, "FB_SKIP_ONCE"),
    (nack(EVS[1], NackReason.TRIMMED), EvState.SKIP, Reason.NACK_TRIMMED, "FB_NACK_TRIMMED"),
    (sack(EVS[1], MultipathState.ALWAYS_SKIP), EvState.ASSUMED_BAD, Reason.SACK_ALWAYS_SKIP,
     "FB_ALWAYS_SKIP"),
])
def test_feedback_changes_state_and_reports_it(fb, l4, state, reason, stat):
    feedback(fb, l4)
    s = slot_of(fb, EVS[1])
    assert (s.state, s.reason) == (state, reason)
    assert fb.stat_values()[stat] == 1
    [event] = fb.poll_events()
    assert (event.ev, event.old_state, event.new_state, event.reason) == (EVS[1], EvState.GOOD, state, reason)
    assert bytes(event.peer) == bytes.fromhex("20010db8010000010000000000000003") and event.ts_ns > 0
    others = [slot_of(fb, ev).state for ev in EVS if ev != EVS[1]]
    assert others == [EvState.GOOD] * 3


def test_trimmed_lasthop_and_other_nacks_do_not_penalise(fb):
    feedback(fb, nack(EVS[2], NackReason.TRIMMED_LASTHOP))
    feedback(fb, nack(EVS[2], NackReason.NO_BITMAP))
    s = slot_of(fb, EVS[2])
    assert (s.state, s.nacks) == (EvState.GOOD, 2)
    st = fb.stat_values()
    assert (st["FB_NACK_LASTHOP"], st["FB_NACK_OTHER"]) == (1, 1)
    assert fb.poll_events() == []


def test_skip_does_not_lift_assumed_bad_or_denied(fb):
    fb.write_slot(pkt.NIC_B, 0, state=EvState.DENIED)
    fb.write_slot(pkt.NIC_B, 3, state=EvState.ASSUMED_BAD)
    feedback(fb, nack(EVS[0], NackReason.TRIMMED))
    feedback(fb, sack(EVS[3], MultipathState.SKIP_ONCE))
    assert (slot_of(fb, EVS[0]).state, slot_of(fb, EVS[3]).state) == (EvState.DENIED, EvState.ASSUMED_BAD)


def test_unknown_ev_peer_and_short_feedback_are_counted(fb):
    feedback(fb, sack(0x0FFFFFFF))
    feedback(fb, pkt.bth(Opcode.SACK) + bytes(10))
    frame = pkt.encapped(pkt.NIC_C, pkt.NIC_A, sack(EVS[0]), ev=PEER_EV, outer_tc=0, inner_tc=0)
    assert fb.ingress.test_run(frame).retval == XDP_PASS
    st = fb.stat_values()
    assert (st["FB_UNKNOWN_EV"], st["FB_SHORT"], st["FB_UNKNOWN_PEER"]) == (1, 1, 1)


def test_skip_expires_after_one_rotation(fb):
    feedback(fb, nack(EVS[1], NackReason.TRIMMED))
    frame = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload())
    used = []
    for _ in range(4 * len(EVS)):
        used.append(Ether(fb.egress.test_run(frame).data)[UDP].sport)
    # Skipped for the rest of its rotation and the next, then used again.
    assert used.count(EVS[1] >> 16) >= 1
    assert EVS[1] >> 16 not in used[:len(EVS) - 1]
    assert slot_of(fb, EVS[1]).state == EvState.GOOD
    kinds = [(e.new_state, e.reason) for e in fb.poll_events()]
    assert kinds == [(EvState.SKIP, Reason.NACK_TRIMMED), (EvState.GOOD, Reason.SKIP_EXPIRED)]
