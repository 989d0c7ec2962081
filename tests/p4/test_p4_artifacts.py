"""The committed p4c outputs (p4src/build/) are p4c's, current, and carry the P4Runtime
contract of design section 4 exactly: the pipeline contract ``mrckit.wire.pipeline.MRC_SWITCH``.

P4Runtime ids are p4c's (P4Runtime spec 1.4 section 6.3: ids derived from names); the contract
fixes names, not ids, so only the references between ids are checked."""

import filecmp
import json
import subprocess
from pathlib import Path

import pytest
from google.protobuf import text_format

from finsy.proto import p4i
from mrckit.switch.bmv2 import DEFAULT_JSON, DEFAULT_P4INFO, find_tool
from mrckit.wire.pipeline import MRC_SWITCH

from support.paths import ROOT as REPO_ROOT

MATCH_KINDS = {"exact": p4i.MatchField.EXACT, "lpm": p4i.MatchField.LPM,
               "ternary": p4i.MatchField.TERNARY, "optional": p4i.MatchField.OPTIONAL}
SELECTOR_FIELDS = [["outer_ipv6", "flow_label"], ["udp", "src_port"]]
"""The EV hash input, in order (mrckit.wire.ecmp); selector fields are not in the P4Info."""


def load_p4info(path: Path):
    return text_format.Parse(path.read_text(), p4i.P4Info())


def short(preamble) -> str:
    return preamble.alias or preamble.name.rsplit(".", 1)[-1]


def contract_view() -> dict:
    """The contract in the shape :func:`p4info_view` reads a P4Info into."""
    return {
        "tables": {t.name: {"keys": [(k.name, k.bits, MATCH_KINDS[k.match]) for k in t.keys],
                            "actions": {a.name: list(a.params) for a in t.actions},
                            "default_only": set(t.default_only), "size": t.size,
                            "implementation": t.implementation, "const_default": False}
                   for t in MRC_SWITCH.tables},
        "actions": {a.name for t in MRC_SWITCH.tables for a in t.actions},
        "action_profiles": {p.name: {"tables": list(p.tables), "with_selector": p.with_selector,
                                     "size": p.size, "max_group_size": p.max_group_size}
                            for p in MRC_SWITCH.action_profiles},
        "counters": {c.name: (c.size, p4i.CounterSpec.BOTH) for c in MRC_SWITCH.counters},
    }


def p4info_view(info) -> dict:
    """Names, widths, match kinds, actions, sizes, profiles and counters of a P4Info."""
    actions = {a.preamble.id: a for a in info.actions}
    profiles = {p.preamble.id: short(p.preamble) for p in info.action_profiles}
    table_names = {t.preamble.id: short(t.preamble) for t in info.tables}
    return {
        "tables": {short(t.preamble): {
            "keys": [(m.name, m.bitwidth, m.match_type) for m in t.match_fields],
            "actions": {short(actions[r.id].preamble): [(p.name, p.bitwidth) for p in actions[r.id].params]
                        for r in t.action_refs},
            "default_only": {short(actions[r.id].preamble) for r in t.action_refs
                             if r.scope == p4i.ActionRef.DEFAULT_ONLY},
            "size": t.size,
            "implementation": profiles.get(t.implementation_id),
            "const_default": bool(t.const_default_action_id)} for t in info.tables},
        "actions": {short(a.preamble) for a in info.actions},
        "action_profiles": {short(p.preamble): {"tables": [table_names[i] for i in p.table_ids],
                                                "with_selector": p.with_selector, "size": p.size,
                                                "max_group_size": p.max_group_size}
                            for p in info.action_profiles},
        "counters": {short(c.preamble): (c.size, c.spec.unit) for c in info.counters},
    }


def test_artifacts_committed():
    assert DEFAULT_JSON.is_file() and DEFAULT_P4INFO.is_file(), "run `make p4` and commit p4src/build/"


def test_p4info_is_the_contract():
    """Every table, key, action, parameter, size, action profile and counter, both ways."""
    got, want = p4info_view(load_p4info(DEFAULT_P4INFO)), contract_view()
    for part in want:
        assert got[part] == want[part], f"P4Info {part} differ from mrckit.wire.pipeline"
    assert not info_extras(load_p4info(DEFAULT_P4INFO)), "P4Info objects the contract does not declare"


def info_extras(info) -> list[str]:
    """P4Info objects outside the contract's kinds (direct counters, meters, registers, digests...)."""
    kinds = ("direct_counters", "meters", "direct_meters", "registers", "digests", "controller_packet_metadata",
             "value_sets", "externs")
    return [k for k in kinds if len(getattr(info, k))]


def test_contract_view_sees_a_changed_size():
    """The comparison above can fail: a P4Info with another table size reads differently."""
    info = load_p4info(DEFAULT_P4INFO)
    info.tables[0].size += 1
    assert p4info_view(info)["tables"] != contract_view()["tables"]


def test_json_default_actions():
    """The initial default actions of the contract (P4Info carries only const defaults)."""
    program = json.loads(DEFAULT_JSON.read_text())
    names = {a["id"]: a["name"].rsplit(".", 1)[-1] for a in program["actions"]}
    tables = {t["name"].rsplit(".", 1)[-1]: t for p in program["pipelines"] for t in p["tables"]}
    for spec in MRC_SWITCH.tables:
        if spec.implementation:  # bmv2 has no settable default here: the P4Info's default-only action
            assert "default_entry" not in tables[spec.name] and spec.default_action in spec.default_only, spec.name
        else:
            assert names[tables[spec.name]["default_entry"]["action_id"]] == spec.default_action, spec.name


def test_json_selector_hashes_the_ev():
    """bmv2's selector: CRC-32 over the flow label then the UDP source port (mrckit.wire.ecmp)."""
    program = json.loads(DEFAULT_JSON.read_text())
    profiles = {p["name"].rsplit(".", 1)[-1]: p for pl in program["pipelines"] for p in pl["action_profiles"]}
    selector = profiles["ecmp_selector"]["selector"]
    assert selector["algo"] == "crc32"
    assert [f["value"] for f in selector["input"]] == SELECTOR_FIELDS


def test_committed_outputs_are_current(tmp_path):
    """Recompile with `make p4` into a temporary folder; the committed files must be equal."""
    p4c = find_tool("p4c-bm2-ss")
    if p4c is None:
        pytest.skip("p4c-bm2-ss not found on PATH or in /opt/p4tools/bin: cannot check staleness")
    proc = subprocess.run(["make", "-s", "p4", f"P4C={p4c}", f"P4_OUT={tmp_path}"], cwd=REPO_ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"p4c failed:\n{proc.stdout}\n{proc.stderr}"
    for name in (DEFAULT_JSON.name, DEFAULT_P4INFO.name):
        assert filecmp.cmp(tmp_path / name, REPO_ROOT / "p4src" / "build" / name, shallow=False), \
            f"p4src/build/{name} is stale: run `make p4` and commit it"
