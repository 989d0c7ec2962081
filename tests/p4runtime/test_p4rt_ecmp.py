"""EV-hash mode over real gRPC into the real maps: action profile members and groups of
ecmp_selector and the LPM entries of ipv6_fib that name them. Write, read (single and wildcard),
modify, delete; every refusal with its canonical code, the maps left unchanged; batches."""

import ipaddress

import grpc
import pytest
from finsy.proto import p4r

from support import p4rt
from support.p4rt_harness import Client, load_p4info

from mrckit.switch.p4runtime import MRC_SWITCH, Device, EbpfBackend, P4RuntimeServer

OK, INVALID, NOT_FOUND, EXISTS, PERMISSION, EXHAUSTED, PRECONDITION, ABORTED, RANGE, UNIMPLEMENTED = 0, 3, 5, 6, 7, 8, 9, 10, 11, 12
NET = "2001:db8:100:1::/64"
HOST = "2001:db8:100:2::3/128"
U = p4rt.entity_update


@pytest.fixture
def p4info(client):
    info = load_p4info()
    client.set_pipeline(info)
    return info


def _batch(client, *updates, **kw):
    with pytest.raises(grpc.RpcError) as info:
        client.write(*updates, **kw)
    assert info.value.code() == grpc.StatusCode.UNKNOWN
    return [code for code, _ in p4rt.batch_errors(info.value)], [m for _, m in p4rt.batch_errors(info.value)]


def _base(client, p4info):
    """Members 1-3 (ports 1-3), 4 (drop); group 10 = {1, 2}; NET -> group 10; HOST -> member 3."""
    client.write(*[U("INSERT", p4rt.member(p4info, m, "set_egress", port=m)) for m in (1, 2, 3)],
                 U("INSERT", p4rt.member(p4info, 4, "drop")),
                 U("INSERT", p4rt.group(p4info, 10, [2, 1])),
                 U("INSERT", p4rt.route(p4info, NET, group_id=10)),
                 U("INSERT", p4rt.route(p4info, HOST, member_id=3)))


def _entities(client, query):
    return sorted(e.SerializeToString() for e in client.read(query))


def _bytes(*entities):
    return sorted(e.SerializeToString() for e in entities)


def test_members_groups_routes_insert_read_modify_delete(client, switch, p4info):
    _base(client, p4info)
    assert switch.members() == {1: ("set_egress", {"port": 1}), 2: ("set_egress", {"port": 2}),
                                            3: ("set_egress", {"port": 3}), 4: ("drop", {})}
    assert switch.groups() == {10: (1, 2)}
    assert {str(k): v for k, v in switch.routes().items()} == {NET: ("group", 10), HOST: ("member", 3)}

    # reads give back exactly what a canonical client wrote (groups: members ascending)
    members = [p4rt.member(p4info, m, "set_egress", port=m) for m in (1, 2, 3)] + [p4rt.member(p4info, 4, "drop")]
    assert _entities(client, p4rt.read_members()) == _bytes(*[p4r.Entity(action_profile_member=m) for m in members])
    assert _entities(client, p4rt.read_members(p4info)) == _entities(client, p4rt.read_members())
    (one,) = client.read(p4rt.read_members(p4info, 2))
    assert one.action_profile_member == members[1]
    assert client.read(p4rt.read_members(p4info, 99)) == []
    (g,) = client.read(p4rt.read_groups())
    assert g.action_profile_group == p4rt.group(p4info, 10, [1, 2])
    assert client.read(p4rt.read_groups(p4info, 10)) == [g] and client.read(p4rt.read_groups(p4info, 11)) == []
    routes = [p4rt.route(p4info, NET, group_id=10), p4rt.route(p4info, HOST, member_id=3)]
    assert _entities(client, p4rt.read_table(p4info, "ipv6_fib")) == _bytes(*[p4r.Entity(table_entry=r) for r in routes])
    (by_key,) = client.read(p4r.Entity(table_entry=p4rt.route(p4info, NET)))
    assert by_key.table_entry == routes[0]

    client.write(U("MODIFY", p4rt.member(p4info, 1, "drop")),
                 U("MODIFY", p4rt.group(p4info, 10, [3, 2])),
                 U("MODIFY", p4rt.route(p4info, HOST, member_id=4)))
    assert switch.members()[1] == ("drop", {})
    assert switch.groups() == {10: (2, 3)}
    assert client.read(p4r.Entity(table_entry=p4rt.route(p4info, HOST)))[0].table_entry.action.action_profile_member_id == 4

    client.write(U("DELETE", p4rt.route(p4info, NET)), U("DELETE", p4rt.route(p4info, HOST)),
                 U("DELETE", p4rt.group(p4info, 10)),
                 *[U("DELETE", p4rt.member(p4info, m)) for m in (1, 2, 3, 4)])
    assert client.read(p4rt.read_members(), p4rt.read_groups(), p4rt.read_table(p4info, "ipv6_fib")) == []
    assert switch.snapshot()["members"] == {} and switch.snapshot()["groups"] == {} and switch.snapshot()["routes"] == {}


