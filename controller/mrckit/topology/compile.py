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
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..wire.addressing import host_link_name
from ..wire.constants import BMV2_MAX_PORTS, UsidRole
from ..wire.usid import active_prefix, container_pack, usid_pack
from .entries import (
    DA_PREFIX_FIELD, EGRESS_PORT_FIELD, MY_USID, PORT_CONFIG, SET_EGRESS, SET_PORT, USID_FIB, USID_UN, HostConfig,
    HostPort, SwitchConfig, SwitchPort, TableEntry,
)
from .model import Topology, TopologyError
from .plan import MAC_KIND, Role, host_ifname, mac_address, mac_addresses

Target = Literal["ebpf", "bmv2"]
TARGETS = ("ebpf", "bmv2")
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


def compile_fabric(topo: Topology, target: Target = "ebpf") -> CompiledFabric:
    """Compile every switch's tables and every host's config of ``topo`` for ``target``.

    The entries are the same for both targets; ``bmv2`` additionally refuses a switch with a
    port numbered 510 or more (bmv2 reserves 511 as its drop port, design section 4).

    Raises:
        TopologyError: an unknown target, or a switch that does not fit bmv2.
    """
    prefixes = prefix_table(topo)
    rows = _port_rows(topo, prefixes)
    _check_target(topo, rows, target)
    my_key = prefixes[topo.switch_plane, topo.switch_role, topo.switch_index]
    return CompiledFabric(topo, target, rows, my_key)


class CompiledFabric:
    """The compiled fabric: per-switch entries and per-host configs, produced on demand from
    compact arrays (a switch's slice is a few hundred microseconds of work).

    Attributes:
        topology: the source topology. target: ``"ebpf"`` or ``"bmv2"``.
    """

    def __init__(self, topology: Topology, target: str, rows: _PortRows, my_usid_keys: np.ndarray):
        self.topology, self.target = topology, target
        self._rows, self._my_key = rows, my_usid_keys

    def entry_count(self) -> int:
        """Total number of table entries over all switches."""
        return len(self._my_key) + 2 * len(self._rows.port)

    def _sid(self, switch: str | int) -> int:
        return switch if isinstance(switch, int) else self.topology.switch_id(switch)

    def entries(self, switch: str | int) -> list[TableEntry]:
        """The table entries of one switch (by name or id): its ``my_usid`` entry, then its
        ``usid_fib`` entries, then its ``port_config`` entries, each by port number.

        Raises:
            TopologyError: no such switch.
        """
        sid = self._sid(switch)
        r, lo, hi = self._rows, self._rows.offsets[sid], self._rows.offsets[sid + 1]
        topo = self.topology
        ports = r.port[lo:hi].tolist()
        out = [TableEntry(MY_USID, {DA_PREFIX_FIELD: int(self._my_key[sid])}, USID_UN, {})]
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

    def switch(self, switch: str | int) -> SwitchConfig:
        """The full :class:`SwitchConfig` of one switch (by name or id).

        Raises:
            TopologyError: no such switch.
        """
        sid = self._sid(switch)
        s = self.topology.switches[sid]
        return SwitchConfig(name=s.name, role=s.role.value, plane=s.plane, index=s.index, usid=s.usid,
                            ports=self.ports(sid), entries=tuple(self.entries(sid)))

    def switches(self) -> Iterator[SwitchConfig]:
        """Every switch's config, in switch-id order, one at a time."""
        for sid in range(len(self.topology.switches)):
            yield self.switch(sid)

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
                          t1_per_plane=topo.t1_per_plane, ports=tuple(ports))

    def hosts(self) -> Iterator[HostConfig]:
        """Every host's config, in host-id order, one at a time."""
        for hid in range(len(self.topology.hosts)):
            yield self.host(hid)
