"""The topology model of a multi-plane two-tier Clos fabric (design sections 3.3 and 7).

A fabric has ``planes`` planes. In each plane, T0 (leaf) switches link to every T1 (spine)
switch of the plane; every host has one port per plane, linked to the T0 with the same leaf
index L in every plane (rail-aligned), on the same downlink D. A host's place (L, D) fixes its
NIC address, its port addresses and its downlink uSIDs (design section 3.3), so the path to any
peer follows from the peer's NIC address and the EV alone.

Links are held as parallel integer arrays (``FabricLinks``, ``HostLinks``), not as objects:
the 131,072-host fabric has two million of them. Node ids are positions in ``Topology.switches``
and ``Topology.hosts``. :meth:`Topology.links` yields readable :class:`Link` rows on demand.

Every ``Topology`` is validated when it is built (see ``validate.py``): a bad one raises
:class:`TopologyError` naming the element and the problem.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..errors import MrcError
from ..wire.addressing import host_link_name, nic_address, parse_nic_address, port_address, t1_link_name
from ..wire.constants import ENCAP_LEN, UsidRole
from ..wire.usid import DEFAULT_LOCATOR, usid_pack
from .plan import Role, host_ifname, t0_down_ifname, t0_up_ifname, t1_ifname

DEFAULT_MTU = 3500
"""Default L3 MTU of every fabric link, in bytes. It carries encapsulated packets, so the
host's NIC device gets ``mtu - 40``; 3500 stays under the 3506 bytes that a non-frags XDP
program allows on a veth peer (design section 9) and fits a 2048 B payload (design 3.1)."""
MIN_MTU = 1280 + ENCAP_LEN
"""Smallest fabric MTU: an IPv6 minimum-MTU inner packet (RFC 8200) plus the outer header."""
MAX_MTU = 9216
DEFAULT_TRIM_THRESHOLD = 64
"""Default queue depth, in packets, at which a switch port trims (design section 4)."""
DEFAULT_ECN_THRESHOLD = 16
"""Default queue depth, in packets, at which a fabric-facing port marks CE (design section 4)."""

SWITCH_ROLES = {Role.T0: UsidRole.T0, Role.T1: UsidRole.T1}


class TopologyError(MrcError):
    """A topology that breaks the model or the addressing plan.

    Attributes:
        problem: what is wrong, e.g. ``"duplicate port 3 on p0-t0-1"``.
        ref: the element at fault, for the YAML loader to turn into ``file:line``:
            ``("switch", id)``, ``("host", id)``, ``("fabric_link", row)``, ``("host_link", row)``,
            ``("field", name)`` or ``None``.
        where: ``"file:line"`` once known, else ``""``.
    """

    def __init__(self, problem: str, ref: tuple | None = None, where: str = ""):
        self.problem, self.ref, self.where = problem, ref, where
        super().__init__(f"{where}: {problem}" if where else problem)

    def located(self, where: str) -> TopologyError:
        """The same error with its location set to ``where`` (``"file:line"``)."""
        return TopologyError(self.problem, self.ref, where)


@dataclass(frozen=True, slots=True)
class GrpcTls:
    """TLS for a controller's gRPC channel: the CA that signed the server's certificate, and
    optionally a client certificate and key (mutual TLS). Paths to PEM files, read at connect
    time; ``server_name`` overrides the name checked in the server's certificate."""

    ca: str
    cert: str | None = None
    key: str | None = None
    server_name: str | None = None

    def __post_init__(self):
        if not self.ca:
            raise TopologyError("tls: 'ca' (the CA certificate that signed the server's) is required")
        if bool(self.cert) != bool(self.key):
            raise TopologyError("tls: 'cert' and 'key' go together")


