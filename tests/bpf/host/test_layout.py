"""The ctypes views of mrckit.host.maps equal the C structs of the mrc_host object (from its
BTF). The counter and reason enums are generated from mrckit.host.maps (tests/unit/host/test_host_gen.py)."""

import ctypes

import pytest

from mrckit.bpf.btf import btf_struct_layout, layout_mismatches
from mrckit.host import maps


@pytest.mark.parametrize("ctype, cname", [
    (maps.HostConfigMap, "host_config"), (maps.PlanePort, "plane_port"), (maps.EvSlot, "ev_slot"),
    (maps.EvSet, "ev_set"), (maps.PlaneGroup, "plane_group"), (maps.LinkKey, "link_key"),
    (maps.TxRec, "tx_rec"), (maps.HostLoad, "host_load"), (maps.SlotWrite, "slot_write"),
])
def test_struct_layouts_match_btf(ctype, cname):
    assert layout_mismatches(ctype, btf_struct_layout("mrc_host", cname)) == []


def test_event_layout_matches_the_static_assert():
    # struct ev_event reaches BTF only through a pointer; the C side asserts these numbers.
    assert ctypes.sizeof(maps.EvEvent) == 32 and maps.EvEvent.ts_ns.offset == 24
    assert (maps.EvEvent.ev.offset, maps.EvEvent.reason.offset) == (16, 22)
