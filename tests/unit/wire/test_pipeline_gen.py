"""One pipeline contract: the committed C and P4 headers of the switch pipeline are exactly what
``python -m mrckit.wire.gen`` renders from ``mrckit.wire.pipeline``, and the programs take their
sizes from them rather than from literals of their own."""

import dataclasses
import re

from mrckit.wire import gen, pipeline
from mrckit.wire.gen import OUTPUTS, all_constants, pipeline_constants, render_pipeline_c, stale_files
from mrckit.wire.pipeline import MRC_SWITCH

from support.paths import ROOT

PIPELINE_FILES = ["ebpf/include/mrc_pipeline_gen.h", "p4src/include/mrc_pipeline.p4"]


def _defines(text: str) -> dict[str, int]:
    return {n: int(v, 0) for n, v in re.findall(r"#define (MRC_\w+) (0x[0-9a-f]+|\d+)U?", text)}


def test_pipeline_files_are_generated_outputs():
    assert set(PIPELINE_FILES) <= set(OUTPUTS)
    for rel in PIPELINE_FILES:
        assert (ROOT / rel).read_text() == OUTPUTS[rel](), f"{rel} is stale: run python -m mrckit.wire.gen"


def test_a_table_size_changed_in_the_contract_alone_is_stale(monkeypatch):
    assert not set(PIPELINE_FILES) & set(stale_files(ROOT))
    fib = MRC_SWITCH.table("usid_fib")
    bigger = dataclasses.replace(MRC_SWITCH, tables=tuple(
        dataclasses.replace(t, size=t.size * 2) if t is fib else t for t in MRC_SWITCH.tables))
    monkeypatch.setattr(pipeline, "MRC_SWITCH", bigger)
    assert set(stale_files(ROOT)) == set(PIPELINE_FILES)
    assert _defines(render_pipeline_c())["MRC_USID_FIB_SIZE"] == fib.size * 2


def test_headers_carry_the_contract():
    c = _defines((ROOT / "ebpf/include/mrc_pipeline_gen.h").read_text())
    p4 = _defines((ROOT / "p4src/include/mrc_pipeline.p4").read_text())
    assert c == pipeline_constants()
    for t in MRC_SWITCH.tables:
        assert c[f"MRC_{t.name.upper()}_SIZE"] == p4[f"MRC_{t.name.upper()}_SIZE"] == t.size
    sel = MRC_SWITCH.action_profile("ecmp_selector")
    assert (p4["MRC_ECMP_SELECTOR_SIZE"], p4["MRC_ECMP_SELECTOR_MAX_GROUP_SIZE"]) == (sel.size, sel.max_group_size)
    assert c["MRC_ECMP_SELECTOR_MAX_GROUPS"] == sel.max_groups
    assert {n.removeprefix("MRC_ACTION_").lower(): v for n, v in c.items() if n.startswith("MRC_ACTION_")} == \
        {n.lower(): v for n, v in pipeline.BPF_ACTION_IDS.items()}
    assert p4.items() <= c.items()  # the P4 header is the subset the P4 program has a use for


def test_one_name_per_constant_across_wire_and_pipeline():
    assert not set(pipeline_constants()) & set(all_constants())


def test_masked_sizes_are_powers_of_two():
    """The BPF program masks indexes with N - 1 for these, which needs N a power of two."""
    for n in (pipeline.USID_SLOTS, pipeline.IFINDEX_SLOTS, MRC_SWITCH.action_profile("ecmp_selector").max_group_size):
        assert n & (n - 1) == 0, n


def test_programs_use_the_generated_sizes():
    """No size literal is left in the P4 tables or the BPF maps: they name the generated constants."""
    p4 = (ROOT / "p4src/mrc_switch.p4").read_text()
    assert '#include "include/mrc_pipeline.p4"' in p4
    assert not re.findall(r"\bsize\s*=\s*\d", p4)
    assert not re.findall(r"counter\(\d", p4) and not re.findall(r"action_selector\([^,]+,\s*\d", p4)
    bpf = (ROOT / "ebpf/mrc_switch.bpf.c").read_text()
    assert '#include "mrc_pipeline_gen.h"' in bpf
    assert re.findall(r"max_entries,\s*(\d+)", bpf) == ["1"]  # only ipv6_fib_state, a one-cell flag
    assert not re.findall(r"^#define (MAX_PORTS|NEVER|\w*SLOTS)\b", bpf, re.M)


def test_gen_writes_them(tmp_path):
    (tmp_path / "ebpf/include").mkdir(parents=True)
    (tmp_path / "p4src/include").mkdir(parents=True)
    written = gen.write_all(tmp_path)
    assert set(PIPELINE_FILES) <= set(written)
    assert stale_files(tmp_path) == []
