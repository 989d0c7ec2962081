"""Requestor behaviour: segmentation, MPR window, NACK reactions, RTO schedule and QP error."""

import pytest
from support.endpoint_harness import Link, RKEY
from mrckit.wire.headers import Nack
from mrckit.endpoint.requestor import QpError, RetryConfig
from mrckit.wire.constants import Opcode
from mrckit.wire.layers import METH, RETH, MrcBTH


def test_segmentation_opcodes_and_reth_in_every_packet(impl):
    link = Link(1 << 20, impl=impl, mtu=1000)
    link.req.post(bytes(range(256)) * 10, 0x40, RKEY, imm=5)  # 2560 B -> 3 packets
    link.req.post(b"", 0, RKEY)
    link.req.pump(link.now)
    pkts = [MrcBTH(p) for p, _, _ in link.wire]
    assert [p.opcode for p in pkts] == [Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY]
    assert [p[RETH].va for p in pkts] == [0x40, 0x40 + 1000, 0x40 + 2000, 0]
    assert [p[RETH].dma_len for p in pkts] == [1000, 1000, 560, 0]
    assert [p.psn for p in pkts] == [0, 1, 2, 3]
    assert [p[METH].msn for p in pkts] == [1, 1, 1, 2] and [p[METH].rqmsn for p in pkts] == [1, 1, 1, 1]
    assert [p.ackreq for p in pkts] == [0, 0, 1, 1]


def test_psns_stay_inside_the_mpr_window(impl):
    link = Link(1 << 20, impl=impl, mtu=256, mpr=128)
    link.req.cc.cwnd = 1 << 30
    link.req.post(b"w" * 256 * 300, 0, RKEY)
    link.req.pump(link.now, budget=1000)
    assert len(link.wire) == 128
    link.deliver(link.wire[1:])  # PSN 0 missing: the window cannot slide
    link.wire = []
    link.resp.flush()
    link.feedback()
    link.req.pump(link.now, budget=1000)
    assert [MrcBTH(p).psn for p, _, _ in link.wire] == [0]  # only the retransmission of the gap


def test_psn_wraps_around_24_bits(impl):
    link = Link(1 << 20, impl=impl, mtu=512, initial_psn=(1 << 24) - 3)
    c = link.req.post(b"z" * 512 * 8, 0, RKEY, imm=1)
    link.run([c])
    assert bytes(link.mr.buf[:4096]) == b"z" * 4096 and link.resp.completions[0].psn == 4


@pytest.mark.parametrize("reason,counter", [(0x01, "nack_trimmed"), (0x02, "nack_trimmed_lasthop"),
                                            (0x06, "nack_resource"), (0x07, "nack_resource"),
                                            (0x0A, "nack_resource"), (0x0B, "nack_psn_oor_window")])
def test_nack_retransmits_at_once(reason, counter, impl):
    link = Link(1 << 20, impl=impl)
    link.req.post(b"n" * 4096, 0, RKEY)
    link.req.pump(link.now)
    link.wire = []
    link.req.on_nack(Nack(reason, 0x1234, 1, 0), link.now)
    link.req.pump(link.now)
    assert [MrcBTH(p).psn for p, _, _ in link.wire] == [1] and MrcBTH(link.wire[0][0]).rtx == 1
    assert link.req.stats.retransmits[counter] == 1


def test_nack_unexp_event_fails_the_qp(impl):
    link = Link(1 << 20, impl=impl)
    c = link.req.post(b"n" * 4096, 0, RKEY)
    link.req.pump(link.now)
    link.req.on_nack(Nack(0x19, 0, 0, 0), link.now)
    with pytest.raises(QpError, match="UNEXP_EVENT"):
        c.wait(0)
    with pytest.raises(QpError):
        link.req.post(b"x", 0, RKEY)


def test_rto_schedule_linear_then_exponential():
    r = RetryConfig(timeout_exp=10, linear_retries=3, exp_retries=2)
    assert [r.rto_ns(n) for n in range(6)] == [1024 << 10] * 4 + [1024 << 11, 1024 << 12]
    assert not r.exhausted(5) and r.exhausted(6)
    assert not RetryConfig(exp_retries=25).exhausted(10**6)
    with pytest.raises(ValueError, match="timeout_exp"):
        RetryConfig(timeout_exp=25)
    with pytest.raises(ValueError, match="linear_retries"):
        RetryConfig(linear_retries=8)


def test_silent_path_hits_the_retry_limit_and_errors_the_qp(impl):
    retry = RetryConfig(timeout_exp=10, linear_retries=2, exp_retries=2)
    link = Link(1 << 20, impl=impl, retry=retry)
    c = link.req.post(b"s" * 8192, 0, RKEY)
    times = []
    for _ in range(200):
        before = link.req.stats.timeouts
        link.req.on_timer(link.now)
        link.req.pump(link.now)
        link.wire = []  # everything is lost
        if link.req.stats.timeouts > before:
            times.append(link.now)
        link.now += 100_000
        if c.done():
            break
    with pytest.raises(QpError, match="retry counter exceeded"):
        c.wait(0)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert len(times) == 5  # 2 linear + 2 exponential retries, the 5th timeout is the limit
    assert gaps[0] == gaps[1] and gaps[2] > gaps[1] and gaps[3] > gaps[2]
    assert link.req.stats.probes == 4


def test_post_rejects_bad_arguments(impl):
    link = Link(1 << 20, impl=impl)
    with pytest.raises(ValueError, match="64 bits"):
        link.req.post(b"x" * 16, (1 << 64) - 8, RKEY)
    with pytest.raises(ValueError, match="32-bit"):
        link.req.post(b"x", 0, 1 << 32)
    with pytest.raises(ValueError, match="32-bit"):
        link.req.post(b"x", 0, RKEY, imm=-1)
