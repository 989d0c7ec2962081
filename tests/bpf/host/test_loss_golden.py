"""BPF_PROG_TEST_RUN golden tests of loss retirement (mrc-facts 1 "Path health"; docs/host.md):
tc egress records each data PSN's EV, a NACK marks the record, and a retransmission of an
unmarked PSN makes the EV that carried the original ASSUMED_BAD at once."""

from support import host_pkt as pkt
from support.host_pkt import Dscp, Ecn, Opcode
import pytest
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from mrckit.host.maps import TXR_ACKED, TXR_NACKED, Reason
from mrckit.wire.constants import BTH_FLAG_RTX, EvState, NackReason
from mrckit.wire.ev import ev_pack

TC_ACT_REDIRECT, XDP_PASS = 7, 2
EVS = [ev_pack(0, 1, 0x111), ev_pack(0, 2, 0x222), ev_pack(1, 1, 0x333), ev_pack(1, 3, 0x444)]
PEER_EV = ev_pack(0, 3, 0xABCDE)
PSN, DQPN = 0x123456, 0x42


@pytest.fixture
def lp(dp):
    dp.set_template(EVS)
    return dp


def send(dp, psn: int = PSN, rtx: bool = False, dqpn: int = DQPN, opcode: int = Opcode.WRITE_ONLY) -> int:
    """One data packet through tc egress; returns the EV it was sprayed on."""
    l4 = pkt.write_payload(opcode, flags=BTH_FLAG_RTX if rtx else 0, psn=psn, dqpn=dqpn)
    res = dp.egress.test_run(pkt.plain(pkt.NIC_A, pkt.NIC_B, l4))
    assert res.retval == TC_ACT_REDIRECT
    out = Ether(res.data)
    return (out[UDP].sport << 16) | (out.payload.fl & 0xFFFF)


def nack(dp, ev: int, reason: int, psn: int = PSN) -> None:
    l4 = pkt.bth(Opcode.NACK, dqpn=0x77) + pkt.neth(ev, reason, psn)
    frame = pkt.encapped(pkt.NIC_B, pkt.NIC_A, l4, ev=PEER_EV, outer_tc=pkt.tclass(Dscp.CONTROL),
                         inner_tc=pkt.tclass(Dscp.CONTROL))
    assert dp.ingress.test_run(frame).retval == XDP_PASS


def state(dp, ev: int) -> tuple[int, int]:
    s = dp.peer_set(pkt.NIC_B)
    slot = next(s.slots[i] for i in range(s.n) if s.slots[i].ev == ev)
    return slot.state, slot.reason


def test_data_packet_is_recorded_with_its_ev_and_slot(lp):
    ev = send(lp)
    rec = lp.tx_record(pkt.NIC_B, PSN)
    assert (rec.ev, rec.flags, rec.dqpn, rec.blamed_ev) == (ev, 0, DQPN, 0)
    assert lp.peer_set(pkt.NIC_B).slots[rec.slot].ev == ev
    assert lp.tx_record(pkt.NIC_B, PSN + 1) is None


def test_control_packets_are_not_recorded(lp):
    send(lp)  # makes the peer set
    l4 = pkt.bth(Opcode.SACK, psn=PSN + 5) + pkt.seth(EVS[0])
    assert lp.egress.test_run(pkt.plain(pkt.NIC_A, pkt.NIC_B, l4)).retval == TC_ACT_REDIRECT
    assert lp.tx_record(pkt.NIC_B, PSN + 5) is None


def test_rtx_of_an_unanswered_psn_retires_the_original_ev(lp):
    first = send(lp)
    pkt.deliver_later(lp, PSN + 1)
    lp.poll_events()
    second = send(lp, rtx=True)
    assert second != first  # the retransmission already avoids the retired EV
    assert state(lp, first) == (EvState.ASSUMED_BAD, Reason.LOSS)
    [event] = lp.poll_events()
    assert (event.ev, event.old_state, event.new_state, event.reason) == \
        (first, EvState.GOOD, EvState.ASSUMED_BAD, Reason.LOSS)
    assert bytes(event.peer) == bytes.fromhex("20010db8010000010000000000000003") and event.ts_ns > 0
    st = lp.stat_values()
    assert (st["RTX_SEEN"], st["LOSS_RETIRED"]) == (1, 1)
    # the record now names the retransmission's EV, so a second loss blames that one
    assert lp.tx_record(pkt.NIC_B, PSN).ev == second
    assert [state(lp, ev)[0] for ev in EVS if ev != first] == [EvState.GOOD] * 3


