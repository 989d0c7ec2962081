"""Switch and host targets from a topology (p4runtime:/agent: fields and overrides), the
pipeline loader, switch lookup in a topology file and the CLI's user errors."""

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from mrckit.cli import main
from mrckit.control import (
    Controller, HostTarget, SwitchTarget, host_config_proto, load_pipeline, saved_status_path, targets_from_topology,
)
from mrckit.control.lookup import resolve_switch
from mrckit.errors import MrcError
from mrckit.topology import GrpcEndpoint, GrpcTls, compile_fabric, dumps_topology, generate_clos, loads_topology

P4INFO_FILE = Path(__file__).resolve().parents[3] / "p4src/build/mrc_switch.p4info.txtpb"


def addressed(topo, device_id=None, tls=None):
    sw = [dataclasses.replace(s, p4runtime=GrpcEndpoint(f"unix:/run/t/{s.name}.sock", device_id, tls))
          for s in topo.switches]
    hs = [dataclasses.replace(h, agent=GrpcEndpoint(f"unix:/run/t/{h.name}.sock")) for h in topo.hosts]
    return dataclasses.replace(topo, switches=tuple(sw), hosts=tuple(hs))


def test_topology_endpoints_round_trip_through_yaml():
    topo = addressed(generate_clos(), 0, GrpcTls("ca.pem", "c.pem", "k.pem", "sw.example"))
    again = loads_topology(dumps_topology(topo))
    assert again.switches == topo.switches and again.hosts == topo.hosts
    switches, hosts = targets_from_topology(again)
    assert switches[0] == SwitchTarget("p0-t0-0", "unix:/run/t/p0-t0-0.sock", 0,
                                       GrpcTls("ca.pem", "c.pem", "k.pem", "sw.example"))
    assert [h.name for h in hosts] == [h.name for h in topo.hosts]


@pytest.mark.parametrize("edit, message", [
    (("device_id: 0", "device_id: x"), "device_id must be an integer"),
    (("device_id: 0", "device_id: 18446744073709551616"), "device_id 18446744073709551616"),
    (('cert: "c.pem", ', ""), "'cert' and 'key' go together"),
    (("tls: {ca: \"ca.pem\", ", "tls: {"), "missing key 'ca'"),
    (("device_id: 0", "port: 0"), "unknown key 'port'"),
])
def test_bad_endpoint_fields_name_the_line(edit, message):
    text = dumps_topology(addressed(generate_clos(), 0, GrpcTls("ca.pem", "c.pem", "k.pem")))
    with pytest.raises(MrcError, match=message) as exc:
        loads_topology(text.replace(*edit, 1), "t.yaml")
    assert str(exc.value).startswith("t.yaml:9: switch p0-t0-0: p4runtime")


def test_device_id_default_and_overrides():
    topo = addressed(generate_clos())
    switches, _ = targets_from_topology(topo, {"p0-t1-1": ("127.0.0.1:9559", 7)}, {"h0-0": "[::1]:5000"},
                                        device_id=0, nic_device="veth-nic")
    by = {t.name: t for t in switches}
    assert by["p0-t0-0"].device_id == 0 and by["p0-t1-1"] == SwitchTarget("p0-t1-1", "127.0.0.1:9559", 7)
    _, hosts = targets_from_topology(topo, host_addresses={"h0-0": "[::1]:5000"}, nic_device="veth-nic")
    assert hosts[0] == HostTarget("h0-0", "[::1]:5000", "veth-nic")


def test_switches_without_address_and_unknown_overrides_are_errors():
    topo = generate_clos()
    with pytest.raises(MrcError, match=r"no P4Runtime address for switch p0-t0-0, .* and 6 more"):
        targets_from_topology(topo)
    with pytest.raises(MrcError, match="no switch named 'p9-t0-0'"):
        targets_from_topology(topo, {"p9-t0-0": ("unix:/x", None)})
    all_named = {s.name: (f"unix:/s/{s.name}", None) for s in topo.switches}
    switches, hosts = targets_from_topology(topo, all_named)
    assert len(switches) == 10 and hosts == [] and switches[0].device_id == 1


