"""Scapy layers of the mrckit MRC profile (design section 3.2) and the ICRC trailer.

``MrcBTH`` extends scapy's RoCE ``BTH`` (``scapy.contrib.roce``): same 12-byte layout and field
names, the MRC opcodes added to the opcode table, and byte 8 split into AckReq, r, rtx, ts and
4 reserved bits. The AETH is scapy's own. ``dissect(captured_bytes)`` reads a whole MRC packet:
the payload of UDP destination port 4791 (and 4792, the agent's port, design section 5) as
``MrcBTH``, the header stack after the BTH following the opcode (design section 3.2 table),
with TSETH when ts = 1 and ImmDt for the ``_IMM`` opcodes. Importing this module leaves scapy's
own dissection alone (``Ether(captured_bytes)`` still reads 4791 as RoCE), so other scapy users
in the process see no change; ``UDP()/MrcBTH()`` builds with dport 4791.

The ICRC is the last 4 bytes of the packet (``MrcBTH.icrc``, LSB first, see :mod:`.icrc`). It
is left out when any IPv6 header below the BTH carries DSCP TRIMMED or TRIMMED_LASTHOP, the
marks of a trimmed packet. Left at ``None`` it is computed when the packet is built, from the
IPv6 and UDP layers below; a BTH built without them gets an ICRC of 0.

Field names are shared with ``p4src/include/headers.p4``; the C structs in
``ebpf/include/mrc_wire.h`` have the same byte offsets (tests check both).
"""

import struct

from scapy.contrib import roce
from scapy.contrib.roce import BTH, _bth_opcodes
from scapy.fields import (
    BitEnumField, BitField, ByteEnumField, ConditionalField, FCSField, SignedShortField,
    XBitField, XByteField, XIntField, XLongField, XShortField, ShortField, IntField,
)
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import NoPayload, Packet, Padding, Raw, bind_layers, bind_top_down

from .constants import (
    AETH_LEN, AGENT_UDP_PORT, BTH_FLAG_TS, BTH_LEN, CC_STATE_LEN, EETH_LEN, ERTH_LEN, ICRC_LEN,
    IMM_OPCODES, IMMDT_LEN, METH_LEN, NETH_LEN, PETH_LEN, RETH_LEN, SETH_LEN, TSETH_FORMAT,
    TSETH_LEN, UDP_LEN, UDP_PORT_ROCEV2, WRITE_OPCODES, Dscp, EpOp, EpStatus, MultipathState, NackReason,
    Opcode,
)
from .icrc import icrc_compute

_TRIMMED_DSCPS = frozenset({Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP})
_OPCODE_NAMES = {**_bth_opcodes, **{int(op): op.name for op in Opcode}}


def _is_trimmed(pkt: Packet) -> bool:
    """True if an IPv6 header below ``pkt`` has a trimmed DSCP (design section 3.1)."""
    layer = pkt.underlayer
    while layer is not None:
        if isinstance(layer, IPv6) and (layer.tc or 0) >> 2 in _TRIMMED_DSCPS:
            return True
        layer = layer.underlayer
    return False


class _Header(Packet):
    """A fixed-size MRC header: dissecting fewer bytes than it needs raises a clear ValueError
    (scapy turns that into ``Raw`` when the header is a payload, so captures never raise)."""

    wire_len = 0
    """Bytes of the header on the wire (the constants of design section 3.2)."""

    def do_dissect(self, s: bytes) -> bytes:
        need = self._needed()
        if len(s) < need:
            raise ValueError(f"{self.name}: {len(s)} bytes left, the header needs {need}")
        return super().do_dissect(s)

    def _needed(self) -> int:
        return self.wire_len


def _find_bth(pkt: Packet) -> "MrcBTH | None":
    layer = pkt.underlayer
    while layer is not None and not isinstance(layer, MrcBTH):
        layer = layer.underlayer
    return layer


