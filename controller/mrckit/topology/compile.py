"""Compilation of a topology into per-switch table entries and per-host configs (design 3.3, 4).

Every switch port carries exactly one ``usid_fib`` entry (the uSID of what lies behind it) and
one ``port_config`` entry (its MAC rewrite and thresholds), and every switch one ``my_usid``
entry (its own uSID):

| switch | port towards | ``usid_fib`` key (locator, uSID) | ``port_config`` |
|---|---|---|---|
| T0 (p, L) | T1 t | T1(p, t) -> that port | faces_host 0 |
| T0 (p, L) | host on downlink D | DOWN(p, D) -> that port | faces_host 1 |
| T1 (p, t) | T0 L | T0(p, L) -> that port | faces_host 0 |

So :func:`compile_fabric` builds one sorted array table of switch ports (vectorised with numpy:
the 131,072-host fabric has three million) and :class:`CompiledFabric` turns one switch's or
one host's slice into plain data on demand. Nothing is ever computed per host pair.

In EV-hash mode (``mode="ecmp"``) a switch has no ``my_usid``/``usid_fib`` entries:
the same ``port_config`` entries, plus ``ecmp_selector`` members and groups and ``ipv6_fib``
routes from ``ecmp.py``, for a given set of T0-T1 links that are down.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..wire.addressing import host_link_name
from ..wire.constants import BMV2_MAX_PORTS, UsidRole
from ..wire.pipeline import (DA_PREFIX_FIELD, EGRESS_PORT_FIELD, MY_USID, PORT_CONFIG, SET_EGRESS, SET_PORT,
                             USID_FIB, USID_UN)
from ..wire.usid import active_prefix, container_pack, usid_pack
from .ecmp import DownLinks, EcmpPlan, down_t1_links
from .entries import (
    MODES, ActionProfileGroup, ActionProfileMember, HostConfig, HostPort, SwitchConfig, SwitchPort, TableEntry,
)
from .model import Topology, TopologyError
from .plan import MAC_KIND, Role, host_ifname, mac_address, mac_addresses

Target = Literal["ebpf", "bmv2"]
TARGETS = ("ebpf", "bmv2")
Mode = Literal["srv6", "ecmp"]
# What a switch port row's link reference points at.
_FABRIC_AT_T0, _FABRIC_AT_T1, _HOST_AT_T0 = 0, 1, 2


def prefix_table(topo: Topology) -> np.ndarray:
    """uint64 array ``[plane, role, index]`` of the 48-bit DA prefixes (locator << 16 | uSID),
    each computed by ``mrckit.wire`` (``usid_pack``, ``container_pack``, ``active_prefix``).
    Only the index range the fabric uses is filled; role 0 (reserved) stays 0."""
    top = max(int(topo.switch_index.max(initial=0)), int(topo.host_downlink.max(initial=0))) + 1
    table = np.zeros((topo.planes, 4, top), dtype=np.uint64)
    for plane in range(topo.planes):
        for role in (UsidRole.T0, UsidRole.T1, UsidRole.DOWN):
            count = min(top, 256 if role == UsidRole.T1 else 1024)
            table[plane, role, :count] = [active_prefix(container_pack([usid_pack(plane, role, i)], topo.locator))
                                          for i in range(count)]
    return table


@dataclass(frozen=True, eq=False)
class _PortRows:
    """The switch-port table, sorted by (switch, port): one row per connected switch port."""

    switch: np.ndarray
    port: np.ndarray
    fib_key: np.ndarray
    src_mac: np.ndarray
    dst_mac: np.ndarray
    faces_host: np.ndarray
    link_kind: np.ndarray
    link_row: np.ndarray
    offsets: np.ndarray


def _port_rows(topo: Topology, prefixes: np.ndarray) -> _PortRows:
    fl, hl = topo.fabric_links, topo.host_links
    plane, index = topo.switch_plane, topo.switch_index
    fp = plane[fl.t0]
    t0_kind, t1_kind, host_kind = (np.full(1, MAC_KIND[r]) for r in (Role.T0, Role.T1, Role.HOST))
    t0_up_mac = mac_addresses(t0_kind, fp, index[fl.t0], fl.t0_port)
    t1_mac = mac_addresses(t1_kind, fp, index[fl.t1], fl.t1_port)
    t0_down_mac = mac_addresses(t0_kind, hl.plane, index[hl.t0], hl.t0_port)
    host_mac = mac_addresses(host_kind, hl.plane, topo.host_leaf[hl.host], topo.host_downlink[hl.host])
    cols = dict(
        switch=(fl.t0, fl.t1, hl.t0),
        port=(fl.t0_port, fl.t1_port, hl.t0_port),
        fib_key=(prefixes[fp, UsidRole.T1, index[fl.t1]], prefixes[fp, UsidRole.T0, index[fl.t0]],
                 prefixes[hl.plane, UsidRole.DOWN, topo.host_downlink[hl.host]]),
        src_mac=(t0_up_mac, t1_mac, t0_down_mac),
        dst_mac=(t1_mac, t0_up_mac, host_mac),
        faces_host=(np.zeros(len(fl), np.uint8), np.zeros(len(fl), np.uint8), np.ones(len(hl), np.uint8)),
        link_kind=(np.full(len(fl), _FABRIC_AT_T0, np.uint8), np.full(len(fl), _FABRIC_AT_T1, np.uint8),
                   np.full(len(hl), _HOST_AT_T0, np.uint8)),
        link_row=(np.arange(len(fl), dtype=np.int32), np.arange(len(fl), dtype=np.int32),
                  np.arange(len(hl), dtype=np.int32)),
    )
    merged = {name: np.concatenate(parts) for name, parts in cols.items()}
    order = np.argsort(merged["switch"].astype(np.int64) * 512 + merged["port"], kind="stable")
    rows = {name: col[order] for name, col in merged.items()}
    offsets = np.searchsorted(rows["switch"], np.arange(len(topo.switches) + 1))
    return _PortRows(offsets=offsets, **rows)


def _check_target(topo: Topology, rows: _PortRows, target: str) -> None:
    if target not in TARGETS:
        raise TopologyError(f"unknown target {target!r}: use one of {', '.join(TARGETS)}")
    if target != "bmv2" or not len(rows.port):
        return
    bad = np.flatnonzero(rows.port >= BMV2_MAX_PORTS)
    if len(bad):
        sid = int(rows.switch[bad[0]])
        count = int(rows.offsets[sid + 1] - rows.offsets[sid])
        raise TopologyError(
            f"{topo.switches[sid].name} has {count} ports, up to port {int(rows.port[rows.offsets[sid + 1] - 1])}; "
            f"bmv2 takes at most {BMV2_MAX_PORTS} (ports 0..{BMV2_MAX_PORTS - 1}, 511 is its drop port). "
            f"Compile for the ebpf target, which takes all 512, or use fewer ports")


def compile_fabric(topo: Topology, target: Target = "ebpf", mode: Mode = "srv6") -> CompiledFabric:
    """Compile every switch's tables and every host's config of ``topo`` for ``target``.

    The entries are the same for both targets; ``bmv2`` additionally refuses a switch with a
    port numbered 510 or more (bmv2 reserves 511 as its drop port, design section 4).

    Args:
        mode: ``"srv6"`` (uSID source routing, design 3-4: ``my_usid``, ``usid_fib``,
            ``port_config``) or ``"ecmp"`` (EV-hash mode: ``port_config``, and
            ``ecmp_selector`` members and groups and ``ipv6_fib`` routes, ``ecmp.py``).

    Raises:
        TopologyError: an unknown target or mode, or a switch that does not fit bmv2.
    """
    if mode not in MODES:
        raise TopologyError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    prefixes = prefix_table(topo)
    rows = _port_rows(topo, prefixes)
    _check_target(topo, rows, target)
    my_key = prefixes[topo.switch_plane, topo.switch_role, topo.switch_index]
    return CompiledFabric(topo, target, rows, my_key, mode)


class CompiledFabric:
    """The compiled fabric: per-switch entries and per-host configs, produced on demand from
    compact arrays (a switch's slice is a few hundred microseconds of work).

    Attributes:
        topology: the source topology. target: ``"ebpf"`` or ``"bmv2"``.
        mode: ``"srv6"`` or ``"ecmp"``.
    """

    def __init__(self, topology: Topology, target: str, rows: _PortRows, my_usid_keys: np.ndarray,
                 mode: str = "srv6"):
        self.topology, self.target, self.mode = topology, target, mode
        self._rows, self._my_key = rows, my_usid_keys
        self._ecmp = EcmpPlan(topology, self._port_kinds) if mode == "ecmp" else None

    def entry_count(self) -> int:
        """Total number of table entries (:meth:`entries`: ``my_usid``, ``usid_fib``,
        ``port_config``) over all switches; EV-hash mode has only ``port_config``."""
        if self.mode == "ecmp":
            return len(self._rows.port)
        return len(self._my_key) + 2 * len(self._rows.port)

    def _sid(self, switch: str | int) -> int:
        return switch if isinstance(switch, int) else self.topology.switch_id(switch)

    def _port_kinds(self, sid: int) -> list[tuple[int, str, int]]:
        """``(port, kind, row)`` per connected port of switch ``sid``, by port number: kind
        ``"host"`` (row in host_links), ``"t1"`` (T0 uplink) or ``"t0"`` (T1 downlink; rows
        in fabric_links)."""
        r, lo, hi = self._rows, self._rows.offsets[sid], self._rows.offsets[sid + 1]
        names = {_FABRIC_AT_T0: "t1", _FABRIC_AT_T1: "t0", _HOST_AT_T0: "host"}
        return [(port, names[kind], row) for port, kind, row in
                zip(r.port[lo:hi].tolist(), r.link_kind[lo:hi].tolist(), r.link_row[lo:hi].tolist())]

    def entries(self, switch: str | int) -> list[TableEntry]:
        """The table entries of one switch (by name or id): its ``my_usid`` entry, then its
        ``usid_fib`` entries, then its ``port_config`` entries, each by port number. In EV-hash
        mode only the ``port_config`` entries (the rest is :meth:`members`, :meth:`groups`,
        :meth:`routes`).

        Raises:
            TopologyError: no such switch.
        """
        sid = self._sid(switch)
        r, lo, hi = self._rows, self._rows.offsets[sid], self._rows.offsets[sid + 1]
        topo = self.topology
        ports = r.port[lo:hi].tolist()
        out = []
        if self.mode == "srv6":
            out.append(TableEntry(MY_USID, {DA_PREFIX_FIELD: int(self._my_key[sid])}, USID_UN, {}))
            out += [TableEntry(USID_FIB, {DA_PREFIX_FIELD: key}, SET_EGRESS, {"port": port})
                    for key, port in zip(r.fib_key[lo:hi].tolist(), ports)]
        out += [TableEntry(PORT_CONFIG, {EGRESS_PORT_FIELD: port}, SET_PORT,
                           {"src_mac": src, "dst_mac": dst, "faces_host": faces,
                            "trim_threshold": topo.trim_threshold, "ecn_threshold": topo.ecn_threshold})
                for port, src, dst, faces in zip(ports, r.src_mac[lo:hi].tolist(), r.dst_mac[lo:hi].tolist(),
                                                 r.faces_host[lo:hi].tolist())]
        return out

    def ports(self, switch: str | int) -> tuple[SwitchPort, ...]:
        """The connected ports of one switch (by name or id), by port number."""
        sid = self._sid(switch)
        r, topo = self._rows, self.topology
        out = []
        for i in range(r.offsets[sid], r.offsets[sid + 1]):
            kind, row = int(r.link_kind[i]), int(r.link_row[i])
            link = topo.host_link(row) if kind == _HOST_AT_T0 else topo.fabric_link(row)
            near_a = kind != _FABRIC_AT_T1
            out.append(SwitchPort(
                number=int(r.port[i]), ifname=link.a_ifname if near_a else link.b_ifname, mac=int(r.src_mac[i]),
                peer=link.b if near_a else link.a, peer_ifname=link.b_ifname if near_a else link.a_ifname,
                peer_mac=int(r.dst_mac[i]), faces_host=bool(r.faces_host[i]), link=link.name))
        return tuple(out)

    # --- EV-hash mode ---------------------------------------------------------------------
    def _plan(self) -> EcmpPlan:
        if self._ecmp is None:
            raise TopologyError("members, groups and routes exist in EV-hash mode only: compile with mode='ecmp'")
        return self._ecmp

    def down_links(self, links: Iterable[str] | DownLinks = ()) -> DownLinks:
        """``links`` (design 3.3 link names) as the T0-T1 links down that :meth:`groups` and
        :meth:`routes` take; host links are left out (they change no group).

        Raises:
            TopologyError: a link the fabric does not have. ValueError: a malformed name.
        """
        return links if isinstance(links, DownLinks) else down_t1_links(self.topology, links)

    def members(self, switch: str | int) -> tuple[ActionProfileMember, ...]:
        """EV-hash mode: the ``ecmp_selector`` members of one switch, ascending id: one
        ``set_egress(port)`` member per connected port, id port + 1. They do not depend on
        which links are down.

        Raises:
            TopologyError: no such switch, or not compiled in EV-hash mode.
        """
        return self._plan().members(self._sid(switch))

    def groups(self, switch: str | int, down: Iterable[str] | DownLinks = ()) -> tuple[ActionProfileGroup, ...]:
        """EV-hash mode: the ``ecmp_selector`` groups of one switch, by id, with the links
        ``down`` down (link names, or :meth:`down_links`' result). See ``ecmp.py`` for the plan.

        Raises:
            TopologyError: no such switch or link, or not compiled in EV-hash mode.
        """
        return self._plan().groups_and_routes(self._sid(switch), self.down_links(down))[0]

    def routes(self, switch: str | int, down: Iterable[str] | DownLinks = ()) -> tuple[TableEntry, ...]:
        """EV-hash mode: the ``ipv6_fib`` routes of one switch with the links ``down`` down:
        host /128s by downlink, then leaf /64s by leaf.

        Raises:
            TopologyError: no such switch or link, or not compiled in EV-hash mode.
        """
        return self._plan().groups_and_routes(self._sid(switch), self.down_links(down))[1]

    def groups_and_routes(self, switch: str | int, down: Iterable[str] | DownLinks = ()) -> tuple[
            tuple[ActionProfileGroup, ...], tuple[TableEntry, ...]]:
        """:meth:`groups` and :meth:`routes` in one computation (what a reroute needs).

        Raises:
            TopologyError: no such switch or link, or not compiled in EV-hash mode.
        """
        return self._plan().groups_and_routes(self._sid(switch), self.down_links(down))

    def affected_switches(self, before: Iterable[str] | DownLinks, after: Iterable[str] | DownLinks) -> list[str]:
        """EV-hash mode: names of the switches whose groups or routes may change when the links
        down go from ``before`` to ``after`` (every T0 of each plane concerned).

        Raises:
            TopologyError: an unknown link, or not compiled in EV-hash mode.
        """
        ids = self._plan().affected_switches(self.down_links(before), self.down_links(after))
        return [self.topology.switches[sid].name for sid in ids]

    def switch(self, switch: str | int, down: Iterable[str] | DownLinks = ()) -> SwitchConfig:
        """The full :class:`SwitchConfig` of one switch (by name or id); in EV-hash mode with
        its members, and its groups and routes for the links ``down`` down (ignored in SRv6
        mode, where hosts steer around failures).

        Raises:
            TopologyError: no such switch (or, in EV-hash mode, no such link).
        """
        sid = self._sid(switch)
        s = self.topology.switches[sid]
        config = SwitchConfig(name=s.name, role=s.role.value, plane=s.plane, index=s.index, usid=s.usid,
                              ports=self.ports(sid), entries=tuple(self.entries(sid)))
        if self.mode != "ecmp":
            return config
        groups, routes = self._plan().groups_and_routes(sid, self.down_links(down))
        return dataclasses.replace(config, members=self.members(sid), groups=groups, routes=routes, mode=self.mode)

    def switches(self, down: Iterable[str] | DownLinks = ()) -> Iterator[SwitchConfig]:
        """Every switch's config, in switch-id order, one at a time (``down``: see :meth:`switch`)."""
        down = self.down_links(down) if self.mode == "ecmp" else DownLinks()
        for sid in range(len(self.topology.switches)):
            yield self.switch(sid, down)

    def host(self, host: str | int) -> HostConfig:
        """The :class:`HostConfig` of one host (by name, NIC address or id).

        Raises:
            TopologyError: no such host.
        """
        topo = self.topology
        hid = host if isinstance(host, int) else topo.host_id(host)
        h, hl = topo.hosts[hid], topo.host_links
        rows = [topo.host_link_row(hid, plane) for plane in range(topo.planes)]
        ports = []
        for plane, t0_id, t0_port in zip(range(topo.planes), hl.t0[rows].tolist(), hl.t0_port[rows].tolist()):
            t0 = topo.switches[t0_id]
            ports.append(HostPort(
                plane=plane, ifname=host_ifname(plane), address=h.port_address(plane),
                mac=mac_address(Role.HOST, plane, h.leaf, h.downlink),
                t0_mac=mac_address(Role.T0, plane, t0.index, t0_port), t0=t0.name, t0_port=t0_port,
                link=host_link_name(plane, h.leaf, h.downlink)))
        return HostConfig(name=h.name, nic_address=h.nic_address, leaf=h.leaf, downlink=h.downlink,
                          locator=topo.locator, mtu=topo.mtu, nic_mtu=topo.nic_mtu, planes=topo.planes,
                          t1_per_plane=topo.t1_per_plane, ports=tuple(ports), mode=self.mode)

    def hosts(self) -> Iterator[HostConfig]:
        """Every host's config, in host-id order, one at a time."""
        for hid in range(len(self.topology.hosts)):
            yield self.host(hid)
