"""Bring-up errors give one clear line and leave nothing behind; teardown is guaranteed on a
late failure, on SIGTERM and by `down --all` ."""

import signal
import socket
import subprocess
import sys
import time

import pytest
from support.fabric_helpers import RUN_PREFIX, controller_args, fabric_name, leftovers, mrc

from mrckit import netns
from mrckit.errors import MrcError
from mrckit.apps import pairwise
from mrckit.fabric import teardown
from mrckit.fabric.fabric import Fabric
from mrckit.switch.bmv2 import find_tool
from mrckit.topology import dump_topology, generate_clos

pytestmark = pytest.mark.root


def tiny():
    """One plane, one spine, two leaves, one host each: the cheapest fabric with a spine."""
    return generate_clos(planes=1, spines=1, leaves=2, hosts_per_leaf=1)


def test_wrong_topology_file_is_one_line_and_builds_nothing(tmp_path, need_root):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nplanes: 2\nswitches:\n  - {name: a, role: t9, plane: 0, index: 0}\n")
    name = fabric_name("badtopo")
    out = mrc("fabric", "up", str(bad), "--name", name)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"mrc: error: {bad}:") and len(out.stderr.splitlines()) == 1
    assert leftovers(f"mrcf-{name}", name) == {}


@pytest.mark.skipif(find_tool("simple_switch_grpc") is not None, reason="bmv2 is installed here")
def test_missing_bmv2_is_a_clear_error(need_root):
    name = fabric_name("nobmv2")
    out = mrc("fabric", "up", "--target", "bmv2", "--name", name)
    assert out.returncode == 2 and "simple_switch_grpc not found" in out.stderr and "Traceback" not in out.stderr
    assert leftovers(f"mrcf-{name}", name) == {}


def test_p4runtime_port_in_use_is_a_clear_error(need_root):
    name = fabric_name("portuse")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MrcError, match=f"127.0.0.1:{port} is already in use"):
            Fabric.up(tiny(), name=name, prefix=RUN_PREFIX, p4runtime_port=port - 1)
    assert leftovers(RUN_PREFIX + name, name) == {}


def test_a_failure_late_in_bring_up_removes_everything(need_root):
    name = fabric_name("late")
    # The controller refuses an option: the last step fails, after every node is running.
    with pytest.raises(MrcError, match="controller did not start.*no-such-option"):
        Fabric.up(tiny(), name=name, prefix=RUN_PREFIX, controller_args=(*controller_args(), "--no-such-option"))
    assert leftovers(RUN_PREFIX + name, name) == {}


def test_sigterm_during_bring_up_removes_everything(tmp_path, need_root):
    name = fabric_name("sigterm")
    topo = tmp_path / "tiny.yaml"
    dump_topology(tiny(), str(topo))
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from mrckit.cli import main; sys.exit(main())",
                             "fabric", "up", str(topo), "--name", name, "--no-controller"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 60
    while time.monotonic() < end and not netns.list_prefix(f"mrcf-{name}-"):
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0, err
    assert leftovers(f"mrcf-{name}", name) == {}


def test_a_second_fabric_coexists_serves_p4runtime_on_ports_and_down_all_takes_only_it(small_fabric):
    name = fabric_name("ports")
    prefix = RUN_PREFIX + "p"  # its own prefix: down --all by it must leave small_fabric alone
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fab = Fabric.up(tiny(), name=name, prefix=prefix, p4runtime_port=port, controller=False)
    try:
        assert fab.switch_address("p0-t1-0") == f"127.0.0.1:{port + 2}"
        assert not any(r.received for r in pairwise.pairwise_udp(fab, 5, timeout=1))  # empty tables
        assert "programmed 3 switches" in fab.program_once(*controller_args())
        assert all(r.ok for r in pairwise.pairwise_udp(fab))  # same host names as small_fabric's
        fab.detach()  # as if the process that made it had crashed: only `down --all` is left
    except BaseException:
        fab.down()
        raise
    removed = teardown.down_all(prefix)
    assert removed["fabrics"] == [name]
    assert leftovers(prefix + name, name) == {}
    assert all(small_fabric.status()["processes"].values())
    assert all(r.ok for r in pairwise.pairwise_udp(small_fabric, hosts=["h0-0", "h1-0"]))


def test_sigterm_to_a_process_owning_a_running_fabric_tears_it_down(need_root):
    name = fabric_name("owner")
    script = ("import time\nfrom mrckit.fabric.fabric import Fabric\nfrom mrckit.topology import generate_clos\n"
              f"fab = Fabric.up(generate_clos(planes=1, spines=1, leaves=2, hosts_per_leaf=1), name={name!r}, "
              f"prefix={RUN_PREFIX!r}, controller=False)\nprint('up', flush=True)\ntime.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up", proc.stderr.read()
        assert netns.list_prefix(RUN_PREFIX + name)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM
    assert leftovers(RUN_PREFIX + name, name) == {}


def test_missing_p4c_outputs_are_refused_before_anything_is_built(need_root):
    name = fabric_name("nop4")
    with pytest.raises(MrcError, match="P4Info /nonexistent.txtpb"):
        Fabric.up(tiny(), name=name, prefix=RUN_PREFIX, controller_args=("--p4info", "/nonexistent.txtpb"))
    assert leftovers(RUN_PREFIX + name, name) == {}


def test_jumbo_mtu_without_xdp_frags_is_refused(need_root):
    name = fabric_name("jumbo")
    with pytest.raises(MrcError, match="mtu 9000 B: above 3506 B, which needs xdp.frags"):
        Fabric.up(generate_clos(mtu=9000), name=name, prefix=RUN_PREFIX)
    assert leftovers(RUN_PREFIX + name, name) == {}


def test_foreground_up_tears_down_on_ctrl_c(tmp_path, need_root):
    name = fabric_name("fg")
    topo = tmp_path / "tiny.yaml"
    dump_topology(tiny(), str(topo))
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from mrckit.cli import main; sys.exit(main())",
                             "fabric", "up", str(topo), "--name", name, "--no-controller", "--foreground"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        while not lines or not lines[-1].startswith("running"):
            lines.append(proc.stdout.readline())
            assert lines[-1], proc.stderr.read()
        assert len(netns.list_prefix(f"mrcf-{name}-")) == 3 + 2
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert f"fabric {name} down" in out
    assert leftovers(f"mrcf-{name}", name) == {}


def test_fabric_down_cleans_up_after_a_killed_bring_up(tmp_path, need_root):
    name = fabric_name("killed")
    topo = tmp_path / "tiny.yaml"
    dump_topology(tiny(), str(topo))
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from mrckit.cli import main; sys.exit(main())",
                             "fabric", "up", str(topo), "--name", name, "--no-controller"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 60
    while time.monotonic() < end and not teardown.pinned_switches_of(f"mrcf-{name}-"):
        time.sleep(0.01)
    proc.kill()  # SIGKILL: no handler runs; the state file is all that is left to go by
    proc.wait()
    assert netns.list_prefix(f"mrcf-{name}-")
    out = mrc("fabric", "down", name)
    assert out.returncode == 0 and f"fabric {name} down" in out.stdout, out.stderr
    assert leftovers(f"mrcf-{name}", name) == {}
