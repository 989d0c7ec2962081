"""The EV hash of EV-hash (ECMP) mode: which member of an ECMP group a packet takes.

In EV-hash mode the switches, not the hosts, spray: table ``ipv6_fib`` of the P4 program is
implemented by the action selector ``ecmp_selector``, whose selector fields are the flow label
and the UDP source port, which together carry the EV (design section 3.1). Both switch targets
must pick the same member for the same packet, so the hash is the one bmv2 computes for
``action_selector(HashAlgorithm.crc32, ...)`` (behavioral-model ``src/bm_sim/calculations.cpp``
and ``action_profile.cpp``), and the eBPF switch reimplements exactly that:

1. **Input bytes.** The selector fields are packed most significant bit first, in key order,
   with no gap between them, and the last byte is padded with zero bits. A field of an invalid
   header (no UDP header in the frame) is left out. So with UDP the input is 5 bytes,
   ``flow_label (20 bits) | udp_sport (16 bits) | 0000``; without it, 3 bytes,
   ``flow_label (20 bits) | 0000``.
2. **Hash.** CRC-32 as in IEEE 802.3 and zlib: polynomial 0x04C11DB7, reflected input and
   output, initial value and final XOR 0xFFFFFFFF.
3. **Member.** ``members[hash % len(members)]``, where ``members`` are the group's member ids
   in ascending order. bmv2 orders a group by its internal member handles, which follow the
   member ids when members are created in ascending id order and never deleted and re-created;
   mrckit's controller does both, and the conformance suite checks the agreement.
"""

import zlib

from ._check import check_range

FLOW_LABEL_BITS = 20
UDP_PORT_BITS = 16


def ecmp_hash_input(flow_label: int, udp_sport: int | None) -> bytes:
    """The bytes the selector hashes: 5 bytes with a UDP source port, 3 without.

    Args:
        flow_label: the IPv6 flow label, 20 bits.
        udp_sport: the UDP source port (16 bits), or None when the frame has no UDP header.

    Raises:
        ValueError: a field out of range.
    """
    check_range("flow_label", flow_label, 0, (1 << FLOW_LABEL_BITS) - 1)
    if udp_sport is None:
        return (flow_label << 4).to_bytes(3, "big")
    check_range("udp_sport", udp_sport, 0, (1 << UDP_PORT_BITS) - 1)
    return ((flow_label << 20) | (udp_sport << 4)).to_bytes(5, "big")


def ecmp_hash(flow_label: int, udp_sport: int | None) -> int:
    """The 32-bit EV hash of a packet (CRC-32 of :func:`ecmp_hash_input`).

    Raises:
        ValueError: a field out of range.
    """
    return zlib.crc32(ecmp_hash_input(flow_label, udp_sport))


def ecmp_member(members: list[int] | tuple[int, ...], flow_label: int, udp_sport: int | None) -> int:
    """The member id that a group of ``members`` picks for this packet.

    Args:
        members: the group's member ids, any order (they are sorted here), at least one.

    Raises:
        ValueError: an empty group, or a field out of range.
    """
    if not members:
        raise ValueError("an ECMP group with no members picks nothing")
    ordered = sorted(members)
    return ordered[ecmp_hash(flow_label, udp_sport) % len(ordered)]


def ev_member(members: list[int] | tuple[int, ...], ev: int) -> int:
    """The member id an MRC packet carrying ``ev`` takes (flow label = EV bits 15..0, UDP
    source port = EV bits 31..16, design section 3.1).

    Raises:
        ValueError: an empty group or ``ev`` outside 0..2**32-1.
    """
    check_range("ev", ev, 0, 0xFFFFFFFF)
    return ecmp_member(members, ev & 0xFFFF, ev >> 16)
