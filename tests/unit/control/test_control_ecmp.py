"""EV-hash (ECMP) mode in the controller: the member/group/route difference and its
write order, the P4Runtime codec against the built P4Info, link reports, and the failure
reaction (which groups change, with exactly which members; the timeline)."""

import asyncio
import ipaddress
import json
import types

import pytest

from mrckit.control import (
    Controller, EcmpTables, EntryDiff, Rerouter, SwitchTarget, diff_ecmp, load_pipeline,
)
from mrckit.control.p4rt import _decode_group, _decode_member, _decode_route, _encode
from mrckit.control.reactor import ASSUMED_BAD
from mrckit.errors import MrcError
from mrckit.topology import (
    ALL_UPLINKS_GROUP, ActionProfileGroup, ActionProfileMember, TableEntry, TopologyError, compile_fabric, generate_clos,
)

TOPO = generate_clos()  # 2 planes; 2 T1 and 3 T0 per plane; 2 hosts per leaf; uplinks on ports 2, 3
LINK = "p0/t0-1/t1-0"


def net(text):
    return ipaddress.IPv6Network(text)


def m(mid, port):
    return ActionProfileMember(mid, "set_egress", {"port": port})


# --- difference and order ------------------------------------------------------------------
def test_identical_tables_need_no_write():
    cfg = compile_fabric(TOPO, mode="ecmp").switch("p0-t0-0")
    want = EcmpTables.of(cfg)
    have = EcmpTables(tuple(reversed(cfg.members)), cfg.groups, tuple(reversed(cfg.routes)))
    d = diff_ecmp(want, have)
    assert len(d) == 0 and d.phases() == []


def test_phases_create_before_use_and_delete_after_last_use():
    want = EcmpTables(members=(m(1, 0), m(2, 1), m(3, 2)), groups=(ActionProfileGroup(5, (2, 3)),),
                      routes=(TableEntry.route(net("2001:db8:100:1::/64"), group=5),))
    have = EcmpTables(members=(m(3, 7), m(9, 9)), groups=(ActionProfileGroup(6, (9,)),),
                      routes=(TableEntry.route(net("2001:db8:100:1::/64"), group=6),
                              TableEntry.route(net("2001:db8:100:7::/64"), member=9)))
    d = diff_ecmp(want, have)
    assert d.summary() == ("members 2 insert, 1 modify, 1 delete; groups 1 insert, 0 modify, 1 delete; "
                           "routes 0 insert, 1 modify, 1 delete")
    assert d.phases() == [
        [("insert", m(1, 0)), ("insert", m(2, 1)), ("modify", m(3, 2))],          # ascending member id
        [("insert", ActionProfileGroup(5, (2, 3)))],
        [("modify", TableEntry.route(net("2001:db8:100:1::/64"), group=5))],
        [("delete", TableEntry.route(net("2001:db8:100:7::/64"), member=9))],
        [("delete", ActionProfileGroup(6, (9,)))],
        [("delete", m(9, 9))]]


def test_a_group_with_other_members_is_a_modify():
    d = diff_ecmp(EcmpTables(groups=(ActionProfileGroup(1025, (3, 4)),)),
                  EcmpTables(groups=(ActionProfileGroup(1025, (4,)),)))
    assert d.groups == EntryDiff(modify=(ActionProfileGroup(1025, (3, 4)),))


def test_a_duplicate_is_refused():
    with pytest.raises(MrcError, match="two entries for ecmp_selector 3"):
        diff_ecmp(EcmpTables(members=(m(3, 1), m(3, 2))), EcmpTables())


# --- P4Runtime codec (the P4Info p4c built) -------------------------------------------------
@pytest.fixture(scope="module")
def schema():
    return load_pipeline().schema


def test_codec_round_trip(schema):
    member = m(4, 3)
    e = _encode(schema, member).action_profile_member
    assert (e.member_id, e.action.params[0].value) == (4, b"\x03")
    assert _decode_member(schema, e) == member
    group = ActionProfileGroup(1025, (3, 4))
    g = _encode(schema, group).action_profile_group
    assert [(x.member_id, x.weight) for x in g.members] == [(3, 1), (4, 1)]
    assert _decode_group(g) == group
    for route in (TableEntry.route(net("2001:db8:100:2::/64"), group=1025), TableEntry.route(net("2001:db8:100::1/128"), member=1)):
        te = _encode(schema, route).table_entry
        assert te.match[0].lpm.prefix_len == route.prefix.prefixlen
        assert _decode_route(schema, te) == route


