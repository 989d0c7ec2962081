"""Whole transfers through the in-memory link (no sockets): integrity under loss, reordering,
duplication, trimming and a silent EV, and the WRITE_WITH_IMM barrier."""

import hashlib
import os

import pytest

from support.endpoint_harness import Faults, Link, RKEY, trimmed
from mrckit.endpoint.requestor import RetryConfig
from mrckit.wire.constants import BTH_FLAG_RTX, Dscp, Ecn, Opcode
from mrckit.wire.headers import parse_bth

SIZE = 1 << 20


def _transfer(link: Link, data: bytes, imm=None):
    comp = link.req.post(data, 0, RKEY, imm)
    at_completion = []
    comp.add_done_callback(lambda c: at_completion.append(link.mr.sha256()))
    link.run([comp])
    comp.wait(0)
    return at_completion[0]


@pytest.mark.parametrize("loss", [0.01, 0.05, 0.20])
def test_integrity_under_loss(loss, impl):
    data = os.urandom(SIZE)
    link = Link(SIZE, impl=impl, faults=Faults(drop=loss, seed=int(loss * 100)))
    sha_at_completion = _transfer(link, data)
    assert sha_at_completion == hashlib.sha256(data).hexdigest()
    assert sum(link.req.stats.retransmits.values()) > 0


def test_integrity_when_sacks_and_nacks_are_lost_duplicated_and_reordered(impl):
    data = os.urandom(SIZE)
    link = Link(SIZE, impl=impl, faults=Faults(drop=0.1, trim=0.05, permute=True, seed=11),
                reply_faults=Faults(drop=0.3, duplicate=0.2, permute=True, seed=12))
    assert _transfer(link, data) == hashlib.sha256(data).hexdigest()
    assert link.resp.stats.trimmed > 0 and sum(link.req.stats.retransmits.values()) > 0


def test_integrity_under_reorder_and_duplication(impl):
    data = os.urandom(SIZE)
    link = Link(SIZE, impl=impl, faults=Faults(duplicate=0.2, permute=True, seed=7))
    assert _transfer(link, data) == hashlib.sha256(data).hexdigest()
    st = link.resp.stats
    assert st.duplicates > 0 and st.placed_bytes == SIZE
    assert link.resp.qps[0x200].ooo_count > 0


def test_integrity_with_trimmed_packets(impl):
    data = os.urandom(SIZE)
    link = Link(SIZE, impl=impl, faults=Faults(trim=0.1, seed=3))
    assert _transfer(link, data) == hashlib.sha256(data).hexdigest()
    assert link.resp.stats.trimmed > 0
    assert link.resp.stats.nacks["TRIMMED"] == link.resp.stats.trimmed
    assert link.req.stats.retransmits["nack_trimmed"] >= link.resp.stats.trimmed - link.req.stats.retransmits["rto"]


def test_integrity_with_a_silent_ev(impl):
    # One of four EVs goes silent for good: retransmissions leave on other EVs and complete.
    data = os.urandom(SIZE)
    link = Link(SIZE, impl=impl, faults=Faults(silent_ev=0x20000003))
    assert _transfer(link, data) == hashlib.sha256(data).hexdigest()
    assert link.req.stats.retransmits["sack_gap"] + link.req.stats.retransmits["rto"] > 0


def test_retransmissions_carry_rtx_flag_and_retx_dscp(impl):
    link = Link(SIZE, impl=impl)
    link.req.post(os.urandom(8 * 2048), 0, RKEY)
    link.req.pump(link.now)
    first = link.wire
    link.wire = []
    link.deliver(first[1:])  # the first packet is lost
    link.resp.flush()
    link.feedback()
    link.req.pump(link.now)
    assert link.req.stats.retransmits["sack_gap"] == 0  # fewer than 16 later packets acked
    link.now += 10**9
    link.req.on_timer(link.now)
    link.req.pump(link.now)
    rtx = [p for p in link.wire if p[0][8] & BTH_FLAG_RTX]
    assert len(rtx) == 1 and rtx[0][1] == (Dscp.TRIMMABLE_RETX << 2 | Ecn.ECT0)
    assert all(t == (Dscp.TRIMMABLE << 2 | Ecn.ECT0) for _, t, _ in first)


def test_write_with_imm_waits_for_delayed_earlier_writes(impl):
    link = Link(SIZE, impl=impl)
    first = os.urandom(64 * 1024)
    second = os.urandom(4096)
    c1 = link.req.post(first, 0, RKEY)
    c2 = link.req.post(second, 65536, RKEY, imm=0xABCD)
    link.req.pump(link.now, budget=1000)
    pkts, link.wire = link.wire, []
    delayed = pkts[5]  # a middle packet of the first WRITE
    link.deliver([p for p in pkts if p is not delayed])
    link.resp.flush()
    assert link.resp.stats.placed_packets == len(pkts) - 1
    assert not link.resp.completions, "WRITE_WITH_IMM completed before an earlier write landed"
    link.feedback()
    assert not c1.done() and not c2.done()
    link.deliver([delayed])
    comp = link.resp.completions.popleft()
    assert (comp.imm, comp.rqmsn) == (0xABCD, 1)
    assert bytes(link.mr.buf[:65536 + 4096]) == first + second
    link.resp.flush()
    link.feedback()
    assert c1.done() and c2.done()


