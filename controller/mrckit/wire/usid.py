"""uSID and uSID-container codecs (design section 3.3; RFC 9800 NEXT-C-SID, lblen 32, nflen 16).

A uSID is 16 bits: plane (15..12) | role (11..10) | index (9..0), role as in ``UsidRole``;
role 0 is reserved so that no uSID is 0x0000, the end-of-container marker.

A container is a 128-bit IPv6 destination address: a 32-bit locator followed by up to six
16-bit uSIDs, zero-padded. A uN switch whose uSID is first shifts the 96 bits after the
locator left by 16, zero-filled (RFC 9800 section 4.1, NEXT-C-SID flavor).
"""

import ipaddress
from typing import NamedTuple

from ._check import check_range
from .constants import MAX_USIDS_IN_CONTAINER, UsidRole

DEFAULT_LOCATOR = 0xFCBBBB00
"""fcbb:bb00::/32, the default uSID block (design section 3.1)."""
LOCATOR_BITS = 32
USID_BITS = 16
USID_PLANE_SHIFT = 12
USID_ROLE_SHIFT = 10
USID_ROLE_MASK = 0x3
USID_INDEX_MASK = 0x3FF
ACTIVE_PREFIX_BITS = LOCATOR_BITS + USID_BITS
"""The 48-bit key of ``my_usid`` and ``usid_fib``: locator and active uSID (design section 4)."""


class UsidFields(NamedTuple):
    """The fields of a uSID: plane (0..15), role (``UsidRole``), index (0..1023)."""

    plane: int
    role: UsidRole
    index: int  # type: ignore[assignment]  # the uSID field's name (design 3.2) shadows tuple.index


def usid_pack(plane: int, role: UsidRole | int, index: int) -> int:
    """Build a 16-bit uSID.

    Raises:
        ValueError: plane outside 0..15, role outside 1..3 (0 is reserved), index outside 0..1023.
    """
    check_range("plane", plane, 0, 15)
    check_range("role", int(role), 1, 3)
    check_range("index", index, 0, 1023)
    return (plane << USID_PLANE_SHIFT) | (int(role) << USID_ROLE_SHIFT) | index


def usid_unpack(usid: int) -> UsidFields:
    """Split a 16-bit uSID into (plane, role, index).

    Raises:
        ValueError: usid outside 1..65535, or with the reserved role 0.
    """
    check_range("usid", usid, 1, 0xFFFF)
    role = (usid >> USID_ROLE_SHIFT) & USID_ROLE_MASK
    if role == UsidRole.RESERVED:
        raise ValueError(f"usid=0x{usid:04x} has the reserved role 0")
    return UsidFields(usid >> USID_PLANE_SHIFT, UsidRole(role), usid & USID_INDEX_MASK)


def container_pack(usids: list[int], locator: int = DEFAULT_LOCATOR) -> int:
    """Build a uSID container (a 128-bit int) from a locator and 1..6 uSIDs, zero-padded.

    Raises:
        ValueError: more than 6 uSIDs, a uSID of 0 or over 16 bits, a locator over 32 bits.
    """
    check_range("locator", locator, 0, 0xFFFFFFFF)
    if len(usids) > MAX_USIDS_IN_CONTAINER:
        raise ValueError(f"usids has {len(usids)} entries; a container holds at most 6")
    value = locator
    for i, usid in enumerate(usids):
        check_range(f"usids[{i}]", usid, 1, 0xFFFF)
        value = (value << USID_BITS) | usid
    return value << (USID_BITS * (MAX_USIDS_IN_CONTAINER - len(usids)))


def container_unpack(da: int) -> tuple[int, list[int]]:
    """Split a container into (locator, uSIDs up to the first 0x0000 end marker).

    Raises:
        ValueError: ``da`` outside 0..2**128-1.
    """
    check_range("da", da, 0, (1 << 128) - 1)
    locator = da >> 96
    usids = []
    for i in range(MAX_USIDS_IN_CONTAINER):
        usid = (da >> (80 - USID_BITS * i)) & 0xFFFF
        if usid == 0:
            break
        usids.append(usid)
    return locator, usids


def un_shift(da: int) -> int:
    """Apply the uN step: keep the locator, shift the 96 bits after it left by 16, zero-fill.

    Raises:
        ValueError: ``da`` outside 0..2**128-1.
    """
    check_range("da", da, 0, (1 << 128) - 1)
    low96 = da & ((1 << 96) - 1)
    return (da & ~((1 << 96) - 1)) | ((low96 << USID_BITS) & ((1 << 96) - 1))


def active_prefix(da: int) -> int:
    """The first 48 bits of a DA (locator + active uSID): the key of ``my_usid`` and ``usid_fib``."""
    check_range("da", da, 0, (1 << 128) - 1)
    return da >> 80


def to_ipv6(value: int) -> ipaddress.IPv6Address:
    """A 128-bit int as an ``IPv6Address``."""
    return ipaddress.IPv6Address(value)
