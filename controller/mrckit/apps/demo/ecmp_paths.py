"""Which spine an EV takes in EV-hash (ECMP) mode, for the demo's per-path figures.

In EV-hash mode the host's EV carries no path: the sender's T0 hashes it (flow label and UDP
source port, ``mrckit.wire.ecmp``) over its group of uplinks toward the destination leaf. With
every link up that group holds the uplink to every T1 of the plane, so the EV's *nominal*
spine is ``ev_member(uplink members, ev)``. Once the controller takes a member out of a group
(a link down), the EVs that hashed onto it, and some others, move: the nominal spine is where
an EV goes on the healthy fabric, which is what the report's paths show in this mode.
"""

from __future__ import annotations

from collections.abc import Callable

from ...topology import Role, member_id
from ...topology.plan import switch_name
from ...wire.ecmp import ev_member
from ...wire.ev import ev_plane


def nominal_path(compiled, leaf: int) -> Callable[[int], tuple[int, int]]:
    """EV -> (plane, spine) for packets leaving T0 ``leaf`` toward another leaf, with every
    T0–T1 link of that T0 up (the group of all its uplinks, member id = port + 1).

    Raises:
        MrcError/KeyError: no such T0 in ``compiled`` (a ``mrckit.topology.CompiledFabric``).
    """
    spines = {s.name: s.index for s in compiled.topology.switches if s.role == Role.T1}
    uplinks: dict[int, dict[int, int]] = {}
    for plane in range(compiled.topology.planes):
        ports = compiled.switch(switch_name(Role.T0, plane, leaf)).ports
        uplinks[plane] = {member_id(p.number): spines[p.peer] for p in ports if p.peer in spines}

    def path_of(ev: int) -> tuple[int, int]:
        plane = ev_plane(ev)
        members = uplinks[plane]
        return plane, members[ev_member(tuple(members), ev)]

    return path_of


def group_path(compiled, leaf: int, destination, down=()) -> Callable[[int], tuple[int, int]]:
    """EV -> (plane, spine) for packets leaving T0 ``leaf`` toward NIC address ``destination``
    with the T0–T1 links ``down`` down (design 3.3 names): the T0's ``ipv6_fib`` route for the
    destination (longest prefix), its group or member as the controller compiles them for
    those links, and the member the hash picks (``mrckit.wire.ecmp``). This is where the
    switch really sends an EV at that moment, unlike :func:`nominal_path`.

    Raises:
        MrcError/KeyError: no such T0 in ``compiled``, or no route to ``destination``.
    """
    import ipaddress

    dst = ipaddress.IPv6Address(str(destination))
    spines = {s.name: s.index for s in compiled.topology.switches if s.role == Role.T1}
    choices: dict[int, tuple[int, ...]] = {}
    peer: dict[int, dict[int, int]] = {}
    for plane in range(compiled.topology.planes):
        name = switch_name(Role.T0, plane, leaf)
        peer[plane] = {member_id(p.number): spines.get(p.peer, -1) for p in compiled.switch(name).ports}
        groups, routes = compiled.groups_and_routes(name, down)
        route = max((r for r in routes if dst in ipaddress.IPv6Network(str(r.prefix))),
                    key=lambda r: ipaddress.IPv6Network(str(r.prefix)).prefixlen)
        if route.group is None:
            choices[plane] = (route.member,)
        else:
            choices[plane] = next(g.members for g in groups if g.group_id == route.group)

    def path_of(ev: int) -> tuple[int, int]:
        plane = ev_plane(ev)
        members = choices[plane]
        return plane, peer[plane][ev_member(members, ev)]

    return path_of