def test_imm_completions_in_order_when_imm_packets_arrive_reversed(impl):
    link = Link(SIZE, impl=impl)
    comps = [link.req.post(b"x" * 100, i * 100, RKEY, imm=i) for i in range(4)]
    link.req.pump(link.now)
    pkts, link.wire = link.wire, []
    link.deliver(pkts[::-1])
    assert [c.imm for c in link.resp.completions] == [0, 1, 2, 3]
    link.resp.flush()
    link.feedback()
    assert all(c.done() for c in comps)


def test_duplicate_is_ignored_but_acknowledged(impl):
    link = Link(SIZE, impl=impl)
    link.req.post(b"a" * 2048, 0, RKEY)
    link.req.pump(link.now)
    pkt = link.wire[0]
    link.deliver([pkt])
    link.resp.flush()
    link.replies.clear()
    link.mr.buf[0:1] = b"Z"  # a second placement would overwrite this
    link.deliver([pkt])
    link.resp.flush()
    assert link.resp.stats.duplicates == 1 and link.mr.buf[0:1] == b"Z"
    assert len(link.replies) == 1 and link.replies[0][0] == 0xDC  # a SACK


def test_trimmed_arrival_nacked_with_echoed_ev(impl):
    from mrckit.wire.layers import MrcBTH, NETH
    link = Link(SIZE, impl=impl)
    link.req.post(b"q" * 4096, 0, RKEY)
    link.req.pump(link.now)
    pkt, _tc, _ev = link.wire[1]
    for dscp, reason in ((Dscp.TRIMMED, 1), (Dscp.TRIMMED_LASTHOP, 2)):
        link.replies.clear()
        link.resp.handle(bytearray(trimmed(pkt)), len(trimmed(pkt)), dscp << 2, 0x5678, 0x1234, "2001:db8:100:1::1")
        nack = MrcBTH(link.replies[0])
        assert (nack[NETH].nack_reason, nack[NETH].ev, nack[NETH].nack_psn) == (reason, 0x12345678, 1)
    assert link.mr.placed_bytes == 0


def _late_first_packet(link: Link, late_ns: int) -> list:
    """Send 40 packets at t0; all but the first arrive and are acked ``late_ns`` later."""
    link.req.post(os.urandom(40 * 2048), 0, RKEY)
    link.req.pump(link.now)
    sent, link.wire = link.wire, []
    link.now += late_ns
    link.deliver(sent[1:])
    link.resp.flush()
    link.feedback()
    link.req.pump(link.now)  # a packet declared lost is retransmitted (and counted) here
    return sent


def test_reordering_within_the_slowest_rtt_is_not_a_loss(impl):
    # 39 packets sent after the first are acked, but none is older than the round trip just
    # measured: a sprayed packet on a slower path is late, not lost (RFC 8985-style time rule).
    link = Link(SIZE, impl=impl)
    sent = _late_first_packet(link, 5_000_000)
    assert link.req.stats.retransmits["sack_gap"] == 0
    link.now += 1_000_000
    link.deliver(sent[:1])
    link.resp.flush()
    link.feedback()
    assert 0 not in link.req.outstanding and sum(link.req.stats.retransmits.values()) == 0


def test_a_packet_older_than_the_slowest_rtt_is_lost_by_sack_gap_before_any_rto(impl):
    link = Link(SIZE, impl=impl, retry=RetryConfig(timeout_exp=24))  # the RTO cannot fire in this test
    _late_first_packet(link, 5_000_000)
    link.now += 2_000_000  # the first packet is now 7 ms old, more than 5/4 of the 5 ms RTT
    link.req.post(os.urandom(20 * 2048), 40 * 2048, RKEY)
    link.req.pump(link.now)
    later, link.wire = link.wire, []
    link.deliver(later)
    link.resp.flush()
    link.feedback()
    link.req.pump(link.now)
    assert link.req.stats.retransmits["sack_gap"] == 1 and link.req.stats.timeouts == 0


