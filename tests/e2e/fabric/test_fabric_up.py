"""`mrc fabric up` on the default small fabric, eBPF target: every host pair talks over every
plane, counted by the hosts' dataplanes and the switches' counters ."""

import json

import pytest
from support.fabric_helpers import RUN_PREFIX, controller_args, mrc

from mrckit import netns
from mrckit.errors import MrcError
from mrckit.apps import pairwise
from mrckit.fabric.fabric import Fabric
from mrckit.topology import generate_clos

pytestmark = pytest.mark.root


def test_every_host_pair_over_every_plane(small_fabric):
    fab = small_fabric
    before = {s: fab.switch_counters(s, "rx_port") for s in fab.switches()}
    results = pairwise.pairwise_udp(fab)
    assert len(results) == 6 * 5
    bad = [r for r in results if not r.ok]
    assert not bad, pairwise.summary(results) + "\n" + "\n".join(map(str, bad))
    for r in results:  # every pair, every plane: the sender's dataplane counted both planes
        assert set(r.per_plane) == {0, 1} and min(r.per_plane.values()) > 0, r
        assert sum(r.per_plane.values()) == r.sent == r.received, r
    # The switches saw it too: every spine of every plane forwarded, every T0 took from its hosts.
    for s in fab.switches():
        after = fab.switch_counters(s, "rx_port")
        got = sum(after[p][0] - before[s][p][0] for p in after)
        assert got > 0, (s, after)


def test_controller_programmed_every_switch_and_host(small_fabric):
    from mrckit.control import read_status

    st = read_status(small_fabric.name)
    assert st["ready"] and st["running"]
    assert set(st["switches"]) == set(small_fabric.switches())
    entries = {s.name: len(s.entries) for s in small_fabric.compiled.switches()}
    for name, sw in st["switches"].items():
        assert sw["connected"] and sw["total"]["inserted"] == entries[name], (name, sw)
    assert set(st["hosts"]) == set(small_fabric.hosts())


def test_status_and_check_from_separate_processes(small_fabric):
    out = mrc("fabric", "status", small_fabric.name, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert all(doc["processes"].values()) and len(doc["processes"]) == 10 + 6 + 1
    assert len(doc["links"]) == 2 * 3 * 2 + 6 * 2
    assert {(ln["state_a"], ln["state_b"]) for ln in doc["links"]} == {("UP", "UP")}
    check = mrc("fabric", "check", small_fabric.name)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "30/30 host pairs OK" in check.stdout


def test_host_handle_runs_commands_inside_the_host(small_fabric):
    h = small_fabric.host("h1-0")
    addrs = h.run(["ip", "-6", "-o", "addr", "show", "dev", "nic0"]).stdout.decode()
    assert h.nic_address in addrs
    # Design section 9 on every fabric veth: TX checksum offload off, GRO on (peer NAPI).
    features = h.run(["ethtool", "-k", "plane0"]).stdout.decode()
    assert "tx-checksumming: off" in features and "generic-receive-offload: on" in features
    # The NIC device leaves 40 bytes for the outer header on the plane ports.
    links = {ln["ifname"]: ln for ln in json.loads(h.run(["ip", "-j", "link"]).stdout)}
    assert links["nic0"]["mtu"] + 40 == links["plane0"]["mtu"] == small_fabric.topology.mtu
    # No ND on the fabric: no link-local address on a plane port, a static neighbour for the T0.
    assert "inet6" not in h.run(["ip", "-6", "addr", "show", "dev", "plane0"]).stdout.decode()
    t0_mac = small_fabric.compiled.host("h1-0").ports[0].t0_mac.to_bytes(6, "big").hex(":")
    neigh = h.run(["ip", "-6", "neigh", "show", "dev", "plane0"]).stdout.decode()
    assert t0_mac in neigh and "PERMANENT" in neigh
    # Switch ports have IPv6 off: the kernel never answers or solicits on the fabric.
    sw = small_fabric.ns("p0-t1-0")
    assert netns.run(["sysctl", "-n", "net.ipv6.conf.t0-0.disable_ipv6"], ns=sw).stdout.strip() == b"1"


def test_second_up_with_the_same_name_fails_and_leaves_the_first_running(small_fabric):
    with pytest.raises(MrcError, match="is up already"):
        Fabric.up(generate_clos(), name=small_fabric.name, prefix=RUN_PREFIX, controller_args=controller_args())
    out = mrc("fabric", "up", "--name", small_fabric.name)
    assert out.returncode == 2 and out.stderr.startswith("mrc: error:") and "Traceback" not in out.stderr
    doc = json.loads(mrc("fabric", "status", small_fabric.name, "--json").stdout)
    assert all(doc["processes"].values())
