"""Bit layout of a scapy layer: (field name, bit offset, width in bits) for every field."""

from scapy.fields import ConditionalField


def _bits(field) -> int:
    fld = getattr(field, "fld", field)
    if hasattr(fld, "size"):  # BitField and BitEnumField: width in bits
        return int(fld.size)
    return fld.sz * 8


def py_layout(cls) -> list[tuple[str, int, int]]:
    """Fields of ``cls`` in order, skipping the ICRC trailer (a ConditionalField)."""
    out, offset = [], 0
    for field in cls.fields_desc:
        if isinstance(field, ConditionalField):
            continue
        bits = _bits(field)
        out.append((field.name, offset, bits))
        offset += bits
    return out
