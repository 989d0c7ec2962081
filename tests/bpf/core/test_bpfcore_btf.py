"""mrckit.bpf: ctypes mirrors proven equal to the C structs through the object's BTF."""

import ctypes

import pytest

from support.bpfcore_helpers import CfgVal, PktStats
from mrckit import bpf


def test_mirrors_equal_the_c_layouts(need_bpf):
    stats = bpf.btf_struct_layout("test_maps", "pkt_stats")
    assert stats.size == 24
    assert {n: (f.offset, f.size) for n, f in stats.fields.items()} == {
        "packets": (0, 8), "bytes": (8, 8), "last_len": (16, 4), "kind": (20, 1), "pad": (21, 3)}
    assert bpf.layout_mismatches(PktStats, stats) == []
    with bpf.BpfObject.open("test_maps") as obj:
        assert bpf.layout_mismatches(CfgVal, bpf.btf_struct_layout(obj, "cfg_val")) == []


def test_a_wrong_mirror_is_reported(need_bpf):
    class Swapped(ctypes.Structure):
        _fields_ = [("bytes", ctypes.c_uint64), ("packets", ctypes.c_uint64),
                    ("last_len", ctypes.c_uint16), ("kind", ctypes.c_uint8)]
    problems = bpf.layout_mismatches(Swapped, bpf.btf_struct_layout("test_maps", "pkt_stats"))
    assert "size: ctypes 24 != C 24" not in problems
    assert "member pad: in C, missing in ctypes" in problems
    assert "member bytes: ctypes offset 0 size 8 != C offset 8 size 8" in problems
    assert "member last_len: ctypes offset 16 size 2 != C offset 16 size 4" in problems


def test_unknown_struct(need_bpf):
    with pytest.raises(bpf.BpfError, match="no struct or union 'nope'"):
        bpf.btf_struct_layout("test_maps", "nope")


class _BC(ctypes.Union):
    _fields_ = [("b", ctypes.c_uint32), ("c", ctypes.c_uint8 * 4)]


class LayoutProbe(ctypes.Structure):
    """Mirror of ``struct layout_probe``: an anonymous union and two bit fields."""
    _anonymous_ = ("bc",)
    _fields_ = [("a", ctypes.c_uint16), ("bc", _BC), ("flags", ctypes.c_uint8, 3),
                ("kind", ctypes.c_uint8, 5), ("d", ctypes.c_uint64)]


def test_anonymous_unions_and_bit_fields(need_bpf):
    layout = bpf.btf_struct_layout("test_maps", "layout_probe")
    assert (layout.size, layout.fields["d"].offset) == (24, 16)
    assert (layout.fields["b"].offset, layout.fields["c"].offset, layout.fields["c"].size) == (4, 4, 4)
    assert (layout.fields["flags"].bit_offset, layout.fields["flags"].bit_size) == (64, 3)
    assert (layout.fields["kind"].bit_offset, layout.fields["kind"].bit_size) == (67, 5)
    assert bpf.layout_mismatches(LayoutProbe, layout) == []

    class WrongBits(ctypes.Structure):
        _anonymous_ = ("bc",)
        _fields_ = [("a", ctypes.c_uint16), ("bc", _BC), ("flags", ctypes.c_uint8, 4),
                    ("kind", ctypes.c_uint8, 4), ("d", ctypes.c_uint64)]
    assert bpf.layout_mismatches(WrongBits, layout) == [
        "member flags: ctypes bits 64+4 != C 64+3", "member kind: ctypes bits 68+4 != C 67+5"]