def test_the_rto_waits_twice_the_slowest_rtt(impl):
    """A 262 µs timer with a 5 ms RTT just measured: the first packet, 7 ms old, is still on
    its way by that RTT, so no timeout fires before 10 ms (RTO_MAX_RTT_SHIFT); then one does."""
    link = Link(SIZE, impl=impl, retry=RetryConfig(timeout_exp=8))
    _late_first_packet(link, 5_000_000)
    assert link.req.stats.timeouts == 0
    link.now += 2_000_000
    link.req.on_timer(link.now)
    assert link.req.stats.timeouts == 0 and sum(link.req.stats.retransmits.values()) == 0
    link.now += 3_100_000  # the first packet is now 10.1 ms old
    link.req.on_timer(link.now)
    link.req.pump(link.now)  # what the timeout declared lost goes out (and is counted) here
    assert link.req.stats.timeouts == 1 and link.req.stats.retransmits["rto"] >= 1


def test_the_rto_remembers_a_stall_that_the_sack_gap_rule_forgot(impl):
    """One 5 ms stall, then 1000 packets acked at once: the SACK-gap rule's tracker (1/2^6 a
    sample) is back near 0, the RTO floor's (RTO_RTT_DECAY_SHIFT, 1/2^12) still holds 3.9 ms.
    A packet stalled again is not timed out by the 262 µs timer, but past twice that."""
    link = Link(4 << 20, impl=impl, retry=RetryConfig(timeout_exp=8))
    link.req.post(os.urandom(40 * 2048), 0, RKEY)
    link.req.pump(link.now)
    stalled, link.wire = link.wire, []
    link.now += 5_000_000
    link.deliver(stalled)
    link.resp.flush()
    link.feedback()
    prompt = link.req.post(os.urandom(1000 * 2048), 40 * 2048, RKEY)
    while not prompt.done():  # every RTT sample 0: the clock stands still
        link.req.pump(link.now, budget=64)
        batch, link.wire = link.wire, []
        link.deliver(batch)
        link.resp.flush()
        link.feedback()
    link.req.post(os.urandom(2048), 1040 * 2048, RKEY)
    link.req.pump(link.now)
    link.wire = []  # the last packet stalls
    link.now += 4_000_000
    link.req.on_timer(link.now)
    assert link.req.stats.timeouts == 0
    link.now += 4_000_000  # 8 ms: past 2 x 3.9 ms
    link.req.on_timer(link.now)
    assert link.req.stats.timeouts == 1


def test_a_timeout_resends_the_oldest_packet_only(impl):
    """RFC 6298 section 5.4: the first window (32 packets) stalls past the RTO, none lost,
    none acked; the timeout resends only the oldest PSN, so the host dataplane judges one EV,
    not 32. Once the stall ends every packet is acked and the write completes with no other
    resend."""
    link = Link(SIZE, impl=impl, retry=RetryConfig(timeout_exp=8))
    data = os.urandom(SIZE)
    comp = link.req.post(data, 0, RKEY)
    link.req.pump(link.now)
    stalled, link.wire = link.wire, []
    link.now += 1_000_000  # 1 ms: past the 262 µs timer, and no RTT measured yet
    link.req.on_timer(link.now)
    link.req.pump(link.now)
    rtx = [p for p in link.wire if p[0][0] != Opcode.PROBE and p[0][8] & BTH_FLAG_RTX]
    assert link.req.stats.timeouts == 1 and link.req.stats.retransmits["rto"] == 1
    assert [p[0][9:12] for p in rtx] == [stalled[0][0][9:12]]  # the BTH PSN of the first packet
    link.deliver(stalled + link.wire)
    link.wire = []
    link.resp.flush()
    link.feedback()
    link.run([comp])
    assert link.mr.sha256() == hashlib.sha256(data).hexdigest()
    assert sum(link.req.stats.retransmits.values()) == 1


def test_after_a_timeout_the_timer_restarts(impl):
    """RFC 6298 section 5.5-5.6: the first window stalls past the RTO; after the timeout that
    resends the oldest packet, the next oldest (as old, and as unacked) waits a whole RTO
    from that timeout. Turns in between declare nothing: the window halves once and one EV
    is blamed, not one per turn."""
    link = Link(SIZE, impl=impl, retry=RetryConfig(timeout_exp=8))  # 262 µs
    link.req.post(os.urandom(SIZE), 0, RKEY)
    link.req.pump(link.now)
    link.wire = []  # the window stalls
    link.now += 1_000_000
    deadline = link.req.on_timer(link.now)
    cwnd = link.req.cc.cwnd
    for _ in range(20):  # the loop's next turns, 10 µs apart
        link.now += 10_000
        link.req.pump(link.now)
        assert link.req.on_timer(link.now) == deadline
    assert (link.req.stats.timeouts, link.req.stats.retransmits["rto"], link.req.cc.cwnd) == (1, 1, cwnd)
    assert deadline == link.now - 200_000 + 262_144
    link.now = deadline
    link.req.on_timer(link.now)
    link.req.pump(link.now)
    assert (link.req.stats.timeouts, link.req.stats.retransmits["rto"]) == (2, 2)


