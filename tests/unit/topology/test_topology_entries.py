"""TableEntry is the one table entry of mrckit: a direct table's names an action, an indirect
table's (ipv6_fib) names a member or a group, a default entry has no match; its constructors
take the key names from the pipeline contract."""

import ipaddress

import pytest

from mrckit.topology.entries import ActionProfileMember, TableEntry
from mrckit.wire.pipeline import DA_PREFIX_FIELD, EGRESS_PORT_FIELD, FIB_DST_FIELD


def test_exact_takes_the_key_name_from_the_contract():
    assert TableEntry.exact("usid_fib", 0xFCBBBB001001, "set_egress", {"port": 1}) == \
        TableEntry("usid_fib", {DA_PREFIX_FIELD: 0xFCBBBB001001}, "set_egress", {"port": 1})
    assert TableEntry.exact("port_config", 3).match == {EGRESS_PORT_FIELD: 3}
    assert TableEntry.exact("MrcIngress.my_usid", 5, "usid_un").match == {DA_PREFIX_FIELD: 5}
    with pytest.raises(ValueError, match="unknown table 'nope': the switch has my_usid"):
        TableEntry.exact("nope", 1)


def test_route_is_an_indirect_entry_of_ipv6_fib():
    r = TableEntry.route("2001:db8:100:2::/64", group=5)
    assert (r.table, r.match, r.action, r.target) == (
        "ipv6_fib", {FIB_DST_FIELD: (int(ipaddress.IPv6Address("2001:db8:100:2::")), 64)}, None, ("group", 5))
    assert r.prefix == ipaddress.IPv6Network("2001:db8:100:2::/64")
    assert str(r) == "ipv6_fib 2001:db8:100:2::/64 -> group 5"
    assert TableEntry.route("2001:db8::1/128", member=3).target == ("member", 3)
    assert TableEntry.route("2001:db8::/32").target is None  # the key alone, as a delete names it


@pytest.mark.parametrize("make,needle", [
    (lambda: TableEntry.route("2001:db8::/32", member=1, group=2), "not both"),
    (lambda: TableEntry("ipv6_fib", {FIB_DST_FIELD: (0, 0)}, "drop", member=1), "an action or a member/group"),
    (lambda: TableEntry.route("2001:db8::1/32", member=1), "has host bits set"),
    (lambda: TableEntry.route("nonsense", member=1), "prefix 'nonsense' is not an IPv6 prefix"),
])
def test_malformed_entries_are_refused_by_name(make, needle):
    with pytest.raises(ValueError, match=needle):
        make()


def test_identity_is_table_and_match_and_equal_entries_hash_alike():
    a = TableEntry.exact("usid_fib", 7, "set_egress", {"port": 1})
    b = TableEntry.exact("usid_fib", 7, "drop")
    assert a.identity() == b.identity() and a != b
    assert hash(a) == hash(TableEntry.exact("usid_fib", 7, "set_egress", {"port": 1}))
    assert {TableEntry.route("2001:db8::/32", member=1), TableEntry.route("2001:db8::/32", member=1)} == \
        {TableEntry.route("2001:db8::/32", member=1)}


def test_default_entry_has_no_match():
    assert TableEntry("usid_fib", {}, "drop").is_default
    assert not TableEntry.exact("usid_fib", 1, "drop").is_default
    assert str(TableEntry("usid_fib", {}, "drop")) == "usid_fib default -> drop()"


def test_member_params_default_to_empty():
    assert ActionProfileMember(4, "drop") == ActionProfileMember(4, "drop", {})