def test_default_route_omits_the_field_and_reads_back_so(client, switch, p4info):
    _base(client, p4info)
    client.write(U("INSERT", p4rt.route(p4info, None, member_id=4)))
    assert switch.routes()[ipaddress.IPv6Network("::/0")] == ("member", 4)
    got = [e.table_entry for e in client.read(p4rt.read_table(p4info, "ipv6_fib")) if not e.table_entry.match]
    assert got == [p4rt.route(p4info, None, member_id=4)]
    client.write(U("DELETE", p4rt.route(p4info, "::/0")))
    assert len(switch.routes()) == 2


def test_padded_lpm_value_is_read_back_canonical(client, p4info):
    _base(client, p4info)
    padded = p4rt.route(p4info, "2001:db8:200::/48", member_id=1)
    padded.match[0].lpm.value = padded.match[0].lpm.value.rjust(16, b"\x00")
    client.write(U("INSERT", padded))
    (got,) = client.read(p4r.Entity(table_entry=p4rt.route(p4info, "2001:db8:200::/48")))
    assert got.table_entry == p4rt.route(p4info, "2001:db8:200::/48", member_id=1)


def test_the_default_entry_is_a_constant_noaction(client, p4info):
    (d,) = client.read(p4rt.read_table(p4info, "ipv6_fib", default=True))
    assert d.table_entry.is_default_action and d.table_entry.action.action.action_id == p4rt.ids(p4info, "ipv6_fib", "NoAction")[1]
    te = p4r.TableEntry(table_id=p4rt.ids(p4info, "ipv6_fib")[0], is_default_action=True)
    te.action.action.action_id = p4rt.ids(p4info, "ipv6_fib", "drop")[1]
    codes, messages = _batch(client, U("MODIFY", te))
    assert codes == [PERMISSION] and "constant NoAction" in messages[0]


def _with(msg, **fields):
    for name, v in fields.items():
        setattr(msg, name, v)
    return msg


