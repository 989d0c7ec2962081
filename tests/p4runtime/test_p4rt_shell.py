"""The real p4runtime-shell (its own virtualenv, its own process) programs the eBPF switch:
insert, read, modify and delete in every table, default entries, counter reads; the maps and
the forwarding follow every step."""

import subprocess

import pytest
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from support import p4rt
from support.p4rt_frames import XDP_DROP, XDP_REDIRECT, frame
from support.p4rt_harness import ROOT, load_p4info
from support.p4rt_shell import SHELL_PYTHON, shell

from mrckit.topology.entries import TableEntry
from mrckit.wire.constants import DropReason


@pytest.fixture
def need_shell():
    if not SHELL_PYTHON.exists():
        pytest.skip("p4runtime-shell virtualenv .venv-p4rt missing: run `make p4rt-shell`")


def test_p4runtime_shell_programs_every_table(need_shell, server, switch, tmp_path):
    switch.wire_ports([2, 3, 7], ingress=0)
    p4info = load_p4info()
    action_id = {a.preamble.alias: a.preamble.id for a in p4info.actions}
    pkt = frame("fcbb:bb00:101:1001::")

    out = shell(server.address, "setup", tmp_path)
    assert out["tables"] == {"my_usid": [], "usid_fib": [], "port_config": []}
    assert out["cells"] == 512 and len(out["drop_reason"]) == len(DropReason)

    out = shell(server.address, "write", tmp_path)
    assert out["tables"]["my_usid"] == [{"key": "fcbbbb000101", "action": action_id["usid_un"], "params": []}]
    assert out["tables"]["usid_fib"] == [{"key": "fcbbbb001001", "action": action_id["set_egress"], "params": ["02"]}]
    assert out["tables"]["port_config"] == [{"key": "02", "action": action_id["set_port"],
                                             "params": ["0200000000a2", "0200000000b2", "01", "64", "32"]}]
    assert out["default"] == ["07"]
    assert switch.tables.direct.read("port_config")[0].params["trim_threshold"] == 100
    assert switch.tables.direct.default("usid_fib") == TableEntry("usid_fib", {}, "set_egress", {"port": 7})
    verdict, data = switch.run(pkt)
    assert verdict == XDP_REDIRECT and Ether(data)[IPv6].dst == "fcbb:bb00:1001::"
    assert Ether(data).dst == "02:00:00:00:00:b2"
    assert shell(server.address, "read", tmp_path)["tx_port_2"] == [[2, 1, len(pkt)]]

    out = shell(server.address, "duplicate", tmp_path)
    assert out["error"] and "ALREADY_EXISTS" in out["error"]

    out = shell(server.address, "modify", tmp_path)
    assert out["tables"]["my_usid"][0]["action"] == action_id["NoAction"]
    assert out["tables"]["usid_fib"][0]["params"] == ["03"]
    assert out["tables"]["port_config"][0]["params"][1] == "0200000000c2"
    # my_usid now does nothing: uSID 0x0101 is looked up in the FIB, misses, and takes the default
    verdict, data = switch.run(pkt)
    assert verdict == XDP_REDIRECT and Ether(data)[IPv6].dst == "fcbb:bb00:101:1001::"
    assert shell(server.address, "read", tmp_path)["drop_reason"] == [[i, 0, 0] for i in range(len(DropReason))]

    out = shell(server.address, "delete", tmp_path)
    assert out["tables"] == {"my_usid": [], "usid_fib": [], "port_config": []}
    assert out["default"] == [""]
    assert switch.tables.direct.default("usid_fib") == TableEntry("usid_fib", {}, "drop")
    assert switch.run(pkt)[0] == XDP_DROP
    out = shell(server.address, "read", tmp_path)
    assert out["drop_reason"][2] == [2, 1, len(pkt)]  # no_route


