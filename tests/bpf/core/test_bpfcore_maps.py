"""mrckit.bpf: typed map access, per-CPU values and sums, pinning and reuse of pinned maps."""

import ctypes
import os

import pytest

from support.bpfcore_helpers import CfgVal, PktStats, SharedVal
from mrckit import bpf

U32 = ctypes.c_uint32


def cfg_val(verdict: int, first_mac_byte: int = 0x02) -> CfgVal:
    return CfgVal((ctypes.c_uint8 * 6)(first_mac_byte, 1, 2, 3, 4, 5), 7, verdict)


@pytest.fixture
def loaded(need_bpf):
    with bpf.BpfObject.open("test_maps") as obj:
        yield obj.load()


def test_hash_update_lookup_iterate_delete(loaded):
    cfg = loaded.map("cfg", key_type=U32, value_type=CfgVal)
    assert (cfg.key_size, cfg.value_size, cfg.type_name, cfg.percpu) == (4, 12, "hash", False)
    for key in (1, 2, 3):
        cfg.update(key, cfg_val(key))
    assert sorted(cfg.keys()) == [1, 2, 3]
    assert {k: v.verdict for k, v in cfg.items()} == {1: 1, 2: 2, 3: 3}
    assert bytes(cfg.lookup(2)) == bytes(cfg_val(2))
    assert cfg.delete(2) is True and cfg.delete(2) is False
    assert cfg.lookup(2) is None
    assert cfg.clear() == 2 and list(cfg.keys()) == []


def test_untyped_map_speaks_bytes(loaded):
    cfg = loaded.map("cfg")
    cfg.update(b"\x05\x00\x00\x00", bytes(cfg_val(1)))
    assert list(cfg.keys()) == [b"\x05\x00\x00\x00"]
    assert cfg.lookup(5) == bytes(cfg_val(1))  # int keys: native byte order, as C sees them


def test_update_flags(loaded):
    cfg = loaded.map("cfg", key_type=U32, value_type=CfgVal)
    cfg.update(1, cfg_val(1), bpf.BPF_NOEXIST)
    with pytest.raises(bpf.BpfError) as info:
        cfg.update(1, cfg_val(2), bpf.BPF_NOEXIST)
    assert info.value.errno == 17  # EEXIST
    with pytest.raises(bpf.BpfError) as info:
        cfg.update(9, cfg_val(2), bpf.BPF_EXIST)
    assert info.value.errno == 2  # ENOENT
    assert cfg.lookup(1).verdict == 1


def test_wrong_sizes_are_refused(loaded):
    cfg = loaded.map("cfg")
    with pytest.raises(ValueError, match="key is 3 bytes, the map needs 4"):
        cfg.update(b"abc", bytes(12))
    with pytest.raises(ValueError, match="value is 11 bytes"):
        cfg.update(1, bytes(11))
    with pytest.raises(ValueError, match="does not fit"):
        cfg.lookup(1 << 40)
    with pytest.raises(bpf.BpfError, match="value type PktStats is 24 bytes, the map's value is 12"):
        loaded.map("cfg", value_type=PktStats)


def test_per_cpu_values_and_sum(loaded):
    stats = loaded.map("stats", key_type=U32, value_type=PktStats)
    ncpus = bpf.possible_cpus()
    assert stats.percpu and stats.ncpus == ncpus
    per_cpu = [PktStats(packets=cpu + 1, bytes=10 * (cpu + 1)) for cpu in range(ncpus)]
    stats.update(7, per_cpu)
    got = stats.lookup(7)
    assert [(v.packets, v.bytes) for v in got] == [(c + 1, 10 * (c + 1)) for c in range(ncpus)]
    total = stats.lookup_sum(7)
    assert (total.packets, total.bytes) == (sum(range(1, ncpus + 1)), 10 * sum(range(1, ncpus + 1)))
    stats.update(8, PktStats(packets=3))  # one value: written to every CPU
    assert stats.lookup_sum(8).packets == 3 * ncpus
    with pytest.raises(ValueError, match="possible CPUs"):
        stats.update(9, per_cpu + per_cpu)
    summed = dict(stats.items_sum())
    assert summed[7].packets == total.packets and summed[0].packets == 0


def test_sum_values_of_ints_and_arrays():
    assert bpf.sum_values([1, 2, 3]) == 6
    arr = bpf.sum_values([(ctypes.c_uint64 * 2)(1, 2), (ctypes.c_uint64 * 2)(10, 20)])
    assert list(arr) == [11, 22]
    with pytest.raises(ValueError):
        bpf.sum_values([])


def test_pinned_map_outlives_its_object(pin_dir):
    path = os.path.join(pin_dir, "cfg")
    with bpf.BpfObject.open("test_maps") as obj:
        obj.load().map("cfg", key_type=U32, value_type=CfgVal).update(4, cfg_val(3))
        obj.map("cfg").pin(path)
    with bpf.Map.from_pin(path, key_type=U32, value_type=CfgVal) as cfg:
        assert (cfg.name, cfg.type_name, cfg.max_entries) == ("cfg", "hash", 64)
        assert cfg.lookup(4).verdict == 3
    assert bpf.Map.unpin(path) is True and not os.path.exists(path)
    assert bpf.Map.unpin(path) is False
    with pytest.raises(bpf.BpfError) as info:
        bpf.Map.from_pin(path)
    assert info.value.errno == 2


