"""Dissection rules of the MRC layers (design section 3.2): per-opcode header stacks, the
conditional TSETH, the ICRC trailer and trimmed packets, the UDP bindings, and bad input."""

import pytest
from scapy.contrib.roce import BTH
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw

from mrckit.wire.constants import Dscp, Opcode
from mrckit.wire.layers import (
    AETH, CCState, EETH, ERTH, ImmDt, METH, MrcBTH, NETH, PETH, RETH, SETH, TSETH,
)
from mrckit.wire.packet import frame_ev, header_stack, mrc_frame, parse_frame

NICS = dict(inner_src="2001:db8:100::1", inner_dst="2001:db8:100:1::3")

# Design section 3.2 table, written out by hand.
STACKS = {
    Opcode.WRITE_FIRST: [METH, RETH], Opcode.WRITE_MIDDLE: [METH, RETH],
    Opcode.WRITE_LAST: [METH, RETH], Opcode.WRITE_ONLY: [METH, RETH],
    Opcode.WRITE_LAST_IMM: [METH, RETH, ImmDt], Opcode.WRITE_ONLY_IMM: [METH, RETH, ImmDt],
    Opcode.SACK: [SETH, CCState], Opcode.NACK: [NETH], Opcode.ACK: [AETH],
    Opcode.PROBE: [PETH], Opcode.EP_REQ: [ERTH], Opcode.EP_RESP: [EETH],
}


def _layers(pkt) -> list[type]:
    out, layer = [], pkt[MrcBTH].payload
    while layer and not isinstance(layer, Raw):
        out.append(type(layer))
        layer = layer.payload
    return out


def _with_ts(stack: list[type]) -> list[type]:
    return stack[:1] + [TSETH] + stack[1:] if stack[0] is METH else stack


@pytest.mark.parametrize("opcode", list(STACKS))
@pytest.mark.parametrize("ts", [0, 1])
def test_stack_follows_the_opcode_and_ts(opcode, ts):
    expected = _with_ts(STACKS[opcode]) if ts else STACKS[opcode]
    hdrs = MrcBTH(opcode=opcode, ts=ts)
    for cls in expected:
        hdrs = hdrs / cls()
    payload = b"payload!" if opcode in (Opcode.WRITE_ONLY, Opcode.WRITE_LAST_IMM) else b""
    pkt = parse_frame(bytes(mrc_frame(hdrs / Raw(payload) if payload else hdrs, ev=5, **NICS)))
    assert _layers(pkt) == expected
    assert [n for n in header_stack(opcode, bool(ts))] == [c.__name__.lower().replace("ccstate", "cc_state") for c in expected]
    if payload:
        assert pkt[Raw].load == payload


def test_ts_is_set_exactly_when_a_tseth_follows():
    with_ts = bytes(MrcBTH(opcode=Opcode.WRITE_ONLY, icrc=0) / METH() / TSETH() / RETH())
    without = bytes(MrcBTH(opcode=Opcode.WRITE_ONLY, icrc=0) / METH() / RETH())
    assert with_ts[8] == 0x10 and without[8] == 0x00
    forced = bytes(MrcBTH(opcode=Opcode.WRITE_ONLY, ts=0, icrc=0) / METH() / TSETH() / RETH())
    assert forced[8] == 0x00  # an explicit value wins, so tests can build malformed packets


def test_flags_byte_layout():
    raw = bytes(MrcBTH(ackreq=1, rtx=1, ts=1, icrc=0))
    assert raw[8] == 0x80 | 0x20 | 0x10
    assert MrcBTH(bytes.fromhex("ca00ffff00000001b0000001" "00000000")).rtx == 1


def test_control_opcode_is_filled_in_by_the_next_header():
    for cls, opcode in ((SETH, Opcode.SACK), (NETH, Opcode.NACK), (AETH, Opcode.ACK),
                        (PETH, Opcode.PROBE), (ERTH, Opcode.EP_REQ), (EETH, Opcode.EP_RESP)):
        assert bytes(MrcBTH(icrc=0) / cls())[0] == opcode


@pytest.mark.parametrize("where", ["outer", "inner"])
@pytest.mark.parametrize("dscp", [Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP])
def test_trimmed_packets_have_no_icrc(where, dscp):
    hdrs = MrcBTH(opcode=Opcode.WRITE_ONLY_IMM, psn=3) / METH() / RETH(dma_len=2048) / ImmDt(imm=7)
    frame = mrc_frame(hdrs, ev=5, outer_src="2001:db8:200::1", outer_dst="fcbb:bb00:1401::", **NICS)
    frame[IPv6 if where == "outer" else UDP].underlayer.tc = dscp << 2
    raw = bytes(frame)
    assert len(raw) == 14 + 40 + 40 + 8 + 12 + 4 + 16 + 4
    pkt = parse_frame(raw)
    assert pkt[ImmDt].imm == 7 and Raw not in pkt and pkt[MrcBTH].icrc is None


