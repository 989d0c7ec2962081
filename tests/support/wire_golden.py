"""Hand-written golden frames of the mrckit MRC profile (design section 3).

Every byte below was written by hand from the layouts of design section 3.2, one header per
line, and checked field by field in the comments; none of it is produced by mrckit code. The
4 ICRC bytes of each frame were computed with the bitwise CRC-32 of ``crc32.py`` over the
masked bytes (hand-written for two frames in tests/unit/wire/test_wire_icrc.py) and agree with scapy's RoCE ICRC.

Shared values:
- forward EV 0x10234567 = plane 1 | T1 2 | salt 0x34567: UDP sport 0x1023, flow label 0x4567;
- reverse EV 0x10500001 = plane 1 | T1 5 | salt 1: sport 0x1050, flow label 0x0001;
- requestor NIC (leaf 0, downlink 0) 2001:db8:100:0::1, its plane-1 port 2001:db8:201:0::1;
- responder NIC (leaf 1, downlink 2) 2001:db8:100:1::3;
- uSID path plane 1, leaf 0 -> T1 2 -> leaf 1 -> downlink 2:
  T0(1,0)=0x1400, T1(1,2)=0x1802, T0(1,1)=0x1401, DOWN(1,2)=0x1c02.
"""


def hx(*chunks: str) -> bytes:
    """Join hex chunks; spaces are for reading only."""
    return bytes.fromhex("".join(chunks))


ETH = "020000000002 020000000001 86dd"            # dst 02:..:02, src 02:..:01, IPv6
REQ_NIC = "20010db8 01000000 00000000 00000001"    # 2001:db8:100:0::1
RSP_NIC = "20010db8 01000001 00000000 00000003"    # 2001:db8:100:1::3
REQ_PORT_P1 = "20010db8 02010000 00000000 00000001"  # 2001:db8:201:0::1
PATH_DA = "fcbbbb00 14001802 14011c02 00000000"    # fcbb:bb00:1400:1802:1401:1c02::

# WRITE_ONLY, DSCP TRIMMABLE (10) ECN ECT0 (2): tc = 0x2a; first word 6|2a|04567.
WRITE_ONLY = dict(
    eth=ETH,
    outer="62a04567 005c 29 40" + REQ_PORT_P1 + PATH_DA,    # plen 92 = 40 + 52, nh 41, hlim 64
    inner="62a04567 0034 11 40" + REQ_NIC + RSP_NIC,        # plen 52, nh UDP, hlim 64
    udp="1023 12b7 0034 0000",                              # sport EV>>16, dport 4791, len 52, csum 0
    bth="ca 00 ffff 00 000123 80 000456",                   # WRITE_ONLY, pkey ffff, QP 0x123, AckReq, PSN 0x456
    meth="0001 0002",                                       # RQMSN 1, MSN 2
    reth="00007f0000001000 cafe0001 00000008",              # VA, R_Key, DMA length 8
    payload="4d52436461746121",                             # "MRCdata!"
    icrc="8f8a11df",
)

# SACK from the responder on the reverse EV, DSCP CONTROL (46) ECN 0: tc 0xb8.
SACK = dict(
    eth=ETH,
    inner="6b800001 003c 11 40" + RSP_NIC + REQ_NIC,        # plen 60 = 8 + 12 + 28 + 8 + 4
    udp="1050 12b7 003c 0000",
    bth="dc 00 ffff 00 000077 00 000000",                   # SACK to QP 0x77
    seth="0020 fffe 10234567 0011 0022 00 000450 00 04 0002 a000000000000001",
    # type 0 next 0 M=SKIP_ONCE(01 at bits 6..5) PR 0 | ack_psn_offset -2 | echoed EV |
    # spdcid 0x11 dpdcid 0x22 | rsvd | cack_psn 0x450 | cc 0 | MPR 4 | sack_offset 2 |
    # bitmap: bits 63 and 0 set = PSNs cack+2 and cack+2+63
    cc_state="1234 0003 85 000100",                         # ts 0x1234 | ooo 3 | restore 1 pen 5 | 256 units
    icrc="c0b340ea",
)

# NACK TRIMMED from the responder on the reverse EV.
NACK_TRIMMED = dict(
    eth=ETH,
    inner="6b800001 002c 11 40" + RSP_NIC + REQ_NIC,        # plen 44 = 8 + 12 + 20 + 4
    udp="1050 12b7 002c 0000",
    bth="dd 00 ffff 00 000077 00 000000",
    neth="0000 01 00 10234567 0011 0022 00 000456 00 00 1234",
    # type/next 0 | reason TRIMMED | vendor 0 | echoed EV | pdcids | rsvd | nack_psn 0x456 |
    # cc 0 | rsvd | tx_timestamp 0x1234
    icrc="8fea4f68",
)

# PROBE from the requestor on the forward EV, DSCP CONTROL: first word 6|b8|04567.
PROBE = dict(
    eth=ETH,
    inner="6b804567 0028 11 40" + REQ_NIC + RSP_NIC,        # plen 40 = 8 + 12 + 16 + 4
    udp="1023 12b7 0028 0000",
    bth="de 00 ffff 00 000123 00 000000",                   # PROBE consumes no PSN
    peth="00 00 0007 0000 0011 0022 2345 0001 0000",        # probe_id 7, ts 0x2345, TSR 0 format 1
    icrc="9d43fe62",
)

# EP_REQ EV_PROBE from the requestor's agent, encapsulated on the forward EV's path.
EP_REQ = dict(
    eth=ETH,
    outer="6b804567 0050 29 40" + REQ_PORT_P1 + PATH_DA,    # plen 80 = 40 + 40
    inner="6b804567 0028 11 40" + REQ_NIC + RSP_NIC,
    udp="1023 12b7 0028 0000",
    bth="d8 00 ffff 00 000002 00 000000",                   # EP_REQ to QP 0x2
    erth="40 00 0009 0000000f 20300042 3456 0000",          # op EV_PROBE (01 at 7..6), probe 9,
    # planes 0..3 up, response EV 0x20300042 (plane 2, T1 3, salt 0x42), ts 0x3456
    icrc="06ff77e4",
)

# EP_RESP from the responder's agent on the response EV 0x20300042: sport 0x2030, fl 0x0042.
EP_RESP = dict(
    eth=ETH,
    inner="6b800042 0028 11 40" + RSP_NIC + REQ_NIC,
    udp="2030 12b7 0028 0000",
    bth="d9 00 ffff 00 000002 00 000000",
    eeth="40 00 0009 10234567 3456 0010 00000000",          # op EV_PROBE, status OK, echoes, service 16
    icrc="b623cbd5",
)

GOLDEN = {"WRITE_ONLY": WRITE_ONLY, "SACK": SACK, "NACK_TRIMMED": NACK_TRIMMED, "PROBE": PROBE,
          "EP_REQ": EP_REQ, "EP_RESP": EP_RESP}


def frame(g: dict) -> bytes:
    """All chunks of a golden frame in order."""
    return hx(*g.values())


def inner_without_icrc(g: dict) -> bytes:
    """The bytes the ICRC covers: the inner IPv6 header to the end of the payload."""
    keys = list(g)
    return hx(*(g[k] for k in keys[keys.index("inner"):-1]))
