"""ICRC known answers (design section 3.1): an independent bitwise CRC-32 over bytes masked by
hand, scapy's RoCE ICRC (``scapy.contrib.roce``), and mrckit.wire.icrc must all agree."""

import struct

import pytest
from scapy.contrib.roce import BTH
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw

from mrckit.wire.layers import METH, MrcBTH, RETH
from mrckit.wire.icrc import icrc_append, icrc_bytes, icrc_check, icrc_compute, masked

from support.crc32 import crc32_bitwise
from support.wire_golden import GOLDEN, REQ_NIC, RSP_NIC, hx, inner_without_icrc


def test_bitwise_crc_check_value():
    assert crc32_bitwise(b"123456789") == 0xCBF43926  # the CRC-32 catalogue check value


# The masked bytes of the WRITE_ONLY golden, by hand: LRH stand-in, then the inner IPv6 with tc,
# flow label and hop limit all ones, UDP with sport and checksum all ones, BTH byte 4 all ones.
WRITE_ONLY_MASKED = hx(
    "ffffffffffffffff",
    "6fffffff 0034 11 ff", REQ_NIC, RSP_NIC,
    "ffff 12b7 0034 ffff",
    "ca 00 ffff ff 000123 80 000456",
    "0001 0002", "00007f0000001000 cafe0001 00000008", "4d52436461746121",
)
SACK_MASKED = hx(
    "ffffffffffffffff",
    "6fffffff 003c 11 ff", RSP_NIC, REQ_NIC,
    "ffff 12b7 003c ffff",
    "dc 00 ffff ff 000077 00 000000",
    "0020 fffe 10234567 0011 0022 00 000450 00 04 0002 a000000000000001", "1234 0003 85 000100",
)


@pytest.mark.parametrize("name,hand_masked", [("WRITE_ONLY", WRITE_ONLY_MASKED), ("SACK", SACK_MASKED)])
def test_known_answer_from_hand_masked_bytes(name, hand_masked):
    expected = struct.unpack("<I", bytes.fromhex(GOLDEN[name]["icrc"]))[0]
    assert crc32_bitwise(hand_masked) == expected
    assert masked(inner_without_icrc(GOLDEN[name])) == hand_masked
    assert icrc_compute(inner_without_icrc(GOLDEN[name])) == expected


def _scapy_roce_icrc(inner: bytes) -> bytes:
    """scapy's RoCEv2 ICRC of the same packet with the UDP source port set to 0xffff, the one
    field scapy does not mask (mrckit masks it, design section 3.1)."""
    ip = IPv6(inner)
    bth_onward = bytes(ip[UDP].payload)
    pkt = IPv6(src=ip.src, dst=ip.dst, tc=ip.tc, fl=ip.fl, hlim=ip.hlim) / \
        UDP(sport=0xFFFF, dport=ip[UDP].dport, chksum=0) / \
        BTH(bth_onward[:12] + b"\0\0\0\0") / Raw(bth_onward[12:])
    pkt[BTH].icrc = None
    return bytes(pkt)[-4:]


@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden_icrc_agrees_with_scapy_roce(name):
    inner = inner_without_icrc(GOLDEN[name])
    assert _scapy_roce_icrc(inner).hex() == GOLDEN[name]["icrc"]
    assert icrc_bytes(icrc_compute(inner)).hex() == GOLDEN[name]["icrc"]
    assert icrc_check(icrc_append(inner))


@pytest.mark.parametrize("offset,new", [
    (1, 0x00), (3, 0x12), (7, 0x01),   # traffic class, flow label, hop limit
    (40, 0x00), (41, 0x00),            # UDP source port: the EV (mrckit's mask)
    (46, 0x12), (47, 0x34),            # UDP checksum
    (52, 0x00),                        # BTH byte 4
])
def test_variant_fields_do_not_change_the_icrc(offset, new):
    inner = bytearray(inner_without_icrc(GOLDEN["WRITE_ONLY"]))
    before = icrc_compute(bytes(inner))
    inner[offset] = new
    assert icrc_compute(bytes(inner)) == before


@pytest.mark.parametrize("offset", [4, 8, 39, 42, 44, 48, 49, 55, 60, 90, -5, -1])
def test_invariant_fields_change_the_icrc(offset):
    # plen, addresses, UDP dport and length, BTH, payload, the ICRC itself
    packet = bytearray(icrc_append(inner_without_icrc(GOLDEN["WRITE_ONLY"])))
    assert icrc_check(bytes(packet))
    packet[offset] ^= 0x01
    assert not icrc_check(bytes(packet))


def test_icrc_is_least_significant_byte_first():
    assert icrc_bytes(0x11223344) == b"\x44\x33\x22\x11"


@pytest.mark.parametrize("data,message", [
    (b"", "needs at least 60"),
    (bytes.fromhex("4f") + bytes(59), "IP version 4"),
    (bytes.fromhex("60000000 0000 06 40") + bytes(52), "next header is 6"),
])
def test_bad_input_is_named(data, message):
    with pytest.raises(ValueError, match=message):
        icrc_compute(data)
    with pytest.raises(ValueError):
        icrc_check(data[:10])


def test_builder_masks_the_source_port():
    a = IPv6(src="2001:db8:100::1", dst="2001:db8:100:1::3") / UDP(sport=1, dport=4791)
    b = IPv6(src="2001:db8:100::1", dst="2001:db8:100:1::3") / UDP(sport=0xFFFF, dport=4791)
    hdrs = MrcBTH(opcode=0xCA) / METH() / RETH()
    assert bytes(a / hdrs.copy())[-4:] == bytes(b / hdrs.copy())[-4:]
