"""The native endpoint's batched socket loop over a real veth: a burst read by recvmmsg keeps
each datagram's own traffic class and flow label, a sendmmsg batch refused part-way fails
only the QP whose packet does not fit, busy-polling completes a verified write, and the arrival
log notes what the responder was handed."""

import hashlib
import os
import time

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6

from mrckit import netns
from mrckit.endpoint import QpConfig, QpError, RetryConfig
from mrckit.endpoint.native import NATIVE_TIMEOUT_EXP, NativeEndpoint, available
from mrckit.endpoint.native._lib import lib
from mrckit.wire.constants import Dscp, Opcode
from mrckit.wire.layers import METH, RETH, SETH, MrcBTH

from support.endpoint_pair import ADDR_A, ADDR_B, recv_reply, send_from_test, responder_with_test_sockets

pytestmark = [pytest.mark.root, pytest.mark.skipif(available() is not None, reason=str(available()))]

LOAD_SAFE = RetryConfig(timeout_exp=NATIVE_TIMEOUT_EXP, exp_retries=25)
"""The native RTO with no retry limit: a descheduled peer costs retransmissions, never the QP."""


def test_a_burst_read_by_recvmmsg_keeps_each_datagram_traffic_class_and_flow_label(netns_pair):
    label, n = 0x0A5A5, 3 * lib().mrcep_tuning(b"RX_BATCH") + 7
    with responder_with_test_sockets(netns_pair, label, "native") as (ep_b, mr, tx, rx):
        # Sent back to back, so the responder's thread reads them several per recvmmsg; every
        # other one CE-marked, so a slot read with another slot's control data would miscount.
        for psn in range(n):
            ce = psn % 2
            pkt = bytes(IPv6(src=ADDR_A, dst=ADDR_B) / UDP(sport=0x1234, dport=4791)
                        / MrcBTH(opcode=Opcode.WRITE_ONLY, dqpn=0x200, psn=psn, ackreq=int(psn == n - 1))
                        / METH() / RETH(va=psn * 16, rkey=0x1000, dma_len=16) / psn.to_bytes(16, "big"))[48:]
            send_from_test(tx, pkt, (Dscp.TRIMMABLE << 2) | (3 if ce else 2), label)
        end = time.monotonic() + 10
        while mr.placed_bytes < n * 16 and time.monotonic() < end:
            time.sleep(0.01)
        assert mr.placed_bytes == n * 16
        assert [int.from_bytes(mr.buf[i * 16:(i + 1) * 16], "big") for i in range(n)] == list(range(n))
        st = ep_b.responder.stats
        assert (st.packets, st.ce_marked, st.malformed, st.duplicates) == (n, n // 2, 0, 0)
        sack, _ = recv_reply(rx)  # every SACK echoes the EV: UDP source port and flow label
        assert sack.opcode == Opcode.SACK and sack[SETH].ev == (0x1234 << 16) | label


def test_a_sendmmsg_batch_refused_part_way_fails_only_the_qp_that_does_not_fit(netns_pair):
    netns.run(["ip", "link", "set", netns_pair.if_a, "mtu", "1500"], ns=netns_pair.ns_a)
    small, large = os.urandom(64 << 10), os.urandom(64 << 10)
    with netns.enter(netns_pair.ns_b):
        ep_b = NativeEndpoint(ADDR_B)
    with netns.enter(netns_pair.ns_a):
        ep_a = NativeEndpoint(ADDR_A, start=False)  # this test turns its loop: both QPs in one outbox
    try:
        mr = ep_b.register_mr(len(small), rkey=0x1000)
        ep_b.create_qp(ADDR_A, qpn=0x200, remote_qpn=0x100)
        ep_b.create_qp(ADDR_A, qpn=0x201, remote_qpn=0x101)
        fits = ep_a.create_qp(ADDR_B, qpn=0x100, remote_qpn=0x200, config=QpConfig(mtu=1024, retry=LOAD_SAFE))
        too_big = ep_a.create_qp(ADDR_B, qpn=0x101, remote_qpn=0x201, config=QpConfig(mtu=2048, retry=LOAD_SAFE))
        ok = ep_a.write(fits, small, 0, 0x1000, imm=5)
        bad = ep_a.write(too_big, large, 0, 0x1000)
        ep_a.turn(0)  # fits' packets first in the batch, then too_big's: refused after a short count
        assert bad.done()
        with pytest.raises(QpError, match="does not fit the MTU"):
            bad.wait(0)
        assert ep_a.send_errors >= 1
        end = time.monotonic() + 30
        while not ok.done() and time.monotonic() < end:
            ep_a.turn(0)
            time.sleep(0.0002)
        ok.wait(0)
        assert ep_b.poll_recv(5).imm == 5
        assert hashlib.sha256(mr.buf).digest() == hashlib.sha256(small).digest()
    finally:
        ep_a.close()
        ep_b.close()


def test_busy_polling_endpoints_complete_a_verified_write(netns_pair):
    data = os.urandom(16 << 20)
    with netns.enter(netns_pair.ns_b):
        ep_b = NativeEndpoint(ADDR_B, busy_poll=True)
    with netns.enter(netns_pair.ns_a):
        ep_a = NativeEndpoint(ADDR_A, busy_poll=True)
    try:
        mr = ep_b.register_mr(len(data), rkey=0x1000)
        ep_b.create_qp(ADDR_A, qpn=0x200, remote_qpn=0x100)
        qp = ep_a.create_qp(ADDR_B, qpn=0x100, remote_qpn=0x200, config=QpConfig(retry=LOAD_SAFE))
        ep_a.write(qp, data, 0, 0x1000, imm=9).wait(120)
        assert ep_b.poll_recv(10).imm == 9
        assert mr.sha256() == hashlib.sha256(data).hexdigest()
        assert ep_b.responder.stats.bad_icrc == 0
    finally:
        ep_a.close()
        ep_b.close()


def test_the_arrival_log_notes_each_datagram_for_the_responder_with_its_ev_and_tseth(netns_pair):
    """What the demo's loss accounting reads (``NativeTally``): every datagram handed to the
    responder, in order, with its EV (sport << 16 | flow label) and the TSETH tx_timestamp of a
    data packet with BTH ts = 1; replies for the requestor are not noted, and nothing is noted
    while the log is off."""
    from mrckit.wire.layers import TSETH

    def data(psn, ts):
        bth = MrcBTH(opcode=Opcode.WRITE_ONLY, dqpn=0x200, psn=psn, ts=int(ts is not None))
        pkt = bth / METH() / (TSETH(tx_timestamp=ts) if ts is not None else b"") / RETH(va=0, rkey=0x1000, dma_len=4)
        return bytes(IPv6(src=ADDR_A, dst=ADDR_B) / UDP(sport=0x1234, dport=4791) / pkt / b"abcd")[48:]

    sack = bytes(IPv6(src=ADDR_A, dst=ADDR_B) / UDP(sport=9, dport=4791)
                 / MrcBTH(opcode=Opcode.SACK, dqpn=0x100, psn=0) / SETH())[48:]
    with netns.enter(netns_pair.ns_b):
        ep = NativeEndpoint(ADDR_B, start=False)
    try:
        ep.register_mr(64, rkey=0x1000)
        ep.create_qp(ADDR_A, qpn=0x200, remote_qpn=0x100)
        first = data(0, 7)
        ep.dispatch(first, len(first), 0, 0x11, 0x1234, ADDR_A, 1_000)  # log off: not noted
        ep.log_arrivals(True)
        for pkt, flow, now in [(data(1, 0xBEEF), 0x22, 2_000), (data(2, None), 0x33, 3_000),
                               (sack, 0x44, 4_000), (b"\x0a", 0x55, 5_000)]:
            ep.dispatch(pkt, len(pkt), 0, flow, 0x1234, ADDR_A, now)
        assert ep.arrivals() == [((0x1234 << 16) | 0x22, 2_000, 0xBEEF), ((0x1234 << 16) | 0x33, 3_000, None),
                                 ((0x1234 << 16) | 0x55, 5_000, None)]
        assert ep.arrivals() == [] and ep.arrivals_lost == 0  # drained
        st = ep.responder.stats  # the responder saw each, the one sent while the log was off too
        assert (st.packets, st.placed_packets, st.malformed) == (4, 3, 1)
    finally:
        ep.close()