def test_an_entity_that_does_not_fit_the_p4info(schema):
    with pytest.raises(MrcError, match="does not fit the P4Info"):
        _encode(schema, ActionProfileMember(1, "set_egress", {"port": 1 << 12}))


# --- the failure reaction (pure) -----------------------------------------------------------
def test_a_link_down_changes_exactly_these_groups():
    fabric = compile_fabric(TOPO, mode="ecmp")
    r = Rerouter(fabric)
    before = {n: r.desired(n) for n in ("p0-t0-0", "p0-t0-1", "p0-t0-2")}
    change = r.report(LINK, up=False, time_ns=100, source="fault")
    assert change.switches == ("p0-t0-0", "p0-t0-1", "p0-t0-2") and change.down == {LINK}
    diffs = {n: diff_ecmp(r.desired(n), before[n]) for n in change.switches}
    # T0 0 and T0 2: a group for leaf 1 with only the uplink to T1 1 (member 4), and the route to it.
    for n in ("p0-t0-0", "p0-t0-2"):
        assert diffs[n].phases() == [[("insert", ActionProfileGroup(2, (4,)))],
                                     [("modify", TableEntry.route(net("2001:db8:100:1::/64"), group=2))]]
    # T0 1: its uplink to T1 0 (member 3) leaves the shared group.
    assert diffs["p0-t0-1"].phases() == [[("modify", ActionProfileGroup(ALL_UPLINKS_GROUP, (4,)))]]
    assert r.report(LINK, up=False, time_ns=101) is None  # said twice: nothing more to do
    r.done(change, 150, {"p0-t0-0": 2, "p0-t0-1": 1, "p0-t0-2": 2}, {})
    assert r.rerouted == {LINK: 150}
    back = r.report(LINK, up=True, time_ns=200)
    assert back.up and back.down == frozenset()
    restore = {n: diff_ecmp(r.desired(n), EcmpTables.of(fabric.switch(n, [LINK]))) for n in back.switches}
    for n in ("p0-t0-0", "p0-t0-2"):  # route back to the shared group first, then the group goes
        assert restore[n].phases() == [[("modify", TableEntry.route(net("2001:db8:100:1::/64"), group=ALL_UPLINKS_GROUP))],
                                       [("delete", ActionProfileGroup(2, (4,)))]]
    assert restore["p0-t0-1"].phases() == [[("modify", ActionProfileGroup(ALL_UPLINKS_GROUP, (3, 4)))]]
    r.done(back, 250, {"p0-t0-0": 2, "p0-t0-1": 1, "p0-t0-2": 2}, {})
    assert r.rerouted == {} and r.links_down() == []
    assert [(mk.kind, mk.time_ns) for mk in r.timeline.marks] == [
        ("link_down", 100), ("reroute", 150), ("link_up", 200), ("restore", 250)]
    assert r.timeline.marks[1].detail == "groups and routes rewritten on 3 of 3 switches (5 updates)"


def _event(**kw):
    base = dict(peer="2001:db8:100:2::1", ev=0x10000005, new_state=ASSUMED_BAD, reason="RTO_TIMEOUT",
                wall_time_ns=0, link="")
    return types.SimpleNamespace(**(base | kw))


def test_first_assumed_bad_is_marked_once_per_report_and_congestion_is_not():
    r = Rerouter(compile_fabric(TOPO, mode="ecmp"))
    r.host_event("h0-0", _event(), 50)  # no link reported down yet: not on the timeline
    r.report(LINK, up=False, time_ns=100)
    r.host_event("h0-0", _event(reason="SACK_ALWAYS_SKIP"), 110)
    r.host_event("h0-1", _event(wall_time_ns=120), 121)
    r.host_event("h1-0", _event(), 130)
    r.host_event("h1-0", _event(peer="", reason="PORT_DOWN", link="p1/t0-1/down-0"), 140)
    assert [(mk.kind, mk.time_ns, mk.detail) for mk in r.timeline.marks] == [
        ("link_down", 100, "reported"),
        ("first_assumed_bad", 120, "h0-1: RTO_TIMEOUT peer 2001:db8:100:2::1 EV 0x10000005"),
        ("link_down", 140, "port down seen by h1-0")]


