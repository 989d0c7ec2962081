"""Faults on a running fabric: loss, blackhole, down and flap on a link, a failed switch, and
restore; each logged with a timestamp . Only T0-T1 links and a T1 are broken,
and only for plain UDP (no acks), so no host agent reacts; carrier-down faults are reported to
the controller, which DENIES the links and lifts them on restore, so the shared fabric ends
clean."""

import json
import time
from datetime import datetime

import pytest
from support.fabric_helpers import mrc

from mrckit import netns
from mrckit.bpf.attach import xdp_query
from mrckit.errors import MrcError
from mrckit.apps import pairwise
from mrckit.fabric import faults

pytestmark = pytest.mark.root


def one_way(fab, src, dst, packets=256):
    (r,) = [r for r in pairwise.pairwise_udp(fab, packets, hosts=[src, dst], timeout=3) if r.src == src]
    return r


def test_loss_drops_a_share_of_the_packets_crossing_the_link_both_ways(small_fabric):
    fab = small_fabric
    line = fab.fail_link("p0-t0-0", "p0-t1-0", kind="loss", value=50)
    assert line.endswith("fail link p0-t0-0 p0-t1-0 loss 50 % [p0/t0-0/t1-0]")
    try:
        results = pairwise.pairwise_udp(fab, 256, hosts=["h0-0", "h1-0"], timeout=3)
        up = faults.read_stats(fab.ns("p0-t1-0"), "t0-0")    # h0-0 -> h1-0 enters the spine here
        down = faults.read_stats(fab.ns("p0-t0-0"), "t1-0")  # h1-0 -> h0-0 enters the leaf here
    finally:
        fab.restore("p0-t0-0", "p0-t1-0")
    for stats in (up, down):
        assert stats.seen > 20 and 0 < stats.dropped_loss < stats.seen, stats
        assert stats.seen == stats.passed + stats.dropped_loss
    lost = {r.src: r.sent - r.received for r in results}
    assert lost == {"h0-0": up.dropped_loss, "h1-0": down.dropped_loss}
    assert not [f for f in faults.list_faults() if f[0] in (fab.ns("p0-t0-0"), fab.ns("p0-t1-0"))]
    assert one_way(fab, "h0-0", "h1-0").ok


def test_blackhole_drops_everything_on_the_link_and_restore_puts_the_switch_back(small_fabric):
    fab = small_fabric
    ns = fab.ns("p1-t1-1")
    with netns.enter(ns):
        switch_prog = xdp_query("t0-1").prog_id
    fab.fail_link("p1-t0-1", "p1-t1-1", kind="blackhole")
    try:
        r = one_way(fab, "h1-0", "h2-0")
        stats = faults.read_stats(ns, "t0-1")
    finally:
        fab.restore("p1-t0-1", "p1-t1-1")
    # Every packet sprayed onto plane 1, spine 1 died there, and nothing else was lost.
    assert stats.dropped_blackhole > 0 and stats.passed == 0
    assert r.sent - r.received == stats.dropped_blackhole
    with netns.enter(ns):
        assert xdp_query("t0-1").prog_id == switch_prog


def test_failed_switch_is_reported_denied_on_every_host_and_lifted_on_restore(small_fabric):
    fab = small_fabric
    spine_links = {"p0/t0-0/t1-0", "p0/t0-1/t1-0", "p0/t0-2/t1-0"}
    fab.fail_switch("p0-t1-0")
    try:
        with netns.enter(fab.ns("p0-t1-0")):
            attached = [xdp_query(p.ifname).prog_id for p in fab.compiled.switch("p0-t1-0").ports]
        with pytest.raises(MrcError, match="failed already"):
            fab.fail_switch("p0-t1-0")
        # Its links are reported down (as the T0s' PHYs would), and the SRv6 controller
        # DENIES them on every host without waiting for host evidence: no pair loses a packet.
        denied = _until(lambda: spine_links <= set(_status(fab)["denials"]))
        r = one_way(fab, "h0-1", "h2-1")
    finally:
        fab.restore("p0-t1-0")
    assert attached == [0, 0, 0]
    assert denied, _status(fab)["timeline"][-6:]
    marks = [m for m in _status(fab)["timeline"] if m["kind"] == "deny_all_hosts" and set(m["links"]) & spine_links]
    assert marks and all("link report: down (switch p0-t1-0 failed)" in m["detail"] for m in marks), marks
    assert r.ok, r
    assert _until(lambda: not set(_status(fab)["denials"]) & spine_links), _status(fab)["denials"]
    assert one_way(fab, "h0-1", "h2-1").ok


