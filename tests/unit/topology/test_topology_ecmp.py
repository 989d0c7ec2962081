"""EV-hash (ECMP) mode compilation (ECMP contract section 6): every entry of a T0 and a
T1 of the default fabric, hand-checked; the groups with links down; the reference walk through
the compiled routes and groups, with the member the EV hash (mrckit.wire.ecmp) picks."""

import dataclasses
import ipaddress
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrckit.topology import (
    ALL_UPLINKS_GROUP, ActionProfileGroup, ActionProfileMember, SwitchConfig, TableEntry, TopologyError,
    compile_fabric, generate_clos, path_for_ev, paths,
)
from mrckit.wire.pipeline import EGRESS_PORT_FIELD
from mrckit.topology.walk import Walker
from mrckit.wire import ev_pack
from mrckit.wire.ecmp import ev_member

from support.topology_gen import fabric_sizes, scramble

TOPO = generate_clos()  # 2 planes; 2 T1 and 3 T0 per plane; 2 hosts per leaf (ports 0, 1; uplinks 2, 3)


@pytest.fixture(scope="module")
def fabric():
    return compile_fabric(TOPO, mode="ecmp")


def net(text):
    return ipaddress.IPv6Network(text)


def member(mid, port):
    return ActionProfileMember(mid, "set_egress", {"port": port})


def port_entry(port, src, dst, faces):
    return TableEntry("port_config", {EGRESS_PORT_FIELD: port}, "set_port",
                      {"src_mac": src, "dst_mac": dst, "faces_host": faces, "trim_threshold": 64, "ecn_threshold": 16})


def test_t0_entries(fabric):
    cfg = fabric.switch("p1-t0-2")
    assert cfg.mode == "ecmp"
    assert cfg.entries == (  # port_config exactly as in SRv6 mode; no my_usid, no usid_fib
        port_entry(0, 0x02_01_10_02_00_00, 0x02_03_10_02_00_00, 1),
        port_entry(1, 0x02_01_10_02_00_01, 0x02_03_10_02_00_01, 1),
        port_entry(2, 0x02_01_10_02_00_02, 0x02_02_10_00_00_02, 0),
        port_entry(3, 0x02_01_10_02_00_03, 0x02_02_10_01_00_02, 0))
    assert cfg.members == (member(1, 0), member(2, 1), member(3, 2), member(4, 3))
    assert cfg.groups == (ActionProfileGroup(1025, (3, 4)),)
    assert cfg.routes == (
        TableEntry.route(net("2001:db8:100:2::1/128"), member=1),
        TableEntry.route(net("2001:db8:100:2::2/128"), member=2),
        TableEntry.route(net("2001:db8:100::/64"), group=1025),
        TableEntry.route(net("2001:db8:100:1::/64"), group=1025))


def test_t1_entries(fabric):
    cfg = fabric.switch("p0-t1-1")
    assert cfg.entries == (
        port_entry(0, 0x02_02_00_01_00_00, 0x02_01_00_00_00_03, 0),
        port_entry(1, 0x02_02_00_01_00_01, 0x02_01_00_01_00_03, 0),
        port_entry(2, 0x02_02_00_01_00_02, 0x02_01_00_02_00_03, 0))
    assert cfg.members == (member(1, 0), member(2, 1), member(3, 2))
    assert cfg.groups == ()
    assert cfg.routes == (TableEntry.route(net("2001:db8:100::/64"), member=1), TableEntry.route(net("2001:db8:100:1::/64"), member=2),
                          TableEntry.route(net("2001:db8:100:2::/64"), member=3))
    assert fabric.entry_count() == 12 * 2 + 12  # port_config only


def test_srv6_mode_is_unchanged_and_the_default():
    srv6 = compile_fabric(TOPO)
    assert srv6.mode == "srv6" and srv6.host("h0-0").mode == "srv6"
    cfg = srv6.switch("p0-t0-0")
    assert (cfg.members, cfg.groups, cfg.routes, cfg.mode) == ((), (), (), "srv6")
    assert [e.table for e in cfg.entries][:3] == ["my_usid", "usid_fib", "usid_fib"]
    assert cfg == SwitchConfig(cfg.name, cfg.role, cfg.plane, cfg.index, cfg.usid, cfg.ports, cfg.entries)
    with pytest.raises(TopologyError, match="EV-hash mode only"):
        srv6.members("p0-t0-0")


