"""The ctypes views of mrckit.host.maps equal the C structs of the mrc_host object (from its
BTF), and the counter/reason enums equal the C enums (ebpf/host/maps.h)."""

import ctypes
import re
from pathlib import Path

import pytest

from mrckit.bpf.btf import btf_struct_layout, layout_mismatches
from mrckit.host import maps

SRC = Path(__file__).resolve().parents[3] / "ebpf" / "host" / "maps.h"


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


def _c_enum(name: str) -> list[str]:
    body = re.search(r"enum %s \{(.*?)\};" % name, SRC.read_text(), re.S)[1]
    return [m for m in re.findall(r"^\s*(\w+)", body, re.M)]


def test_stat_and_reason_enums_match_c():
    assert [f"STAT_{s.name}" for s in maps.Stat] + ["STAT_MAX"] == _c_enum("host_stat")
    assert [f"REASON_{r.name}" for r in maps.Reason if r < 16] == _c_enum("ev_reason")


def test_slot_write_constants_match_c():
    assert [f"SLOT_WRITE_{r.name}" for r in maps.SlotWriteResult] == _c_enum("slot_write_result")
    flag = re.search(r"#define SLOT_WRITE_CLEAR_PENDING (\d+)", SRC.read_text())[1]
    assert maps.SLOT_WRITE_CLEAR_PENDING == int(flag)
