"""The EV-hash (ECMP) API of ``SwitchTables`` (docs/ecmp-mode.md): members, groups and
ipv6_fib routes round-trip, the map bytes are the contract's layout, and every refused call names
what is wrong and changes nothing."""

import ipaddress

import pytest

from mrckit.errors import MrcError
from mrckit.switch import tables as T
from mrckit.wire import pipeline as P
from mrckit.switch.errors import EntryExists, EntryInUse, EntryNotFound, GroupTooLarge, UnknownReference
from mrckit.topology.entries import ActionProfileGroup, ActionProfileMember, TableEntry

P64 = ipaddress.IPv6Network("2001:db8:100:1::/64")


def state(t):
    return t.ecmp.members(), t.ecmp.groups(), t.ecmp.routes()


@pytest.fixture
def tables(switch):
    """Members 1 (port 1), 2 (port 2), 9 (drop); group 5 = {1, 2}; route P64 -> group 5 and
    2001:db8::1/128 -> member 9."""
    t = switch.tables
    t.ecmp.write_member(ActionProfileMember(2, "set_egress", {"port": 2}))
    t.ecmp.write_member(ActionProfileMember(1, "MrcIngress.set_egress", {"port": 1}))
    t.ecmp.write_member(ActionProfileMember(9, "drop"))
    t.ecmp.write_group(ActionProfileGroup(5, (2, 1)))
    t.ecmp.write_route(TableEntry.route(P64, group=5))
    t.ecmp.write_route(TableEntry.route("2001:db8::1/128", member=9))
    return t


def test_roundtrip_and_map_layout(tables):
    t = tables
    assert t.ecmp.members() == [ActionProfileMember(1, "set_egress", {"port": 1}),
                                ActionProfileMember(2, "set_egress", {"port": 2}), ActionProfileMember(9, "drop", {})]
    assert t.ecmp.groups() == [ActionProfileGroup(5, (1, 2))]
    assert t.ecmp.routes() == [TableEntry.route("2001:db8::1/128", member=9), TableEntry.route(P64, group=5)]
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
    t.ecmp.write_member(ActionProfileMember(9, "set_egress", {"port": 7}), modify=True)
    t.ecmp.write_group(ActionProfileGroup(5, (9,)), modify=True)
    t.ecmp.write_route(TableEntry.route(P64, member=1), modify=True)
    assert t.ecmp.members()[2] == ActionProfileMember(9, "set_egress", {"port": 7})
    assert t.ecmp.groups() == [ActionProfileGroup(5, (9,))]
    assert t.ecmp.routes()[1] == TableEntry.route(P64, member=1)
    t.ecmp.delete_group(5)
    t.ecmp.delete_route(TableEntry.route("2001:db8::1/128"))
    t.ecmp.delete_member(9)
    assert t.ecmp.groups() == [] and [m.member_id for m in t.ecmp.members()] == [1, 2]
    t.ecmp.clear()
    assert state(t) == ([], [], [])


def test_empty_group_is_allowed(tables):
    tables.ecmp.write_group(ActionProfileGroup(6, ()))
    assert tables.ecmp.groups()[1] == ActionProfileGroup(6, ())


def test_full_group_of_256(tables):
    t = tables
    for m in range(100, 354):
        t.ecmp.write_member(ActionProfileMember(m, "drop"))
    members = [1, 2] + list(range(100, 354))
    t.ecmp.write_group(ActionProfileGroup(7, tuple(reversed(members))))
    assert t.ecmp.groups()[-1] == ActionProfileGroup(7, tuple(sorted(members)))