def _cases(p4info):
    M, G, R = (lambda *a, **k: p4rt.member(p4info, *a, **k)), (lambda *a, **k: p4rt.group(p4info, *a, **k)), \
        (lambda *a, **k: p4rt.route(p4info, *a, **k))
    watched = G(20, [1]); watched.members[0].watch_port = b"\x02"
    old_watch = G(20, [1]); old_watch.members[0].watch = 2
    unknown_profile = _with(M(5, "drop"), action_profile_id=0x11FFFFFF)
    no_default_only = M(5, "NoAction")
    direct = R("2001:db8:300::/48"); direct.action.action.action_id = p4rt.ids(p4info, "ipv6_fib", "drop")[1]
    one_shot = R("2001:db8:300::/48"); one_shot.action.action_profile_action_set.action_profile_actions.add(
        action=p4r.Action(action_id=p4rt.ids(p4info, "ipv6_fib", "drop")[1]), weight=1)
    host_bits = R("2001:db8:300::/48", member_id=1); host_bits.match[0].lpm.value = bytes.fromhex("20010db8030000000000000000000001")
    zero_len = R("2001:db8:300::/48", member_id=1); zero_len.match[0].lpm.prefix_len = 0; zero_len.match[0].lpm.value = b"\x00"
    long_len = R("2001:db8:300::/48", member_id=1); long_len.match[0].lpm.prefix_len = 129
    on_usid_fib = p4rt.entry(p4info, "usid_fib", 0xFCBBBB001001); on_usid_fib.action.action_profile_member_id = 1
    return {
        # members
        "member duplicate insert": ("INSERT", M(1, "drop"), EXISTS),
        "member modify absent": ("MODIFY", M(9, "drop"), NOT_FOUND),
        "member delete absent": ("DELETE", M(9), NOT_FOUND),
        "member delete while in a group": ("DELETE", M(1), PRECONDITION),
        "member delete while named by a route": ("DELETE", M(3), PRECONDITION),
        "member id 0": ("INSERT", M(0, "drop"), INVALID),
        "member without action": ("INSERT", M(5), INVALID),
        "member with a default-only action": ("INSERT", no_default_only, INVALID),
        "member port too wide": ("INSERT", M(5, "set_egress", port=512), RANGE),
        "member of an unknown profile": ("INSERT", unknown_profile, INVALID),
        # groups
        "group duplicate insert": ("INSERT", G(10, [1]), EXISTS),
        "group modify absent": ("MODIFY", G(20, [1]), NOT_FOUND),
        "group delete absent": ("DELETE", G(20), NOT_FOUND),
        "group of an unknown member": ("INSERT", G(20, [1, 9]), NOT_FOUND),
        "group modify to an unknown member": ("MODIFY", G(10, [9]), NOT_FOUND),
        "group delete while named by a route": ("DELETE", G(10), PRECONDITION),
        "group id 0": ("INSERT", G(0, [1]), INVALID),
        "group lists a member twice": ("INSERT", G(20, [1, 1]), INVALID),
        "group max_size above max_group_size": ("INSERT", G(20, [1], max_size=257), INVALID),
        "group larger than its max_size": ("INSERT", G(20, [1, 2, 3], max_size=2), EXHAUSTED),
        "group modify changes max_size": ("MODIFY", G(10, [1, 2], max_size=8), INVALID),
        "group weight 2": ("INSERT", G(20, [1, 2], weight=2), UNIMPLEMENTED),
        "group weight 0": ("INSERT", G(20, [1], weight=0), INVALID),
        "group watch port": ("INSERT", watched, UNIMPLEMENTED),
        "group deprecated watch": ("INSERT", old_watch, UNIMPLEMENTED),
        # ipv6_fib entries
        "route duplicate insert": ("INSERT", R(NET, member_id=1), EXISTS),
        "route delete absent": ("DELETE", R("2001:db8:300::/48"), NOT_FOUND),
        "route modify absent": ("MODIFY", R("2001:db8:300::/48", member_id=1), NOT_FOUND),
        "route to an unknown member": ("INSERT", R("2001:db8:300::/48", member_id=9), NOT_FOUND),
        "route to an unknown group": ("INSERT", R("2001:db8:300::/48", group_id=20), NOT_FOUND),
        "route modified to an unknown group": ("MODIFY", R(NET, group_id=20), NOT_FOUND),
        "route to an empty group": ("INSERT", R("2001:db8:300::/48", group_id=11), PRECONDITION),
        "route with a direct action": ("INSERT", direct, INVALID),
        "route one-shot": ("INSERT", one_shot, UNIMPLEMENTED),
        "route member id 0": ("INSERT", R("2001:db8:300::/48", member_id=0), INVALID),
        "route without action": ("INSERT", R("2001:db8:300::/48"), INVALID),
        "route bits beyond the prefix": ("INSERT", host_bits, INVALID),
        "route prefix_len 0 given": ("INSERT", zero_len, INVALID),
        "route prefix_len 129": ("INSERT", long_len, INVALID),
        "usid_fib entry naming a member": ("INSERT", on_usid_fib, INVALID),
    }


