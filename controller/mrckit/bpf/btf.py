"""Struct layouts read from an object's BTF, to prove ctypes mirrors equal to the C structs.

clang ``-g`` stores every struct of a BPF object in its BTF section. :func:`btf_struct_layout`
reads one back (size, and each member's offset and size in bytes); :func:`layout_mismatches`
compares it with a ``ctypes.Structure``. A test then asserts ``layout_mismatches(...) == []``.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any
from dataclasses import dataclass, field
from pathlib import Path

from . import _libbpf as L
from .errors import BpfError
from .objects import BpfObject, object_path


@dataclass
class FieldLayout:
    """One member: byte ``offset`` and ``size`` (bytes); bit fields give ``bit_offset``/``bit_size``
    (bits from the struct start) and a ``size`` of 0."""
    offset: int
    size: int
    bit_offset: int
    bit_size: int = 0


@dataclass
class StructLayout:
    """A C struct or union as BTF describes it: ``size`` in bytes and its members in order.
    Members of anonymous nested structs/unions appear flattened at their absolute offsets."""
    name: str
    size: int
    fields: dict[str, FieldLayout] = field(default_factory=dict)


def _kind(t: L.BtfType) -> int:
    return (t.info >> 24) & 0x1F


def _collect(btf: int, type_id: int, base_bits: int, out: StructLayout) -> None:
    lib = L.require()
    t = lib.btf__type_by_id(btf, type_id).contents
    kflag, vlen = t.info >> 31, t.info & 0xFFFF
    members = ctypes.cast(ctypes.addressof(t) + ctypes.sizeof(L.BtfType),
                          ctypes.POINTER(L.BtfMember * vlen)).contents
    for m in members:
        bit_size = m.offset >> 24 if kflag else 0
        bit_off = base_bits + (m.offset & 0xFFFFFF if kflag else m.offset)
        name = lib.btf__name_by_offset(btf, m.name_off).decode()
        if not name:
            # An anonymous struct/union: flatten its members (after skipping modifiers).
            _collect(btf, _strip(btf, m.type), bit_off, out)
            continue
        size = 0 if bit_size else lib.btf__resolve_size(btf, m.type)
        out.fields[name] = FieldLayout(bit_off // 8, max(size, 0), bit_off, bit_size)


def _strip(btf: int, type_id: int) -> int:
    # typedef (8), volatile (9), const (10), restrict (11), type_tag (18) wrap the real type.
    lib = L.require()
    while _kind(lib.btf__type_by_id(btf, type_id).contents) in (8, 9, 10, 11, 18):
        type_id = lib.btf__type_by_id(btf, type_id).contents.size
    return type_id


def btf_struct_layout(obj_or_path: BpfObject | str | os.PathLike, struct_name: str) -> StructLayout:
    """Layout of ``struct struct_name`` (or union) in an object's BTF.

    ``obj_or_path``: a :class:`BpfObject`, an object path, or a packaged object name.

    Raises:
        BpfError: the object has no BTF (built without ``-g``) or no such struct/union.
    """
    lib = L.require()
    if isinstance(obj_or_path, BpfObject):
        path = obj_or_path.path
    else:
        text = os.fspath(obj_or_path)
        path = Path(text) if ("/" in text or text.endswith(".o")) else object_path(text)
    btf = L.check_ptr(lib.btf__parse(os.fsencode(path), None), f"read BTF of {path}")
    try:
        for kind in (L.BTF_KIND_STRUCT, L.BTF_KIND_UNION):
            type_id = lib.btf__find_by_name_kind(btf, struct_name.encode(), kind)
            if type_id > 0:
                break
        else:
            raise BpfError(f"{path.name} has no struct or union {struct_name!r} in its BTF "
                           "(is it used by the program? unused types are dropped)")
        layout = StructLayout(struct_name, int(lib.btf__resolve_size(btf, type_id)))
        _collect(btf, type_id, 0, layout)
        return layout
    finally:
        lib.btf__free(btf)


def ctypes_layout(ctype: type) -> StructLayout:
    """The layout of a ctypes Structure/Union in the same form as :func:`btf_struct_layout`
    (members of ``_anonymous_`` fields flattened, like C's anonymous structs/unions)."""
    layout = StructLayout(ctype.__name__, ctypes.sizeof(ctype))
    _ctypes_members(ctype, 0, layout)
    return layout


def _ctypes_members(ctype: Any, base: int, out: StructLayout) -> None:
    anonymous = set(getattr(ctype, "_anonymous_", ()))
    for spec in ctype._fields_:
        name, desc = spec[0], getattr(ctype, spec[0])
        if name in anonymous:
            _ctypes_members(spec[1], base + desc.offset, out)
        elif len(spec) == 3:  # bit field: CPython packs (width << 16 | bit offset) in size
            bit_off = (base + desc.offset) * 8 + (desc.size & 0xFFFF)
            out.fields[name] = FieldLayout(bit_off // 8, 0, bit_off, desc.size >> 16)
        else:
            out.fields[name] = FieldLayout(base + desc.offset, desc.size, (base + desc.offset) * 8)


def layout_mismatches(ctype: type, layout: StructLayout) -> list[str]:
    """Differences between a ctypes Structure/Union and a BTF layout; ``[]`` when they agree.

    Compares total size, the set of member names, and each member's offset and size (bit
    fields: bit offset and width).
    """
    mine = ctypes_layout(ctype)
    problems = []
    if mine.size != layout.size:
        problems.append(f"size: ctypes {mine.size} != C {layout.size}")
    for missing in sorted(set(layout.fields) - set(mine.fields)):
        problems.append(f"member {missing}: in C, missing in ctypes")
    for extra in sorted(set(mine.fields) - set(layout.fields)):
        problems.append(f"member {extra}: in ctypes, missing in C")
    for name, got in mine.fields.items():
        want = layout.fields.get(name)
        if want is None:
            continue
        if want.bit_size or got.bit_size:
            if (got.bit_offset, got.bit_size) != (want.bit_offset, want.bit_size):
                problems.append(f"member {name}: ctypes bits {got.bit_offset}+{got.bit_size} != C "
                                f"{want.bit_offset}+{want.bit_size}")
        elif (got.offset, got.size) != (want.offset, want.size):
            problems.append(f"member {name}: ctypes offset {got.offset} size {got.size} != "
                            f"C offset {want.offset} size {want.size}")
    return problems