@dataclass(frozen=True, slots=True)
class GrpcEndpoint:
    """A gRPC server a controller talks to: a switch's P4Runtime server or a host agent.

    Attributes:
        address: ``unix:/path``, ``host:port`` or ``[v6]:port`` (gRPC target syntax).
        device_id: the P4Runtime device id (switches only; None = the controller's default, 1).
        tls: TLS settings, or None for a plaintext channel.

    Raises:
        TopologyError: an empty address, or a device id outside 0..2**64-1.
    """

    address: str
    device_id: int | None = None
    tls: GrpcTls | None = None

    def __post_init__(self):
        if not isinstance(self.address, str) or not self.address.strip():
            raise TopologyError(f"address {self.address!r}: expected unix:/path or host:port")
        if self.device_id is not None and (isinstance(self.device_id, bool) or not isinstance(self.device_id, int)
                                           or not 0 <= self.device_id < 2**64):
            raise TopologyError(f"device_id {self.device_id!r}: expected an integer 0..2**64-1")


@dataclass(frozen=True, slots=True)
class Switch:
    """A T0 (leaf) or T1 (spine) switch: ``index`` is its T0 or T1 index within ``plane``."""

    name: str
    role: Role
    plane: int
    index: int
    p4runtime: GrpcEndpoint | None = None
    """Where a controller reaches this switch's P4Runtime server (None: the emulator knows)."""

    def __post_init__(self):
        if self.role in ("t0", "t1"):  # accept the plain strings; validation reports anything else
            object.__setattr__(self, "role", Role(self.role))

    @property
    def usid(self) -> int:
        """Its 16-bit uN uSID: plane | role (1 T0, 2 T1) | index (design 3.3)."""
        return usid_pack(self.plane, SWITCH_ROLES[self.role], self.index)


@dataclass(frozen=True, slots=True)
class Host:
    """A host on downlink ``downlink`` (D) of leaf ``leaf`` (L), with one port per plane."""

    name: str
    leaf: int
    downlink: int
    agent: GrpcEndpoint | None = None
    """Where a controller reaches this host's agent (None: the emulator knows)."""

    @property
    def nic_address(self) -> ipaddress.IPv6Address:
        """``2001:db8:100:L::H``, H = D + 1 (design 3.3)."""
        return nic_address(self.leaf, self.downlink)

    def port_address(self, plane: int) -> ipaddress.IPv6Address:
        """Its port address on ``plane``: ``2001:db8:2PP:L::H`` (design 3.3)."""
        return port_address(plane, self.leaf, self.downlink)

    def downlink_usid(self, plane: int) -> int:
        """The uSID DOWN(plane, D) that its T0 on ``plane`` forwards to it (design 3.3)."""
        return usid_pack(plane, UsidRole.DOWN, self.downlink)


class Link(NamedTuple):
    """One link, readable: ``a`` is always the T0; ``b`` a T1 or a host. ``name`` is the link
    name of design 3.3 (``p<plane>/t0-<L>/t1-<t>`` or ``p<plane>/t0-<L>/down-<D>``)."""

    name: str
    plane: int
    a: str
    a_port: int
    a_ifname: str
    b: str
    b_port: int
    b_ifname: str


def _frozen_array(values, dtype) -> np.ndarray:
    arr = np.array(values, dtype=dtype)
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True, eq=False)
class FabricLinks:
    """T0-T1 links, one row per link: ``t0``/``t1`` are switch ids, ``*_port`` port numbers.
    Construct from any int sequences; they are stored as read-only int32 arrays."""

    t0: np.ndarray
    t0_port: np.ndarray
    t1: np.ndarray
    t1_port: np.ndarray

    def __post_init__(self):
        for name in ("t0", "t0_port", "t1", "t1_port"):
            object.__setattr__(self, name, _frozen_array(getattr(self, name), np.int32))

    def __len__(self) -> int:
        return len(self.t0)


