"""The fabric as an endpoint user meets it: the agents' RTO the fabric gives them, and
`mrc write`/`mrc listen` naming fabric hosts."""

import os
import subprocess
import time

import pytest
import yaml
from support.fabric_helpers import RUN_PREFIX, controller_args, fabric_name, leftovers, mrc

from mrckit.errors import MrcError
from mrckit.fabric import hostref, state
from mrckit.fabric.fabric import Fabric
from mrckit.fabric.procs import child_env, mrc_argv
from mrckit.topology import dumps_topology, generate_clos


def test_agents_and_controller_get_the_fabric_rto_of_50_ms(small_fabric):
    st = small_fabric.state
    for host in st.hosts:
        doc = yaml.safe_load((st.dir / "hosts" / f"{host}.yaml").read_text())
        assert int(doc["settings"]["rto_ns"]) == 50_000_000, host
    argv = st.controller["argv"]
    assert argv[argv.index("--agent-setting") + 1] == "rto_ns=50000000"


# --- host names: resolution through the fabrics' state files (no fabric needed) -------------


@pytest.fixture
def fake_fabrics(tmp_path, monkeypatch):
    """``add(name, hosts_per_leaf)`` writes a fabric state file under a private /run/mrckit,
    with every host's namespace present under a private /var/run/netns."""
    monkeypatch.setattr(state, "RUN_ROOT", tmp_path / "run")
    monkeypatch.setattr(hostref, "NETNS_DIR", str(tmp_path / "netns"))
    (tmp_path / "netns").mkdir()

    def add(name, hosts_per_leaf=2):
        topo = generate_clos(hosts_per_leaf=hosts_per_leaf)
        nodes = {h.name: f"mrcf-{name}-{h.name}" for h in topo.hosts}
        for ns in nodes.values():
            (tmp_path / "netns" / ns).touch()
        procs = {h: state.ProcInfo(1, 1, "unix:/x", ["a"], "/log") for h in nodes}
        state.FabricState(name, "mrcf-", "ebpf", dumps_topology(topo), nodes=nodes, hosts=procs).save()

    return add


def test_a_host_name_resolves_to_its_nic_address_and_namespace(fake_fabrics):
    fake_fabrics("lab")
    assert hostref.find_host("h1-1") == hostref.FabricHost("lab", "h1-1", "2001:db8:100:1::2", "mrcf-lab-h1-1")
    assert hostref.find_host("2001:db8:100:1::2") is None  # an address is used as it is
    assert hostref.find_host("2001:db8:100:1::2", fabric="lab").name == "h1-1"


def test_no_fabric_an_unknown_host_and_an_ambiguous_one_are_clear_errors(fake_fabrics):
    with pytest.raises(MrcError, match="no fabric is up"):
        hostref.find_host("h0-0")
    fake_fabrics("one", hosts_per_leaf=1)
    fake_fabrics("two", hosts_per_leaf=3)
    with pytest.raises(MrcError, match=r"no running fabric has a host named 'h9-9' \(fabrics up: one, two"):
        hostref.find_host("h9-9")
    with pytest.raises(MrcError, match=r"in 2 running fabrics \(one, two\): choose one with --fabric"):
        hostref.find_host("h0-0")
    assert hostref.find_host("h0-2").fabric == "two"  # only "two" has it
    assert hostref.find_host("h0-0", fabric="one").ns == "mrcf-one-h0-0"
    with pytest.raises(MrcError, match="fabric 'one' has no host 'h0-2'"):
        hostref.find_host("h0-2", fabric="one")


def test_a_host_whose_namespace_is_gone_is_an_error(fake_fabrics, tmp_path):
    fake_fabrics("lab")
    (tmp_path / "netns" / "mrcf-lab-h0-1").unlink()
    with pytest.raises(MrcError, match="has no namespace mrcf-lab-h0-1"):
        hostref.find_host("h0-1")


# --- mrc write/listen by host name on a real fabric ---------------------------------------------

@pytest.fixture(scope="module")
def tiny_fabric():
    """A fabric of its own (1 plane, 1 spine, 2 leaves, 1 host each: h0-0 and h1-0): a write
    changes the agents' EV states, which the session's small fabric must not see."""
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces and BPF")
    fab = Fabric.up(generate_clos(planes=1, spines=1, leaves=2, hosts_per_leaf=1), name=fabric_name(__name__),
                    target="ebpf", prefix=RUN_PREFIX, controller_args=controller_args())
    yield fab
    fab.down()
    assert leftovers(RUN_PREFIX + fab.name, fab.name) == {}


def test_write_and_listen_by_host_name_from_the_root_namespace(tiny_fabric, tmp_path):
    name = tiny_fabric.name
    log = tmp_path / "listen.err"
    with open(log, "wb") as err:
        listener = subprocess.Popen(mrc_argv("listen", "h1-0", "--fabric", name, "--size", "2M", "--timeout", "90"),
                                    stdout=subprocess.PIPE, stderr=err, text=True, env=child_env())
    try:
        end = time.monotonic() + 60
        while "listening on" not in log.read_text() and listener.poll() is None and time.monotonic() < end:
            time.sleep(0.1)
        assert "listening on [2001:db8:100:1::1]:4791" in log.read_text(), log.read_text()
        writer = mrc("write", "h0-0", "h1-0", "2M", "--fabric", name, "--timeout", "90")
        assert writer.returncode == 0, writer.stderr
        out, _ = listener.communicate(timeout=60)
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.wait()
    assert listener.returncode == 0, log.read_text()
    sha = [ln for ln in writer.stdout.splitlines() if ln.startswith("sha256 ")]
    assert sha and sha == [ln for ln in out.splitlines() if ln.startswith("sha256 ")]
    assert " ".join(writer.stdout.split()).startswith("mrc write 2001:db8:100::1 -> 2001:db8:100:1::1")


def test_a_fabric_host_name_that_is_not_there_is_a_one_line_error(tiny_fabric):
    proc = mrc("write", "h0-0", "h7-7", "1M", "--fabric", tiny_fabric.name)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"DST 'h7-7': fabric '{tiny_fabric.name}' has no host 'h7-7' (its hosts: h0-0, h1-0)" in proc.stderr
