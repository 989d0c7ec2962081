"""Whole MRC frames: build one with the EV applied, read the EV back, and the header stacks.

A frame is ``Ether | outer IPv6 (DA = uSID container) | inner IPv6 (DA = destination NIC) |
UDP :4791 | BTH | ... | ICRC`` (design section 3.1), or the same without the outer header as
the endpoint sends it and the responder receives it after decapsulation.
"""

import ipaddress
import struct

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet

from ._check import check_range
from .constants import ETH_LEN, IPPROTO_IPV6, OUTER_HOP_LIMIT, UDP_PORT_ROCEV2, Dscp, Ecn, Opcode
from .ev import ev_from_wire, ev_to_wire
from .icrc import icrc_check
from .layers import NETH, SETH, MrcBTH, dissect
from .stack import header_stack  # noqa: F401  (re-exported: part of this module's API)

Address = str | int | ipaddress.IPv6Address

DEFAULT_SRC_MAC = "02:00:00:00:00:01"
DEFAULT_DST_MAC = "02:00:00:00:00:02"

def _ip6(name: str, addr: Address) -> str:
    try:
        return str(ipaddress.IPv6Address(addr))
    except (ipaddress.AddressValueError, ValueError) as exc:
        raise ValueError(f"{name}={addr!r} is not an IPv6 address") from exc


def mrc_frame(headers: Packet, *, ev: int, inner_src: Address, inner_dst: Address,
              outer_src: Address | None = None, outer_dst: Address | None = None,
              dscp: int = Dscp.TRIMMABLE, ecn: int = Ecn.ECT0, hop_limit: int = OUTER_HOP_LIMIT,
              src_mac: str = DEFAULT_SRC_MAC, dst_mac: str = DEFAULT_DST_MAC) -> Packet:
    """Build ``Ether / [outer IPv6] / inner IPv6 / UDP / headers`` with the EV applied.

    Args:
        headers: an ``MrcBTH`` and everything after it (payload included); its ICRC is computed
            when the frame is built, unless set.
        ev: the 32-bit EV: UDP source port = EV bits 31..16, flow label = EV bits 15..0 in both
            IPv6 headers (design section 3.1).
        inner_src, inner_dst: NIC addresses.
        outer_src, outer_dst: port address and uSID container; both or neither (no outer header).
        dscp, ecn: the traffic class of both IPv6 headers (6 and 2 bits).
        hop_limit: of both IPv6 headers.

    Raises:
        ValueError: a field out of range, an address that is not IPv6, only one outer address,
            or ``headers`` not starting with an ``MrcBTH``.
    """
    if not isinstance(headers, MrcBTH):
        raise ValueError(f"headers must start with MrcBTH, got {type(headers).__name__}")
    if (outer_src is None) != (outer_dst is None):
        raise ValueError("give both outer_src and outer_dst (encapsulated) or neither")
    check_range("dscp", int(dscp), 0, 63)
    check_range("ecn", int(ecn), 0, 3)
    check_range("hop_limit", hop_limit, 0, 255)
    flow_label, sport = ev_to_wire(ev)
    tc = int(dscp) << 2 | int(ecn)
    inner = IPv6(src=_ip6("inner_src", inner_src), dst=_ip6("inner_dst", inner_dst),
                 tc=tc, fl=flow_label, hlim=hop_limit)
    stack = inner / UDP(sport=sport, dport=UDP_PORT_ROCEV2, chksum=0) / headers
    if outer_src is not None and outer_dst is not None:
        outer = IPv6(src=_ip6("outer_src", outer_src), dst=_ip6("outer_dst", outer_dst),
                     tc=tc, fl=flow_label, hlim=hop_limit, nh=IPPROTO_IPV6)
        stack = outer / stack
    return Ether(src=src_mac, dst=dst_mac) / stack


def frame_ev(frame: Packet) -> int:
    """The EV a frame carries: UDP source port and the low 16 bits of the outermost flow label.

    Raises:
        ValueError: no IPv6 or UDP layer, or a flow label with any of its top 4 bits set.
    """
    if IPv6 not in frame or UDP not in frame:
        raise ValueError("frame has no IPv6/UDP layers; it is not an MRC frame")
    return ev_from_wire(frame[IPv6].fl, frame[UDP].sport)


def parse_frame(data: bytes) -> Packet:
    """Dissect an Ethernet frame; the MRC layers follow from UDP :4791 and the opcode.

    Headers that are cut short become ``Raw``, so any capture parses. Check what you need with
    ``MrcBTH in pkt`` and friends.

    Raises:
        ValueError: ``data`` is shorter than an Ethernet header (14 bytes).
    """
    if len(data) < ETH_LEN:
        raise ValueError(f"frame is {len(data)} bytes; an Ethernet header needs {ETH_LEN}")
    try:
        return dissect(data)
    except struct.error as exc:  # scapy's own layers report short fields this way
        raise ValueError(f"malformed frame: {exc}") from exc


def describe(frame: Packet) -> dict:
    """The MRC facts of one dissected frame, for tools that list captures.

    Returns a dict with ``opcode`` (name, or ``None`` when the frame is not MRC), ``qp``,
    ``psn``, ``ev`` (from UDP source port and flow label), ``flags`` (``"A"``, ``"R"`` (rtx),
    ``"T"`` (ts)), ``dscp``, ``echoed_ev`` (SACK/NACK), ``nack_reason`` (NACK), ``m`` (SACK)
    and ``icrc``: ``"ok"``, ``"bad"`` or ``"none"`` (trimmed).
    """
    if MrcBTH not in frame:
        return {"opcode": None}
    bth = frame[MrcBTH]
    udp = frame[UDP]
    inner = udp.underlayer
    info = {
        "opcode": _OPCODE_NAMES.get(bth.opcode, f"0x{bth.opcode:02x}"),
        "qp": bth.dqpn, "psn": bth.psn,
        "flags": "".join(c for c, on in (("A", bth.ackreq), ("R", bth.rtx), ("T", bth.ts)) if on),
        "dscp": frame[IPv6].tc >> 2,
        "ev": ev_from_wire(frame[IPv6].fl & 0xFFFF, udp.sport),
        "icrc": "none" if bth.icrc is None else ("ok" if _icrc_ok(inner) else "bad"),
    }
    for layer, fields in ((SETH, ("ev", "m")), (NETH, ("ev", "nack_reason"))):
        if layer in frame:
            info["echoed_ev"] = frame[layer].ev
            info[fields[1]] = frame[layer].getfieldval(fields[1])
    return info


def _icrc_ok(inner: Packet) -> bool:
    try:
        return icrc_check(bytes(inner))
    except ValueError:
        return False


_OPCODE_NAMES = {int(op): op.name for op in Opcode}
