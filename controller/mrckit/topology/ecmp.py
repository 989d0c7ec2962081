"""Compilation for EV-hash (ECMP) mode (ECMP contract section 6): ``ipv6_fib`` routes
and ``ecmp_selector`` members and groups, per switch, for a set of T0-T1 links that are down.

In EV-hash mode the hosts send their packets without an outer header; the switches route on
the destination NIC address and hash the EV (flow label + UDP source port, ``mrckit.wire.ecmp``)
over a group of uplinks. Per switch:

- **members**: one per connected port, member id = port + 1, ``set_egress(port)``. They never
  change, so the controller creates them once, in ascending id order (the order bmv2's selector
  hashes over, ``mrckit.wire.ecmp``), and never deletes them while the fabric lives;
- **T0 (plane p, leaf L)**: ``2001:db8:100:L::H/128`` -> the member of down-port D (H = D + 1);
  for every other leaf L2 of the plane, ``2001:db8:100:L2::/64`` -> a group of uplinks;
- **T1 (plane p, index t)**: for every leaf L, ``2001:db8:100:L::/64`` -> the member of its port
  to T0 L.

**Groups: one shared group, plus per-destination groups on demand** (our choice; the contract's
"one group per destination leaf, id L2 + 1" is kept for the groups that differ). Per-destination
groups for every leaf would be leaves x (leaves - 1) groups per plane: at 1024 leaves a T0 would
hold 1023 groups of up to 256 members (262,000 member slots, beyond what switch ASICs and the
eBPF target's 1024-group map hold), and all of them equal while the fabric is healthy. So:

- group :data:`ALL_UPLINKS_GROUP` (id 1025, above every L2 + 1) holds the uplink members of
  every T1 whose T0(L)-T1 link is up; every route to another leaf uses it by default;
- a T1-T0(L2) link that is down makes T1 useless for destination L2 only: then the T0 gets group
  ``L2 + 1`` = its live uplinks minus the T1s whose link to L2 is down, and the route to L2 uses
  that group. When the link comes back the route returns to the shared group and group L2 + 1 is
  deleted.

A group never becomes empty: when no T1 reaches L2 the route stays on the shared group (packets
to L2 are lost either way; the endpoints' retransmission and EV retirement cope), and when every
uplink of the T0 is down the shared group keeps all of them. These rules are a pure function of
the set of links down, so a restarted controller computes the same groups. Host links (``.../down-D``)
change nothing: a host has one port per plane and no other way to it.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..wire.addressing import nic_address, parse_link_name
from ..wire.constants import MAX_T0_PER_PLANE, UsidRole
from ..wire.pipeline import SET_EGRESS
from .entries import ActionProfileGroup, ActionProfileMember, TableEntry
from .model import Topology, TopologyError
from .plan import Role

ALL_UPLINKS_GROUP = MAX_T0_PER_PLANE + 1
"""Group id of a T0's shared group of uplinks (1025: above every per-leaf group id L2 + 1)."""

@dataclass(frozen=True)
class DownLinks:
    """T0-T1 links that are down, parsed: ``by_t0`` maps (plane, leaf) to the T1 indexes whose
    link to that T0 is down. Build it with :func:`down_t1_links`."""

    by_t0: dict[tuple[int, int], frozenset[int]] = field(default_factory=dict)

    def get(self, key: tuple[int, int], default=None):
        """The T1 indexes down at T0 (plane, leaf), or ``default``."""
        return self.by_t0.get(key, default)


def member_id(port: int) -> int:
    """Member id of a switch port: port + 1 (ECMP contract section 6)."""
    return port + 1


def leaf_group_id(leaf: int) -> int:
    """Id of a T0's group towards destination leaf L: L + 1 (created only when it differs from
    :data:`ALL_UPLINKS_GROUP`)."""
    return leaf + 1


@functools.lru_cache(maxsize=MAX_T0_PER_PLANE)
def leaf_prefix(leaf: int) -> ipaddress.IPv6Network:
    """The NIC prefix of every host on leaf L: ``2001:db8:100:L::/64`` (design 3.3)."""
    return ipaddress.IPv6Network((int(nic_address(leaf, 0)) >> 64 << 64, 64))


def host_prefix(leaf: int, downlink: int) -> ipaddress.IPv6Network:
    """The /128 of the host on downlink D of leaf L: ``2001:db8:100:L::H/128``, H = D + 1."""
    return ipaddress.IPv6Network((int(nic_address(leaf, downlink)), 128))


# Routes are immutable and the same on many switches (every T0 of a plane routes leaf L2 to
# the shared group; each host route recurs on its T0 of every plane): sharing them makes a
# T0's tables of the 131,072-host fabric a few hundred dict lookups instead of 767 objects.
@functools.lru_cache(maxsize=4 * MAX_T0_PER_PLANE)
def _leaf_route(leaf: int, group: int) -> TableEntry:
    return TableEntry.route(leaf_prefix(leaf), group=group)


@functools.lru_cache(maxsize=1 << 18)
def _host_route(leaf: int, downlink: int, member: int) -> TableEntry:
    return TableEntry.route(host_prefix(leaf, downlink), member=member)