def test_rtx_with_nothing_later_delivered_does_not_retire(lp):
    """The RACK rule: a timeout with no later packet delivered is a stall (a descheduled
    receiver), not a path's loss; a SACK of a packet sent *before* the lost one does not count,
    one of a packet sent after it does."""
    pkt.deliver_later(lp, PSN - 1)   # delivered, but sent before PSN
    send(lp)
    lp.poll_events()
    send(lp, rtx=True)
    assert all(state(lp, ev)[0] == EvState.GOOD for ev in EVS) and lp.poll_events() == []
    st = lp.stat_values()
    assert (st["RTX_SEEN"], st["RTX_NONE_DELIVERED"], st["LOSS_RETIRED"]) == (1, 1, 0)
    # the retransmission went unanswered too, and a packet sent after it got through
    again = lp.tx_record(pkt.NIC_B, PSN).ev
    pkt.deliver_later(lp, PSN + 1)
    send(lp, rtx=True)
    assert state(lp, again) == (EvState.ASSUMED_BAD, Reason.LOSS)
    assert lp.stat_values()["LOSS_RETIRED"] == 1


@pytest.mark.parametrize("reason, stat", [
    (NackReason.TRIMMED, "FB_NACK_TRIMMED"), (NackReason.TRIMMED_LASTHOP, "FB_NACK_LASTHOP"),
    (NackReason.NO_BITMAP, "FB_NACK_OTHER"),
])
def test_rtx_after_a_nack_does_not_retire(lp, reason, stat):
    first = send(lp)
    nack(lp, first, reason)
    assert lp.tx_record(pkt.NIC_B, PSN).flags == TXR_NACKED
    lp.poll_events()
    send(lp, rtx=True)
    # TRIMMED still SKIPs its EV (congestion), the others leave it GOOD; none retires it
    want = EvState.SKIP if reason == NackReason.TRIMMED else EvState.GOOD
    assert state(lp, first)[0] == want
    assert all(e.new_state != EvState.ASSUMED_BAD for e in lp.poll_events())
    st = lp.stat_values()
    assert (st[stat], st["NACK_MARKED"], st["RTX_AFTER_NACK"], st["LOSS_RETIRED"]) == (1, 1, 1, 0)


def test_nack_for_another_ev_or_psn_does_not_mark(lp):
    first = send(lp)
    other = next(ev for ev in EVS if ev != first)
    nack(lp, other, NackReason.TRIMMED)          # same PSN, echoed EV differs
    nack(lp, first, NackReason.TRIMMED, PSN + 1)  # same EV, PSN never sent
    assert lp.tx_record(pkt.NIC_B, PSN).flags == 0
    assert lp.stat_values()["NACK_MARKED"] == 0
    pkt.deliver_later(lp, PSN + 2)
    send(lp, rtx=True)
    assert state(lp, first) == (EvState.ASSUMED_BAD, Reason.LOSS)


def test_rtx_without_record_or_of_another_qp_is_counted_only(lp):
    send(lp)
    send(lp, psn=PSN + 1, rtx=True)            # never recorded
    send(lp, rtx=True, dqpn=DQPN + 1)          # same PSN, another QP's
    st = lp.stat_values()
    assert (st["RTX_SEEN"], st["RTX_UNKNOWN_PSN"], st["LOSS_RETIRED"]) == (2, 2, 0)
    assert all(state(lp, ev)[0] == EvState.GOOD for ev in EVS)


