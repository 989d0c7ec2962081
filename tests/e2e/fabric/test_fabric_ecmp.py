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

from mrckit.control import controller_address, read_status, saved_status_path
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
    assert not saved_status_path(name).exists()  # a later fabric of this name takes nothing over
    assert not os.path.exists(controller_address(name).removeprefix("unix:"))


def _reports(fab, seen: int = 0) -> list[dict]:
    """The link reports the controller got (its timeline's link_down and link_up marks, the
    source in ``detail``), after the first ``seen`` marks."""
    marks = read_status(fab.name)["timeline"][seen:]
    return [{"link": m["links"][0], "up": m["kind"] == "link_up", "source": m["detail"]}
            for m in marks if m["kind"] in ("link_down", "link_up")]


def _marks(fab) -> int:
    return len(read_status(fab.name)["timeline"])


def _tx(fab, switch):
    return sum(p for p, _ in fab.switch_counters(switch, "tx_port").values())


def test_every_pair_over_every_plane_and_both_spines(ecmp_fabric):
    fab = ecmp_fabric
    doc = json.loads(mrc("fabric", "status", fab.name, "--json").stdout)
    assert doc["mode"] == "ecmp" and fab.mode == "ecmp" and all(doc["processes"].values())
    st = read_status(fab.name)
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
    seen = _marks(fab)
    line = fab.fail_link(*LINK, kind="down")
    try:
        assert line.endswith(f"[{LINK_NAME}]")
        # The report (ReportLink) returns once the groups are rewritten.
        assert _reports(fab, seen) == [{"link": LINK_NAME, "up": False, "source": "fault"}]
        assert LINK_NAME in read_status(fab.name)["rerouted"]
        # The controller took p0-t1-1 out of the groups toward leaf 1 (and leaf 1's uplinks), so
        # no packet is sent into the dead link: every pair gets everything while it is down.
        results = _until_all_ok(fab)
        assert all(r.ok for r in results), pairwise.summary(results)
    finally:
        fab.restore(*LINK)
    assert _reports(fab, seen)[-1] == {"link": LINK_NAME, "up": True, "source": "fault"}
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
    seen = _marks(fab)
    fab.fail_link(*LINK, kind="flap", value=10)
    try:
        end = time.monotonic() + 15  # the flap process starts Python first
        flaps = []
        while time.monotonic() < end and sum(not r["up"] for r in flaps) < 2:
            time.sleep(0.2)
            flaps = [r for r in _reports(fab, seen) if r["source"] == "flap"]
    finally:
        fab.restore(*LINK)
    assert sum(not r["up"] for r in flaps) >= 2 and all(r["link"] == LINK_NAME for r in flaps), flaps
    assert LINK_NAME not in read_status(fab.name)["links_down"]  # left up, reported up


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
    seen = _marks(fab)
    spine_links = {"p0/t0-0/t1-1", "p0/t0-1/t1-1", "p0/t0-2/t1-1"}
    fab.fail_switch("p0-t1-1")
    try:
        reports = _reports(fab, seen)
        assert {r["link"] for r in reports if not r["up"]} == spine_links, reports
        assert {r["source"] for r in reports} == {"switch p0-t1-1 failed"}
        # Without the reports the T0s' groups would keep hashing about half of plane 0's
        # packets into the dead spine for good.
        results = _until_all_ok(fab)
        assert all(r.ok for r in results), pairwise.summary(results)
        out = mrc("fabric", "check", fab.name, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        st = read_status(fab.name)
        assert spine_links <= set(st["rerouted"]), st["rerouted"]
    finally:
        fab.restore("p0-t1-1")
    reports = _reports(fab, seen)
    assert {r["link"] for r in reports if r["up"]} == spine_links, reports
    assert {r["source"] for r in reports if r["up"]} == {"switch p0-t1-1 restored"}
    results = _until_all_ok(fab)
    assert all(r.ok for r in results), pairwise.summary(results)
