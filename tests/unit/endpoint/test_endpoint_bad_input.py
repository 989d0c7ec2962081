"""Bad input to the responder: each case gets its prescribed response (responder module
docstring) and no byte lands outside a region. Packets are built with scapy."""

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw

from support.endpoint_harness import NATIVE_MISSING
from mrckit.endpoint.memory import MemoryTable
from mrckit.endpoint.native import NativeResponder
from mrckit.endpoint.responder import Responder, ResponderQp
from mrckit.wire.constants import NackReason, Opcode
from mrckit.wire.layers import ERTH, METH, NETH, PETH, RETH, SETH, ImmDt, MrcBTH

A, B = "2001:db8:100:1::1", "2001:db8:100:1::2"
FILL = 0x5A


class Rig:
    """Responder B (``impl`` python or native) with two filled regions and QP 0x200 from A."""

    def __init__(self, impl: str = "python"):
        self.memory = MemoryTable()
        self.mr = self.memory.register(4096, base_va=0x10000, rkey=0x1000)
        self.other = self.memory.register(4096, base_va=0x20000, rkey=0x2000)
        for r in (self.mr, self.other):
            r.buf[:] = bytes([FILL]) * r.length
        self.replies = []
        self.raw = []  # every reply's bytes, for the golden comparison of both responders
        cls = NativeResponder if impl == "native" else Responder
        self.resp = cls(B, self.memory, self._reply)
        self.qp = self.resp.add_qp(ResponderQp(0x200, 0x100, mpr=128, peer=A))

    def _reply(self, pkt: bytes, _peer) -> None:
        self.raw.append(bytes(pkt))
        self.replies.append(MrcBTH(pkt))

    def send(self, layers, *, raw: bytes | None = None, tclass: int = 0x28, src: str = A):
        data = raw if raw is not None else bytes(IPv6(src=src, dst=B) / UDP(sport=4791, dport=4791) / layers)[48:]
        self.resp.handle(bytearray(data), len(data), tclass, 0x0BEEF, 0xCAFE, src)
        self.resp.flush()

    def untouched(self) -> bool:
        return all(b == FILL for b in self.mr.buf) and all(b == FILL for b in self.other.buf)

    def nack(self) -> int:
        assert len(self.replies) == 1, self.replies
        assert self.replies[0].opcode == Opcode.NACK
        return self.replies[0][NETH].nack_reason


def write(psn=0, va=0x10000, rkey=0x1000, payload=b"p" * 64, opcode=Opcode.WRITE_ONLY, dma_len=None, dqpn=0x200):
    return (MrcBTH(opcode=opcode, dqpn=dqpn, psn=psn) / METH() / RETH(va=va, rkey=rkey,
            dma_len=len(payload) if dma_len is None else dma_len) / Raw(payload))


@pytest.fixture
def rig(impl):
    return Rig(impl)


def test_good_write_lands(rig):
    rig.send(write())
    assert bytes(rig.mr.buf[:64]) == b"p" * 64 and rig.replies[0].opcode == Opcode.SACK


def test_wrong_rkey_is_nacked_and_errors_the_qp(rig):
    rig.send(write(rkey=0x9999))
    assert rig.nack() == NackReason.UNEXP_EVENT and rig.qp.error and rig.untouched()
    rig.replies.clear()
    rig.send(write(psn=1))  # a QP in error takes nothing more
    assert rig.nack() == NackReason.UNEXP_EVENT and rig.untouched()


@pytest.mark.parametrize("va", [0x10000 + 4096 - 63, 0x10000 - 1, 0x20000 - 32, 0xFFFFFFFFFFFFFFF0])
def test_out_of_bounds_va_is_nacked_and_writes_nothing(rig, va):
    rig.send(write(va=va))
    assert rig.nack() == NackReason.UNEXP_EVENT and rig.qp.error and rig.untouched()