class MrcBTH(_Header, BTH):
    """MRC Base Transport Header, 12 B, plus the ICRC trailer (design sections 3.1 and 3.2).

    Byte 1 is SE/M/PadCnt/TVer as in RoCE; byte 4 is reserved; byte 8 is
    AckReq(7) r(6) rtx(5) ts(4) reserved(3..0). ``ts`` left at ``None`` is set to 1 exactly
    when a ``TSETH`` is in the payload.
    """

    name = "MRC BTH"
    wire_len = BTH_LEN
    match_subclass = True  # so pkt[BTH] (scapy's RoCE BTH) finds an MrcBTH too
    fields_desc = [
        ByteEnumField("opcode", 0, _OPCODE_NAMES),
        BitField("solicited", 0, 1),
        BitField("migreq", 0, 1),
        BitField("padcount", 0, 2),
        BitField("version", 0, 4),
        XShortField("pkey", 0xFFFF),
        XByteField("resv8", 0),
        XBitField("dqpn", 0, 24),
        BitField("ackreq", 0, 1),
        BitField("resv1", 0, 1),
        BitField("rtx", 0, 1),
        BitField("ts", None, 1),
        BitField("resv4", 0, 4),
        BitField("psn", 0, 24),
        ConditionalField(FCSField("icrc", None, fmt="<I"), lambda pkt: not _is_trimmed(pkt)),
    ]

    def _needed(self) -> int:
        return BTH_LEN + (0 if _is_trimmed(self) else ICRC_LEN)

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        p += pay
        if self.ts is None and self.haslayer(TSETH):
            p = p[:8] + bytes([p[8] | BTH_FLAG_TS]) + p[9:]
        if self.icrc is None and not _is_trimmed(self):
            p = p[:-4] + self.compute_icrc(p)
        return p

    def compute_icrc(self, p: bytes) -> bytes:
        """The 4 ICRC bytes for ``p`` (this BTH to the end, ICRC placeholder included), with
        mrckit's masks (:mod:`.icrc`); 0 when there is no IPv6/UDP below to compute it over.
        Overrides the RoCE BTH's method, which does not mask the UDP source port."""
        return struct.pack("<I", self._icrc_of(p[:-ICRC_LEN]))

    def _icrc_of(self, bth_onward: bytes) -> int:
        udp = self.underlayer
        if not isinstance(udp, UDP):
            return 0
        ip6 = udp.underlayer
        if not isinstance(ip6, IPv6):
            return 0
        udp_hdr = bytearray(udp.self_build())
        if udp.len is None:
            struct.pack_into("!H", udp_hdr, 4, len(udp_hdr) + len(bth_onward) + 4)
        ip_hdr = bytearray(ip6.self_build())
        if ip6.plen is None:
            struct.pack_into("!H", ip_hdr, 4, struct.unpack_from("!H", udp_hdr, 4)[0])
        return icrc_compute(bytes(ip_hdr + udp_hdr) + bth_onward)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        if self.opcode in WRITE_OPCODES:
            return METH
        return _CONTROL_NEXT.get(self.opcode, Raw)

    def mysummary(self) -> str:
        return self.sprintf("MRC %opcode% qp=%dqpn% psn=%psn%")


class METH(_Header):
    """Message ETH, 4 B: RQMSN, MSN (design section 3.2)."""

    name = "MRC METH"
    wire_len = METH_LEN
    fields_desc = [ShortField("rqmsn", 0), ShortField("msn", 0)]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        bth = _find_bth(self)
        return TSETH if bth is not None and bth.ts else RETH


class TSETH(_Header):
    """Timestamp ETH, 4 B, present when BTH ts = 1: tx_timestamp (1.024 us units), TSR, format."""

    name = "MRC TSETH"
    wire_len = TSETH_LEN
    fields_desc = [
        ShortField("tx_timestamp", 0),
        BitField("tsr", 0, 1),
        BitField("resv11", 0, 11),
        BitField("ts_format", TSETH_FORMAT, 4),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return RETH


class RETH(_Header):
    """RDMA ETH, 16 B, in every data packet: VA, R_Key, DMA length (bytes)."""

    name = "MRC RETH"
    wire_len = RETH_LEN
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), IntField("dma_len", 0)]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        bth = _find_bth(self)
        return ImmDt if bth is not None and bth.opcode in IMM_OPCODES else Raw


