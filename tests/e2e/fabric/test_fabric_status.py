"""`mrc fabric status NAME` lists the fabric's processes: node, kind, pid, running or not."""

import json

from support.fabric_helpers import mrc


def test_status_lists_every_process_with_its_pid_and_state(small_fabric):
    st = small_fabric.state
    out = mrc("fabric", "status", st.name, "--json")
    assert out.returncode == 0, out.stderr
    rows = {p["node"]: p for p in json.loads(out.stdout)["process_list"]}
    expected = {n: i.pid for n, i in {**st.switches, **st.hosts}.items()} | {"controller": st.controller["pid"]}
    assert {n: p["pid"] for n, p in rows.items()} == expected
    assert all(p["running"] for p in rows.values())
    assert rows["h0-0"]["kind"] == "host agent" and rows["controller"]["kind"] == "controller"

    text = mrc("fabric", "status", st.name)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    for node, pid in expected.items():
        assert any(node in ln and str(pid) in ln and "running" in ln for ln in lines), (node, text.stdout)
