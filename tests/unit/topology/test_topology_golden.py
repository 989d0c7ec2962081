"""Golden values of the default small fabric (2 planes, 2 T1 and 3 T0 per plane, 2 hosts per
leaf), worked out by hand from design section 3.3:

uSID = plane(4) | role(2) | index(10), role 1 T0, 2 T1, 3 host downlink, so
T0(1, 2) = 0x1000 | 0x400 | 2 = 0x1402, T1(1, 1) = 0x1000 | 0x800 | 1 = 0x1801,
DOWN(1, 1) = 0x1000 | 0xc00 | 1 = 0x1c01, T0(0, 0) = 0x0400, DOWN(0, 1) = 0x0c01.
NIC of the host on leaf L, downlink D = 2001:db8:100:L::(D+1); port on plane p = 2001:db8:2pp:L::(D+1).
Path leaf Ls -> (L, D) on plane p via T1 t: locator | T0(p,Ls) | T1(p,t) | T0(p,L) | DOWN(p,D).
"""

import ipaddress

import pytest

from mrckit.topology import compile_fabric, ev_classes_for_link, generate_clos, path_for_ev, paths
from mrckit.topology.entries import TableEntry
from mrckit.wire.pipeline import DA_PREFIX_FIELD, EGRESS_PORT_FIELD
from mrckit.topology.plan import mac_str
from mrckit.topology.walk import walk
from mrckit.wire import ev_pack
from mrckit.wire.addressing import HostLocation


@pytest.fixture(scope="module")
def topo():
    return generate_clos()


@pytest.fixture(scope="module")
def fabric(topo):
    return compile_fabric(topo)


def test_default_fabric_shape(topo):
    assert topo.planes == 2 and topo.t1_per_plane == (2, 2)
    assert [s.name for s in topo.switches] == [
        "p0-t0-0", "p0-t0-1", "p0-t0-2", "p0-t1-0", "p0-t1-1",
        "p1-t0-0", "p1-t0-1", "p1-t0-2", "p1-t1-0", "p1-t1-1"]
    assert [h.name for h in topo.hosts] == ["h0-0", "h0-1", "h1-0", "h1-1", "h2-0", "h2-1"]
    assert len(topo.fabric_links) == 12 and len(topo.host_links) == 12


def test_usids(topo):
    assert {s.name: s.usid for s in topo.switches} == {
        "p0-t0-0": 0x0400, "p0-t0-1": 0x0401, "p0-t0-2": 0x0402, "p0-t1-0": 0x0800, "p0-t1-1": 0x0801,
        "p1-t0-0": 0x1400, "p1-t0-1": 0x1401, "p1-t0-2": 0x1402, "p1-t1-0": 0x1800, "p1-t1-1": 0x1801}
    h21 = topo.host("h2-1")
    assert (h21.downlink_usid(0), h21.downlink_usid(1)) == (0x0c01, 0x1c01)


def test_addresses(topo):
    assert str(topo.host("h0-0").nic_address) == "2001:db8:100::1"
    assert str(topo.host("h2-1").nic_address) == "2001:db8:100:2::2"
    assert str(topo.host("h2-1").port_address(1)) == "2001:db8:201:2::2"
    assert str(topo.host("h1-0").port_address(0)) == "2001:db8:200:1::1"
    assert topo.host("2001:db8:100:1::2").name == "h1-1"


def test_paths_between_leaves(topo):
    found = paths(topo, "h0-0", "h2-1")
    assert [(p.plane, p.spine, p.ev_pattern(), str(p.da)) for p in found] == [
        (0, 0, "0x000xxxxx", "fcbb:bb00:400:800:402:c01::"),
        (0, 1, "0x001xxxxx", "fcbb:bb00:400:801:402:c01::"),
        (1, 0, "0x100xxxxx", "fcbb:bb00:1400:1800:1402:1c01::"),
        (1, 1, "0x101xxxxx", "fcbb:bb00:1400:1801:1402:1c01::")]
    assert found[3].links == ("p1/t0-0/down-0", "p1/t0-0/t1-1", "p1/t0-2/t1-1", "p1/t0-2/down-1")
    assert found[3].nodes == ("h0-0", "p1-t0-0", "p1-t1-1", "p1-t0-2", "h2-1")
    assert found[3].usids == (0x1400, 0x1801, 0x1402, 0x1c01)


