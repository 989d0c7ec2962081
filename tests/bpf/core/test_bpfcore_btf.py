"""mrckit.bpf: ctypes mirrors proven equal to the C structs through the object's BTF."""

import ctypes

import pytest

from bpfcore_helpers import CfgVal, PktStats
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