def test_host_links_and_unknown_links():
    r = Rerouter(compile_fabric(TOPO, mode="ecmp"))
    assert r.report("p0/t0-1/down-0", up=False, time_ns=1) is None  # on the timeline, no group changes
    assert r.links_down() == ["p0/t0-1/down-0"] and r.timeline.marks[-1].kind == "link_down"
    with pytest.raises(TopologyError, match="no link p0/t0-7/t1-0"):
        r.report("p0/t0-7/t1-0", up=False, time_ns=2)


# --- the controller (no switch reachable: the reaction is still decided and recorded) -----
def _controller(tmp_path, **kw):
    targets = [SwitchTarget(s.name, f"unix:{tmp_path}/{s.name}.sock") for s in TOPO.switches]
    return Controller(TOPO, targets, [], load_pipeline(), mode="ecmp", name="fab", run_dir=tmp_path, **kw)


def test_a_restarted_controller_adopts_the_links_reported_down(tmp_path):
    ctl = _controller(tmp_path)  # no saved status: nothing to take over
    assert ctl.rerouter.down == {}

    async def reports():
        await ctl.link_report(LINK, up=False, time_ns=9)
        await ctl.link_report("p0/t0-2/t1-1", up=False)
        await ctl.link_report("p0/t0-2/t1-1", up=True)

    asyncio.run(reports())
    ctl.save_status(stopped=True)
    again = _controller(tmp_path)
    assert again.rerouter.down == {LINK: 9} and again.rerouter.rerouted == {LINK: 9}
    # Its first programming already avoids the link.
    assert again.rerouter.desired("p0-t0-0").groups == (ActionProfileGroup(2, (4,)), ActionProfileGroup(1025, (3, 4)))


def test_a_report_while_switches_are_unreachable_is_recorded_and_left_to_reconcile(tmp_path):
    ctl = _controller(tmp_path)
    written = asyncio.run(ctl.link_report(LINK, up=False, time_ns=100))
    assert written == {}
    marks = ctl.timeline()
    assert [mk.kind for mk in marks] == ["link_down", "reroute"]
    assert "not reached: p0-t0-0, p0-t0-1, p0-t0-2 (reconciled on reconnect)" in marks[1].detail
    status = ctl.status()
    assert status["mode"] == "ecmp" and status["links_down"] == [LINK] and status["rerouted"][LINK] > 0
    json.dumps(status)  # plain data for the status file
    with pytest.raises(TopologyError):
        asyncio.run(ctl.link_report("p9/t0-0/t1-0", up=False))


def test_srv6_mode_denies_a_reported_link_on_every_host(tmp_path):
    targets = [SwitchTarget("p0-t0-0", "unix:/nonexistent")]
    ctl = Controller(TOPO, targets, [], load_pipeline(), name="s", run_dir=tmp_path)
    assert ctl.rerouter is None
    assert asyncio.run(ctl.link_report(LINK, up=False, time_ns=5)) == {}
    assert [(mk.kind, mk.links) for mk in ctl.timeline()] == [("link_down", (LINK,))]
    assert ctl.status()["mode"] == "srv6" and ctl.status()["rerouted"] == {}
    # The reactor denies the reported link at its next decision, from the report alone.
    (deny,) = ctl.reactor.decide(10)
    assert deny.kind == "deny" and deny.links == (LINK,) and deny.reason.startswith("link report")
    assert ctl.status()["links_down"] == [LINK]


def test_ecmp_mode_needs_a_pipeline_with_ipv6_fib(tmp_path):
    from mrckit.control.pipeline import DEFAULT_P4INFO

    text = DEFAULT_P4INFO.read_text()
    old = tmp_path / "old.p4info.txtpb"  # an older P4Info: no ipv6_fib, no selector
    start = text.index("tables {\n  preamble {\n    id: 41087164")
    end = text.index("tables {", start + 1)
    text = text[:start] + text[end:]
    start = text.index("action_profiles {")
    end = text.index("\n}\n", start) + 3
    old.write_text(text[:start] + text[end:])
    pipeline = load_pipeline(old, b"{}")
    with pytest.raises(MrcError, match="no table ipv6_fib or action profile ecmp_selector: EV-hash mode"):
        Controller(TOPO, [], [], pipeline, mode="ecmp", run_dir=None)
    Controller(TOPO, [], [], pipeline, run_dir=None)  # SRv6 mode does not need them
    with pytest.raises(TopologyError, match="unknown mode 'x'"):
        Controller(TOPO, [], [], load_pipeline(), mode="x", run_dir=None)
