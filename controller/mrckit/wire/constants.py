"""Constant tables of the mrckit MRC wire profile (design section 3).

This module is the single source of truth: ``python -m mrckit.wire.gen`` writes the C view
(``ebpf/include/mrc_wire_gen.h``) and the P4 view (``p4src/include/mrc_constants.p4``) from it,
and a test fails when the committed files are stale.

Values marked *ours* rest on secondary sources or are mrckit's own choices; see
``docs/wire-format.md`` for the confidence of each.
"""

from enum import IntEnum

# --- UDP ports and reserved QPs -------------------------------------------------------------
UDP_PORT_ROCEV2 = 4791
"""RoCEv2 well-known UDP destination port, used by MRC [M: MANI v2]."""
AGENT_UDP_PORT = 4792
"""Local port that XDP ingress rewrites QP 0x2 traffic to, so the host agent receives it (ours)."""
QP_ENDPOINT_OPS = 0x2
"""Destination QP reserved for endpoint operations, EP_REQ and EP_RESP [M: EMU, MANI]."""

# --- Header sizes in bytes ------------------------------------------------------------------
ETH_LEN = 14
IPV6_LEN = 40
UDP_LEN = 8
BTH_LEN = 12
METH_LEN = 4
TSETH_LEN = 4
RETH_LEN = 16
IMMDT_LEN = 4
AETH_LEN = 4
SETH_LEN = 28
CC_STATE_LEN = 8
NETH_LEN = 20
PETH_LEN = 16
ERTH_LEN = 16
EETH_LEN = 16
ICRC_LEN = 4
ICRC_PREFIX_LEN = 8
"""Bytes of ones the ICRC runs over first, in place of the InfiniBand LRH (design 3.1)."""
IPV6_MIN_MTU = 1280
"""RFC 8200 section 5: every IPv6 link carries packets of this many bytes (L3) unfragmented,
so a frame no longer than it plus Ethernet fits any egress port (the switch's MTU check)."""
ENCAP_LEN = IPV6_LEN
"""Bytes that SRv6 encapsulation adds: one outer IPv6 header, no SRH (design section 3.1)."""

ETHERTYPE_IPV6 = 0x86DD
IPPROTO_IPV6 = 41
IPPROTO_UDP = 17
OUTER_HOP_LIMIT = 64

# --- Transport parameters ------------------------------------------------------------------
DEFAULT_PAYLOAD_LEN = 2048
"""Default RDMA payload per packet in bytes, a RoCE MTU value (design section 3.1)."""
MPR_UNIT_PSNS = 128
"""SETH MPR is in units of 128 PSNs [H: OCP mrc.h]."""
SETH_OFFSET_MAX = 0x7FFF
"""SETH ack_psn_offset and sack_offset are signed 16-bit: -SETH_OFFSET_MAX - 1 .. SETH_OFFSET_MAX
PSNs from cack_psn (design section 3.2)."""
TIME_UNIT_NS = 1024
"""tx_timestamp, RTO base and service time count units of 1.024 us = 1024 ns."""
RCVD_BYTES_UNIT = 256
"""CC_STATE rcvd_bytes counts units of 256 bytes [M: EMU]."""
ALWAYS_SKIP_CE_MIN = 8
"""The responder reports ALWAYS_SKIP when at least this many ... (ours, design section 6)."""
ALWAYS_SKIP_WINDOW = 16
"""... of the last this-many packets received on an EV were CE-marked (ours)."""
PSN_BITS = 24
PSN_MOD = 1 << PSN_BITS

BTH_DEFAULT_PKEY = 0xFFFF
"""BTH P_Key of every MRC packet: the default partition, full membership (as RoCE)."""

# --- BTH byte 8 flags -----------------------------------------------------------------------
BTH_FLAG_ACKREQ = 0x80
BTH_FLAG_RTX = 0x20
BTH_FLAG_TS = 0x10
TSETH_FORMAT = 1
"""TSETH/PETH format(3..0) value in our profile [M: EMU]."""


class Opcode(IntEnum):
    """MRC BTH opcodes [M: EMU, MANI]; design section 3.2."""

    WRITE_FIRST = 0xC6
    WRITE_MIDDLE = 0xC7
    WRITE_LAST = 0xC8
    WRITE_LAST_IMM = 0xC9
    WRITE_ONLY = 0xCA
    WRITE_ONLY_IMM = 0xCB
    ACK = 0xD1
    EP_REQ = 0xD8
    EP_RESP = 0xD9
    SACK = 0xDC
    NACK = 0xDD
    PROBE = 0xDE


WRITE_OPCODES = frozenset(o for o in Opcode if o <= Opcode.WRITE_ONLY_IMM)
IMM_OPCODES = frozenset({Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM})


class Dscp(IntEnum):
    """DSCP classes, build-time constants (design section 3.3; values ours, names [M])."""

    TRIMMABLE = 10
    TRIMMABLE_RETX = 18
    NO_TRIM = 26
    CONTROL = 46
    TRIMMED = 11
    TRIMMED_LASTHOP = 13


class Ecn(IntEnum):
    """The two ECN bits of the traffic class (RFC 3168)."""

    NOT_ECT = 0
    ECT1 = 1
    ECT0 = 2
    CE = 3


class NackReason(IntEnum):
    """NETH nack_reason codes, the UET code space that MRC reuses [M: EMU; xdp2]."""

    TRIMMED = 0x01
    TRIMMED_LASTHOP = 0x02
    NO_BITMAP = 0x06
    NO_PKT_BUFFER = 0x07
    NO_RESOURCE = 0x0A
    PSN_OOR_WINDOW = 0x0B
    UNEXP_EVENT = 0x19