CASES = list(_cases(load_p4info()))


@pytest.mark.parametrize("case", CASES)
def test_refused_update_has_its_code_and_leaves_maps_unchanged(client, switch, p4info, case):
    _base(client, p4info)
    client.write(U("INSERT", p4rt.group(p4info, 11)))  # an empty group
    kind, msg, code = _cases(p4info)[case]
    before = switch.snapshot()
    codes, messages = _batch(client, U(kind, msg))
    assert codes == [code], messages
    assert switch.snapshot() == before
    if code == UNIMPLEMENTED:
        assert "mrckit does not support" in messages[0]


def test_messages_name_what_is_wrong(client, p4info):
    _base(client, p4info)
    _, messages = _batch(client, U("DELETE", p4rt.member(p4info, 1)), U("DELETE", p4rt.member(p4info, 3)),
                         U("DELETE", p4rt.group(p4info, 10)), U("INSERT", p4rt.route(p4info, "2001:db8::/32", member_id=7)))
    assert "member 1" in messages[0] and "group(s) [10]" in messages[0]
    assert "member 3" in messages[1] and "1 table entries" in messages[1]
    assert "group 10" in messages[2] and "named by 1 table entries" in messages[2]
    assert "2001:db8::/32" in messages[3] and "member 7 does not exist" in messages[3]


def test_group_of_more_than_256_members_is_resource_exhausted(client, switch, p4info):
    client.write(*[U("INSERT", p4rt.member(p4info, m, "set_egress", port=m % 512)) for m in range(1, 258)])
    client.write(U("INSERT", p4rt.group(p4info, 1, range(1, 257))))
    assert len(switch.groups()[1]) == 256
    codes, messages = _batch(client, U("INSERT", p4rt.group(p4info, 2, range(1, 258))),
                             U("MODIFY", p4rt.group(p4info, 1, range(1, 258))))
    assert codes == [EXHAUSTED, EXHAUSTED] and "257 members" in messages[0]
    assert list(switch.groups()) == [1] and len(switch.groups()[1]) == 256


def test_group_max_size_is_kept_and_read_back(client, switch, p4info):
    _base(client, p4info)
    client.write(U("INSERT", p4rt.group(p4info, 20, [3, 1], max_size=4)))
    (g,) = client.read(p4rt.read_groups(p4info, 20))
    assert g.action_profile_group == p4rt.group(p4info, 20, [1, 3], max_size=4)
    client.write(U("MODIFY", p4rt.group(p4info, 20, [1, 2, 3, 4], max_size=4)))
    assert switch.groups()[20] == (1, 2, 3, 4)


def test_group_modified_to_empty_is_allowed_by_the_spec(client, switch, p4info):
    _base(client, p4info)
    client.write(U("MODIFY", p4rt.group(p4info, 10, [])))
    assert switch.groups()[10] == ()
    client.write(U("MODIFY", p4rt.group(p4info, 10, [3])))
    assert switch.groups()[10] == (3,)


def test_continue_on_error_applies_the_good_updates_only(client, switch, p4info):
    _base(client, p4info)
    codes, _ = _batch(client,
                      U("INSERT", p4rt.member(p4info, 5, "set_egress", port=5)),
                      U("INSERT", p4rt.group(p4info, 20, [5, 9])),  # member 9: absent
                      U("INSERT", p4rt.group(p4info, 21, [5, 1])),
                      U("DELETE", p4rt.member(p4info, 2)),  # in group 10
                      U("INSERT", p4rt.route(p4info, "2001:db8:300::/48", group_id=21)),
                      U("MODIFY", p4rt.group(p4info, 10, [1])),
                      U("DELETE", p4rt.member(p4info, 2)))  # no longer in a group
    assert codes == [OK, NOT_FOUND, OK, PRECONDITION, OK, OK, OK]
    assert switch.groups() == {10: (1,), 21: (1, 5)}
    assert 2 not in switch.members() and 5 in switch.members()
    assert str(max(switch.routes())) == "2001:db8:300::/48"


