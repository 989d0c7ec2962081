"""The endpoint over a real veth between two namespaces: a 64 MiB write with the ICRC checked
on every packet, a path that goes silent, and trimmed packets injected by the test whose NACKs
echo the EV read from the inner flow label and UDP source port."""

import hashlib
import os
import socket
import time

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6

from mrckit import netns
from mrckit.endpoint import Endpoint, QpError
from mrckit.wire.constants import Dscp, NackReason, Opcode
from mrckit.wire.layers import METH, NETH, RETH, SETH, CCState, MrcBTH

from support.endpoint_pair import ADDR_A, ADDR_B, recv_reply as _recv, send_from_test as _send, responder_with_test_sockets

pytestmark = pytest.mark.root


def _region_sha(mr) -> str:
    return hashlib.sha256(mr.buf).hexdigest()


def test_64mib_write_with_icrc_on_every_packet(endpoints):
    size = 64 << 20
    ep_a, ep_b, qp, mr = endpoints(size)
    data = os.urandom(size)
    comp = ep_a.write(qp, data, 0, 0x1000, imm=0x64).wait(120)
    assert _region_sha(mr) == hashlib.sha256(data).hexdigest()
    rs, qs = ep_b.responder.stats, qp.requestor.stats
    assert rs.icrc_checked == rs.packets and rs.bad_icrc == 0
    assert rs.placed_bytes == size and rs.placed_packets == size // 2048
    assert qs.icrc_checked == qs.sacks + sum(qs.nacks.values()) and qs.bad_icrc == 0
    assert ep_b.poll_recv(5).imm == 0x64 and comp.nbytes == size


def test_path_goes_silent_then_returns(endpoints, netns_pair, impl):
    size = 16 << 20
    ep_a, ep_b, qp, mr = endpoints(size, impl_a=impl, impl_b=impl)
    data = os.urandom(size)
    comp = ep_a.write(qp, data, 0, 0x1000, imm=1)
    # A route to B through a neighbour that never answers: sends succeed, packets vanish.
    silent = ["ip", "-6", "route", "add", f"{ADDR_B}/128", "via", "2001:db8:100:1::99", "dev", netns_pair.if_a]
    deadline = time.monotonic() + 10
    while ep_b.responder.stats.placed_bytes < size // 8 and time.monotonic() < deadline:
        time.sleep(0.001)
    netns.run(silent, ns=netns_pair.ns_a)
    placed = ep_b.responder.stats.placed_bytes
    time.sleep(0.4)
    assert not comp.done()
    netns.run(["ip", "-6", "route", "del", f"{ADDR_B}/128"], ns=netns_pair.ns_a)
    comp.wait(60)
    assert placed < size
    assert _region_sha(mr) == hashlib.sha256(data).hexdigest()
    assert qp.requestor.stats.timeouts > 0 and qp.requestor.stats.retransmits["rto"] > 0
    assert ep_b.poll_recv(5).imm == 1


def test_injected_trimmed_packets_are_nacked_with_the_echoed_ev(netns_pair, impl):
    label = 0x0BEEF
    with responder_with_test_sockets(netns_pair, label, impl) as (ep_b, mr, tx, rx):
        for dscp, reason in ((Dscp.TRIMMED, NackReason.TRIMMED), (Dscp.TRIMMED_LASTHOP, NackReason.TRIMMED_LASTHOP)):
            trimmed = bytes(IPv6(src=ADDR_A, dst=ADDR_B, tc=dscp << 2) / UDP(sport=0x1234, dport=4791)
                            / MrcBTH(opcode=Opcode.WRITE_ONLY, dqpn=0x200, psn=7) / METH()
                            / RETH(va=0, rkey=0x1000, dma_len=2048))[48:]
            _send(tx, trimmed, dscp << 2, label)
            nack, tclass = _recv(rx)
            assert nack.opcode == Opcode.NACK and nack.dqpn == 0x100
            assert (nack[NETH].nack_reason, nack[NETH].nack_psn) == (reason, 7)
            assert nack[NETH].ev == (0x1234 << 16) | label
            assert tclass >> 2 == Dscp.CONTROL
        # a whole data packet is placed and SACKed with the same echoed EV
        data = bytes(IPv6(src=ADDR_A, dst=ADDR_B) / UDP(sport=0x1234, dport=4791)
                     / MrcBTH(opcode=Opcode.WRITE_ONLY, dqpn=0x200, psn=0, ackreq=1) / METH()
                     / RETH(va=16, rkey=0x1000, dma_len=5) / b"hello")[48:]
        _send(tx, data, (Dscp.TRIMMABLE << 2) | 3, label)  # CE-marked
        sack, _ = _recv(rx)
        assert sack.opcode == Opcode.SACK and sack[SETH].ev == (0x1234 << 16) | label
        assert sack[SETH].m == 1 and sack[SETH].cack_psn == 0
        assert bytes(mr.buf[16:21]) == b"hello" and mr.placed_bytes == 5
        assert ep_b.responder.stats.trimmed == 2 and ep_b.responder.stats.ce_marked == 1


