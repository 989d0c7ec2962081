"""A pcap with one packet of each MRC type, written here and decoded by tshark: Wireshark's
RoCEv2 dissector must see IPv6 / IPv6 / UDP / InfiniBand BTH with our field values."""

import shutil
import subprocess

import pytest
from scapy.packet import Raw
from scapy.utils import wrpcap

from mrckit.wire.constants import Dscp, Ecn, EpOp, NackReason, Opcode
from mrckit.wire.layers import (
    AETH, CCState, EETH, ERTH, ImmDt, METH, MrcBTH, NETH, PETH, RETH, SETH, TSETH,
)
from mrckit.wire.packet import mrc_frame

REQ_NIC, RSP_NIC = "2001:db8:100:0::1", "2001:db8:100:1::3"
ENCAP = dict(outer_src="2001:db8:201:0::1", outer_dst="fcbb:bb00:1400:1802:1401:1c02::")
FIELDS = ["frame.protocols", "ipv6.flow", "ipv6.tclass", "ipv6.dst", "udp.srcport", "udp.dstport",
          "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
          "infiniband.bth.a", "infiniband.bth.reserved7", "infiniband.bth.p_key",
          "infiniband.vendor"]


def _data(opcode, ts=False, **bth):
    stack = MrcBTH(opcode=opcode, dqpn=0x123, **bth) / METH(rqmsn=1, msn=2)
    if ts:
        stack = stack / TSETH(tx_timestamp=0x77)
    stack = stack / RETH(va=0x1000, rkey=0x42, dma_len=16)
    if opcode in (Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM):
        stack = stack / ImmDt(imm=0xABCD)
    return stack / Raw(b"0123456789abcdef")


def _packets():
    """(name, frame, dscp) of every packet type; EV and PSN differ per packet."""
    data = [
        ("WRITE_FIRST", _data(Opcode.WRITE_FIRST, psn=1), Dscp.TRIMMABLE),
        ("WRITE_MIDDLE", _data(Opcode.WRITE_MIDDLE, ts=True, psn=2), Dscp.TRIMMABLE),
        ("WRITE_LAST", _data(Opcode.WRITE_LAST, psn=3, rtx=1), Dscp.TRIMMABLE_RETX),
        ("WRITE_LAST_IMM", _data(Opcode.WRITE_LAST_IMM, ts=True, psn=4, ackreq=1), Dscp.TRIMMABLE),
        ("WRITE_ONLY", _data(Opcode.WRITE_ONLY, psn=5), Dscp.NO_TRIM),
        ("WRITE_ONLY_IMM", _data(Opcode.WRITE_ONLY_IMM, psn=6), Dscp.TRIMMABLE),
        ("TRIMMED", MrcBTH(opcode=Opcode.WRITE_ONLY, dqpn=0x123, psn=7) / METH() / RETH(dma_len=16),
         Dscp.TRIMMED),
        ("ACK", MrcBTH(dqpn=0x77, psn=8) / AETH(syndrome=0, msn=3), Dscp.CONTROL),
        ("SACK", MrcBTH(dqpn=0x77, psn=9) / SETH(ev=0x10234567, cack_psn=5, sack_bitmap=1) / CCState(),
         Dscp.CONTROL),
        ("NACK", MrcBTH(dqpn=0x77, psn=10) / NETH(nack_reason=NackReason.TRIMMED, ev=0x10234567),
         Dscp.CONTROL),
        ("PROBE", MrcBTH(dqpn=0x123, psn=11) / PETH(probe_id=1), Dscp.CONTROL),
        ("EP_REQ", MrcBTH(dqpn=2, psn=12) / ERTH(op=EpOp.EV_PROBE, resp_ev=0x20300042), Dscp.CONTROL),
        ("EP_RESP", MrcBTH(dqpn=2, psn=13) / EETH(op=EpOp.EV_PROBE, req_ev=0x10234567), Dscp.CONTROL),
    ]
    out = []
    for i, (name, stack, dscp) in enumerate(data):
        ev = 0x10200000 + i * 0x00010001
        frame = mrc_frame(stack, ev=ev, inner_src=REQ_NIC, inner_dst=RSP_NIC, dscp=dscp,
                          ecn=Ecn.ECT0 if dscp != Dscp.CONTROL else Ecn.NOT_ECT, **ENCAP)
        out.append((name, frame, ev))
    return out


@pytest.fixture(scope="module")
def decoded(tmp_path_factory):
    tshark = shutil.which("tshark")
    if not tshark:
        pytest.skip("tshark not found (Debian package tshark; `make deps` installs it)")
    packets = _packets()
    pcap = tmp_path_factory.mktemp("pcap") / "mrc_types.pcap"
    wrpcap(str(pcap), [frame for _, frame, _ in packets])
    cmd = [tshark, "-r", str(pcap), "-T", "fields", "-E", "separator=|", "-E", "occurrence=a"]
    for field in FIELDS:
        cmd += ["-e", field]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    assert len(out) == len(packets)
    return [(name, frame, ev, dict(zip(FIELDS, line.split("|")))) for (name, frame, ev), line in zip(packets, out)]


def test_every_type_is_in_the_pcap(decoded):
    assert [name for name, *_ in decoded] == [
        "WRITE_FIRST", "WRITE_MIDDLE", "WRITE_LAST", "WRITE_LAST_IMM", "WRITE_ONLY", "WRITE_ONLY_IMM",
        "TRIMMED", "ACK", "SACK", "NACK", "PROBE", "EP_REQ", "EP_RESP"]


def test_tshark_sees_ipv6_ipv6_udp_infiniband(decoded):
    for name, _, _, f in decoded:
        assert f["frame.protocols"] == "eth:ethertype:ipv6:ipv6:udp:infiniband", name


def test_tshark_fields_equal_ours(decoded):
    for name, frame, ev, f in decoded:
        bth = frame[MrcBTH]
        assert int(f["infiniband.bth.opcode"]) == bth.opcode, name
        assert int(f["infiniband.bth.destqp"], 16) == bth.dqpn, name
        assert int(f["infiniband.bth.psn"]) == bth.psn, name
        assert int(f["infiniband.bth.p_key"]) == 0xFFFF, name
        assert int(f["infiniband.bth.a"]) == bth.ackreq, name
        # Wireshark's 7 reserved bits of byte 8 are MRC's r, rtx, ts and 4 reserved bits
        ts = 1 if TSETH in frame else 0
        assert int(f["infiniband.bth.reserved7"]) == (bth.rtx << 5) | (ts << 4), name
        assert f["ipv6.flow"].split(",") == [f"0x{ev & 0xFFFF:06x}"] * 2, name
        assert int(f["udp.srcport"]) == ev >> 16 and int(f["udp.dstport"]) == 4791, name
        assert f["ipv6.dst"].split(",") == [ENCAP["outer_dst"], RSP_NIC], name


def test_tshark_carries_our_bytes_after_the_bth(decoded):
    for name, frame, _, f in decoded:
        after_bth = bytes(frame)[14 + 40 + 40 + 8 + 12:]
        assert f["infiniband.vendor"].split(",")[-1] == after_bth.hex(), name


def test_trimmed_packet_has_no_icrc(decoded):
    name, frame, _, f = decoded[6]
    assert name == "TRIMMED"
    assert len(bytes(frame)) == 14 + 40 + 40 + 8 + 12 + 4 + 16
    assert int(f["ipv6.tclass"].split(",")[0], 16) >> 2 == Dscp.TRIMMED
