"""`mrc topo export --format containerlab`: the lab file's nodes, kinds, links and interface
names match the fabric, and the config files it writes are what the host agents and the
controller read."""

import shlex

import pytest
import yaml
from click.testing import CliRunner

from mrckit.cli import main
from mrckit.errors import MrcError
from mrckit.fabric.containerlab import LINK_LABEL, export_containerlab, mgmt_name
from mrckit.fabric.nodes import NIC_DEVICE
from mrckit.host.config import from_topology
from mrckit.host.run import load_config
from mrckit.topology import compile_fabric, generate_clos, load_topology, mac_str


@pytest.fixture(scope="module")
def topo():
    return generate_clos(2, 2, 3, 2)


@pytest.fixture
def lab(tmp_path, topo):
    done = export_containerlab(topo, tmp_path / "lab", "mrc-test")
    return done, yaml.safe_load(done.topology.read_text())


def test_one_node_per_switch_and_host_plus_the_controller(lab, topo):
    _, doc = lab
    nodes = doc["topology"]["nodes"]
    assert doc["name"] == "mrc-test"
    assert set(nodes) == {s.name for s in topo.switches} | {h.name for h in topo.hosts} | {"controller"}
    assert {n["kind"] for n in nodes.values()} == {"linux"}
    assert {nodes[s.name]["image"] for s in topo.switches} == {"p4lang/behavioral-model:latest"}
    assert {nodes[h.name]["image"] for h in topo.hosts} == {"mrckit-host:latest"}


def test_every_fabric_link_once_with_the_fabrics_interface_names_and_macs(lab, topo):
    _, doc = lab
    got = {}
    for link in doc["topology"]["links"]:
        assert link["type"] == "veth" and link["mtu"] == topo.mtu
        a, b = link["endpoints"]
        got[link["labels"][LINK_LABEL]] = (a["node"], a["interface"], b["node"], b["interface"])
    want = {l.name: (l.a, l.a_ifname, l.b, l.b_ifname) for l in topo.links()}
    assert got == want
    macs = {}
    for sw in compile_fabric(topo, "bmv2").switches():
        for p in sw.ports:
            macs[(sw.name, p.ifname)], macs[(p.peer, p.peer_ifname)] = mac_str(p.mac), mac_str(p.peer_mac)
    for link in doc["topology"]["links"]:
        for end in link["endpoints"]:
            assert end["mac"] == macs[(end["node"], end["interface"])]


def test_each_switch_runs_bmv2_on_its_ports_with_p4runtime_on_the_management_network(lab, topo):
    _, doc = lab
    for sw in compile_fabric(topo, "bmv2").switches():
        script = shlex.split(doc["topology"]["nodes"][sw.name]["cmd"])[2]
        argv = shlex.split(script.split("exec ", 1)[1])
        assert argv[0] == "simple_switch_grpc" and "--no-p4" in argv
        ports = [argv[i + 1] for i, a in enumerate(argv) if a == "-i"]
        assert ports == [f"{p.number}@{p.ifname}" for p in sorted(sw.ports, key=lambda p: p.number)]
        assert argv[argv.index("--grpc-server-addr") + 1] == "0.0.0.0:9559"
        assert argv[argv.index("--device-id") + 1] == "0"


def test_host_configs_are_what_the_agent_reads(lab, topo):
    done, doc = lab
    compiled = compile_fabric(topo, "bmv2")
    assert sorted(p.name for p in done.hosts) == sorted(f"{h.name}.yaml" for h in topo.hosts)
    for host in compiled.hosts():
        assert load_config(done.topology.parent / "hosts" / f"{host.name}.yaml") == from_topology(host, NIC_DEVICE)
        node = doc["topology"]["nodes"][host.name]
        assert node["binds"] == [f"hosts/{host.name}.yaml:/etc/mrckit/host.yaml:ro"]
        assert "mrc host up /etc/mrckit/host.yaml --create-nic --listen 0.0.0.0:50051" in node["cmd"]


def test_the_controller_topology_names_every_switch_and_agent_by_its_container(lab, topo):
    done, doc = lab
    addressed = load_topology(str(done.controller))
    assert [s.p4runtime.address for s in addressed.switches] == \
        [f"{mgmt_name('mrc-test', s.name)}:9559" for s in topo.switches]
    assert {s.p4runtime.device_id for s in addressed.switches} == {0}
    assert [h.agent.address for h in addressed.hosts] == [f"clab-mrc-test-{h.name}:50051" for h in topo.hosts]
    assert "mrc controller run /etc/mrckit/controller.yaml --target bmv2" in doc["topology"]["nodes"]["controller"]["cmd"]


@pytest.mark.parametrize("name", ["", "-lead", "has space", "a/b"])
def test_a_bad_lab_name_is_refused_and_nothing_is_written(tmp_path, topo, name):
    with pytest.raises(MrcError, match="lab name"):
        export_containerlab(topo, tmp_path / "lab", name)
    assert not (tmp_path / "lab").exists()


def test_the_cli_writes_the_lab_and_says_how_to_deploy_it(tmp_path):
    topo_file = tmp_path / "t.yaml"
    runner = CliRunner()
    assert runner.invoke(main, ["topo", "gen", "-o", str(topo_file)]).exit_code == 0
    result = runner.invoke(main, ["topo", "export", str(topo_file), "--format", "containerlab",
                                  "-o", str(tmp_path / "out"), "--name", "lab1"])
    assert result.exit_code == 0, result.output
    assert f"containerlab deploy -t {tmp_path / 'out' / 'lab1.clab.yml'}" in result.output
    bad = runner.invoke(main, ["topo", "export", str(topo_file), "-o", str(tmp_path / "x"), "--name", "a b"])
    assert bad.exit_code != 0 and "lab name 'a b'" in bad.output and "Traceback" not in bad.output
