"""``mrc wire``: EV, uSID and path decoding, capture listing, and user mistakes as one line."""

from click.testing import CliRunner
from scapy.utils import wrpcap

from mrckit.cli import main
from mrckit.wire.constants import Dscp, Opcode
from mrckit.wire.layers import METH, MrcBTH, RETH
from mrckit.wire.packet import mrc_frame

from support.wire_golden import GOLDEN, frame


def run(*args):
    return CliRunner().invoke(main, ["wire", *args])


def test_ev_both_ways():
    for args in (["ev", "0x10234567"], ["ev", "--plane", "1", "--t1", "2", "--salt", "0x34567"]):
        result = run(*args)
        assert result.exit_code == 0
        assert result.output == ("ev 0x10234567: plane 1, t1 2, salt 0x34567; "
                                 "udp sport 0x1023 (4131), flow label 0x04567\n")


def test_usid_both_ways():
    assert run("usid", "0x1c02").output == "usid 0x1c02: plane 1, role DOWN, index 2\n"
    assert run("usid", "--plane", "1", "--role", "t1", "--index", "2").output == \
        "usid 0x1802: plane 1, role T1, index 2\n"


def test_path_lists_every_hop():
    result = run("path", "--plane", "1", "--t1", "2", "--src-leaf", "0", "--dst-leaf", "1", "--downlink", "2")
    lines = result.output.splitlines()
    assert [line.split()[-3 if "FIB" in line else 1] for line in lines] == [
        "fcbb:bb00:1400:1802:1401:1c02::", "0xfcbbbb001802", "0xfcbbbb001401", "0xfcbbbb001c02"]
    assert lines[-1].endswith("-> host")


def test_user_mistakes_are_one_line():
    result = run("ev", "--plane", "16")
    assert result.exit_code == 2 and result.output.strip() == "mrc: error: plane=16 is out of range 0..15"
    assert run("ev").exit_code == 2 and "give either VALUE or --plane" in run("ev").output
    assert "is not an integer" in run("usid", "zz").output
    assert run("decode", "/nonexistent.pcap").exit_code == 2


def test_decode_lists_a_capture(tmp_path):
    trimmed = mrc_frame(MrcBTH(opcode=Opcode.WRITE_ONLY, psn=9, rtx=1) / METH() / RETH(),
                        ev=0x20300042, inner_src="2001:db8:100::1", inner_dst="2001:db8:100:1::3",
                        dscp=Dscp.TRIMMED)
    bad = bytearray(frame(GOLDEN["PROBE"]))
    bad[-1] ^= 0xFF
    pcap = tmp_path / "c.pcap"
    wrpcap(str(pcap), [frame(GOLDEN["WRITE_ONLY"]), frame(GOLDEN["SACK"]), frame(GOLDEN["NACK_TRIMMED"]),
                       trimmed, bytes(bad), bytes.fromhex("020000000002020000000001 0800".replace(" ", "")) + bytes(30)])
    lines = run("decode", str(pcap)).output.splitlines()
    assert lines[0].split() == ["1", "WRITE_ONLY", "qp", "0x000123", "psn", "1110", "flags", "A", "ev",
                                "0x10234567", "dscp", "10", "icrc", "ok"]
    assert "echoed ev 0x10234567 M 1" in lines[1] and lines[1].split()[1] == "SACK"
    assert "reason 1" in lines[2] and "icrc ok" in lines[2]
    assert "flags R" in lines[3] and "icrc none" in lines[3] and "dscp 11" in lines[3]
    assert lines[4].split()[1] == "PROBE" and lines[4].endswith("icrc bad")
    assert lines[5].split() == ["6", "not", "MRC"]


def test_decode_of_a_file_that_is_no_capture_is_one_line(tmp_path):
    for name, content in (("text.pcap", b"hello\n"), ("empty.pcap", b"")):
        (tmp_path / name).write_bytes(content)
        result = run("decode", str(tmp_path / name))
        assert result.exit_code == 2, result.output
        assert result.output.startswith(f"mrc: error: {tmp_path / name}: not a pcap or pcapng capture")
        assert result.output.count("\n") == 1


def test_path_locator_must_be_a_32_bit_block():
    args = ["path", "--plane", "0", "--src-leaf", "0", "--dst-leaf", "1", "--downlink", "0", "--locator"]
    assert run(*args, "fcbb:bb00::/32").output.split()[1] == "fcbb:bb00:400:800:401:c00::"
    for bad in ("fcbb:bb00:1::", "fcbb:bb00::/48", "garbage"):
        result = run(*args, bad)
        assert result.exit_code == 2 and "--locator" in result.output, (bad, result.output)