def test_rollback_on_error_leaves_nothing(client, switch, p4info):
    _base(client, p4info)
    before = switch.snapshot()
    codes, _ = _batch(client,
                      U("INSERT", p4rt.member(p4info, 5, "set_egress", port=5)),
                      U("INSERT", p4rt.group(p4info, 20, [5, 1], max_size=3)),
                      U("MODIFY", p4rt.route(p4info, NET, group_id=20)),
                      U("DELETE", p4rt.group(p4info, 10)),
                      U("MODIFY", p4rt.member(p4info, 3, "drop")),
                      U("DELETE", p4rt.route(p4info, HOST)),
                      U("DELETE", p4rt.member(p4info, 3)),
                      U("DELETE", p4rt.member(p4info, 1)),  # in group 20 now: fails
                      U("INSERT", p4rt.member(p4info, 6, "drop")),
                      atomicity=p4r.WriteRequest.ROLLBACK_ON_ERROR)
    assert codes == [ABORTED] * 7 + [PRECONDITION, ABORTED]
    assert switch.snapshot() == before
    assert client.read(p4rt.read_groups(p4info, 20)) == []
    # the view was rolled back too: the old state is still fully usable
    client.write(U("DELETE", p4rt.route(p4info, NET)), U("DELETE", p4rt.group(p4info, 10)))


def test_reads_refuse_an_unknown_profile(client, p4info):
    for query in (p4r.Entity(action_profile_member=p4r.ActionProfileMember(action_profile_id=0x11FFFFFF)),
                  p4r.Entity(action_profile_group=p4r.ActionProfileGroup(action_profile_id=0x11FFFFFF))):
        with pytest.raises(grpc.RpcError) as info:
            client.read(query)
        assert info.value.code() == grpc.StatusCode.UNKNOWN  # spec 13.3: per-request errors
        assert [c for c, _ in p4rt.batch_errors(info.value)] == [grpc.StatusCode.INVALID_ARGUMENT.value[0]]


def test_verify_and_commit_clears_routes_groups_and_members(client, switch, p4info):
    _base(client, p4info)
    client.set_pipeline(p4info, cookie=2)
    assert switch.snapshot()["routes"] == {} and switch.snapshot()["groups"] == {} and switch.snapshot()["members"] == {}
    _base(client, p4info)  # ids are free again


def test_restarted_server_reads_back_members_groups_routes_and_max_size(switch, state_dir, tmp_path):
    def serve(sock):
        backend = EbpfBackend.open(switch.name)
        return P4RuntimeServer(Device(backend, MRC_SWITCH, 1, state_dir), f"unix:{tmp_path}/{sock}").start(), backend

    p4info = load_p4info()
    srv, backend = serve("a.sock")
    c = Client(srv.address)
    c.set_pipeline(p4info)
    _base(c, p4info)
    c.write(U("INSERT", p4rt.group(p4info, 20, [3], max_size=5)))
    queries = (p4rt.read_members(), p4rt.read_groups(), p4rt.read_table(p4info, "ipv6_fib"))
    before = [_entities(c, q) for q in queries]
    c.close()
    srv.stop(0)
    backend.close()

    srv, backend = serve("b.sock")
    try:
        c = Client(srv.address)
        assert [_entities(c, q) for q in queries] == before
        codes, _ = _batch(c, U("DELETE", p4rt.member(p4info, 1)), U("MODIFY", p4rt.group(p4info, 20, [3])))
        assert codes == [PRECONDITION, INVALID]  # the references and max_size survived the restart
        c.close()
    finally:
        srv.stop(0)
        backend.close()


def test_set_pipeline_refuses_a_p4info_whose_ipv6_fib_is_direct(client, switch):
    info = load_p4info()
    next(t for t in info.tables if t.preamble.alias == "ipv6_fib").implementation_id = 0
    with pytest.raises(grpc.RpcError) as exc:
        client.set_pipeline(info)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "'ipv6_fib' is direct" in exc.value.details()
    with pytest.raises(grpc.RpcError) as exc:  # nothing was committed
        client.get_pipeline()
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
