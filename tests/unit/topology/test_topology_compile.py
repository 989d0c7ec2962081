"""Compilation details: the bmv2 port limit, the MAC and interface-name plans, host configs
that hold nothing per peer, and model checks on topologies built in Python."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrckit.topology import (
    FabricLinks, HostConfig, HostLinks, Role, Topology, TopologyError, compile_fabric, generate_clos, mac_address,
    mac_str, parse_mac,
)
from mrckit.topology.plan import IFNAME_MAX, MAC_KIND, host_ifname, mac_addresses, t0_down_ifname, t0_up_ifname, \
    t1_ifname


def test_bmv2_refuses_more_than_510_ports_ebpf_takes_them():
    topo = generate_clos(planes=1, spines=2, leaves=2, hosts_per_leaf=509)  # T0: ports 0..510
    with pytest.raises(TopologyError, match=r"p0-t0-0 has 511 ports, up to port 510; bmv2 takes at most 510"):
        compile_fabric(topo, "bmv2")
    fabric = compile_fabric(topo, "ebpf")
    assert max(fabric.switch("p0-t0-0").port_map()) == 510
    assert fabric.entries("p0-t0-0")[-1].key == 510


def test_bmv2_takes_exactly_510_ports():
    topo = generate_clos(planes=1, spines=2, leaves=2, hosts_per_leaf=508)  # ports 0..509
    bmv2, ebpf = compile_fabric(topo, "bmv2"), compile_fabric(topo, "ebpf")
    assert bmv2.switch("p0-t0-1").port_map()[509] == "t1-1"
    for sw in topo.switches:  # the controller writes the same entries to either target
        assert bmv2.switch(sw.name) == ebpf.switch(sw.name)


def test_512_ports_fit_the_ebpf_target():
    topo = generate_clos(planes=1, spines=256, leaves=2, hosts_per_leaf=256)
    assert len(compile_fabric(topo, "ebpf").switch("p0-t0-0").ports) == 512


def test_unknown_target():
    with pytest.raises(TopologyError, match="unknown target 'tofino'"):
        compile_fabric(generate_clos(), "tofino")


@given(kind=st.sampled_from(list(MAC_KIND.values())), plane=st.integers(0, 15), index=st.integers(0, 4095),
       port=st.integers(0, 65535))
def test_vectorised_macs_equal_the_scalar_plan(kind, plane, index, port):
    role = next(r for r, k in MAC_KIND.items() if k == kind)
    vec = mac_addresses(np.array([kind]), np.array([plane]), np.array([index]), np.array([port]))
    assert int(vec[0]) == mac_address(role, plane, index, port)
    mac = mac_address(role, plane, index, port)
    assert mac >> 40 == 0x02  # locally administered, unicast
    assert parse_mac(mac_str(mac)) == mac


def test_mac_plan_layout():
    assert mac_str(mac_address(Role.T0, 1, 3, 5)) == "02:01:10:03:00:05"
    assert mac_str(mac_address(Role.HOST, 1, 3, 2)) == "02:03:10:03:00:02"
    with pytest.raises(ValueError, match="malformed MAC"):
        parse_mac("02:01:10:03:00")


def test_macs_are_unique_across_the_fabric():
    fabric = compile_fabric(generate_clos(planes=3, spines=3, leaves=4, hosts_per_leaf=3))
    macs = [p.mac for s in fabric.topology.switches for p in fabric.switch(s.name).ports]
    macs += [p.mac for h in fabric.hosts() for p in h.ports]
    # switch ports: 3 planes x 4 T0 x 3 T1 x 2 ends + 12 hosts x 3 planes; host ports: 12 x 3
    assert len(macs) == len(set(macs)) == 3 * 4 * 3 * 2 + 36 + 36


def test_ifnames_fit_linux_at_the_limits():
    for name in (host_ifname(15), t0_down_ifname(1023), t0_up_ifname(255), t1_ifname(1023)):
        assert len(name) <= IFNAME_MAX


def test_host_config_holds_nothing_per_peer():
    small = compile_fabric(generate_clos(leaves=2)).host("h1-1")
    large = compile_fabric(generate_clos(leaves=9, hosts_per_leaf=2)).host("h1-1")
    assert small == large  # seven more leaves of peers, the same config
    assert {f.name for f in dataclasses.fields(HostConfig)} == {
        "name", "nic_address", "leaf", "downlink", "locator", "mtu", "nic_mtu", "planes", "t1_per_plane", "ports",
        "mode"}


def test_every_host_and_switch_config_is_produced():
    fabric = compile_fabric(generate_clos(planes=2, spines=3, leaves=3, hosts_per_leaf=2))
    hosts = list(fabric.hosts())
    switches = list(fabric.switches())
    assert [h.name for h in hosts] == [h.name for h in fabric.topology.hosts]
    assert sum(len(s.entries) for s in switches) == fabric.entry_count() == 12 + 2 * (2 * 3 * 3 * 2 + 6 * 2)


def _tiny_from(topo, **change):
    """``topo`` rebuilt through the Topology constructor with some fields changed."""
    fields = dict(planes=topo.planes, switches=topo.switches, hosts=topo.hosts, fabric_links=topo.fabric_links,
                  host_links=topo.host_links)
    return Topology(**(fields | change))


def _tiny(**change):
    return _tiny_from(generate_clos(planes=1, spines=1, leaves=2, hosts_per_leaf=1), **change)


def test_model_checks_python_built_topologies():
    assert _tiny().summary() == "1 planes, 2 T0, 1 T1, 2 hosts, 4 links, mtu 3500"
    # switch ids: 0 p0-t0-0, 1 p0-t0-1, 2 p0-t1-0
    with pytest.raises(TopologyError, match="p0-t0-0 links to p0-t1-0 twice") as err:
        _tiny(fabric_links=FabricLinks([0, 1, 0], [1, 1, 2], [2, 2, 2], [0, 1, 2]))
    assert err.value.ref == ("fabric_link", 2)
    with pytest.raises(TopologyError, match="a switch-to-switch link joins a T0 and a T1"):
        _tiny(fabric_links=FabricLinks([0, 1, 0], [1, 1, 2], [2, 2, 1], [0, 1, 3]))
    with pytest.raises(TopologyError, match="host h0-0 has two links on port 0"):
        _tiny(host_links=HostLinks([0, 1, 0], [0, 0, 0], [0, 1, 0], [0, 0, 5]))
    with pytest.raises(TopologyError, match="mtu=99999 is out of range"):
        _tiny(mtu=99999)
    with pytest.raises(TopologyError, match="link row 0: switch id 7 does not exist"):
        _tiny(fabric_links=FabricLinks([7], [1], [2], [0]))


def test_switch_roles_from_plain_strings():
    topo = generate_clos(planes=1, spines=1, leaves=1, hosts_per_leaf=1)
    switches = [type(s)(s.name, s.role.value, s.plane, s.index) for s in topo.switches]
    assert _tiny_from(topo, switches=switches).switches == topo.switches
    bad = [type(s)(s.name, "t9", s.plane, s.index) for s in topo.switches]
    with pytest.raises(TopologyError, match="switch p0-t0-0: role 't9' is not t0 or t1"):
        _tiny_from(topo, switches=bad)


def test_lookups():
    topo = generate_clos()
    with pytest.raises(TopologyError, match="no switch named 'x'"):
        topo.switch("x")
    with pytest.raises(TopologyError, match="no host named '2001:db8:100:7::1'"):
        topo.host("2001:db8:100:7::1")
    assert topo.switch_at(Role.T1, 1, 1).name == "p1-t1-1" and topo.switch_at(Role.T1, 1, 2) is None
    assert topo.host_at(2, 1).name == "h2-1" and topo.host_at(2, 2) is None