@functools.lru_cache(maxsize=1 << 16)
def _t1_route(leaf: int, member: int) -> TableEntry:
    return TableEntry.route(leaf_prefix(leaf), member=member)


@functools.lru_cache(maxsize=1024)
def _member(port: int) -> ActionProfileMember:
    return ActionProfileMember(member_id(port), SET_EGRESS, {"port": port})


def down_t1_links(topo: Topology, links: Iterable[str]) -> DownLinks:
    """The T0-T1 links among ``links`` (design 3.3 link names) as :class:`DownLinks`. Host links
    are accepted and left out (they change no group).

    Raises:
        TopologyError: a link the fabric does not have. ValueError: a malformed link name.
    """
    out: dict[tuple[int, int], set[int]] = {}
    for link in links:
        name = parse_link_name(link)
        if name.kind != "t1":
            if name.plane >= topo.planes or topo.host_at(name.leaf, name.index) is None:
                raise TopologyError(f"no link {link} in this fabric")
            continue
        if (topo.switch_at(Role.T0, name.plane, name.leaf) is None
                or topo.switch_at(Role.T1, name.plane, name.index) is None):
            raise TopologyError(f"no link {link} in this fabric")
        out.setdefault((name.plane, name.leaf), set()).add(name.index)
    return DownLinks({k: frozenset(v) for k, v in out.items()})


class EcmpPlan:
    """Members, groups and routes of each switch in EV-hash mode, computed on demand from the
    compiled port rows (``compile.py``); nothing is stored per host pair or per switch.

    Args:
        topo: the topology. ports: per switch id, ``(port, kind, row)`` tuples of its connected
            ports by port number (kind and row as in ``compile._PortRows``).
    """

    def __init__(self, topo: Topology, switch_ports):
        self.topology = topo
        self._ports = switch_ports
        t0 = topo.switch_role == UsidRole.T0
        self._leaves = {p: sorted(int(i) for i in topo.switch_index[t0 & (topo.switch_plane == p)])
                        for p in range(topo.planes)}

    def members(self, sid: int) -> tuple[ActionProfileMember, ...]:
        """One ``set_egress`` member per connected port of switch ``sid``, ascending id."""
        return tuple(_member(port) for port, _, _ in self._ports(sid))

    def groups_and_routes(self, sid: int, down: DownLinks) -> tuple[tuple[ActionProfileGroup, ...],
                                                                      tuple[TableEntry, ...]]:
        """The groups (by id) and routes (host /128s by downlink, then leaf /64s by leaf) of
        switch ``sid`` with the T0-T1 links ``down`` down (module docstring)."""
        s = self.topology.switches[sid]
        if s.role == Role.T1:
            return (), tuple(_t1_route(leaf, member_id(port)) for port, leaf in self._t1_downlinks(sid))
        return self._t0(sid, s.plane, s.index, down)

    def _t1_downlinks(self, sid: int) -> list[tuple[int, int]]:
        fl, index = self.topology.fabric_links, self.topology.switch_index
        return sorted(((port, int(index[fl.t0[row]])) for port, _, row in self._ports(sid)), key=lambda x: x[1])

    def _t0(self, sid: int, plane: int, leaf: int, down: DownLinks):
        topo = self.topology
        fl, hl = topo.fabric_links, topo.host_links
        uplinks, hosts = [], []
        for port, kind, row in self._ports(sid):
            if kind == "host":
                hosts.append((int(topo.host_downlink[hl.host[row]]), port))
            else:
                uplinks.append((int(topo.switch_index[fl.t1[row]]), member_id(port)))
        dead_own = down.get((plane, leaf), frozenset())
        live = [m for t, m in uplinks if t not in dead_own]
        shared = tuple(sorted(live or [m for _, m in uplinks]))
        groups = [ActionProfileGroup(ALL_UPLINKS_GROUP, shared)] if shared else []
        routes = [_host_route(leaf, d, member_id(port)) for d, port in sorted(hosts)]
        for other in self._leaves[plane] if shared else ():  # no uplink at all: no other leaf is reachable
            if other == leaf:
                continue
            group = ALL_UPLINKS_GROUP
            dead = down.get((plane, other))
            if dead:
                reach = tuple(sorted(m for t, m in uplinks if t not in dead_own and t not in dead))
                if reach and reach != shared:
                    group = leaf_group_id(other)
                    groups.append(ActionProfileGroup(group, reach))
            routes.append(_leaf_route(other, group))
        return tuple(sorted(groups, key=lambda g: g.group_id)), tuple(routes)

    def affected_switches(self, down_before: DownLinks, down_after: DownLinks) -> list[int]:
        """Switch ids whose groups or routes may differ between two sets of links down: every
        T0 of each plane where the sets differ (sorted)."""
        before, after = down_before.by_t0, down_after.by_t0
        changed = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
        planes = {plane for plane, _ in changed}
        topo = self.topology
        return [sid for sid, s in enumerate(topo.switches) if s.role == Role.T0 and s.plane in planes]