def test_mrc_shell_opens_p4runtime_shell_on_the_server(need_shell, server, client, tmp_path):
    p4info = load_p4info()
    client.set_pipeline(p4info)
    client.write(*[p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", k, "drop")) for k in (1, 2, 3)])
    mrc = ROOT / ".venv/bin/mrc"
    script = "n = len(list(TableEntry('usid_fib').read()))\nprint('ENTRIES', n)\nexit\n"
    proc = subprocess.run([str(mrc), "shell", server.address, "--election-id", "0,0"], input=script,
                          capture_output=True, text=True, timeout=120)
    assert "ENTRIES 3" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_mrc_shell_without_the_virtualenv_is_a_clear_error(server, tmp_path):
    env = {**__import__("os").environ, "MRC_P4RT_PYTHON": str(tmp_path / "nope")}
    proc = subprocess.run([str(ROOT / ".venv/bin/mrc"), "shell", server.address], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "make p4rt-shell" in proc.stderr and "Traceback" not in proc.stderr


def test_p4runtime_shell_programs_members_groups_and_lpm_routes(need_shell, server, switch, tmp_path):
    """ecmp_selector and ipv6_fib through p4runtime-shell (EV-hash mode): the maps, the reads
    and the forwarding follow each step."""
    from support.p4rt_frames import ecmp_frame
    from mrckit.wire.ecmp import ev_member

    switch.wire_ports([1, 2, 4], ingress=0)
    set_egress = {a.preamble.alias: a.preamble.id for a in load_p4info().actions}["set_egress"]
    net_hex = "20010db8010000010000000000000000"
    shell(server.address, "setup", tmp_path)

    out = shell(server.address, "ecmp", tmp_path)
    assert out["members"] == [[2, set_egress, ["01"]], [3, set_egress, ["02"]]]
    assert out["groups"] == [[7, [[2, 1], [3, 1]]]]
    assert out["routes"] == [[net_hex, 64, "action_profile_group_id", 7],
                             [net_hex[:-1] + "2", 128, "action_profile_member_id", 3]]
    assert switch.groups() == {7: (2, 3)}
    assert {str(p): r for p, r in switch.routes().items()} == {
        "2001:db8:100:1::/64": ("group", 7), "2001:db8:100:1::2/128": ("member", 3)}
    for ev in (0x11, 0x2222, 0x30303, 0x4040404):
        verdict, data = switch.run(ecmp_frame(ev, "2001:db8:100:1::9"))
        assert verdict == XDP_REDIRECT and Ether(data)[IPv6].hlim == 63
    assert switch.tables.counters.read("tx_port", 1)[0] + switch.tables.counters.read("tx_port", 2)[0] == 4
    want = sum(ev_member([2, 3], ev) == 2 for ev in (0x11, 0x2222, 0x30303, 0x4040404))
    assert switch.tables.counters.read("tx_port", 1)[0] == want

    out = shell(server.address, "ecmp-bad", tmp_path)
    assert "UNIMPLEMENTED" in out["error"] and "weighted" in out["error"]

    out = shell(server.address, "ecmp-modify", tmp_path)
    assert out["members"][0] == [2, set_egress, ["04"]] and out["groups"] == [[7, [[2, 1]]]]
    assert out["routes"][1][2:] == ["action_profile_member_id", 2]
    switch.run(ecmp_frame(5, "2001:db8:100:1::2"))
    assert switch.tables.counters.read("tx_port", 4)[0] == 1  # the /128 names member 2, now port 4

    out = shell(server.address, "ecmp-delete", tmp_path)
    assert out["members"] == [] and out["groups"] == [] and out["routes"] == []
    assert switch.snapshot()["routes"] == {} and switch.members() == {}
    assert switch.run(ecmp_frame(5, "2001:db8:100:1::2"))[0] == XDP_DROP


def test_p4runtime_shell_reads_metadata_back_and_filters(need_shell, server, tmp_path):
    shell(server.address, "setup", tmp_path)
    out = shell(server.address, "metadata", tmp_path)
    tagged, plain = ["fcbbbb00a001", b"shell".hex()], ["fcbbbb00a002", ""]
    assert out["all"] == [tagged, plain]
    assert out["by_metadata"] == [tagged]
    assert out["by_action"] == [plain]