def test_forged_sack_with_a_bad_icrc_is_ignored(endpoints, netns_pair, impl):
    ep_a, ep_b, qp, mr = endpoints(1 << 16, impl_a=impl, impl_b=impl)
    sack = bytes(IPv6(src=ADDR_B, dst=ADDR_A) / UDP(sport=4791, dport=4791)
                 / MrcBTH(dqpn=0x100) / SETH(cack_psn=100) / CCState())[48:]
    bad = sack[:-1] + bytes([sack[-1] ^ 0xFF])
    with netns.enter(netns_pair.ns_b):
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    with s:
        s.bind((ADDR_B, 0x4444))
        s.sendto(bad, (ADDR_A, 4791))
        deadline = time.monotonic() + 5
        while qp.requestor.stats.bad_icrc == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert qp.requestor.stats.bad_icrc == 1 and qp.requestor.stats.sacks == 0


def test_integrity_with_trimmed_packets_on_the_wire(netns_pair, impl):
    # A trimming switch emulated at A's socket: one data packet in ten leaves as its trimmed
    # form (headers only, no ICRC, DSCP TRIMMED), crosses the veth, and is NACKed by B (the
    # Python responder, or the native one).
    import random

    from mrckit.endpoint.requestor import TCLASS_DATA, TCLASS_RETX

    rng = random.Random(5)
    with netns.enter(netns_pair.ns_a):
        ep_a = Endpoint(ADDR_A)
    from mrckit.endpoint.native import NativeEndpoint

    with netns.enter(netns_pair.ns_b):
        ep_b = (NativeEndpoint if impl == "native" else Endpoint)(ADDR_B)
    trims = []
    send = ep_a.transport.send

    def trimming_send(parts, tclass, peer):
        if tclass in (TCLASS_DATA, TCLASS_RETX) and rng.random() < 0.1:
            trims.append(1)
            return send(parts[:1], Dscp.TRIMMED << 2, peer)
        return send(parts, tclass, peer)

    ep_a.transport.send = trimming_send
    try:
        size = 4 << 20
        mr = ep_b.register_mr(size, rkey=0x1000)
        ep_b.create_qp(ADDR_A, qpn=0x200, remote_qpn=0x100)
        qp = ep_a.create_qp(ADDR_B, qpn=0x100, remote_qpn=0x200)
        data = os.urandom(size)
        ep_a.write(qp, data, 0, 0x1000, imm=3).wait(60)
        assert _region_sha(mr) == hashlib.sha256(data).hexdigest()
        assert ep_b.responder.stats.trimmed == len(trims) > 0
        assert qp.requestor.stats.nacks["TRIMMED"] == len(trims)
        assert qp.requestor.stats.retransmits["nack_trimmed"] == len(trims)
        assert ep_b.poll_recv(5).imm == 3
    finally:
        ep_a.close()
        ep_b.close()


def test_packets_larger_than_the_link_mtu_fail_the_qp_clearly(endpoints, netns_pair, impl):
    ep_a, ep_b, qp, mr = endpoints(1 << 16, impl_a=impl, impl_b=impl)
    netns.run(["ip", "link", "set", netns_pair.if_a, "mtu", "1500"], ns=netns_pair.ns_a)
    with pytest.raises(QpError, match="does not fit the MTU"):
        ep_a.write(qp, b"x" * 4096, 0, 0x1000).wait(10)
    assert mr.placed_bytes == 0
