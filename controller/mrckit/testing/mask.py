"""An expected packet with "don't care" bits, as p4lang PTF's ``Mask``: the switch may rewrite
some fields freely (a checksum, a timestamp), and the test states which.

>>> m = Mask(Ether() / IPv6(hlim=63) / UDP())           # doctest: +SKIP
>>> m.ignore(IPv6, "fl").ignore(UDP, "chksum")          # by scapy layer and field name
>>> m.matches(frame)

Offsets are in bits from the start of the frame (Ethernet onwards).
"""

from __future__ import annotations

from scapy.fields import BitField
from scapy.packet import Packet

from ..errors import MrcError


class Mask:
    """The bytes of ``packet`` (a scapy packet or bytes), each bit cared about unless told.

    Attributes:
        expected: the expected frame's bytes.
        mask: one byte per expected byte; a 1 bit is compared, a 0 bit is ignored.
        ignore_extra_bytes: whether a received frame may be longer than ``expected``.
        ignored: the fields ignored by name, for messages (``"IPv6.fl"``).
    """

    def __init__(self, packet: Packet | bytes, *, ignore_extra_bytes: bool = False):
        self.packet = packet if isinstance(packet, Packet) else None
        self.expected = bytes(packet)
        self.mask = bytearray(b"\xff" * len(self.expected))
        self.ignore_extra_bytes = ignore_extra_bytes
        self.ignored: list[str] = []

    def ignore_bits(self, offset: int, width: int) -> "Mask":
        """Ignore ``width`` bits from bit ``offset`` of the frame.

        Raises:
            MrcError: the range leaves the expected frame.
        """
        if offset < 0 or width <= 0 or offset + width > 8 * len(self.expected):
            raise MrcError(f"mask: bits {offset}..{offset + width - 1} are outside the {len(self.expected)}-byte "
                           "expected frame")
        for bit in range(offset, offset + width):
            self.mask[bit // 8] &= ~(0x80 >> (bit % 8)) & 0xFF
        self.ignored.append(f"bits {offset}+{width}")
        return self

    def ignore(self, layer: type[Packet] | str, field: str) -> "Mask":
        """Ignore one field of the first ``layer`` (a scapy class or its name) in the packet.

        Raises:
            MrcError: the mask was made from bytes, or the packet has no such layer or field.
        """
        offset, width = self.field_bits(layer, field)
        self.ignore_bits(offset, width)
        self.ignored[-1] = f"{_layer_name(layer)}.{field}"
        return self

    def ignore_from(self, offset_bytes: int) -> "Mask":
        """Ignore everything from byte ``offset_bytes`` on (a payload the switch may change)."""
        return self.ignore_bits(8 * offset_bytes, 8 * (len(self.expected) - offset_bytes))

    # PTF's names, for tests ported from PTF.
    def set_do_not_care(self, offset: int, bitwidth: int) -> None:
        """PTF's ``Mask.set_do_not_care``: :meth:`ignore_bits`."""
        self.ignore_bits(offset, bitwidth)

    def set_do_not_care_packet(self, hdr_type: type[Packet], field_name: str) -> None:
        """PTF's ``Mask.set_do_not_care_packet`` (``set_do_not_care_scapy``): :meth:`ignore`."""
        self.ignore(hdr_type, field_name)

    set_do_not_care_scapy = set_do_not_care_packet

    def set_ignore_extra_bytes(self) -> None:
        """PTF's ``Mask.set_ignore_extra_bytes``: a longer received frame still matches."""
        self.ignore_extra_bytes = True

    def matches(self, frame: bytes) -> bool:
        """Whether ``frame`` equals the expected bytes on every bit cared about."""
        n = len(self.expected)
        if len(frame) < n or (len(frame) > n and not self.ignore_extra_bytes):
            return False
        return all((a ^ b) & m == 0 for a, b, m in zip(frame[:n], self.expected, self.mask))

    def cared_bits(self, offset: int) -> int:
        """The mask byte at byte ``offset`` (0 past the end)."""
        return self.mask[offset] if offset < len(self.mask) else 0

    def field_bits(self, layer: type[Packet] | str, field: str) -> tuple[int, int]:
        """(bit offset, bit width) of ``field`` of the first ``layer`` in the packet.

        Raises:
            MrcError: no scapy packet, no such layer, or no such field.
        """
        if self.packet is None:
            raise MrcError("mask: made from bytes, so fields have no names: use ignore_bits(offset, width)")
        found = self.packet.getlayer(layer)
        if found is None:
            raise MrcError(f"mask: the expected packet has no {_layer_name(layer)} layer")
        start = 8 * (len(self.expected) - len(bytes(found)))
        found = found.__class__(bytes(found))      # computed fields (lengths) filled in
        bits = 0
        for fld in found.fields_desc:
            width = _field_bits(found, fld)
            if fld.name == field:
                return start + bits, width
            bits += width
        names = ", ".join(f.name for f in found.fields_desc)
        raise MrcError(f"mask: {_layer_name(layer)} has no field {field!r} (its fields: {names})")


def _layer_name(layer: type[Packet] | str) -> str:
    return layer if isinstance(layer, str) else layer.__name__


def _field_bits(pkt: Packet, fld) -> int:
    """Width in bits of ``fld`` as encoded in ``pkt``."""
    if isinstance(fld, BitField) or getattr(fld, "size", None) and not hasattr(fld, "sz"):
        return int(fld.size)
    raw = fld.addfield(pkt, b"", pkt.getfieldval(fld.name))
    return 8 * len(raw)