def test_host_config_message_matches_the_compiled_config():
    cfg = compile_fabric(generate_clos()).host("h1-1")
    msg = host_config_proto(cfg, "nic0")
    assert msg.nic_address == "2001:db8:100:1::2" and msg.nic_device == "nic0"
    assert list(msg.t1_per_plane) == [2, 2] and msg.locator == 0xFCBBBB00
    assert [(p.plane, p.link, p.address) for p in msg.ports] == [
        (0, "p0/t0-1/down-1", "2001:db8:200:1::2"), (1, "p1/t0-1/down-1", "2001:db8:201:1::2")]
    assert msg.ports[0].mac.count(":") == 5 and msg.ports[0].neighbor_mac != msg.ports[0].mac


def test_pipeline_cookie_follows_the_content(tmp_path):
    a = load_pipeline(P4INFO_FILE, b"{}")
    assert load_pipeline(P4INFO_FILE, b"{}").cookie == a.cookie
    assert load_pipeline(P4INFO_FILE, b'{"x": 1}').cookie != a.cookie
    assert a.config().cookie.cookie == a.cookie and a.config().p4_device_config == b"{}"
    with pytest.raises(MrcError, match="P4Info .*nope.txtpb"):
        load_pipeline(tmp_path / "nope.txtpb", b"{}")
    (tmp_path / "bad.txtpb").write_text("tables { nonsense")
    with pytest.raises(MrcError, match="not a P4Info text proto"):
        load_pipeline(tmp_path / "bad.txtpb", b"{}")


def test_a_target_outside_the_topology_is_refused():
    with pytest.raises(MrcError, match="no host named 'nobody'"):
        Controller(generate_clos(), [], [HostTarget("nobody", "unix:/x")], load_pipeline(P4INFO_FILE, b"{}"),
                   run_dir=None)


def test_switch_lookup_in_a_topology_file(tmp_path):
    topo_file = tmp_path / "t.yaml"
    topo_file.write_text(dumps_topology(addressed(generate_clos(), 3)))
    assert resolve_switch("p0-t1-0", topo_file) == SwitchTarget("p0-t1-0", "unix:/run/t/p0-t1-0.sock", 3)
    with pytest.raises(MrcError, match="no running controller .*sockets in .* manages a switch named 'p0-t1-0'"):
        resolve_switch("p0-t1-0", run_dir=tmp_path)
    with pytest.raises(MrcError, match="controller name 'a/b'"):
        saved_status_path("a/b", tmp_path)


@pytest.mark.parametrize("args, message", [
    (["controller", "run", "/nonexistent.yaml"], "/nonexistent.yaml: cannot read"),
    (["controller", "run", "{topo}"], "no P4Runtime address for switch p0-t0-0"),
    (["controller", "run", "{topo}", "--switch", "nope=unix:/x"], "no switch named 'nope'"),
    (["controller", "run", "{topo}", "--switch", "broken"], "expected NAME=ADDRESS"),
    (["controller", "run", "{topo}", "--switch", "p0-t0-0=127.0.0.1:1@zz"], "device id 'zz' after '@' is not a number"),
    (["controller", "run", "{topo}", "--settle-ms", "-5"], "--settle-ms"),
    (["controller", "run", "{topo}", "--agent-setting", "bogus=1"], "has no field named \"bogus\""),
    (["controller", "status", "--name", "nope", "--run-dir", "{dir}"], "no controller socket at"),
    (["controller", "status", "--name", "../x", "--run-dir", "{dir}"], "controller name '../x'"),
    (["shell", "p0-t0-0", "--topo", "{topo}"], "switch p0-t0-0 has no p4runtime address"),
])
def test_cli_user_errors_are_one_line(tmp_path, args, message):
    topo = tmp_path / "clos.yaml"
    topo.write_text(dumps_topology(generate_clos()))
    args = [a.format(topo=topo, dir=tmp_path) for a in args]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert "camelCase" not in result.output and "Available Fields" not in result.output