def test_paths_within_a_leaf(topo):
    found = paths(topo, "h0-0", "h0-1")
    assert [(p.plane, p.spine, p.ev_pattern(), str(p.da), p.links) for p in found] == [
        (0, None, "0x0xxxxxxx", "fcbb:bb00:400:c01::", ("p0/t0-0/down-0", "p0/t0-0/down-1")),
        (1, None, "0x1xxxxxxx", "fcbb:bb00:1400:1c01::", ("p1/t0-0/down-0", "p1/t0-0/down-1"))]


def test_ev_to_path(topo):
    ev = 0x101ABCDE  # plane 1, T1 1, salt 0xabcde
    assert path_for_ev(topo, "h0-0", "h2-1", ev).links[1] == "p1/t0-0/t1-1"
    assert path_for_ev(topo, "h0-0", "h2-1", ev).takes(ev)
    assert not path_for_ev(topo, "h0-0", "h2-1", ev).takes(0x100ABCDE)
    # Within a leaf the T1 field is ignored.
    assert path_for_ev(topo, "h0-0", "h0-1", 0x1FF00001).links == ("p1/t0-0/down-0", "p1/t0-0/down-1")


def _da(value):
    return {DA_PREFIX_FIELD: value}


def _port_entry(port, src, dst, faces):
    return TableEntry("port_config", {EGRESS_PORT_FIELD: port}, "set_port",
                      {"src_mac": src, "dst_mac": dst, "faces_host": faces, "trim_threshold": 64, "ecn_threshold": 16})


def test_t0_entries(fabric):
    # T0 2 of plane 1: downlinks 0, 1 on ports 0, 1; uplinks to T1 0, 1 on ports 2, 3.
    assert fabric.entries("p1-t0-2") == [
        TableEntry("my_usid", _da(0xFCBBBB001402), "usid_un", {}),
        TableEntry("usid_fib", _da(0xFCBBBB001C00), "set_egress", {"port": 0}),
        TableEntry("usid_fib", _da(0xFCBBBB001C01), "set_egress", {"port": 1}),
        TableEntry("usid_fib", _da(0xFCBBBB001800), "set_egress", {"port": 2}),
        TableEntry("usid_fib", _da(0xFCBBBB001801), "set_egress", {"port": 3}),
        _port_entry(0, 0x02_01_10_02_00_00, 0x02_03_10_02_00_00, 1),
        _port_entry(1, 0x02_01_10_02_00_01, 0x02_03_10_02_00_01, 1),
        _port_entry(2, 0x02_01_10_02_00_02, 0x02_02_10_00_00_02, 0),
        _port_entry(3, 0x02_01_10_02_00_03, 0x02_02_10_01_00_02, 0)]


def test_t1_entries(fabric):
    assert fabric.entries("p0-t1-1") == [
        TableEntry("my_usid", _da(0xFCBBBB000801), "usid_un", {}),
        TableEntry("usid_fib", _da(0xFCBBBB000400), "set_egress", {"port": 0}),
        TableEntry("usid_fib", _da(0xFCBBBB000401), "set_egress", {"port": 1}),
        TableEntry("usid_fib", _da(0xFCBBBB000402), "set_egress", {"port": 2}),
        _port_entry(0, 0x02_02_00_01_00_00, 0x02_01_00_00_00_03, 0),
        _port_entry(1, 0x02_02_00_01_00_01, 0x02_01_00_01_00_03, 0),
        _port_entry(2, 0x02_02_00_01_00_02, 0x02_01_00_02_00_03, 0)]
    assert fabric.entry_count() == 10 * 1 + 2 * (12 * 2 + 12)


def test_switch_ports_and_ifnames(fabric):
    cfg = fabric.switch("p1-t0-2")
    assert cfg.port_map() == {0: "down-0", 1: "down-1", 2: "t1-0", 3: "t1-1"}
    port3 = cfg.ports[3]
    assert (port3.peer, port3.peer_ifname, port3.link, port3.faces_host) == ("p1-t1-1", "t0-2", "p1/t0-2/t1-1", False)
    assert mac_str(port3.mac) == "02:01:10:02:00:03"
    assert fabric.switch("p0-t1-0").port_map() == {0: "t0-0", 1: "t0-1", 2: "t0-2"}
    assert (cfg.usid, cfg.role, cfg.plane, cfg.index) == (0x1402, "t0", 1, 2)