def test_rtx_of_an_ev_already_replaced_or_denied_is_counted_only(lp):
    first = send(lp)
    s = lp.peer_set(pkt.NIC_B)
    index = next(i for i in range(s.n) if s.slots[i].ev == first)
    lp.write_slot(pkt.NIC_B, index, state=EvState.DENIED)
    pkt.deliver_later(lp, PSN + 2)
    lp.poll_events()
    send(lp, rtx=True)
    assert state(lp, first)[0] == EvState.DENIED and lp.poll_events() == []
    first2 = send(lp, psn=PSN + 1)
    s = lp.peer_set(pkt.NIC_B)
    index = next(i for i in range(s.n) if s.slots[i].ev == first2)
    lp.write_slot(pkt.NIC_B, index, ev=ev_pack(first2 >> 28, 0, 0x999))  # the agent replaced it
    pkt.deliver_later(lp, PSN + 3)
    send(lp, psn=PSN + 1, rtx=True)
    assert lp.stat_values()["LOSS_EV_GONE"] == 2
    assert lp.stat_values()["LOSS_RETIRED"] == 0


def test_retransmission_keeps_trimmable_retx_class(lp):
    send(lp)
    l4 = pkt.write_payload(flags=BTH_FLAG_RTX, psn=PSN, dqpn=DQPN)
    out = Ether(lp.egress.test_run(pkt.plain(pkt.NIC_A, pkt.NIC_B, l4)).data)
    assert out.payload.tc == pkt.tclass(Dscp.TRIMMABLE_RETX, Ecn.ECT0)


def sack(dp, ev: int, ack_psn: int) -> None:
    """A SACK triggered by ``ack_psn`` on ``ev``: cack_psn 3 below it, ack_psn_offset +3."""
    assert dp.ingress.test_run(pkt.sack_frame(ev, ack_psn)).retval == XDP_PASS


def test_sack_of_the_blamed_original_undoes_the_retirement(lp):
    first = send(lp)
    pkt.deliver_later(lp, PSN + 2)
    second = send(lp, rtx=True)
    assert lp.tx_record(pkt.NIC_B, PSN).blamed_ev == first
    sack(lp, first, PSN + 1)   # another PSN on the retired EV proves nothing about PSN's loss
    sack(lp, second, PSN)      # the retransmission's own SACK neither
    assert state(lp, first) == (EvState.ASSUMED_BAD, Reason.LOSS)
    lp.poll_events()
    sack(lp, first, PSN)       # the original arrived after all: the retirement was spurious
    assert state(lp, first) == (EvState.GOOD, Reason.LOSS_UNDONE)
    [event] = lp.poll_events()
    assert (event.ev, event.old_state, event.new_state, event.reason) == \
        (first, EvState.ASSUMED_BAD, EvState.GOOD, Reason.LOSS_UNDONE)
    assert lp.stat_values()["LOSS_UNDONE"] == 1
    sack(lp, first, PSN)       # once only
    assert lp.stat_values()["LOSS_UNDONE"] == 1


def test_sack_does_not_lift_other_assumed_bad_reasons(lp):
    first = send(lp)
    pkt.deliver_later(lp, PSN + 2)
    send(lp, rtx=True)
    s = lp.peer_set(pkt.NIC_B)
    index = next(i for i in range(s.n) if s.slots[i].ev == first)
    lp.write_slot(pkt.NIC_B, index, state=EvState.ASSUMED_BAD)  # e.g. the agent's RTO_TIMEOUT
    s = lp.peer_set(pkt.NIC_B)
    s.slots[index].reason = Reason.RTO_TIMEOUT
    lp.put_peer_set(pkt.NIC_B, s)
    sack(lp, first, PSN)
    assert state(lp, first) == (EvState.ASSUMED_BAD, Reason.RTO_TIMEOUT)
    assert lp.stat_values()["LOSS_UNDONE"] == 0


def test_rtx_of_a_psn_already_sacked_does_not_retire(lp):
    """The endpoint may retransmit before it has read a SACK that XDP already saw (an RTO on a
    busy host): the SACK's trigger marked the record, so the EV keeps its state."""
    first = send(lp)
    sack(lp, first, PSN)
    assert lp.tx_record(pkt.NIC_B, PSN).flags == TXR_ACKED
    send(lp, rtx=True)
    assert state(lp, first)[0] == EvState.GOOD
    st = lp.stat_values()
    assert (st["RTX_AFTER_ACK"], st["LOSS_RETIRED"]) == (1, 0)
