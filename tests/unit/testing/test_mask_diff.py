"""mrckit.testing's Mask (PTF-style don't-care bits) and its field-by-field failure diff, on
real scapy packets with MRC's layers."""

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mrckit.errors import MrcError
from mrckit.testing import Mask
from mrckit.testing.diff import describe, field_lines
from mrckit.testing.session import drop_reason_index
from mrckit.wire.constants import DropReason
from mrckit.wire.layers import METH, MrcBTH


def _pkt(**ipv6):
    return (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") /
            IPv6(src="2001:db8::1", dst="2001:db8::2", **ipv6) / UDP(sport=1, dport=4791) /
            MrcBTH(opcode=0x0A, dqpn=3, psn=7) / METH(rqmsn=1, msn=2) / Raw(b"x" * 16))


def test_field_offsets_follow_the_wire_layout():
    m = Mask(_pkt())
    assert m.field_bits(Ether, "src") == (48, 48)
    assert m.field_bits(IPv6, "tc") == (14 * 8 + 4, 8)          # after the 4-bit version
    assert m.field_bits(IPv6, "hlim") == (14 * 8 + 56, 8)
    assert m.field_bits(UDP, "chksum") == (54 * 8 + 48, 16)
    assert m.field_bits(MrcBTH, "psn") == (62 * 8 + 72, 24)     # BTH bytes 9..11


def test_an_ignored_field_may_differ_and_nothing_else():
    want = _pkt(hlim=63)
    got = bytearray(bytes(want))
    got[21] = 64                                                 # hop limit
    assert not Mask(want).matches(bytes(got))
    assert Mask(want).ignore(IPv6, "hlim").matches(bytes(got))
    got[22] ^= 1                                                 # source address
    assert not Mask(want).ignore(IPv6, "hlim").matches(bytes(got))


def test_ptf_names_and_extra_bytes():
    want = _pkt()
    m = Mask(want)
    m.set_do_not_care_packet(UDP, "chksum")
    m.set_do_not_care(0, 48)                                     # destination MAC, by bits
    got = bytearray(bytes(want) + b"tail")
    got[0] ^= 0xFF
    got[60] ^= 0xFF                                              # UDP checksum
    assert not m.matches(bytes(got))                             # longer
    m.set_ignore_extra_bytes()
    assert m.matches(bytes(got))


def test_bad_masks_are_named():
    with pytest.raises(MrcError, match="no field 'nope'"):
        Mask(_pkt()).ignore(IPv6, "nope")
    with pytest.raises(MrcError, match="no UDP layer"):
        Mask(Ether() / IPv6()).ignore(UDP, "chksum")
    with pytest.raises(MrcError, match="made from bytes"):
        Mask(bytes(_pkt())).ignore(IPv6, "hlim")
    with pytest.raises(MrcError, match="outside"):
        Mask(bytes(_pkt())).ignore_bits(8 * 200, 8)


def test_diff_names_each_field_and_shows_both_packets():
    want = _pkt(hlim=63)
    got = bytearray(bytes(want))
    got[21] = 64
    got[62 + 11] = 9                                             # BTH psn low byte
    lines = field_lines(Mask(want), bytes(got))
    assert lines == ["IPv6.hlim: expected 63, got 64", "MrcBTH.psn: expected 7, got 9"]
    text = describe(Mask(want), bytes(got))
    assert "-  hlim      = 63" in text and "+  hlim      = 64" in text
    assert "--- expected (show2)" in text and "+++ got (show2)" in text


def test_diff_leaves_ignored_fields_out_and_reports_length():
    want = _pkt(hlim=63)
    got = bytes(want)[:-4]
    lines = field_lines(Mask(want).ignore(IPv6, "hlim"), got)
    assert f"length: expected {len(want)} B, got {len(got)} B" in lines
    assert not any(line.startswith("IPv6.hlim") for line in lines)


def test_drop_reasons_by_name_or_index():
    assert drop_reason_index("no_route") == DropReason.NO_ROUTE
    assert drop_reason_index(DropReason.CONGESTION) == 3
    with pytest.raises(MrcError, match="unknown drop reason 'lost'"):
        drop_reason_index("lost")
