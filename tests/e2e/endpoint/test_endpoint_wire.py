"""What the endpoint puts on the veth, captured with an AF_PACKET socket and dissected with
scapy: DSCP/ECN per packet kind, UDP checksum 0, rtx flag on retransmissions, a valid ICRC on
every data packet and SACK; and the WRITE_WITH_IMM barrier against the real socket."""

import os
import socket
import threading

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6

from mrckit import netns
from mrckit.wire.constants import Dscp, Ecn, Opcode
from mrckit.wire.icrc import icrc_check
from mrckit.wire.layers import METH, RETH, ImmDt, MrcBTH, dissect

from support.endpoint_pair import ADDR_A, ADDR_B, recv_reply as _recv, send_from_test as _send, responder_with_test_sockets

pytestmark = pytest.mark.root
ETH_P_ALL = 0x0003


class Capture:
    """Frames seen on an interface of a namespace, collected by a thread."""

    def __init__(self, ns: str, ifname: str):
        with netns.enter(ns):
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
        self.sock.bind((ifname, 0))
        self.sock.settimeout(0.2)
        self.frames: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                self.frames.append(self.sock.recv(65535))
            except TimeoutError:
                continue

    def stop(self) -> list:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()
        return [dissect(f) for f in self.frames]


def test_wire_format_of_a_lossy_transfer(endpoints, netns_pair, impl):
    faults = pytest.importorskip("mrckit.fabric.faults", reason="the fault-injection module has not landed")
    size = 1 << 20
    ep_a, ep_b, qp, mr = endpoints(size, impl_a=impl, impl_b=impl)
    cap = Capture(netns_pair.ns_a, netns_pair.if_a)
    try:
        faults.attach(netns_pair.ns_b, netns_pair.if_b, faults.Fault(loss_ppm=faults.percent_to_ppm(5)))
    except Exception as exc:
        cap.stop()
        pytest.skip(f"fault program unavailable: {exc}")
    try:
        ep_a.write(qp, os.urandom(size), 0, 0x1000, imm=9).wait(60)
    finally:
        faults.detach(netns_pair.ns_b, netns_pair.if_b)
        frames = cap.stop()
    mrc = [f for f in frames if f.haslayer(MrcBTH) and f[UDP].dport == 4791]
    data = [f for f in mrc if f[MrcBTH].opcode <= Opcode.WRITE_ONLY_IMM]
    sacks = [f for f in mrc if f[MrcBTH].opcode == Opcode.SACK]
    assert len({f[MrcBTH].psn for f in data}) == size // 2048 and sacks
    for f in data:
        ip6, bth = f[IPv6], f[MrcBTH]
        assert ip6.src == ADDR_A and f[UDP].chksum == 0 and f[UDP].sport == 4791
        want = Dscp.TRIMMABLE_RETX if bth.rtx else Dscp.TRIMMABLE
        assert ip6.tc == (want << 2 | Ecn.ECT0)
        assert icrc_check(bytes(ip6))
        assert bth.ts == 1 and f.haslayer(METH) and f.haslayer(RETH)
    assert any(f[MrcBTH].rtx for f in data), "5% loss caused no retransmission on the wire"
    assert [f[ImmDt].imm for f in data if f.haslayer(ImmDt)][:1] == [9]
    for f in sacks:
        assert f[IPv6].tc == Dscp.CONTROL << 2 and f[UDP].chksum == 0 and icrc_check(bytes(f[IPv6]))


def _write(psn: int, va: int, payload: bytes, imm=None) -> bytes:
    opcode = Opcode.WRITE_ONLY if imm is None else Opcode.WRITE_ONLY_IMM
    pkt = MrcBTH(opcode=opcode, dqpn=0x200, psn=psn, ackreq=1) / METH(rqmsn=int(imm is not None), msn=psn + 1)
    pkt = pkt / RETH(va=va, rkey=0x1000, dma_len=len(payload))
    if imm is not None:
        pkt = pkt / ImmDt(imm=imm)
    return bytes(IPv6(src=ADDR_A, dst=ADDR_B) / UDP(sport=0x1234, dport=4791) / pkt / payload)[48:]


def test_write_with_imm_waits_for_a_delayed_earlier_write_over_the_socket(netns_pair, impl):
    with responder_with_test_sockets(netns_pair, 0x1, impl) as (ep_b, mr, tx, rx):
        _send(tx, _write(1, 100, b"second", imm=0x42), Dscp.TRIMMABLE << 2, 0x1)
        sack, _ = _recv(rx)  # placed and acknowledged, but PSN 0 is missing
        assert sack.opcode == Opcode.SACK and bytes(mr.buf[100:106]) == b"second"
        assert ep_b.poll_recv(0.3) is None, "WRITE_WITH_IMM completed before an earlier write landed"
        _send(tx, _write(0, 0, b"first"), Dscp.TRIMMABLE << 2, 0x1)
        _recv(rx)
        comp = ep_b.poll_recv(5)
        assert comp is not None and comp.imm == 0x42 and bytes(mr.buf[:5]) == b"first"
