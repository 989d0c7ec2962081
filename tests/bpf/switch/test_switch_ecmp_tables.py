"""The EV-hash (ECMP) API of ``SwitchTables`` (docs/ecmp-mode.md): members, groups and
ipv6_fib routes round-trip, the map bytes are the contract's layout, and every refused call names
what is wrong and changes nothing."""

import ipaddress

import pytest

from mrckit.errors import MrcError
from mrckit.switch import tables as T
from mrckit.wire import pipeline as P
from mrckit.switch.ebpf_target import EntryExists, EntryInUse, EntryNotFound, GroupTooLarge, UnknownReference

P64 = ipaddress.IPv6Network("2001:db8:100:1::/64")


def state(t):
    return t.read_members(), t.read_groups(), t.read_routes()


@pytest.fixture
def tables(switch):
    """Members 1 (port 1), 2 (port 2), 9 (drop); group 5 = {1, 2}; route P64 -> group 5 and
    2001:db8::1/128 -> member 9."""
    t = switch.tables
    t.write_member(2, "set_egress", {"port": 2})
    t.write_member(1, "MrcIngress.set_egress", {"port": 1})
    t.write_member(9, "drop")
    t.write_group(5, [2, 1])
    t.write_route(P64, group=5)
    t.write_route("2001:db8::1/128", member=9)
    return t


def test_roundtrip_and_map_layout(tables):
    t = tables
    assert t.read_members() == {1: ("set_egress", {"port": 1}), 2: ("set_egress", {"port": 2}), 9: ("drop", {})}
    assert t.read_groups() == {5: (1, 2)}
    assert t.read_routes() == {ipaddress.IPv6Network("2001:db8::1/128"): ("member", 9), P64: ("group", 5)}
    # Bytes of the contract: LPM key = prefixlen (host order) | 16 address bytes (network order);
    # fib_ref = kind, id; group = count | members ascending, zero after them.
    raw = dict(t.maps["ipv6_fib"].typed(None, None).items())
    key = (64).to_bytes(4, "little") + P64.network_address.packed
    assert raw[key] == (2).to_bytes(4, "little") + (5).to_bytes(4, "little")
    group = t.maps["ecmp_group"].typed(None, None).lookup(5)
    assert group == b"".join(v.to_bytes(4, "little") for v in (2, 1, 2)) + bytes(4 * 254)
    assert t.maps["ecmp_member"].lookup(9).action == P.BPF_ACTION_IDS[P.DROP]


def test_modify_and_delete_in_dependency_order(tables):
    t = tables
    t.write_member(9, "set_egress", {"port": 7}, modify=True)
    t.write_group(5, [9], modify=True)
    t.write_route(P64, member=1, modify=True)
    assert t.read_members()[9] == ("set_egress", {"port": 7})
    assert t.read_groups() == {5: (9,)}
    assert t.read_routes()[P64] == ("member", 1)
    t.delete_group(5)
    t.delete_route("2001:db8::1/128")
    t.delete_member(9)
    assert t.read_groups() == {} and list(t.read_members()) == [1, 2]
    t.clear_ecmp()
    assert state(t) == ({}, {}, {})


def test_empty_group_is_allowed(tables):
    tables.write_group(6, [])
    assert tables.read_groups()[6] == ()


def test_full_group_of_256(tables):
    t = tables
    for m in range(100, 354):
        t.write_member(m, "drop")
    members = [1, 2] + list(range(100, 354))
    t.write_group(7, reversed(members))
    assert t.read_groups()[7] == tuple(sorted(members))


