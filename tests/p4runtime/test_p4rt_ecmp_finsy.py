"""finsy, the controller's P4Runtime client, programs ecmp_selector and ipv6_fib on the eBPF
switch exactly as it would program bmv2: P4ActionProfileMember, P4ActionProfileGroup with
P4Member, P4TableEntry with P4IndirectAction; reads decode back to what was written."""

import asyncio
import time
import ipaddress

import finsy as fy
import pytest

from support.p4rt_harness import DEVICE_CONFIG, P4INFO_PATH
from support.p4rt_frames import ecmp_frame as frame

from mrckit.wire.ecmp import ev_member

SELECTOR, FIB, KEY = "ecmp_selector", "ipv6_fib", "hdr.outer_ipv6.dst_addr"
NET = "2001:db8:100:1::/64"


def _member(member_id, action, **params):
    return fy.P4ActionProfileMember(SELECTOR, member_id=member_id, action=fy.P4TableAction(action, **params))


def _group(group_id, members, max_size=0):
    return fy.P4ActionProfileGroup(SELECTOR, group_id=group_id, max_size=max_size,
                                   members=[fy.P4Member(m, weight=1) for m in members])


def _route(prefix, **ref):
    action = fy.P4IndirectAction(**ref) if ref else None
    return fy.P4TableEntry(FIB, match=fy.P4TableMatch({KEY: prefix}), action=action)


def _session(server, steps):
    """Run ``steps`` (coroutine functions of the switch) in one finsy connection; return
    what each returned, once the server has closed the session's stream: the next session
    arbitrates with the same election id, which a live stream would still hold."""
    opts = fy.SwitchOptions(p4info=P4INFO_PATH, p4blob=DEVICE_CONFIG, device_id=1)

    async def run():
        async with fy.Switch("sw", server.address, opts) as sw:
            return [await step(sw) for step in steps]

    out = asyncio.run(run())
    deadline = time.monotonic() + 30
    while server.device.arbiter.streams() and time.monotonic() < deadline:
        time.sleep(0.02)
    return out


async def _read_all(sw):
    members = [m async for m in sw.read(fy.P4ActionProfileMember(SELECTOR))]
    groups = [g async for g in sw.read(fy.P4ActionProfileGroup(SELECTOR))]
    routes = [r async for r in sw.read(fy.P4TableEntry(FIB))]
    return members, groups, routes


def test_finsy_programs_members_groups_and_routes(server, switch):
    switch.wire_ports([1, 2, 3], ingress=0)

    async def insert(sw):
        await sw.insert([_member(m, "set_egress", port=m - 1) for m in (2, 3, 4)])
        await sw.insert([_group(7, [4, 2, 3], max_size=8)])
        await sw.insert([_route(NET, group_id=7), _route("2001:db8:100:1::2/128", member_id=4)])
        return await _read_all(sw)

    async def modify(sw):
        await sw.modify([_member(4, "drop"), _group(7, [2, 3], max_size=8)])
        await sw.modify([_route("2001:db8:100:1::2/128", group_id=7)])
        return await _read_all(sw)

    async def refused(sw):
        weighted = fy.P4ActionProfileGroup(SELECTOR, group_id=9, members=[fy.P4Member(2, weight=2)])
        with pytest.raises(fy.P4ClientError) as info:
            await sw.insert([weighted])
        return str(info.value)

    async def delete(sw):
        await sw.delete([_route(NET), _route("2001:db8:100:1::2/128")])
        await sw.delete([_group(7, [])])
        await sw.delete([fy.P4ActionProfileMember(SELECTOR, member_id=m) for m in (2, 3, 4)])
        return await _read_all(sw)

    (members, groups, routes), = _session(server, [insert])
    assert members == [_member(m, "set_egress", port=m - 1) for m in (2, 3, 4)]
    assert groups == [_group(7, [2, 3, 4], max_size=8)]
    net = int(ipaddress.IPv6Address("2001:db8:100:1::"))
    # finsy decodes the match by the field's short name, as (value, prefix length)
    assert [(r.match["dst_addr"], r.action) for r in routes] == [
        ((net, 64), fy.P4IndirectAction(group_id=7)), ((net + 2, 128), fy.P4IndirectAction(member_id=4))]
    assert switch.groups() == {7: (2, 3, 4)}
    for ev in (1, 0x10001, 0xABCDEF01, 0x7777):
        verdict, _ = switch.run(frame(ev, "2001:db8:100:1::77"))
        assert verdict == 4
    assert [switch.tables.counters.read("tx_port", p)[0] for p in (1, 2, 3)] == \
        [sum(ev_member([2, 3, 4], ev) == p + 1 for ev in (1, 0x10001, 0xABCDEF01, 0x7777)) for p in (1, 2, 3)]

    (members, groups, routes), message = _session(server, [modify, refused])
    assert members[-1] == _member(4, "drop") and groups == [_group(7, [2, 3], max_size=8)]
    assert {r.action.group_id for r in routes} == {7}
    assert "UNIMPLEMENTED" in message and "weighted" in message
    assert switch.members()[4] == ("drop", {})

    (members, groups, routes), = _session(server, [delete])
    assert (members, groups, routes) == ([], [], [])
    assert switch.snapshot()["members"] == {} and switch.snapshot()["routes"] == {}