def test_once_a_timeouts_resend_is_acked_the_packets_sent_before_it_go_at_once(impl):
    """The tail of a write on a dead EV: 16 packets, every fourth on a silent EV, and no later
    packet to pass the reorder threshold. The timeout resends the oldest lost one; once that
    resend is acked, the three others sent before it are lost (reason sack_gap) and go out on
    the next turn, not one restarted RTO apart."""
    link = Link(SIZE, impl=impl, faults=Faults(silent_ev=0x20000003))
    comp = link.req.post(os.urandom(16 * 2048), 0, RKEY)
    link.step()
    lost = [parse_bth(p).psn for p, _, ev in link.sent if ev == 0x20000003]
    assert len(lost) == 4
    while link.req.stats.timeouts == 0:
        link.step()  # the timeout's step: the oldest lost packet resent, and acked
    sent = len(link.sent)
    link.step()
    resent = sorted(parse_bth(p).psn for p, _, _ in link.sent[sent:] if parse_bth(p).flags & BTH_FLAG_RTX)
    assert resent == lost[1:]
    assert (link.req.stats.timeouts, link.req.stats.retransmits["sack_gap"]) == (1, 3)
    link.run([comp])


def test_a_timeouts_resend_that_overtakes_a_held_window_loses_nothing_else(impl):
    """The window (32 packets) is held up on its way, none lost; the timeout's resend, sent
    whatever the window, overtakes it and is acked. That ack is no evidence against the held
    packets: the next turns resend nothing, and once the window arrives the write completes
    with the one resend."""
    link = Link(SIZE, impl=impl, retry=RetryConfig(timeout_exp=8))
    data = os.urandom(32 * 2048)
    comp = link.req.post(data, 0, RKEY)
    link.req.pump(link.now)
    held, link.wire = link.wire, []
    link.now += 1_000_000
    link.req.on_timer(link.now)
    link.req.pump(link.now)
    link.deliver(link.wire)  # the resend and the probe
    link.wire = []
    link.resp.flush()
    link.feedback()
    for _ in range(5):  # turns before the restarted timer falls due again
        link.now += 10_000
        link.req.on_timer(link.now)
        link.req.pump(link.now)
    assert [p for p, _, _ in link.wire if parse_bth(p).flags & BTH_FLAG_RTX] == []
    assert sum(link.req.stats.retransmits.values()) == 1
    link.deliver(held)
    link.resp.flush()
    link.feedback()
    link.run([comp])
    assert link.mr.sha256() == hashlib.sha256(data + bytes(SIZE - len(data))).hexdigest()
    assert sum(link.req.stats.retransmits.values()) == 1


def test_a_timeouts_resend_is_not_held_by_the_window(impl):
    """The window has shrunk to one packet while 32 unacked packets still count in flight: the
    timeout's one resend goes out anyway (RFC 5681 section 3.1), else nothing would ever leave
    again; the next resend waits for the window or the next timeout."""
    link = Link(SIZE, impl=impl, retry=RetryConfig(timeout_exp=8))
    link.req.post(os.urandom(SIZE), 0, RKEY)
    link.req.pump(link.now)
    stalled, link.wire = link.wire, []
    link.req.cc.cwnd = 2048
    link.now += 1_000_000
    link.req.on_timer(link.now)
    link.req.pump(link.now)
    rtx = [p for p in link.wire if p[0][0] != Opcode.PROBE and p[0][8] & BTH_FLAG_RTX]
    assert [p[0][9:12] for p in rtx] == [stalled[0][0][9:12]]
    link.wire = []
    link.req.pump(link.now)
    assert link.wire == [] and link.req.stats.retransmits["rto"] == 1


@pytest.mark.parametrize("imm", [None, 0x5A5A], ids=["write", "write_with_imm"])
@pytest.mark.parametrize("rkey, va", [(RKEY, 0), (0xDEAD, 0), (RKEY, 1 << 63)], ids=["valid", "bad-rkey", "bad-va"])
def test_zero_length_write_completes_with_any_rkey_and_va(impl, imm, rkey, va):
    """IBTA C9-88: a WRITE whose DMA length is 0 need not carry a valid R_Key or VA; it
    completes (and WRITE_WITH_IMM delivers its immediate) without touching memory."""
    link = Link(SIZE, impl=impl)
    before = bytes(link.mr.buf)
    comp = link.req.post(b"", va, rkey, imm=imm)
    after = link.req.post(b"z" * 100, 0, RKEY)  # the QP stays usable
    link.run([comp, after])
    assert comp.done() and comp.error is None
    assert link.rqp.error is None and link.req.error is None
    assert bytes(link.mr.buf[100:]) == before[100:] and bytes(link.mr.buf[:100]) == b"z" * 100
    imms = [c.imm for c in link.resp.completions]
    assert imms == ([imm] if imm is not None else [])