def test_host_configs_say_ecmp(fabric):
    h = fabric.host("h1-0")
    assert h.mode == "ecmp"
    assert dataclasses.replace(h, mode="srv6") == compile_fabric(TOPO).host("h1-0")


def test_bad_mode_and_bad_links(fabric):
    with pytest.raises(TopologyError, match="unknown mode 'ospf': use one of srv6, ecmp"):
        compile_fabric(TOPO, mode="ospf")
    with pytest.raises(TopologyError, match="no link p0/t0-3/t1-0 in this fabric"):
        fabric.groups("p0-t0-0", ["p0/t0-3/t1-0"])
    with pytest.raises(TopologyError, match="no link p2/t0-0/down-0 in this fabric"):
        fabric.groups("p0-t0-0", ["p2/t0-0/down-0"])
    with pytest.raises(ValueError, match="link name"):
        fabric.groups("p0-t0-0", ["t0-1/t1-0"])


def test_a_dead_t1_link_gives_the_other_leaves_a_group_without_that_t1(fabric):
    down = ["p0/t0-1/t1-0"]  # T0 1 - T1 0 of plane 0: uplink member 3 of every T0 reaches T1 0
    groups, routes = fabric.groups_and_routes("p0-t0-0", down)
    assert groups == (ActionProfileGroup(2, (4,)), ActionProfileGroup(1025, (3, 4)))
    assert routes[2:] == (TableEntry.route(net("2001:db8:100:1::/64"), group=2),
                          TableEntry.route(net("2001:db8:100:2::/64"), group=1025))
    # T0 1 itself: its uplink to T1 0 is dead for every destination: the shared group loses it.
    assert fabric.groups("p0-t0-1", down) == (ActionProfileGroup(1025, (4,)),)
    assert fabric.routes("p0-t0-1", down) == fabric.routes("p0-t0-1")
    # The T1s and the other plane do not change.
    for name in ("p0-t1-0", "p0-t1-1", "p1-t0-0", "p1-t0-1"):
        assert fabric.switch(name, down) == fabric.switch(name)
    assert fabric.affected_switches([], down) == ["p0-t0-0", "p0-t0-1", "p0-t0-2"]
    assert fabric.affected_switches(down, down) == []


def test_groups_never_become_empty(fabric):
    both = ["p0/t0-1/t1-0", "p0/t0-1/t1-1"]  # leaf 1 unreachable in plane 0
    groups, routes = fabric.groups_and_routes("p0-t0-0", both)
    assert groups == (ActionProfileGroup(ALL_UPLINKS_GROUP, (3, 4)),)  # no group 2: it would be empty
    assert routes[2] == TableEntry.route(net("2001:db8:100:1::/64"), group=ALL_UPLINKS_GROUP)
    assert fabric.groups("p0-t0-1", both) == (ActionProfileGroup(ALL_UPLINKS_GROUP, (3, 4)),)  # all own uplinks dead
    # T0 0's own uplink to T1 1 dead and T1 0 dead towards leaf 2: nothing reaches leaf 2.
    mixed = ["p0/t0-0/t1-1", "p0/t0-2/t1-0"]
    assert fabric.groups_and_routes("p0-t0-0", mixed) == (
        (ActionProfileGroup(ALL_UPLINKS_GROUP, (3,)),),
        fabric.routes("p0-t0-0"))


def test_host_links_change_no_group(fabric):
    assert fabric.affected_switches([], ["p0/t0-1/down-0"]) == []
    assert fabric.switch("p0-t0-1", ["p0/t0-1/down-0"]) == fabric.switch("p0-t0-1")


def test_walk_takes_the_member_the_ev_hash_picks(fabric):
    walker = Walker(fabric)
    t1s = set()
    for salt in range(64):
        ev = ev_pack(1, 0, salt * 977)
        tr = walker.walk("h0-0", "h2-1", ev)
        assert tr.delivered and tr.da == ipaddress.IPv6Address("2001:db8:100:2::2")
        spine = ev_member((3, 4), ev) - 3  # member 3 = uplink to T1 0, member 4 = T1 1
        assert tr.links == path_for_ev(TOPO, "h0-0", "h2-1", ev_pack(1, spine)).links
        assert [type(h) for h in tr.hops[0].hits] == [TableEntry, ActionProfileGroup, ActionProfileMember, TableEntry]
        t1s.add(spine)
    assert t1s == {0, 1}  # the T1 field of the EV does not choose: the hash does