BAD_CALLS = [
    # write_member
    (lambda t: t.write_member(-1, "drop"), MrcError, "member id -1"),
    (lambda t: t.write_member(1 << 32, "drop"), MrcError, "32-bit"),
    (lambda t: t.write_member(True, "drop"), MrcError, "member id True"),
    (lambda t: t.write_member(3, "usid_un"), MrcError, "not one of set_egress, drop"),
    (lambda t: t.write_member(3, "set_egress"), MrcError, r"parameters \[\] given, \['port'\]"),
    (lambda t: t.write_member(3, "drop", {"port": 1}), MrcError, "parameters"),
    (lambda t: t.write_member(3, "set_egress", {"port": 512}), MrcError, "does not fit 9 bits"),
    (lambda t: t.write_member(1, "drop"), EntryExists, "member 1 exists"),
    (lambda t: t.write_member(3, "drop", modify=True), EntryNotFound, "no member 3"),
    # delete_member
    (lambda t: t.delete_member(3), EntryNotFound, "no member 3"),
    (lambda t: t.delete_member(1), EntryInUse, "member 1 is still used by group 5"),
    (lambda t: t.delete_member(9), EntryInUse, "member 9 is still used by route 2001:db8::1/128"),
    (lambda t: t.delete_member("1"), MrcError, "member id '1'"),
    # write_group
    (lambda t: t.write_group(-5, [1]), MrcError, "group id -5"),
    (lambda t: t.write_group(6, [1, -1]), MrcError, "member id -1"),
    (lambda t: t.write_group(6, [1, 2, 1]), MrcError, "member 1 listed twice"),
    (lambda t: t.write_group(6, [1, 3, 4]), UnknownReference, "group 6: no member 3, 4"),
    (lambda t: t.write_group(6, range(257)), GroupTooLarge, "257 members, at most 256"),
    (lambda t: t.write_group(5, [1]), EntryExists, "group 5 exists"),
    (lambda t: t.write_group(6, [1], modify=True), EntryNotFound, "no group 6"),
    (lambda t: t.write_group(5, [1, 3], modify=True), UnknownReference, "no member 3"),
    # delete_group
    (lambda t: t.delete_group(6), EntryNotFound, "no group 6"),
    (lambda t: t.delete_group(5), EntryInUse, "group 5 is still used by route 2001:db8:100:1::/64"),
    # write_route
    (lambda t: t.write_route("2001:db8::1/64", member=1), MrcError, "has host bits set"),
    (lambda t: t.write_route("nonsense", member=1), MrcError, "prefix 'nonsense'"),
    (lambda t: t.write_route(ipaddress.IPv4Network("192.0.2.0/24"), member=1), MrcError, "not an IPv6 prefix"),
    (lambda t: t.write_route("2001:db8:1::/48"), MrcError, "exactly one of member= and group="),
    (lambda t: t.write_route("2001:db8:1::/48", member=1, group=5), MrcError, "exactly one"),
    (lambda t: t.write_route("2001:db8:1::/48", member=3), UnknownReference, "no member 3"),
    (lambda t: t.write_route("2001:db8:1::/48", group=6), UnknownReference, "no group 6"),
    (lambda t: t.write_route("2001:db8:1::/48", group=-6), MrcError, "group id -6"),
    (lambda t: t.write_route(P64, member=1), EntryExists, "prefix 2001:db8:100:1::/64 exists"),
    # modify is exact-prefix: a covering /64 does not make the /80 exist
    (lambda t: t.write_route("2001:db8:100:1::/80", member=1, modify=True), EntryNotFound,
     "no prefix 2001:db8:100:1::/80"),
    (lambda t: t.write_route(P64, member=3, modify=True), UnknownReference, "no member 3"),
    # delete_route
    (lambda t: t.delete_route("2001:db8:100:1::/80"), EntryNotFound, "no entry for prefix"),
    (lambda t: t.delete_route("2001:db8::/32"), EntryNotFound, "no entry for prefix 2001:db8::/32"),
    (lambda t: t.delete_route("2001:db8::/129"), MrcError, "2001:db8::/129"),
]


@pytest.mark.parametrize("call,error,needle", BAD_CALLS, ids=[f"{i}-{c[2][:28]}" for i, c in enumerate(BAD_CALLS)])
def test_refused_calls_name_the_problem_and_change_nothing(tables, call, error, needle):
    before = state(tables)
    with pytest.raises(error, match=needle):
        call(tables)
    assert state(tables) == before


def test_full_maps_are_clear_errors(switch):
    """Members: 4096, groups: 1024 (the refused write names the capacity, nothing changes)."""
    t = switch.tables
    for m in range(T.ECMP_PROFILE.size):
        t.write_member(m, "drop")
    with pytest.raises(MrcError, match=r"full \(4096 entries\), cannot add member 4096"):
        t.write_member(T.ECMP_PROFILE.size, "drop")
    for g in range(T.ECMP_PROFILE.max_groups):
        t.write_group(g, [g])
    with pytest.raises(MrcError, match=r"full \(1024 entries\), cannot add group 1024"):
        t.write_group(T.ECMP_PROFILE.max_groups, [0])
    assert len(t.read_members()) == T.ECMP_PROFILE.size and len(t.read_groups()) == T.ECMP_PROFILE.max_groups


def test_full_ipv6_fib_is_a_clear_error(switch):
    """65536 routes fill ipv6_fib; the next insert is refused by name, a modify still works."""
    t = switch.tables
    t.write_member(1, "drop")
    fib = t.maps["ipv6_fib"]
    ref = bytes(T.FibRef(T.FIB_REF_MEMBER, 1))
    head = (64).to_bytes(4, "little") + bytes.fromhex("20010db8")
    for i in range(P.MRC_SWITCH.table(P.IPV6_FIB).size - 1):  # raw bytes straight into the map, for speed
        fib.update(head + i.to_bytes(4, "big") + bytes(8), ref)
    t.write_route("2001:db9::/32", member=1)
    with pytest.raises(MrcError, match=r"ipv6_fib: full \(65536 entries\), cannot add prefix 2001:dba::/32"):
        t.write_route("2001:dba::/32", member=1)
    t.write_route("2001:db9::/32", member=1, modify=True)
    assert fib.lookup(T.lpm_key(ipaddress.IPv6Network("2001:dba::/32"))) is None
