"""The committed p4c outputs (p4src/build/) are p4c's, current, and carry the P4Runtime
contract of design section 4 exactly."""

import filecmp
import json
import subprocess
from pathlib import Path

import pytest
from google.protobuf import text_format

from finsy.proto import p4i
from mrckit.switch.bmv2 import DEFAULT_JSON, DEFAULT_P4INFO, REPO_ROOT, find_tool

EXACT, LPM = p4i.MatchField.EXACT, p4i.MatchField.LPM
USID_KEY = ("hdr.outer_ipv6.dst_addr[127:80]", 48, EXACT)
TABLES = {   # name -> (keys (name, bits, match type), actions, initial default action, size)
    "my_usid": ([USID_KEY], {"usid_un": [], "NoAction": []}, "NoAction", 4096),
    "usid_fib": ([USID_KEY], {"set_egress": [("port", 9)], "drop": []}, "drop", 65536),
    "port_config": ([("standard_metadata.egress_spec", 9, EXACT)],
                    {"set_port": [("src_mac", 48), ("dst_mac", 48), ("faces_host", 1),
                                  ("trim_threshold", 32), ("ecn_threshold", 32)], "NoAction": []},
                    "NoAction", 512),
    # EV-hash mode (docs/ecmp-mode.md). A table with an action profile has no
    # settable default on bmv2: p4c adds NoAction as its default-only miss action.
    "ipv6_fib": ([("hdr.outer_ipv6.dst_addr", 128, LPM)],
                 {"set_egress": [("port", 9)], "drop": [], "NoAction": []}, None, 65536),
}
DEFAULT_ONLY = {"ipv6_fib": {"NoAction"}}
ACTION_PROFILES = {"ecmp_selector": {"tables": ["ipv6_fib"], "with_selector": True, "size": 4096,
                                     "max_group_size": 256}}
SELECTOR_FIELDS = [["outer_ipv6", "flow_label"], ["udp", "src_port"]]
"""The EV hash input, in order (mrckit.wire.ecmp); selector fields are not in the P4Info."""
COUNTERS = {"rx_port": 512, "tx_port": 512, "trim_port": 512, "ecn_port": 512, "drop_port": 512,
            "drop_reason": 7}


def load_p4info(path: Path):
    return text_format.Parse(path.read_text(), p4i.P4Info())


def short(preamble) -> str:
    return preamble.alias or preamble.name.rsplit(".", 1)[-1]


def test_artifacts_committed():
    assert DEFAULT_JSON.is_file() and DEFAULT_P4INFO.is_file(), "run `make p4` and commit p4src/build/"


def test_p4info_is_the_contract():
    info = load_p4info(DEFAULT_P4INFO)
    actions = {a.preamble.id: a for a in info.actions}
    tables = {short(t.preamble): t for t in info.tables}
    assert set(tables) == set(TABLES)
    for name, (keys, acts, default, size) in TABLES.items():
        t = tables[name]
        assert [(m.name, m.bitwidth, m.match_type) for m in t.match_fields] == keys, name
        got = {short(actions[r.id].preamble): [(p.name, p.bitwidth) for p in actions[r.id].params]
               for r in t.action_refs}
        assert got == acts, name
        default_only = {short(actions[r.id].preamble) for r in t.action_refs
                        if r.scope == p4i.ActionRef.DEFAULT_ONLY}
        assert default_only == DEFAULT_ONLY.get(name, set()), name
        assert not t.const_default_action_id, f"{name}: the default action must stay writable"
        assert t.size == size, name
    profiles = {short(p.preamble): p for p in info.action_profiles}
    table_ids = {t.preamble.id: short(t.preamble) for t in info.tables}
    assert set(profiles) == set(ACTION_PROFILES)
    for name, want in ACTION_PROFILES.items():
        p = profiles[name]
        got = {"tables": [table_ids[i] for i in p.table_ids], "with_selector": p.with_selector,
               "size": p.size, "max_group_size": p.max_group_size}
        assert got == want, name
        for table in want["tables"]:
            assert tables[table].implementation_id == p.preamble.id, table
    counters = {short(c.preamble): c for c in info.counters}
    assert {n: c.size for n, c in counters.items()} == COUNTERS
    assert all(c.spec.unit == p4i.CounterSpec.BOTH for c in counters.values())


def test_json_default_actions():
    """The initial default actions of design section 4 (P4Info carries only const defaults)."""
    program = json.loads(DEFAULT_JSON.read_text())
    names = {a["id"]: a["name"].rsplit(".", 1)[-1] for a in program["actions"]}
    tables = {t["name"].rsplit(".", 1)[-1]: t for p in program["pipelines"] for t in p["tables"]}
    for name, (_, _, default, _) in TABLES.items():
        if default is not None:
            assert names[tables[name]["default_entry"]["action_id"]] == default, name


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