def test_walk_with_a_link_down_avoids_it(fabric):
    walker = Walker(fabric, down=["p1/t0-2/t1-1"])
    for salt in range(32):
        tr = walker.walk("h0-1", "h2-0", ev_pack(1, 1, salt))
        assert tr.delivered and "p1/t0-2/t1-1" not in tr.links


@pytest.mark.parametrize("down, dropped_on", [
    (["p0/t0-0/t1-0", "p0/t0-0/t1-1"], "p0/t0-0/t1-"),   # every uplink of the source T0
    (["p0/t0-2/t1-0", "p0/t0-2/t1-1"], "p0/t0-2/t1-"),   # every uplink of the destination T0
    (["p0/t0-2/down-1"], "p0/t0-2/down-1"),             # the destination host's link
    (["p0/t0-0/down-1"], "p0/t0-0/down-1"),             # the source host's link
])
def test_walk_drops_on_a_down_link_the_groups_still_use(fabric, down, dropped_on):
    """With no path left the compiler keeps the groups' members (docs/topology.md); the walk
    must not carry the packet over the down link."""
    walker = Walker(fabric, down=down)
    for salt in range(16):
        tr = walker.walk("h0-1", "h2-1", ev_pack(0, 0, salt))
        assert not tr.delivered and tr.reached is None and tr.drop == "link_down"
        assert tr.drop_link.startswith(dropped_on) and tr.drop_link in down
        assert tr.drop_link not in tr.links and not set(tr.links) & set(down)


def test_srv6_walk_drops_on_a_down_link():
    fabric = compile_fabric(TOPO)
    down = Walker(fabric, down=["p1/t0-0/t1-1"])
    tr = down.walk("h0-0", "h2-1", ev_pack(1, 1, 5))
    assert (tr.delivered, tr.drop, tr.drop_link, tr.links) == (False, "link_down", "p1/t0-0/t1-1", ("p1/t0-0/down-0",))
    assert down.walk("h0-0", "h2-1", ev_pack(1, 0, 5)).delivered  # the other spine's path is up
    with pytest.raises(TopologyError, match="no link p1/t0-9/t1-1"):
        Walker(fabric, down=["p1/t0-9/t1-1"])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=fabric_sizes, seed=st.integers(0, 2**32), salt=st.integers(0, 2**20 - 1), down_count=st.integers(0, 3))
def test_walk_delivers_every_pair_and_uses_every_route(size, seed, salt, down_count):
    """Random fabrics, shuffled ids and ports, random T0-T1 links down: every host pair on every
    plane is delivered along one of its paths, avoiding the links down when some path does.
    With no link down, every route and group is used (none unused, none missing); with links
    down a T1 that every T0 avoids towards some leaf legitimately keeps an unused route."""
    topo = scramble(generate_clos(**size), seed)
    rnd = random.Random(seed)
    t1_links = [link.name for link in topo.links() if "/t1-" in link.name]
    down = rnd.sample(t1_links, min(down_count, len(t1_links)))
    fabric = compile_fabric(topo, mode="ecmp")
    walker = Walker(fabric, down=down)
    used = set()
    for s in topo.hosts:
        for d in topo.hosts:
            if s == d:
                continue
            candidates = {p.links for p in paths(topo, s.name, d.name)}
            for plane in range(topo.planes):
                alive = {p for p in candidates if p[0].startswith(f"p{plane}/") and not set(p) & set(down)}
                taken = set()
                # EVs until the hash has sent one over every usable path (bounded: 64 per path).
                for k in range(64 * topo.t1_per_plane[plane]):
                    ev = ev_pack(plane, 0, (salt + 7919 * k) % (1 << 20))
                    tr = walker.walk(s.name, d.name, ev)
                    if not alive:  # the groups keep their members; the packet dies on a down link
                        assert not tr.delivered and tr.drop == "link_down" and tr.drop_link in down, tr
                        break
                    assert tr.delivered, tr
                    assert tr.links in alive, (tr.links, down)
                    taken.add(tr.links)
                    for hop in tr.hops:
                        used |= {(hop.switch, hit) for hit in hop.hits if not (isinstance(hit, TableEntry) and hit.target is None)}
                    if taken >= alive:
                        break
                assert taken >= alive, "the hash never took some usable path"
    if down:
        return
    for sw in topo.switches:
        cfg = fabric.switch(sw.name)
        routes = {(sw.name, r) for r in cfg.routes}
        assert routes <= used, sorted(map(str, (r for _, r in routes - used)))[:5]
        assert {(sw.name, g) for g in cfg.groups} <= used