def test_restarted_process_reattaches_to_pinned_state(pin_dir):
    path = os.path.join(pin_dir, "cfg")
    with bpf.BpfObject.open("test_maps") as first:
        first.load().map("cfg", key_type=U32, value_type=CfgVal).update(0, cfg_val(bpf.XDP_TX, 0xAA))
        first.map("cfg").pin(path)
    with bpf.BpfObject.open("test_maps") as second:
        assert second.map("cfg").reuse_pin(path) is True
        second.load()
        assert second.map("cfg", key_type=U32, value_type=CfgVal).lookup(0).verdict == bpf.XDP_TX
        # The new program really uses the pinned map: it rewrites the MAC from the old entry.
        res = second.program("xdp_count").test_run(bytes(14) + bytes(50))
    assert res.retval == bpf.XDP_TX and res.data[:6] == bytes([0xAA, 1, 2, 3, 4, 5])


def test_reuse_of_an_incompatible_pin_is_refused(pin_dir):
    path = os.path.join(pin_dir, "stats")
    with bpf.BpfObject.open("test_maps") as obj:
        obj.load().map("stats").pin(path)
    with bpf.BpfObject.open("test_maps") as obj:
        with pytest.raises(bpf.BpfError, match="differs from map cfg"):
            obj.map("cfg").reuse_pin(path)
        assert obj.map("cfg").reuse_pin(os.path.join(pin_dir, "absent")) is False


def test_set_pin_path_pins_then_reuses(pin_dir):
    path = os.path.join(pin_dir, "auto_cfg")
    with bpf.BpfObject.open("test_maps") as obj:
        obj.map("cfg").set_pin_path(path)
        obj.load().map("cfg").update(1, cfg_val(1))
    assert os.path.exists(path)
    with bpf.BpfObject.open("test_maps") as obj:
        obj.map("cfg").set_pin_path(path)
        assert obj.load().map("cfg", value_type=CfgVal).lookup(1).verdict == 1


def test_pinned_program_runs_after_its_object_closed(pin_dir):
    path = os.path.join(pin_dir, "prog")
    with bpf.BpfObject.open("test_xdp_pass") as obj:
        obj.load().program("xdp_pass").pin(path)
    prog = bpf.Program.from_pin(path)
    try:
        assert prog.test_run(bytes(60)).retval == bpf.XDP_PASS
    finally:
        prog.close()
    assert bpf.unpin(path)


def test_pin_path_rejects_traversal():
    assert bpf.pin_path("sw1", "ports") == "/sys/fs/bpf/mrckit/sw1/ports"
    with pytest.raises(ValueError, match="plain name"):
        bpf.pin_path("..", "x")
    with pytest.raises(bpf.BpfError, match="not under /sys/fs/bpf"):
        bpf.unpin("/etc/passwd")


def test_pin_root_pins_on_first_load_and_reuses_after(pin_dir):
    for expected in (3, 6):  # a second process sees the first one's count and adds to it
        with bpf.BpfObject.open("test_pinned", pin_root=pin_dir) as obj:
            obj.load().program("xdp_hits").test_run(bytes(60), repeat=3)
            assert obj.map("hits", value_type=ctypes.c_uint64).lookup(0) == expected
    assert os.listdir(pin_dir) == ["hits"]


# --- mmapable arrays (mrckit.bpf.mmapped) ---------------------------------------------------
def test_mmapped_field_writes_change_only_their_field_and_meet_the_programs(loaded):
    from mrckit.bpf.mmapped import MmapArray

    m = loaded.map("shared", key_type=U32, value_type=SharedVal)
    assert bpf.btf_struct_layout("test_maps", "shared_val").size == ctypes.sizeof(SharedVal)
    arr = MmapArray(m, SharedVal)
    try:
        for _ in range(3):
            loaded.program("xdp_shared_bump").test_run(bytes(64))
        arr.write(1, "config", cfg_val(7))
        arr.write(1, "limit", U32(99))
        loaded.program("xdp_shared_bump").test_run(bytes(64))
        kernel = m.lookup(1)  # bpf_map_lookup_elem: the same memory, seen through the kernel
        assert (kernel.hits, bytes(kernel.config), kernel.limit) == (4, bytes(cfg_val(7)), 99)
        assert arr.read(1, "hits").value == 4 and bytes(arr.read(1, "config")) == bytes(cfg_val(7))
        assert bytes(m.lookup(0)) == bytes(m.lookup(2)) == bytes(ctypes.sizeof(SharedVal))
    finally:
        arr.close()


def test_mmapped_array_refuses_what_it_cannot_map_or_name(loaded):
    from mrckit.bpf.mmapped import MmapArray

    with pytest.raises(bpf.BpfError, match="layout_probe: not an mmapable array"):
        MmapArray(loaded.map("layout_probe"), SharedVal)
    with pytest.raises(bpf.BpfError, match="shared: value type CfgVal is 12 bytes, the map's values are 24"):
        MmapArray(loaded.map("shared"), CfgVal)
    arr = MmapArray(loaded.map("shared"), SharedVal)
    with pytest.raises(bpf.BpfError, match=r"shared: index 3 outside 0\.\.2"):
        arr.read(3, "hits")
    with pytest.raises(bpf.BpfError, match="SharedVal has no field 'nope'"):
        arr.write(0, "nope", U32(1))
    with pytest.raises(bpf.BpfError, match="field 'limit' takes c_uint, not c_ulong"):
        arr.write(0, "limit", ctypes.c_uint64(1))
    arr.close()
    arr.close()  # idempotent
    with pytest.raises(bpf.BpfError, match="shared: the mapping is closed"):
        arr.read(0, "hits")
