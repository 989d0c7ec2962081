"""The RC baseline transport of the native endpoint (docs/endpoint.md "The RC baseline"), through
the in-memory link: every byte delivered under loss by go-back-N, cumulative AETH ACKs and one
NAK sequence error per gap, never a SACK, nothing placed out of order."""

import hashlib
import os
import random

import pytest

from support.endpoint_harness import NATIVE_MISSING, Faults, Link, RKEY
from mrckit.endpoint import Endpoint, QpConfig
from mrckit.wire.constants import AethSyndrome, Dscp, Opcode
from mrckit.wire.headers import parse_bth

pytestmark = pytest.mark.skipif(NATIVE_MISSING is not None, reason=str(NATIVE_MISSING))
SIZE = 1 << 20


def _transfer(link: Link, data: bytes) -> str:
    comp = link.req.post(data, 0, RKEY)
    link.run([comp])
    comp.wait(0)
    return link.mr.sha256()


def _ops(link: Link) -> set[int]:
    return {p[0] for p in link.answered}


@pytest.mark.parametrize("loss", [0.01, 0.05])
def test_every_byte_arrives_under_loss_by_go_back_n_with_no_sack(loss):
    data = os.urandom(SIZE)
    link = Link(SIZE, impl="native", rc=True, faults=Faults(drop=loss, seed=int(loss * 1000)))
    assert _transfer(link, data) == hashlib.sha256(data).hexdigest()
    rs, qs = link.resp.stats, link.req.stats
    assert _ops(link) == {Opcode.ACK}, "an RC responder answers with AETH ACKs only"
    assert rs.sacks == 0 and not rs.nacks and qs.sacks == 0
    assert rs.seq_naks > 0 and qs.seq_naks == rs.seq_naks and rs.acks > 0 and qs.acks > 0
    assert rs.out_of_sequence > 0 and link.rqp.ooo_count == 0, "nothing past a gap is placed"
    assert qs.retransmits["nak_seq"] > 0 and qs.probes == 0
    assert rs.placed_bytes == SIZE


def test_a_gap_rewinds_to_the_naked_psn_and_resends_everything_after_it():
    data = os.urandom(64 * 2048)
    link = Link(len(data), impl="native", rc=True)
    comp = link.req.post(data, 0, RKEY)
    link.req.pump(link.now, budget=64)
    first, link.wire = link.wire, []
    psns = [parse_bth(p).psn for p, _, _ in first]
    assert psns == list(range(len(psns))) and len(psns) > 10
    link.deliver([w for w in first if parse_bth(w[0]).psn != 5])   # PSN 5 lost
    link.resp.flush()
    naks = [p for p in link.replies if p[0] == Opcode.ACK and p[12] == AethSyndrome.NAK_PSN_SEQ_ERROR]
    assert len(naks) == 1 and parse_bth(naks[0]).psn == 5, "one NAK per gap, naming the expected PSN"
    link.feedback()
    link.req.pump(link.now, budget=64)
    resent = [parse_bth(p).psn for p, _, _ in link.wire]
    assert resent[:len(psns) - 5] == list(range(5, len(psns))), "go-back-N: PSN 5 and every later one, in order"
    assert link.req.stats.retransmits["nak_seq"] == len(psns) - 5
    link.run([comp])
    assert link.mr.sha256() == hashlib.sha256(data).hexdigest()


def test_lost_replies_and_trimmed_packets_recover_by_timeout():
    data = os.urandom(SIZE // 4)
    link = Link(len(data), impl="native", rc=True, faults=Faults(drop=0.02, trim=0.02, seed=3),
                reply_faults=Faults(drop=0.3, seed=4))
    assert _transfer(link, data) == hashlib.sha256(data).hexdigest()
    assert link.resp.stats.trimmed > 0 and not link.resp.stats.nacks, "no NACK TRIMMED from an RC responder"
    assert link.req.stats.timeouts > 0 and link.req.stats.retransmits["rto"] > 0


def test_rc_data_is_not_trimmable():
    link = Link(8 * 2048, impl="native", rc=True)
    link.req.post(bytes(8 * 2048), 0, RKEY)
    link.req.pump(link.now, budget=64)
    assert {t >> 2 for _, t, _ in link.wire} == {Dscp.NO_TRIM}


def test_rc_needs_the_native_endpoint():
    with Endpoint("::1", port=0) as ep, pytest.raises(ValueError, match="native endpoint only"):
        ep.create_qp("::1", remote_qpn=0x100, config=QpConfig(transport="rc"))
    with pytest.raises(ValueError, match="use mrc or rc"):
        QpConfig(transport="roce")


def test_reordering_costs_rc_a_go_back_n_but_not_a_byte():
    data = bytes(random.Random(5).randbytes(SIZE // 4))
    link = Link(len(data), impl="native", rc=True, faults=Faults(permute=True, seed=6))
    assert _transfer(link, data) == hashlib.sha256(data).hexdigest()
    assert link.resp.stats.seq_naks > 0



def test_reordered_and_duplicated_replies_cost_no_byte():
    data = os.urandom(SIZE // 4)
    link = Link(len(data), impl="native", rc=True, faults=Faults(drop=0.02, seed=8),
                reply_faults=Faults(duplicate=0.5, permute=True, seed=9))
    assert _transfer(link, data) == hashlib.sha256(data).hexdigest()
    assert link.req.stats.seq_naks > link.resp.stats.seq_naks, "duplicated NAKs arrived"


def test_a_stale_nak_after_a_later_ack_rewinds_nothing():
    data = os.urandom(128 * 2048)
    link = Link(len(data), impl="native", rc=True)
    comp = link.req.post(data, 0, RKEY)
    link.req.pump(link.now, budget=64)
    first, link.wire = link.wire, []
    link.deliver([w for w in first if parse_bth(w[0]).psn != 5])
    link.resp.flush()
    (nak,) = [p for p in link.replies if p[0] == Opcode.ACK and p[12] == AethSyndrome.NAK_PSN_SEQ_ERROR]
    link.feedback()                                   # go back to PSN 5
    link.req.pump(link.now, budget=64)
    link.deliver(link.wire)
    link.wire = []
    link.resp.flush()
    link.feedback()                                   # ACK up to PSN 63 and beyond
    assert link.req.una() >= 64
    link.req.pump(link.now, budget=64)                # PSNs 64.. in flight
    rewound = link.req.stats.retransmits["nak_seq"]
    link.req.on_reply(nak, link.now)                  # the NAK for PSN 5 again, late
    link.req.pump(link.now, budget=64)
    assert link.req.stats.retransmits["nak_seq"] == rewound == 59
    link.run([comp])
    assert link.mr.sha256() == hashlib.sha256(data).hexdigest()