class ImmDt(_Header):
    """Immediate data, 4 B, for WRITE_LAST_IMM and WRITE_ONLY_IMM."""

    name = "MRC ImmDt"
    wire_len = IMMDT_LEN
    fields_desc = [XIntField("imm", 0)]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class SETH(_Header):
    """SACK ETH, 28 B (design section 3.2); followed by ``CCState``.

    ``m`` is a :class:`MultipathState`; ``ev`` is the echoed EV (the spec's "entropy");
    ``ack_psn_offset`` and ``sack_offset`` are signed, relative to ``cack_psn``; ``mpr`` counts
    128 PSNs; bit 63 of ``sack_bitmap`` is PSN cack_psn + sack_offset.
    """

    name = "MRC SETH"
    wire_len = SETH_LEN
    fields_desc = [
        BitField("hdr_type", 0, 4),
        BitField("next_hdr", 0, 5),
        BitEnumField("m", 0, 2, {int(v): v.name for v in MultipathState}),
        BitField("pr", 0, 1),
        BitField("resv4", 0, 4),
        SignedShortField("ack_psn_offset", 0),
        XIntField("ev", 0),
        XShortField("spdcid", 0),
        XShortField("dpdcid", 0),
        XByteField("resv12", 0),
        BitField("cack_psn", 0, 24),
        BitField("cc_type", 0, 4),
        BitField("cc_flags", 0, 4),
        XByteField("mpr", 0),
        SignedShortField("sack_offset", 0),
        XLongField("sack_bitmap", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return CCState


class CCState(_Header):
    """CC_STATE, 8 B, after the SETH: reflected tx_timestamp, ooo_count, restore_cwnd,
    rcv_cwnd_pen, rcvd_bytes (units of 256 B)."""

    name = "MRC CC_STATE"
    wire_len = CC_STATE_LEN
    fields_desc = [
        ShortField("tx_timestamp", 0),
        BitField("resv1", 0, 1),
        BitField("ooo_count", 0, 15),
        BitField("restore_cwnd", 0, 1),
        BitField("rcv_cwnd_pen", 0, 7),
        BitField("rcvd_bytes", 0, 24),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class NETH(_Header):
    """NACK ETH, 20 B: reason (:class:`NackReason`), echoed EV, nack_psn, tx_timestamp."""

    name = "MRC NETH"
    wire_len = NETH_LEN
    fields_desc = [
        BitField("hdr_type", 0, 4),
        BitField("next_hdr", 0, 5),
        BitField("resv7", 0, 7),
        ByteEnumField("nack_reason", 0, {int(v): v.name for v in NackReason}),
        XByteField("vendor_info", 0),
        XIntField("ev", 0),
        XShortField("spdcid", 0),
        XShortField("dpdcid", 0),
        XByteField("resv12", 0),
        BitField("nack_psn", 0, 24),
        BitField("cc_type", 0, 4),
        BitField("cc_flags", 0, 4),
        XByteField("resv17", 0),
        ShortField("tx_timestamp", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class PETH(_Header):
    """Reliability-probe ETH, 16 B (PROBE; answered by a SACK with PR = 1)."""

    name = "MRC PETH"
    wire_len = PETH_LEN
    fields_desc = [
        XByteField("resv0", 0),
        XByteField("vendor_info", 0),
        ShortField("probe_id", 0),
        XShortField("resv4", 0),
        XShortField("spdcid", 0),
        XShortField("dpdcid", 0),
        ShortField("tx_timestamp", 0),
        BitField("tsr", 0, 1),
        BitField("resv11", 0, 11),
        BitField("ts_format", TSETH_FORMAT, 4),
        XShortField("resv14", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class ERTH(_Header):
    """Endpoint-request ETH, 16 B (EP_REQ to QP 0x2): op (:class:`EpOp`), probe_id,
    port_status_mask (bit p = plane port p up), resp_ev (the EV the answer must use)."""

    name = "MRC ERTH"
    wire_len = ERTH_LEN
    fields_desc = [
        BitEnumField("op", 0, 2, {int(v): v.name for v in EpOp}),
        BitField("resv6", 0, 6),
        XByteField("vendor_info", 0),
        ShortField("probe_id", 0),
        XIntField("port_status_mask", 0),
        XIntField("resp_ev", 0),
        ShortField("tx_timestamp", 0),
        XShortField("resv14", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class EETH(_Header):
    """Endpoint-response ETH, 16 B (EP_RESP): op, status (:class:`EpStatus`), probe_id, the
    request's EV and tx_timestamp echoed, service_time (1.024 us units)."""

    name = "MRC EETH"
    wire_len = EETH_LEN
    fields_desc = [
        BitEnumField("op", 0, 2, {int(v): v.name for v in EpOp}),
        BitEnumField("status", 0, 2, {int(v): v.name for v in EpStatus}),
        BitField("resv4", 0, 4),
        XByteField("vendor_info", 0),
        ShortField("probe_id", 0),
        XIntField("req_ev", 0),
        ShortField("req_tx_timestamp", 0),
        ShortField("service_time", 0),
        XIntField("resv12", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class AETH(_Header, roce.AETH):
    """RoCE ACK ETH, 4 B: syndrome, MSN (24 bits). scapy's layer, with the length check."""

    name = "AETH"
    wire_len = AETH_LEN

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


_CONTROL_NEXT: dict[int, type[Packet]] = {
    Opcode.SACK: SETH,
    Opcode.NACK: NETH,
    Opcode.ACK: AETH,
    Opcode.PROBE: PETH,
    Opcode.EP_REQ: ERTH,
    Opcode.EP_RESP: EETH,
}

HEADER_LAYERS: dict[str, type[Packet]] = {
    "bth": MrcBTH, "meth": METH, "tseth": TSETH, "reth": RETH, "immdt": ImmDt, "aeth": AETH,
    "seth": SETH, "cc_state": CCState, "neth": NETH, "peth": PETH, "erth": ERTH, "eeth": EETH,
}
"""Every MRC header after UDP, by the name the C struct (``mrc_<name>``) and the P4 header
(``<name>_h``) use."""

# The payload overloads let ``MrcBTH()/SETH()`` fill in the opcode; dissection goes through
# guess_payload_class above. These bind our own classes only.
for _opcode, _layer in _CONTROL_NEXT.items():
    bind_layers(MrcBTH, _layer, opcode=int(_opcode))
bind_layers(SETH, CCState)

# Building: ``UDP()/MrcBTH()`` gets dport 4791 (bound last, so the default). Top-down only:
# scapy's UDP keeps its own dissection rules, so importing this module changes nothing for other
# scapy users in the process; :func:`dissect` reads MRC.
bind_top_down(UDP, MrcBTH, dport=AGENT_UDP_PORT)
bind_top_down(UDP, MrcBTH, dport=UDP_PORT_ROCEV2)
MRC_UDP_PORTS = frozenset({UDP_PORT_ROCEV2, AGENT_UDP_PORT})
"""UDP destination ports whose payload :func:`dissect` reads as MRC (design sections 3.2, 5)."""


def dissect(data: bytes, first: type[Packet] = Ether) -> Packet:
    """Dissect ``data`` (a frame, or with ``first=IPv6`` an IPv6 packet) with scapy's own layers,
    then read the payload of the first UDP header to port 4791 or 4792 as MRC: ``MrcBTH`` and
    the headers its opcode implies, the ICRC last unless an IPv6 header below is trimmed.

    The UDP length decides where MRC ends, as scapy's UDP does; what follows is ``Padding``.
    Any bytes are accepted (a short or garbled stack dissects as far as it goes, then Raw).
    """
    pkt = first(data)
    layer = pkt
    while not isinstance(layer, NoPayload):
        if isinstance(layer, UDP) and layer.dport in MRC_UDP_PORTS:
            _read_as_mrc(layer)
            break
        layer = layer.payload
    return pkt


def _read_as_mrc(udp: UDP) -> None:
    raw = bytes(udp.original[UDP_LEN:]) if udp.original else bytes(udp.payload)
    body, pad = raw, b""
    if udp.len is not None and UDP_LEN <= udp.len < UDP_LEN + len(raw):
        body, pad = raw[:udp.len - UDP_LEN], raw[udp.len - UDP_LEN:]
    udp.remove_payload()
    if not body:
        return
    try:
        mrc: Packet = MrcBTH(body, _underlayer=udp)
    except Exception:  # a header cut short: Raw, as scapy's own payload dissection does
        mrc = Raw(body, _underlayer=udp)
    udp.add_payload(mrc)
    if pad:
        udp.lastlayer().add_payload(Padding(pad))