@dataclass(frozen=True, eq=False)
class HostLinks:
    """Host links, one row per host port: ``host`` is a host id, ``plane`` the host's port
    (a host's port p is its plane-p port), ``t0`` a switch id and ``t0_port`` its port number.
    Construct from any int sequences; they are stored as read-only int32 arrays."""

    host: np.ndarray
    plane: np.ndarray
    t0: np.ndarray
    t0_port: np.ndarray

    def __post_init__(self):
        for name in ("host", "plane", "t0", "t0_port"):
            object.__setattr__(self, name, _frozen_array(getattr(self, name), np.int32))

    def __len__(self) -> int:
        return len(self.host)


@dataclass(frozen=True, eq=False)
class Topology:
    """A validated multi-plane two-tier Clos fabric.

    Attributes:
        planes: number of planes (1..16; the EV plane field is 4 bits).
        switches: every T0 and T1; a switch's id is its position here.
        hosts: every host; a host's id is its position here.
        fabric_links: the T0-T1 links.
        host_links: the host links, exactly one per host and plane.
        locator: the 32-bit uSID locator (default fcbb:bb00::/32).
        mtu: L3 MTU of every fabric link in bytes (hosts' NIC devices get ``mtu - 40``).
        trim_threshold, ecn_threshold: port queue thresholds in packets (design section 4).

    Raises:
        TopologyError: on construction, when the fabric breaks the model (see ``validate.py``).
    """

    planes: int
    switches: tuple[Switch, ...]
    hosts: tuple[Host, ...]
    fabric_links: FabricLinks
    host_links: HostLinks
    locator: int = DEFAULT_LOCATOR
    mtu: int = DEFAULT_MTU
    trim_threshold: int = DEFAULT_TRIM_THRESHOLD
    ecn_threshold: int = DEFAULT_ECN_THRESHOLD

    def __post_init__(self):
        object.__setattr__(self, "switches", tuple(self.switches))
        object.__setattr__(self, "hosts", tuple(self.hosts))
        from .validate import validate  # validate.py reads this module's types
        validate(self)

    # --- node arrays (for vectorised work) --------------------------------------------------
    @functools.cached_property
    def switch_role(self) -> np.ndarray:
        """UsidRole value (1 T0, 2 T1) per switch id."""
        return _frozen_array([SWITCH_ROLES[s.role] for s in self.switches], np.int32)

    @functools.cached_property
    def switch_plane(self) -> np.ndarray:
        """Plane per switch id."""
        return _frozen_array([s.plane for s in self.switches], np.int32)

    @functools.cached_property
    def switch_index(self) -> np.ndarray:
        """T0 or T1 index per switch id."""
        return _frozen_array([s.index for s in self.switches], np.int32)

    @functools.cached_property
    def host_leaf(self) -> np.ndarray:
        """Leaf L per host id."""
        return _frozen_array([h.leaf for h in self.hosts], np.int32)

    @functools.cached_property
    def host_downlink(self) -> np.ndarray:
        """Downlink D per host id."""
        return _frozen_array([h.downlink for h in self.hosts], np.int32)

    # --- lookups ------------------------------------------------------------------------------
    @functools.cached_property
    def _switch_ids(self) -> dict[str, int]:
        return {s.name: i for i, s in enumerate(self.switches)}

    @functools.cached_property
    def _host_ids(self) -> dict[str, int]:
        return {h.name: i for i, h in enumerate(self.hosts)}

    @functools.cached_property
    def _switch_at(self) -> dict[tuple[Role, int, int], int]:
        return {(s.role, s.plane, s.index): i for i, s in enumerate(self.switches)}

    @functools.cached_property
    def _host_at(self) -> dict[tuple[int, int], int]:
        return {(h.leaf, h.downlink): i for i, h in enumerate(self.hosts)}

    def switch_id(self, name: str) -> int:
        """Id of switch ``name``. Raises TopologyError if there is none."""
        try:
            return self._switch_ids[name]
        except KeyError:
            raise TopologyError(f"no switch named {name!r}") from None

    def host_id(self, name_or_nic: str) -> int:
        """Id of a host given its name or its NIC address. Raises TopologyError if none."""
        hid = self._host_ids.get(name_or_nic)
        if hid is None:
            try:
                leaf, downlink = parse_nic_address(name_or_nic)
                hid = self._host_at.get((leaf, downlink))
            except ValueError:
                hid = None
        if hid is None:
            raise TopologyError(f"no host named {name_or_nic!r} (give a host name or a NIC address)")
        return hid

    def switch(self, name: str) -> Switch:
        """Switch ``name``. Raises TopologyError if there is none."""
        return self.switches[self.switch_id(name)]

    def host(self, name_or_nic: str) -> Host:
        """The host with this name or NIC address. Raises TopologyError if there is none."""
        return self.hosts[self.host_id(name_or_nic)]

    def switch_at(self, role: Role, plane: int, index: int) -> Switch | None:
        """The T0 or T1 with this plane and index, or None."""
        sid = self._switch_at.get((Role(role), plane, index))
        return None if sid is None else self.switches[sid]

    def host_at(self, leaf: int, downlink: int) -> Host | None:
        """The host on downlink D of leaf L, or None."""
        hid = self._host_at.get((leaf, downlink))
        return None if hid is None else self.hosts[hid]

    @functools.cached_property
    def t1_per_plane(self) -> tuple[int, ...]:
        """Number of T1 per plane; their indexes run 0..n-1, the EV's T1 field values."""
        counts = np.bincount(self.switch_plane[self.switch_role == UsidRole.T1], minlength=self.planes)
        return tuple(int(c) for c in counts[: self.planes])

    @functools.cached_property
    def nic_mtu(self) -> int:
        """MTU of a host's NIC device: ``mtu`` minus the 40-byte outer header (design 3.1)."""
        return self.mtu - ENCAP_LEN

    # --- links ---------------------------------------------------------------------------------
    def fabric_link(self, row: int) -> Link:
        """Row ``row`` of ``fabric_links`` as a :class:`Link`."""
        fl = self.fabric_links
        t0, t1 = self.switches[fl.t0[row]], self.switches[fl.t1[row]]
        return Link(t1_link_name(t0.plane, t0.index, t1.index), t0.plane,
                    t0.name, int(fl.t0_port[row]), t0_up_ifname(t1.index),
                    t1.name, int(fl.t1_port[row]), t1_ifname(t0.index))

    def host_link(self, row: int) -> Link:
        """Row ``row`` of ``host_links`` as a :class:`Link`."""
        hl = self.host_links
        t0, host, plane = self.switches[hl.t0[row]], self.hosts[hl.host[row]], int(hl.plane[row])
        return Link(host_link_name(plane, t0.index, host.downlink), plane,
                    t0.name, int(hl.t0_port[row]), t0_down_ifname(host.downlink),
                    host.name, plane, host_ifname(plane))

    def links(self) -> Iterator[Link]:
        """Every link, T0-T1 links first, then host links."""
        for row in range(len(self.fabric_links)):
            yield self.fabric_link(row)
        for row in range(len(self.host_links)):
            yield self.host_link(row)

    @functools.cached_property
    def _host_link_rows(self) -> np.ndarray:
        rows = np.full(len(self.hosts) * self.planes, -1, dtype=np.int64)
        hl = self.host_links
        rows[hl.host.astype(np.int64) * self.planes + hl.plane] = np.arange(len(hl))
        return rows

    def host_link_row(self, host_id: int, plane: int) -> int:
        """Row in ``host_links`` of host ``host_id``'s port on ``plane``."""
        return int(self._host_link_rows[host_id * self.planes + plane])

    def summary(self) -> str:
        """One line: planes, switches per role and plane, hosts, links."""
        t0 = int(np.count_nonzero(self.switch_role == UsidRole.T0))
        return (f"{self.planes} planes, {t0} T0, {len(self.switches) - t0} T1, {len(self.hosts)} hosts, "
                f"{len(self.fabric_links) + len(self.host_links)} links, mtu {self.mtu}")
