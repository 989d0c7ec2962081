"""Entropy value (EV) codecs, design section 3.3 ("generated" EV profile, ours).

An EV is 32 bits: plane (bits 31..28) | T1 index within the plane (27..20) | salt (19..0).
On the wire it is split: UDP source port = EV bits 31..16, outer (and inner) flow label =
EV bits 15..0, with the flow label's top 4 bits zero (design section 3.1). The bit order is
unverified against the spec [L], so it lives only here and in the generated C/P4 views.
"""

from typing import NamedTuple

from ._check import check_range

EV_BITS = 32
PLANE_SHIFT = 28
T1_SHIFT = 20
SALT_BITS = 20
SALT_MASK = (1 << SALT_BITS) - 1
PLANE_MASK = 0xF
T1_MASK = 0xFF
EV_SPORT_SHIFT = 16
"""UDP source port = EV >> 16; flow label = EV & 0xFFFF (design section 3.1)."""
EV_FLOW_LABEL_MASK = 0xFFFF


class EvFields(NamedTuple):
    """The fields of an EV: plane (0..15), T1 index (0..255), salt (0..2**20-1)."""

    plane: int
    t1: int
    salt: int


def ev_pack(plane: int, t1: int, salt: int = 0) -> int:
    """Build a 32-bit EV from its fields.

    Raises:
        ValueError: a field out of range (plane 0..15, t1 0..255, salt 0..1048575).
    """
    check_range("plane", plane, 0, 15)
    check_range("t1", t1, 0, 255)
    check_range("salt", salt, 0, SALT_MASK)
    return (plane << PLANE_SHIFT) | (t1 << T1_SHIFT) | salt


def ev_unpack(ev: int) -> EvFields:
    """Split a 32-bit EV into (plane, t1, salt).

    Raises:
        ValueError: ``ev`` outside 0..2**32-1.
    """
    check_range("ev", ev, 0, 0xFFFFFFFF)
    return EvFields(ev_plane(ev), ev_t1(ev), ev & SALT_MASK)


def ev_plane(ev: int) -> int:
    """The plane of a 32-bit EV (bits 31..28). Unchecked: for hot paths over EVs already
    known to be 32-bit (map slots, parsed headers); use :func:`ev_unpack` on user input."""
    return ev >> PLANE_SHIFT


def ev_t1(ev: int) -> int:
    """The T1 index within the plane of a 32-bit EV (bits 27..20). Unchecked, as
    :func:`ev_plane`."""
    return (ev >> T1_SHIFT) & T1_MASK


def ev_to_wire(ev: int) -> tuple[int, int]:
    """Return (flow_label, udp_sport) for an EV: (EV bits 15..0, EV bits 31..16).

    Raises:
        ValueError: ``ev`` outside 0..2**32-1.
    """
    check_range("ev", ev, 0, 0xFFFFFFFF)
    return ev & 0xFFFF, ev >> 16


def ev_from_flowinfo(flowinfo: int, udp_sport: int) -> int:
    """The 32-bit EV of a received packet from the socket's ``IPV6_FLOWINFO`` value (the flow
    label, possibly with the traffic class above it: only bits 15..0 are EV bits) and the UDP
    source port (0..65535). Unchecked, for hot paths over kernel-reported values;
    :func:`ev_from_wire` checks its arguments."""
    return (udp_sport << EV_SPORT_SHIFT) | (flowinfo & EV_FLOW_LABEL_MASK)


def ev_from_wire(flow_label: int, udp_sport: int) -> int:
    """Rebuild the EV from a 20-bit flow label and a UDP source port.

    The flow label's top 4 bits are not part of the EV and must be zero.

    Raises:
        ValueError: flow_label outside 0..65535 or udp_sport outside 0..65535.
    """
    check_range("flow_label", flow_label, 0, 0xFFFF)
    check_range("udp_sport", udp_sport, 0, 0xFFFF)
    return (udp_sport << 16) | flow_label