def test_host_config(fabric):
    cfg = fabric.host("h2-1")
    assert (cfg.nic_address, cfg.leaf, cfg.downlink) == (ipaddress.IPv6Address("2001:db8:100:2::2"), 2, 1)
    assert (cfg.locator, cfg.mtu, cfg.nic_mtu, cfg.planes, cfg.t1_per_plane) == (0xFCBBBB00, 3500, 3460, 2, (2, 2))
    p1 = cfg.ports[1]
    assert (p1.plane, p1.ifname, str(p1.address), p1.t0, p1.t0_port, p1.link) == (
        1, "plane1", "2001:db8:201:2::2", "p1-t0-2", 1, "p1/t0-2/down-1")
    assert (mac_str(p1.mac), mac_str(p1.t0_mac)) == ("02:03:10:02:00:01", "02:01:10:02:00:01")
    # The host's MACs are exactly what its T0 rewrites to and from.
    t0_port = fabric.switch("p1-t0-2").ports[1]
    assert (t0_port.mac, t0_port.peer_mac) == (p1.t0_mac, p1.mac)


def test_links_named_by_design(topo):
    names = [ln.name for ln in topo.links()]
    assert names[:2] == ["p0/t0-0/t1-0", "p0/t0-0/t1-1"]
    assert "p1/t0-2/down-1" in names and len(set(names)) == 24
    ln = topo.host_link(topo.host_link_row(topo.host_id("h2-1"), 1))
    assert ln == ("p1/t0-2/down-1", 1, "p1-t0-2", 1, "down-1", "h2-1", 1, "plane1")


def test_failed_link_ev_classes(topo):
    assert [str(c) for c in ev_classes_for_link(topo, "p0/t0-1/t1-0")] == [
        "plane 0, T1 0, leaf 1 -> leaf *", "plane 0, T1 0, leaf * -> leaf 1"]
    assert [str(c) for c in ev_classes_for_link(topo, "p1/t0-2/down-1")] == [
        "plane 1, T1 *, leaf 2/down-1 -> leaf *", "plane 1, T1 *, leaf * -> leaf 2/down-1"]
    up, down = ev_classes_for_link(topo, "p0/t0-1/t1-0")
    assert up.matches(ev_pack(0, 0, 7), HostLocation(1, 0), HostLocation(2, 1))
    assert not up.matches(ev_pack(0, 1, 7), HostLocation(1, 0), HostLocation(2, 1))
    assert not up.matches(ev_pack(0, 0, 7), HostLocation(1, 0), HostLocation(1, 1))  # same leaf: no T1
    assert down.matches(ev_pack(0, 0, 7), HostLocation(0, 0), HostLocation(1, 1))


def test_trace_hop_by_hop(fabric):
    tr = walk(fabric, "h0-0", "h2-1", 0x10100005)
    assert [(h.switch, h.in_port, str(h.da_in), str(h.da_out), h.out_port, h.hop_limit) for h in tr.hops] == [
        ("p1-t0-0", 0, "fcbb:bb00:1400:1801:1402:1c01::", "fcbb:bb00:1801:1402:1c01::", 3, 64),
        ("p1-t1-1", 0, "fcbb:bb00:1801:1402:1c01::", "fcbb:bb00:1402:1c01::", 2, 63),
        ("p1-t0-2", 3, "fcbb:bb00:1402:1c01::", "fcbb:bb00:1c01::", 1, 62)]
    assert (tr.reached, tr.port, tr.delivered, tr.drop) == ("h2-1", "plane1", True, None)


def test_trace_drops_unknown_t1(fabric):
    tr = walk(fabric, "h0-0", "h2-1", ev_pack(1, 5, 0))
    assert (tr.drop, tr.reached, [h.switch for h in tr.hops]) == ("no_route", None, ["p1-t0-0"])
    assert tr.hops[0].out_port is None