def test_psn_beyond_window_is_nacked(rig):
    rig.send(write(psn=128))
    assert rig.nack() == NackReason.PSN_OOR_WINDOW and rig.qp.error is None and rig.untouched()
    assert rig.replies[0][NETH].nack_psn == 128 and rig.replies[0][NETH].ev == 0xCAFEBEEF


def test_psn_behind_window_is_a_duplicate(rig):
    rig.send(write(psn=0xFFFF00))
    assert rig.replies[0].opcode == Opcode.SACK and rig.resp.stats.duplicates == 1 and rig.untouched()


def test_duplicate_too_far_behind_for_the_sack_offset_acknowledges_nothing_new(impl):
    """Found by the fuzz corpus: a duplicate 39,000 PSNs behind cannot be named by the SETH's
    signed 16-bit ack_psn_offset. The SACK names cack_psn instead (the Python responder raised,
    the C one wrapped the offset onto some other PSN, which a requestor would take as acked)."""
    rig = Rig(impl)
    qp = rig.resp.add_qp(ResponderQp(0x201, 0x100, mpr=128, initial_psn=40000, peer=A))
    rig.send(write(psn=1000, dqpn=0x201))
    sack = rig.replies[0]
    assert sack.opcode == Opcode.SACK and rig.resp.stats.duplicates == 1 and rig.untouched()
    assert sack[SETH].cack_psn == 39999 and sack[SETH].ack_psn_offset == 0 and qp.error is None


@pytest.mark.parametrize("layers", [
    MrcBTH(opcode=Opcode.EP_REQ, dqpn=0x200) / ERTH(),
    MrcBTH(opcode=0x00, dqpn=0x200) / Raw(b"x" * 40),
    MrcBTH(opcode=0xC5, dqpn=0x200) / Raw(b"x" * 40),
    MrcBTH(opcode=Opcode.ACK, dqpn=0x200) / Raw(b"\0" * 4),
], ids=["ep_req", "rc_send_first", "unknown_c5", "ack_to_responder"])
def test_unexpected_opcode_errors_the_qp(rig, layers):
    rig.send(layers)
    assert rig.nack() == NackReason.UNEXP_EVENT and rig.qp.error and rig.untouched()


def test_headers_short_for_opcode(rig):
    rig.send(MrcBTH(opcode=Opcode.WRITE_ONLY_IMM, dqpn=0x200) / METH() / RETH(va=0x10000, rkey=0x1000))
    assert rig.nack() == NackReason.UNEXP_EVENT and rig.untouched()


def test_dma_length_mismatch(rig):
    rig.send(write(dma_len=4096))
    assert rig.nack() == NackReason.UNEXP_EVENT and rig.untouched()


def test_payload_beyond_mtu(rig):
    rig.send(write(payload=b"m" * 2049))
    assert rig.nack() == NackReason.UNEXP_EVENT and rig.untouched()


def test_truncated_packet_fails_icrc_and_is_dropped(rig):
    full = bytes(IPv6(src=A, dst=B) / UDP(sport=4791, dport=4791) / write())[48:]
    for cut in (len(full) - 10, 40, 15, 3):
        rig.send(None, raw=full[:cut])
    assert rig.replies == [] and rig.untouched()
    assert rig.resp.stats.bad_icrc == 2 and rig.resp.stats.malformed == 2


def test_corrupted_packet_dropped(rig):
    full = bytearray(bytes(IPv6(src=A, dst=B) / UDP(sport=4791, dport=4791) / write())[48:])
    full[50] ^= 0xFF
    rig.send(None, raw=bytes(full))
    assert rig.replies == [] and rig.resp.stats.bad_icrc == 1 and rig.untouched()


def test_unknown_qp_dropped(rig):
    rig.send(write(dqpn=0x999))
    assert rig.replies == [] and rig.resp.stats.unknown_qp == 1 and rig.untouched()