BAD_CALLS = [
    # write_member
    (lambda t: t.ecmp.write_member(ActionProfileMember(-1, "drop")), MrcError, "member id -1"),
    (lambda t: t.ecmp.write_member(ActionProfileMember(1 << 32, "drop")), MrcError, "32-bit"),
    (lambda t: t.ecmp.write_member(ActionProfileMember(True, "drop")), MrcError, "member id True"),
    (lambda t: t.ecmp.write_member(ActionProfileMember(3, "usid_un")), MrcError, "not one of set_egress, drop"),
    (lambda t: t.ecmp.write_member(ActionProfileMember(3, "set_egress")), MrcError, r"parameters \[\] given, \['port'\]"),
    (lambda t: t.ecmp.write_member(ActionProfileMember(3, "drop", {"port": 1})), MrcError, "parameters"),
    (lambda t: t.ecmp.write_member(ActionProfileMember(3, "set_egress", {"port": 512})), MrcError, "does not fit 9 bits"),
    (lambda t: t.ecmp.write_member(ActionProfileMember(1, "drop")), EntryExists, "member 1 exists"),
    (lambda t: t.ecmp.write_member(ActionProfileMember(3, "drop"), modify=True), EntryNotFound, "no member 3"),
    # delete_member
    (lambda t: t.ecmp.delete_member(3), EntryNotFound, "no member 3"),
    (lambda t: t.ecmp.delete_member(1), EntryInUse, "member 1 is still used by group 5"),
    (lambda t: t.ecmp.delete_member(9), EntryInUse, "member 9 is still used by route 2001:db8::1/128"),
    (lambda t: t.ecmp.delete_member("1"), MrcError, "member id '1'"),
    # write_group
    (lambda t: t.ecmp.write_group(ActionProfileGroup(-5, (1,))), MrcError, "group id -5"),
    (lambda t: t.ecmp.write_group(ActionProfileGroup(6, (1, -1))), MrcError, "member id -1"),
    (lambda t: t.ecmp.write_group(ActionProfileGroup(6, (1, 2, 1))), MrcError, "member 1 listed twice"),
    (lambda t: t.ecmp.write_group(ActionProfileGroup(6, (1, 3, 4))), UnknownReference, "group 6: no member 3, 4"),
    (lambda t: t.ecmp.write_group(ActionProfileGroup(6, tuple(range(257)))), GroupTooLarge, "257 members, at most 256"),
    (lambda t: t.ecmp.write_group(ActionProfileGroup(5, (1,))), EntryExists, "group 5 exists"),
    (lambda t: t.ecmp.write_group(ActionProfileGroup(6, (1,)), modify=True), EntryNotFound, "no group 6"),
    (lambda t: t.ecmp.write_group(ActionProfileGroup(5, (1, 3)), modify=True), UnknownReference, "no member 3"),
    # delete_group
    (lambda t: t.ecmp.delete_group(6), EntryNotFound, "no group 6"),
    (lambda t: t.ecmp.delete_group(5), EntryInUse, "group 5 is still used by route 2001:db8:100:1::/64"),
    # write_route (a route that is no IPv6 prefix, or names both, is refused by TableEntry itself)
    (lambda t: t.ecmp.write_route(TableEntry.route("2001:db8::1/64", member=1)), ValueError, "has host bits set"),
    (lambda t: t.ecmp.write_route(TableEntry.route("nonsense", member=1)), ValueError, "prefix 'nonsense'"),
    (lambda t: t.ecmp.write_route(TableEntry.route(ipaddress.IPv4Network("192.0.2.0/24"), member=1)), ValueError,
     "not an IPv6 prefix"),
    (lambda t: t.ecmp.write_route(TableEntry.route("2001:db8:1::/48")), MrcError, "exactly one of member and group"),
    (lambda t: t.ecmp.write_route(TableEntry.route("2001:db8:1::/48", member=1, group=5)), ValueError, "not both"),
    (lambda t: t.ecmp.write_route(TableEntry.exact("usid_fib", 1)), MrcError, "is not an ipv6_fib TableEntry"),
    (lambda t: t.ecmp.write_route(TableEntry.route("2001:db8:1::/48", member=3)), UnknownReference, "no member 3"),
    (lambda t: t.ecmp.write_route(TableEntry.route("2001:db8:1::/48", group=6)), UnknownReference, "no group 6"),
    (lambda t: t.ecmp.write_route(TableEntry.route("2001:db8:1::/48", group=-6)), MrcError, "group id -6"),
    (lambda t: t.ecmp.write_route(TableEntry.route(P64, member=1)), EntryExists, "prefix 2001:db8:100:1::/64 exists"),
    # modify is exact-prefix: a covering /64 does not make the /80 exist
    (lambda t: t.ecmp.write_route(TableEntry.route("2001:db8:100:1::/80", member=1), modify=True), EntryNotFound,
     "no prefix 2001:db8:100:1::/80"),
    (lambda t: t.ecmp.write_route(TableEntry.route(P64, member=3), modify=True), UnknownReference, "no member 3"),
    # delete_route
    (lambda t: t.ecmp.delete_route(TableEntry.route("2001:db8:100:1::/80")), EntryNotFound, "no entry for prefix"),
    (lambda t: t.ecmp.delete_route(TableEntry.route("2001:db8::/32")), EntryNotFound, "no entry for prefix 2001:db8::/32"),
    (lambda t: t.ecmp.delete_route(TableEntry.route("2001:db8::/129")), ValueError, "2001:db8::/129"),
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
        t.ecmp.write_member(ActionProfileMember(m, "drop"))
    with pytest.raises(MrcError, match=r"full \(4096 entries\), cannot add member 4096"):
        t.ecmp.write_member(ActionProfileMember(T.ECMP_PROFILE.size, "drop"))
    for g in range(T.ECMP_PROFILE.max_groups):
        t.ecmp.write_group(ActionProfileGroup(g, (g,)))
    with pytest.raises(MrcError, match=r"full \(1024 entries\), cannot add group 1024"):
        t.ecmp.write_group(ActionProfileGroup(T.ECMP_PROFILE.max_groups, (0,)))
    assert len(t.ecmp.members()) == T.ECMP_PROFILE.size and len(t.ecmp.groups()) == T.ECMP_PROFILE.max_groups


def test_full_ipv6_fib_is_a_clear_error(switch):
    """65536 routes fill ipv6_fib; the next insert is refused by name, a modify still works."""
    t = switch.tables
    t.ecmp.write_member(ActionProfileMember(1, "drop"))
    fib = t.maps["ipv6_fib"]
    ref = bytes(T.FibRef(T.FIB_REF_MEMBER, 1))
    head = (64).to_bytes(4, "little") + bytes.fromhex("20010db8")
    for i in range(P.MRC_SWITCH.table(P.IPV6_FIB).size - 1):  # raw bytes straight into the map, for speed
        fib.update(head + i.to_bytes(4, "big") + bytes(8), ref)
    t.ecmp.write_route(TableEntry.route("2001:db9::/32", member=1))
    with pytest.raises(MrcError, match=r"ipv6_fib: full \(65536 entries\), cannot add prefix 2001:dba::/32"):
        t.ecmp.write_route(TableEntry.route("2001:dba::/32", member=1))
    t.ecmp.write_route(TableEntry.route("2001:db9::/32", member=1), modify=True)
    assert fib.lookup(T.lpm_key(ipaddress.IPv6Network("2001:dba::/32"))) is None