class AethSyndrome(IntEnum):
    """AETH syndrome byte of the RC baseline transport's ACK (IBTA 9.7.5.1, as RoCEv2 sends it):
    a positive ACK with the credit field "invalid" (RoCE NICs send no end-to-end credits), and
    the NAK for a PSN sequence error (a gap: the requestor goes back to the ACK's PSN)."""

    ACK = 0x1F
    NAK_PSN_SEQ_ERROR = 0x60


class MultipathState(IntEnum):
    """The SETH M field (2 bits) [M: EMU, MANI]."""

    NONE = 0
    SKIP_ONCE = 1
    ALWAYS_SKIP = 2


class EpOp(IntEnum):
    """ERTH/EETH op field (2 bits), ours."""

    PORT_STATUS_UPDATE = 0
    EV_PROBE = 1


class EpStatus(IntEnum):
    """EETH status field (2 bits), ours."""

    OK = 0
    ERROR = 1


class HostFlag(IntEnum):
    """Bits of the host dataplane's ``host_config.flags`` (docs/host.md, EV set policy)."""

    PATH_RETIRE = 1   # a LOSS retires every EV of the lost packet's path toward that peer
    PINNED = 2        # pinned-EV mode: one fixed EV per QP, no spraying, no retirement


class EvState(IntEnum):
    """Per-EV path state kept by the sender (design section 5) [M/H]."""

    GOOD = 0
    SKIP = 1
    ASSUMED_BAD = 2
    DENIED = 3


class UsidRole(IntEnum):
    """The 2-bit role field of a uSID (design section 3.3, ours). 0 is reserved."""

    RESERVED = 0
    T0 = 1
    T1 = 2
    DOWN = 3


class DropReason(IntEnum):
    """Switch drop reasons, the index of the ``drop_reason`` counter (design section 4)."""

    NOT_IPV6 = 0
    HOP_LIMIT = 1
    NO_ROUTE = 2
    CONGESTION = 3
    PORT_DOWN = 4
    MALFORMED = 5
    OVERSIZE = 6
    """Larger than the egress port's MTU. The eBPF target checks it (bpf_check_mtu); the P4
    program cannot see an MTU, so on bmv2 this index stays 0 (docs/ebpf-switch.md)."""


# --- Field widths used by the codecs ------------------------------------------------------
MAX_PLANES = 16
MAX_T1_PER_PLANE = 256
MAX_T0_PER_PLANE = 1024
MAX_DOWNLINKS_PER_T0 = 1024
MAX_USIDS_IN_CONTAINER = 6
SWITCH_PORT_BITS = 9
BMV2_MAX_PORTS = 510
"""bmv2 reserves port 511 as its drop port, so a bmv2 switch has ports 0..509 (design 4)."""

# --- Bit layouts inside header fields (design section 3.2) ------------------------------------
# Masks and shifts apply to the field as a big-endian integer of the width named in the comment.
IPV6_DSCP_SHIFT = 2
"""Traffic class (8 bits) = DSCP << 2 | ECN (RFC 2474, RFC 3168)."""
IPV6_ECN_MASK = 0x3
IPV6_FLOW_LABEL_MASK = 0xFFFFF
BTH_SE = 0x80
"""BTH byte 1 (8 bits): SE(7) M(6) PadCnt(5..4) TVer(3..0), as in RoCE."""
BTH_MIGREQ = 0x40
BTH_PADCNT_SHIFT = 4
BTH_PADCNT_MASK = 0x3
BTH_TVER_MASK = 0xF
BTH_FLAGS_RESERVED_MASK = 0x4F
"""BTH byte 8 bits that are reserved: r(6) and 3..0."""
TS_TSR = 0x8000
"""TSETH/PETH word at offset 2 (16 bits): TSR(15) reserved(14..4) format(3..0)."""
TS_FORMAT_MASK = 0xF
SETH_TYPE_SHIFT = 12
"""SETH/NETH word at offset 0 (16 bits): type(15..12) next(11..7) ..."""
SETH_NEXT_SHIFT = 7
SETH_NEXT_MASK = 0x1F
SETH_M_SHIFT = 5
"""SETH word 0: M(6..5)."""
SETH_M_MASK = 0x3
SETH_PR = 0x10
"""SETH word 0: PR(4), the SACK answers a PROBE."""
CC_TYPE_SHIFT = 4
"""SETH/NETH cc byte (8 bits): cc_type(7..4) cc_flags(3..0)."""
CC_FLAGS_MASK = 0xF
CC_OOO_COUNT_MASK = 0x7FFF
"""CC_STATE word at offset 2 (16 bits): reserved(15) ooo_count(14..0)."""
CC_RESTORE_CWND = 0x80
"""CC_STATE byte 4 (8 bits): restore_cwnd(7) rcv_cwnd_pen(6..0)."""
CC_RCV_CWND_PEN_MASK = 0x7F
EP_OP_SHIFT = 6
"""ERTH/EETH byte 0 (8 bits): op(7..6)."""
EP_OP_MASK = 0x3
EP_STATUS_SHIFT = 4
"""EETH byte 0: status(5..4)."""
EP_STATUS_MASK = 0x3
SACK_BITMAP_BITS = 64
"""sack_bitmap bit 63 is the PSN cack_psn + sack_offset + 0."""