def test_probe_answered_by_sack_with_pr(rig):
    rig.send(write(psn=0))
    rig.replies.clear()
    rig.send(MrcBTH(opcode=Opcode.PROBE, dqpn=0x200) / PETH(probe_id=9, tx_timestamp=0x77))
    sack = rig.replies[0]
    assert sack.opcode == Opcode.SACK and sack[SETH].pr == 1 and sack[SETH].cack_psn == 0
    assert sack[SETH].ev == 0xCAFEBEEF


def test_ce_marked_arrivals_get_skip_once_then_always_skip(rig):
    ms = []
    for psn in range(10):
        rig.replies.clear()
        rig.send(write(psn=psn, va=0x10000 + psn * 64), tclass=0x28 | 3)
        ms.append(rig.replies[0][SETH].m)
    assert ms[:7] == [1] * 7 and ms[7:] == [2] * 3


def test_imm_write_with_bad_rkey_does_not_complete(rig):
    rig.send(MrcBTH(opcode=Opcode.WRITE_ONLY_IMM, dqpn=0x200) / METH(rqmsn=1) / RETH(va=0, rkey=0x1000, dma_len=4)
             / ImmDt(imm=1) / Raw(b"abcd"))
    assert rig.nack() == NackReason.UNEXP_EVENT and not rig.resp.completions and rig.untouched()


def test_write_from_another_sender_is_dropped(rig):
    rig.send(write(), src="2001:db8:100:9::9")
    assert rig.replies == [] and rig.resp.stats.unknown_qp == 1 and rig.untouched()


def test_trimmed_down_to_the_bth_is_still_nacked(rig):
    bth_only = bytes(MrcBTH(opcode=Opcode.WRITE_MIDDLE, dqpn=0x200, psn=3))[:12]
    rig.send(None, raw=bth_only, tclass=11 << 2)
    assert rig.nack() == NackReason.TRIMMED and rig.replies[0][NETH].nack_psn == 3 and rig.untouched()


def _bad_input_sequence(rig: Rig) -> list[bytes]:
    """Every kind of input of the responder's table, one after another, on one QP."""
    full = bytes(IPv6(src=A, dst=B) / UDP(sport=4791, dport=4791) / write(psn=2))[48:]
    rig.send(write(psn=0))
    rig.send(write(psn=0))  # duplicate
    rig.send(write(psn=3, va=0x10040), tclass=0x28 | 3)  # out of order, CE
    rig.send(None, raw=full[:20])
    rig.send(None, raw=full[:-1] + b"\0")  # bad ICRC
    rig.send(write(dqpn=0x999))
    rig.send(write(), src="2001:db8:100:9::9")
    rig.send(None, raw=bytes(MrcBTH(opcode=Opcode.WRITE_MIDDLE, dqpn=0x200, psn=1))[:12], tclass=11 << 2)
    rig.send(None, raw=bytes(MrcBTH(opcode=Opcode.WRITE_MIDDLE, dqpn=0x200, psn=1))[:12], tclass=13 << 2)
    rig.send(write(psn=200))  # beyond the window
    rig.send(MrcBTH(opcode=Opcode.PROBE, dqpn=0x200) / PETH(probe_id=9, tx_timestamp=0x77))
    rig.send(MrcBTH(opcode=Opcode.WRITE_ONLY_IMM, dqpn=0x200, psn=1) / METH(rqmsn=1)
             / RETH(va=0x10080, rkey=0x1000, dma_len=4) / ImmDt(imm=7) / Raw(b"abcd"))
    rig.send(None, raw=full)
    rig.send(write(psn=4, dma_len=4096))  # DMA length mismatch: the QP goes to error
    rig.send(write(psn=5))  # a QP in error NACKs everything
    return rig.raw


@pytest.mark.skipif(NATIVE_MISSING is not None, reason=str(NATIVE_MISSING))
def test_both_responders_answer_bad_input_with_identical_bytes():
    ref, got = Rig("python"), Rig("native")
    assert _bad_input_sequence(got) == _bad_input_sequence(ref)
    assert bytes(got.mr.buf) == bytes(ref.mr.buf) and got.resp.completions == ref.resp.completions
    assert got.resp.stats == ref.resp.stats
