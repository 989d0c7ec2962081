"""Codec bad input (design section 3.3): every out-of-range value raises ValueError naming the
field and the allowed range; malformed addresses and link names say what is wrong."""

import ipaddress

import pytest

from mrckit.wire import (
    UsidRole, active_prefix, container_pack, container_unpack, ev_from_wire, ev_unpack,
    host_link_name, nic_address, parse_link_name, parse_nic_address, parse_port_address,
    path_da, path_usids, port_address, t1_link_name, un_shift, usid_pack, usid_unpack,
)


@pytest.mark.parametrize("call,message", [
    (lambda: ev_unpack(1 << 32), r"ev=4294967296 is out of range 0\.\.4294967295"),
    (lambda: ev_from_wire(0x10000, 0), r"flow_label=65536 is out of range 0\.\.65535"),
    (lambda: ev_from_wire(0, 0x10000), r"udp_sport=65536 is out of range 0\.\.65535"),
    (lambda: usid_pack(16, UsidRole.T0, 0), r"plane=16 is out of range 0\.\.15"),
    (lambda: usid_pack(0, 0, 0), r"role=0 is out of range 1\.\.3"),
    (lambda: usid_pack(0, UsidRole.T1, 1024), r"index=1024 is out of range 0\.\.1023"),
    (lambda: usid_unpack(0), r"usid=0 is out of range 1\.\.65535"),
    (lambda: usid_unpack(0x1000), r"usid=0x1000 has the reserved role 0"),
    (lambda: container_pack([1] * 7), "usids has 7 entries; a container holds at most 6"),
    (lambda: container_pack([0x1400, 0]), r"usids\[1\]=0 is out of range 1\.\.65535"),
    (lambda: container_pack([1], locator=1 << 32), r"locator=4294967296 is out of range"),
    (lambda: container_unpack(1 << 128), "da=.* is out of range"),
    (lambda: un_shift(-1), "da=-1 is out of range"),
    (lambda: active_prefix(1 << 128), "da=.* is out of range"),
    (lambda: nic_address(1024, 0), r"leaf=1024 is out of range 0\.\.1023"),
    (lambda: nic_address(0, 1023), r"downlink=1023 is out of range 0\.\.1022"),
    (lambda: port_address(16, 0, 0), r"plane=16 is out of range 0\.\.15"),
    (lambda: path_usids(0, 256, 0, 1, 0), r"t1=256 is out of range 0\.\.255"),
    (lambda: path_da(0, 0, 0, 1, 1023), r"dst_downlink=1023 is out of range 0\.\.1022"),
    (lambda: path_usids(0, 0, 1024, 1, 0), r"src_leaf=1024 is out of range 0\.\.1023"),
    (lambda: t1_link_name(0, 0, 256), r"t1=256 is out of range 0\.\.255"),
    (lambda: host_link_name(0, 2000, 0), r"leaf=2000 is out of range 0\.\.1023"),
])
def test_out_of_range_names_field_and_range(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_types_are_checked():
    with pytest.raises(TypeError, match="plane must be an int, got str"):
        usid_pack("1", UsidRole.T0, 0)
    with pytest.raises(TypeError, match="got bool"):
        nic_address(True, 0)


@pytest.mark.parametrize("addr,message", [
    ("2001:db9:100:1::1", "not an mrckit host address"),
    ("2001:db8:100:1:1::1", "not an mrckit host address"),
    ("2001:db8:100:1::", "H=0"),
    ("2001:db8:201:1::3", "not a NIC address"),
    ("2001:db8:100:400::1", r"leaf=1024 is out of range"),
])
def test_bad_nic_addresses(addr, message):
    with pytest.raises(ValueError, match=message):
        parse_nic_address(addr)


def test_bad_port_addresses():
    with pytest.raises(ValueError, match="not a port address"):
        parse_port_address("2001:db8:210:1::3")
    with pytest.raises(ValueError, match="not a port address"):
        parse_port_address("2001:db8:100:1::3")


@pytest.mark.parametrize("name,message", [
    ("p1/t0-0/t2-1", "is not p<plane>/t0-<L>/t1-<t>"),
    ("p1/t0-0/t1-1/", "is not p<plane>"),
    ("P1/t0-0/t1-1", "is not p<plane>"),
    ("p16/t0-0/t1-1", r"plane=16 is out of range"),
    ("p1/t0-0/t1-256", r"t1=256 is out of range"),
    ("p1/t0-0/down-1023", r"downlink=1023 is out of range"),
])
def test_bad_link_names(name, message):
    with pytest.raises(ValueError, match=message):
        parse_link_name(name)


def test_addresses_by_hand():
    assert nic_address(1, 2) == ipaddress.IPv6Address("2001:db8:100:1::3")
    assert nic_address(1023, 1022) == ipaddress.IPv6Address("2001:db8:100:3ff::3ff")
    assert port_address(15, 0, 0) == ipaddress.IPv6Address("2001:db8:20f:0::1")
    assert parse_port_address("2001:db8:201:1::3") == (1, (1, 2))
    assert t1_link_name(1, 0, 2) == "p1/t0-0/t1-2" and host_link_name(1, 1, 2) == "p1/t0-1/down-2"


def test_path_links_name_both_host_links_and_both_t1_links_across_leaves():
    from mrckit.wire.addressing import HostLocation, path_links
    a, b, c = HostLocation(0, 1), HostLocation(2, 0), HostLocation(0, 3)
    assert path_links(1, 3, a, b) == {"p1/t0-0/down-1", "p1/t0-2/down-0", "p1/t0-0/t1-3", "p1/t0-2/t1-3"}
    assert path_links(1, 3, a, c) == {"p1/t0-0/down-1", "p1/t0-0/down-3"}  # one leaf: no T1 on it
    with pytest.raises(ValueError, match="t1=256"):
        path_links(0, 256, a, b)