def test_untrimmed_packet_ends_with_its_icrc():
    hdrs = MrcBTH(opcode=Opcode.WRITE_ONLY) / METH() / RETH() / Raw(b"x" * 10)
    pkt = parse_frame(bytes(mrc_frame(hdrs, ev=5, dscp=Dscp.TRIMMABLE_RETX, **NICS)))
    assert pkt[Raw].load == b"x" * 10
    assert pkt[MrcBTH].icrc.to_bytes(4, "little") == bytes(pkt)[-4:]


def test_any_source_port_dissects_as_mrc():
    for ev in (53 << 16, 4791 << 16, 0xFFFF0000, 0):  # 53 would be DNS in scapy's own bindings
        pkt = parse_frame(bytes(mrc_frame(MrcBTH() / PETH(probe_id=9), ev=ev, **NICS)))
        assert pkt[PETH].probe_id == 9


def test_agent_port_dissects_as_mrc():
    frame = mrc_frame(MrcBTH(dqpn=2) / ERTH(probe_id=4), ev=5, **NICS)
    frame[UDP].dport = 4792
    assert parse_frame(bytes(frame))[ERTH].probe_id == 4


def test_standalone_bth_carries_zero_icrc():
    assert bytes(MrcBTH(opcode=Opcode.ACK) / AETH())[-4:] == b"\0\0\0\0"


def test_plain_roce_bth_still_builds_on_4791():
    assert bytes(UDP() / BTH())[2:4] == b"\x12\xb7"


def test_roce_bth_lookup_finds_the_mrc_bth():
    pkt = parse_frame(bytes(mrc_frame(MrcBTH(psn=77) / PETH(), ev=5, **NICS)))
    assert pkt[BTH] is pkt[MrcBTH] and pkt[BTH].psn == 77 and isinstance(pkt[BTH], BTH)
    assert pkt[PETH].probe_id == 0 and Raw not in pkt


def test_frame_ev_reads_sport_and_outer_flow_label():
    frame = mrc_frame(MrcBTH() / PETH(), ev=0xABCD1234, outer_src="2001:db8:200::1",
                      outer_dst="fcbb:bb00:1401::", **NICS)
    assert frame_ev(parse_frame(bytes(frame))) == 0xABCD1234


@pytest.mark.parametrize("kwargs,message", [
    (dict(headers=METH()), "headers must start with MrcBTH"),
    (dict(outer_src="2001:db8:200::1"), "give both outer_src and outer_dst"),
    (dict(inner_dst="10.0.0.1"), "inner_dst='10.0.0.1' is not an IPv6 address"),
    (dict(dscp=64), "dscp=64 is out of range 0..63"),
    (dict(ecn=4), "ecn=4 is out of range 0..3"),
    (dict(ev=-1), "ev=-1 is out of range"),
])
def test_mrc_frame_bad_input(kwargs, message):
    args = dict(headers=MrcBTH() / PETH(), ev=1, **NICS)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        mrc_frame(args.pop("headers"), **args)


def test_frame_ev_bad_input():
    with pytest.raises(ValueError, match="not an MRC frame"):
        frame_ev(parse_frame(bytes.fromhex("020000000002020000000001 0800".replace(" ", "")) + bytes(20)))
    frame = mrc_frame(MrcBTH() / PETH(), ev=1, **NICS)
    frame[IPv6].fl = 0x10000
    with pytest.raises(ValueError, match="flow_label=65536 is out of range"):
        frame_ev(frame)


def test_header_stack_rejects_unknown_opcodes():
    with pytest.raises(ValueError, match="opcode=0x0a is not an MRC opcode"):
        header_stack(0x0A)


def test_summary_names_the_opcode():
    assert "MRC SACK" in (MrcBTH() / SETH()).summary()


def test_header_lengths_without_scapy():
    import subprocess
    import sys
    code = ("import sys, mrckit.wire as w; "
            "print(w.headers_len(0xC9, True), w.headers_len(0xCA), w.headers_len(0xDC), 'scapy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["28", "20", "36", "False"]  # METH+TSETH+RETH+ImmDt, METH+RETH, SETH+CC_STATE


def test_importing_the_layers_leaves_scapys_dissection_alone():
    """Other scapy users in the process keep scapy's own bindings: UDP's dissection rules and
    what Ether() makes of port 4791 (RoCE's BTH) are the same before and after the import."""
    import subprocess
    import sys
    code = (
        "from scapy.layers.inet import UDP\n"
        "from scapy.layers.l2 import Ether\n"
        "import scapy.contrib.roce\n"
        "frame = bytes.fromhex(%r)\n"
        "before = (list(UDP.payload_guess), type(Ether(frame)[UDP].payload).__name__)\n"
        "import mrckit.wire.layers\n"
        "after = (list(UDP.payload_guess), type(Ether(frame)[UDP].payload).__name__)\n"
        "assert before == after, (before, after)\n"
        "assert type(mrckit.wire.layers.dissect(frame)[UDP].payload).__name__ == 'MrcBTH'\n"
        "print(after[1])\n"
    ) % bytes(mrc_frame(MrcBTH() / PETH(), ev=5, **NICS)).hex()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "BTH"
