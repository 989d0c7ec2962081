"""`mrc fabric up --mode ecmp`: the small fabric in EV-hash mode, from the CLI.

Every host pair talks over every plane with no outer header (the switches hash the EV over
their ECMP groups, so both spines of each plane carry traffic), the mode is in the fabric's
state, a T0–T1 link taken down is reported to the controller, which takes it out of the groups
(so every pair still gets every packet while it is down), and `mrc fabric down` leaves nothing.
"""

import json
import os

import pytest
from support.fabric_helpers import controller_args, fabric_name, leftovers, mrc

from mrckit.control import read_status, reports_path, status_path
from mrckit.apps import pairwise
from mrckit.fabric.fabric import Fabric
from mrckit.fabric.state import DEFAULT_PREFIX

pytestmark = pytest.mark.root
LINK = ("p0-t0-1", "p0-t1-1")
LINK_NAME = "p0/t0-1/t1-1"


@pytest.fixture(scope="module")
def ecmp_fabric():
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces and BPF")
    name = fabric_name("ecmp")
    out = mrc("fabric", "up", "--mode", "ecmp", "--name", name, *controller_args(), timeout=300)
    try:
        assert out.returncode == 0, out.stdout + out.stderr
        assert "ecmp mode" in out.stdout
        yield Fabric.open(name)
    finally:
        mrc("fabric", "down", name)
    assert leftovers(DEFAULT_PREFIX + name, name) == {}
    assert not reports_path(name).exists()


def _tx(fab, switch):
    return sum(p for p, _ in fab.switch_counters(switch, "tx_port").values())


def test_every_pair_over_every_plane_and_both_spines(ecmp_fabric):
    fab = ecmp_fabric
    doc = json.loads(mrc("fabric", "status", fab.name, "--json").stdout)
    assert doc["mode"] == "ecmp" and fab.mode == "ecmp" and all(doc["processes"].values())
    st = read_status(status_path(fab.name))
    assert st["ready"] and st.get("mode") == "ecmp"
    spines = [s for s in fab.switches() if "-t1-" in s]
    before = {s: _tx(fab, s) for s in spines}
    results = pairwise.pairwise_udp(fab)
    bad = [r for r in results if not r.ok]
    assert len(results) == 30 and not bad, pairwise.summary(results) + "\n" + "\n".join(map(str, bad))
    for r in results:
        assert sum(r.per_plane.values()) == r.sent == r.received and min(r.per_plane.values()) > 0, r
    # The hosts chose only the plane; the T0s' hash spread each plane over both of its spines.
    for s in spines:
        assert _tx(fab, s) - before[s] > 0, s


def test_link_down_is_reported_and_routed_around(ecmp_fabric):
    fab = ecmp_fabric
    line = fab.fail_link(*LINK, kind="down")
    try:
        assert line.endswith(f"[{LINK_NAME}]")
        reports = [json.loads(x) for x in reports_path(fab.name).read_text().splitlines()]
        assert reports[-1]["link"] == LINK_NAME and reports[-1]["up"] is False
        # The controller took p0-t1-1 out of the groups toward leaf 1 (and leaf 1's uplinks), so
        # no packet is sent into the dead link: every pair gets everything while it is down.
        # (Bounded wait for the reroute: the controller polls its report file.)
        results = _until_all_ok(fab)
        assert all(r.ok for r in results), pairwise.summary(results)
    finally:
        fab.restore(*LINK)
    reports = [json.loads(x) for x in reports_path(fab.name).read_text().splitlines()]
    assert reports[-1]["link"] == LINK_NAME and reports[-1]["up"] is True
    results = _until_all_ok(fab)
    assert all(r.ok for r in results), pairwise.summary(results)


def _until_all_ok(fab, tries: int = 5):
    import time

    results = []
    for _ in range(tries):
        results = pairwise.pairwise_udp(fab, timeout=5.0)
        if all(r.ok for r in results):
            break
        time.sleep(1.0)
    return results


def test_flap_reports_every_change(ecmp_fabric):
    import time

    fab = ecmp_fabric
    path = reports_path(fab.name)
    seen = len(path.read_text().splitlines()) if path.exists() else 0
    fab.fail_link(*LINK, kind="flap", value=10)
    try:
        end = time.monotonic() + 15  # the flap process starts Python first
        flaps = []
        while time.monotonic() < end and sum(not r["up"] for r in flaps) < 2:
            time.sleep(0.2)
            flaps = [r for r in map(json.loads, path.read_text().splitlines()[seen:]) if r["source"] == "flap"]
    finally:
        fab.restore(*LINK)
    assert sum(not r["up"] for r in flaps) >= 2 and all(r["link"] == LINK_NAME for r in flaps), flaps
    last = json.loads(path.read_text().splitlines()[-1])
    assert last["up"] is True and last["link"] == LINK_NAME


def test_an_unknown_mode_is_refused_before_anything_is_built():
    from mrckit.errors import MrcError
    from mrckit.topology import generate_clos

    name = fabric_name("badmode")
    with pytest.raises(MrcError, match="mode 'sr-mpls': use srv6"):
        Fabric.up(generate_clos(), name=name, mode="sr-mpls")
    out = mrc("fabric", "up", "--mode", "sr-mpls", "--name", name)
    assert out.returncode == 2 and "Invalid value for '--mode'" in out.stderr and "Traceback" not in out.stderr
    assert leftovers(DEFAULT_PREFIX + name, name) == {}


def test_a_failed_spine_is_reported_and_every_pair_still_gets_everything(ecmp_fabric):
    fab = ecmp_fabric
    path = reports_path(fab.name)
    seen = len(path.read_text().splitlines()) if path.exists() else 0
    spine_links = {"p0/t0-0/t1-1", "p0/t0-1/t1-1", "p0/t0-2/t1-1"}
    fab.fail_switch("p0-t1-1")
    try:
        reports = [json.loads(x) for x in path.read_text().splitlines()[seen:]]
        assert {r["link"] for r in reports if not r["up"]} == spine_links, reports
        # Without the reports the T0s' groups would keep hashing about half of plane 0's
        # packets into the dead spine for good. (Bounded wait: the controller polls reports.)
        results = _until_all_ok(fab)
        assert all(r.ok for r in results), pairwise.summary(results)
        out = mrc("fabric", "check", fab.name, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        st = read_status(status_path(fab.name))
        assert spine_links <= set(st["rerouted"]), st["rerouted"]
    finally:
        fab.restore("p0-t1-1")
    reports = [json.loads(x) for x in path.read_text().splitlines()[seen:]]
    assert {r["link"] for r in reports if r["up"]} == spine_links, reports
    results = _until_all_ok(fab)
    assert all(r.ok for r in results), pairwise.summary(results)