def _status(fab):
    from mrckit.control import read_status

    return read_status(fab.name)


def _until(cond, seconds: float = 10.0) -> bool:
    """Bounded wait for the controller (it acts on a report at its next decision)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def test_down_and_flap_from_the_cli_with_a_timestamped_fault_log(small_fabric):
    fab = small_fabric
    a, b = "p1-t0-2", "p1-t1-0"
    out = mrc("fail", "link", a, b, "--down", "--fabric", fab.name)
    assert out.returncode == 0, out.stderr
    doc = json.loads(mrc("fabric", "status", fab.name, "--json").stdout)
    (link,) = [ln for ln in doc["links"] if {ln["a"], ln["b"]} == {a, b}]
    assert (link["state_a"], link["state_b"]) == ("DOWN", "DOWN")
    # SRv6 mode: the link is reported down and DENIED on every host, then lifted on restore.
    assert _until(lambda: "p1/t0-2/t1-0" in _status(fab)["denials"]), _status(fab)["timeline"][-4:]
    assert mrc("restore", "link", a, b, "--fabric", fab.name).returncode == 0
    assert _oper(fab, a, "t1-0") == "UP"
    assert _until(lambda: "p1/t0-2/t1-0" not in _status(fab)["denials"])
    lifted = [m for m in _status(fab)["timeline"] if m["kind"] == "lifted" and "p1/t0-2/t1-0" in m["links"]]
    assert lifted and lifted[-1]["detail"].startswith("link report: up (fault)"), lifted

    fab.fail_link(a, b, kind="flap", value=20)
    flapper = fab.state.flappers[f"link:{a}:{b}"]
    seen = set()
    end = time.monotonic() + 5
    while time.monotonic() < end and seen != {"UP", "DOWN"}:
        seen.add(_oper(fab, b, "t0-2"))
        time.sleep(0.01)
    fab.restore(a, b)
    assert seen == {"UP", "DOWN"}
    assert not flapper.alive() and _oper(fab, a, "t1-0") == "UP"
    assert _until(lambda: not _status(fab)["denials"]), _status(fab)["denials"]  # the last report: up

    log = fab.fault_log()
    mine = [ln for ln in log if f" {a} {b}" in ln]
    name = "[p1/t0-2/t1-0]"
    assert [ln.split(" ", 1)[1] for ln in mine[-4:]] == [
        f"fail link {a} {b} down {name}", f"restore link {a} {b} (down) {name}",
        f"fail link {a} {b} flap 20 Hz {name}", f"restore link {a} {b} (flap 20 Hz) {name}"]
    stamps = [datetime.fromisoformat(ln.split(" ", 1)[0]) for ln in log]
    assert stamps == sorted(stamps)


def test_fault_commands_refuse_bad_input_clearly(small_fabric):
    fab = small_fabric
    with pytest.raises(MrcError, match="no link between p0-t0-0 and p0-t0-1"):
        fab.fail_link("p0-t0-0", "p0-t0-1")
    with pytest.raises(ValueError, match="--loss"):
        fab.fail_link("p0-t0-0", "p0-t1-0", kind="loss", value=150)
    with pytest.raises(MrcError, match="no fault to restore"):
        fab.restore("p0-t0-0", "p0-t1-0")
    out = mrc("fail", "link", "p0-t0-0", "p0-t1-0", "--down", "--loss", "5", "--fabric", fab.name)
    assert out.returncode == 2 and "exactly one of" in out.stderr and "Traceback" not in out.stderr
    assert fab.status()["faults"] == {}


def _oper(fab, node, ifname):
    out = netns.run(["ip", "-j", "link", "show", ifname], ns=fab.ns(node)).stdout
    return json.loads(out)[0]["operstate"]
