"""Compiled, target-neutral configuration: switch table entries and host configs.

These are plain data. The controller writes a :class:`SwitchConfig`'s entries unchanged to
either target (bmv2 through finsy, or the eBPF target's P4Runtime server), and hands a
:class:`HostConfig` to a host agent. Names follow the P4Runtime contract of design section 4
and ``docs/ebpf-switch.md``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

# Tables, keys and actions are named by the pipeline contract (design section 4, EV-hash mode:
# docs/ecmp-mode.md), declared once in mrckit.wire.pipeline.
from ..wire.pipeline import DA_PREFIX_FIELD, ECMP_SELECTOR, FIB_DST_FIELD, IPV6_FIB, MRC_SWITCH

MODES = ("srv6", "ecmp")
"""Forwarding modes of a fabric: SRv6 uSID source routing (design 3) or EV-hash."""


@dataclass(frozen=True)
class TableEntry:
    """One P4Runtime table entry by P4 names, target-neutral: the one entry type that the
    topology compiler emits, the controller diffs and writes, and both switch targets take
    (the eBPF switch's maps and its P4Runtime server, and bmv2 through P4Runtime).

    A direct table's entry names an action; an indirect table's (``ipv6_fib``, implemented by
    the action selector ``ecmp_selector``) names exactly one action profile member or group
    instead (P4Runtime spec 1.4 section 9.1.2). An entry with no match fields is the table's
    default entry (section 9.1.4: every table of the contract has a key, so no other entry
    has an empty match).

    Attributes:
        table: ``my_usid``, ``usid_fib``, ``port_config`` or ``ipv6_fib``.
        match: match field name -> value, in the table's key order: an exact field takes an
            int, e.g. ``{"hdr.outer_ipv6.dst_addr[127:80]": 0xfcbbbb000401}`` (48 bits:
            locator << 16 | uSID) or ``{"standard_metadata.egress_spec": 3}`` (9 bits); an LPM
            field takes ``(value, prefix length)``, e.g. ``{"hdr.outer_ipv6.dst_addr":
            (0x20010db8010000020000000000000000, 64)}`` (128 bits).
        action: ``usid_un``, ``set_egress``, ``drop``, ``set_port`` or ``NoAction``; None in an
            indirect table's entry, and in an entry that only names a key (a delete).
        params: action parameter name -> value: ``{"port": 9 bits}`` for set_egress;
            ``src_mac``/``dst_mac`` (48 bits), ``faces_host`` (1 bit), ``trim_threshold`` and
            ``ecn_threshold`` (32 bits, packets) for set_port; ``{}`` for the others.
        member, group: an indirect table's entry: the action profile member id or group id it
            names (exactly one of them); both None in a direct table's entry.

    Raises:
        ValueError: both ``member`` and ``group``, or an action beside either of them.
    """

    table: str
    match: dict[str, int | tuple[int, int]]
    action: str | None = None
    params: dict[str, int] = field(default_factory=dict)
    member: int | None = None
    group: int | None = None

    def __post_init__(self):
        if self.member is not None and self.group is not None:
            raise ValueError(f"table {self.table} entry {self.match}: give one of member and group, not both")
        if self.action is not None and (self.member is not None or self.group is not None):
            raise ValueError(f"table {self.table} entry {self.match}: an action or a member/group, not both")

    @classmethod
    def exact(cls, table: str, key: int, action: str | None = None,
              params: dict[str, int] | None = None) -> "TableEntry":
        """The entry of ``table`` (one exact key field, by the pipeline contract) at ``key``;
        without an action, the key alone (what a delete names). ``table`` may carry a P4Info
        control prefix (``MyIngress.usid_fib``).

        >>> TableEntry.exact("usid_fib", 0xFCBBBB001001, "set_egress", {"port": 1}).match
        {'hdr.outer_ipv6.dst_addr[127:80]': 277883226427393}

        Raises:
            ValueError: ``table`` is not a table of the contract.
        """
        try:
            (key_field,) = MRC_SWITCH.table(table.rsplit(".", 1)[-1]).keys
        except KeyError:
            raise ValueError(f"unknown table {table!r}: the switch has "
                             f"{', '.join(t.name for t in MRC_SWITCH.tables)}") from None
        return cls(table, {key_field.name: key}, action, dict(params or {}))

    @classmethod
    def route(cls, prefix: ipaddress.IPv6Network | str, *, member: int | None = None,
              group: int | None = None) -> "TableEntry":
        """The ``ipv6_fib`` entry of ``prefix`` (e.g. ``2001:db8:100:2::/64``, a leaf's hosts)
        naming an ``ecmp_selector`` member or group (EV-hash mode, docs/ecmp-mode.md); with
        neither, the key alone (what a delete names).

        Raises:
            ValueError: both ``member`` and ``group``; ``prefix`` not an IPv6 prefix or with
                host bits set.
        """
        try:
            net = ipaddress.IPv6Network(prefix)
        except ValueError as exc:
            raise ValueError(f"table {IPV6_FIB}: prefix {prefix!r} is not an IPv6 prefix: {exc}") from None
        return cls(IPV6_FIB, {FIB_DST_FIELD: (int(net.network_address), net.prefixlen)}, member=member, group=group)

    @property
    def key(self) -> int | tuple[int, int]:
        """The single match value (every table of the contract has one key field)."""
        (value,) = self.match.values()
        return value

    @property
    def is_default(self) -> bool:
        """Whether this is the table's default entry (no match fields, spec 9.1.4)."""
        return not self.match

    @property
    def prefix(self) -> ipaddress.IPv6Network:
        """An ``ipv6_fib`` entry's prefix, e.g. ``2001:db8:100:2::/64``."""
        return ipaddress.IPv6Network(self.match[FIB_DST_FIELD])

    @property
    def target(self) -> tuple[str, int] | None:
        """An indirect entry's ``("member", id)`` or ``("group", id)``; None for a direct one."""
        if self.member is not None:
            return "member", self.member
        return None if self.group is None else ("group", self.group)

    def identity(self) -> tuple:
        """A hashable (table, match) pair: what P4Runtime identifies an entry by."""
        return self.table, tuple(sorted(self.match.items()))

    def __hash__(self) -> int:
        return hash((self.identity(), self.action, tuple(sorted(self.params.items())), self.member, self.group))

    def __str__(self) -> str:
        match = ", ".join(_show_match(k, v) for k, v in self.match.items()) or "default"
        if self.target is not None:
            return f"{self.table} {match} -> {' '.join(map(str, self.target))}"
        params = ", ".join(f"{k}=0x{v:x}" if k.endswith("mac") else f"{k}={v}" for k, v in self.params.items())
        return f"{self.table} {match} -> {self.action}({params})"


def _show_match(name: str, value) -> str:
    if name == FIB_DST_FIELD:
        return str(ipaddress.IPv6Network(value))
    return f"{name}=0x{value:x}" if name == DA_PREFIX_FIELD else f"{name}={value}"


@dataclass(frozen=True)
class ActionProfileMember:
    """One member of the action profile ``ecmp_selector`` (P4Runtime ActionProfileMember).

    Attributes:
        member_id: the member id (EV-hash mode: switch port + 1, ECMP contract section 6).
        action: ``set_egress`` or ``drop``; None in a request that names the member only (a
            P4Runtime delete or read).
        params: ``{"port": 9 bits}`` for set_egress, ``{}`` for drop.
        profile: the action profile's P4Info alias.
    """

    member_id: int
    action: str | None
    params: dict[str, int] = field(default_factory=dict)
    profile: str = ECMP_SELECTOR

    def identity(self) -> tuple:
        """What P4Runtime identifies a member by: (action profile, member id)."""
        return self.profile, self.member_id

    def __hash__(self) -> int:
        return hash((self.profile, self.member_id, self.action, tuple(sorted(self.params.items()))))

    def __str__(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.profile} member {self.member_id} -> {self.action}({params})"


@dataclass(frozen=True)
class ActionProfileGroup:
    """One group of the action profile ``ecmp_selector`` (P4Runtime ActionProfileGroup).

    Attributes:
        group_id: the group id (see ``mrckit.topology.ecmp`` for the plan).
        members: its member ids, ascending, 1..256 of them, each of weight 1 (the hash picks
            ``members[crc32 % len(members)]``, ``mrckit.wire.ecmp``).
        profile: the action profile's P4Info alias.
    """

    group_id: int
    members: tuple[int, ...]
    profile: str = ECMP_SELECTOR

    def identity(self) -> tuple:
        """What P4Runtime identifies a group by: (action profile, group id)."""
        return self.profile, self.group_id

    def __str__(self) -> str:
        return f"{self.profile} group {self.group_id} -> members {', '.join(map(str, self.members))}"


@dataclass(frozen=True, slots=True)
class SwitchPort:
    """One port of a switch and what it connects to.

    Attributes:
        number: port number (0..511; 0..509 on bmv2).
        ifname: the emulator's interface name for it (``down-<D>``, ``t1-<t>``, ``t0-<L>``).
        mac: its MAC (48-bit int, the MAC plan of ``plan.py``).
        peer: the neighbour node's name; ``peer_ifname`` and ``peer_mac`` its interface.
        faces_host: whether the neighbour is a host.
        link: the link name of design 3.3.
    """

    number: int
    ifname: str
    mac: int
    peer: str
    peer_ifname: str
    peer_mac: int
    faces_host: bool
    link: str


@dataclass(frozen=True)
class SwitchConfig:
    """Everything a switch needs: its identity, its ports and its table entries.

    Attributes:
        name, role (``"t0"``/``"t1"``), plane, index, usid: the switch's identity (design 3.3).
        ports: every connected port, by port number.
        entries: the ``my_usid``, ``usid_fib`` and ``port_config`` entries, in that order
            (EV-hash mode: only ``port_config``).
        members, groups, routes: EV-hash mode only (empty in SRv6 mode): the ``ecmp_selector``
            members by ascending id, its groups by id, and the ``ipv6_fib`` entries
            (``TableEntry.route``) by prefix.
        mode: ``"srv6"`` or ``"ecmp"``.
    """

    name: str
    role: str
    plane: int
    index: int
    usid: int
    ports: tuple[SwitchPort, ...]
    entries: tuple[TableEntry, ...]
    members: tuple[ActionProfileMember, ...] = ()
    groups: tuple[ActionProfileGroup, ...] = ()
    routes: tuple[TableEntry, ...] = ()
    mode: str = "srv6"

    def port_map(self) -> dict[int, str]:
        """Port number -> interface name (the shape ``EbpfSwitch`` and bmv2 ``-i`` take)."""
        return {p.number: p.ifname for p in self.ports}

    def table(self, name: str) -> list[TableEntry]:
        """The entries of one table."""
        return [e for e in self.entries if e.table == name]


@dataclass(frozen=True, slots=True)
class HostPort:
    """A host's port on one plane.

    Attributes:
        plane: the plane.
        ifname: the emulator's interface name (``plane<p>``).
        address: the port address ``2001:db8:2PP:L::H`` (the outer source address).
        mac: the port's MAC; ``t0_mac`` the MAC of the T0 port it links to (the outer
            destination MAC: there is no ND on the fabric, design section 4).
        t0, t0_port: the T0's name and its port number.
        link: the link name ``p<plane>/t0-<L>/down-<D>``.
    """

    plane: int
    ifname: str
    address: ipaddress.IPv6Address
    mac: int
    t0_mac: int
    t0: str
    t0_port: int
    link: str


@dataclass(frozen=True)
class HostConfig:
    """What a host agent needs, and nothing per peer (design section 5: memory grows with
    hosts, not with hosts squared). The path to any peer follows from the peer's NIC address
    and the EV (design 3.3, ``mrckit.wire.addressing.path_da``).

    Attributes:
        name: the host's name.
        nic_address: ``2001:db8:100:L::H``, the inner source address on every plane.
        leaf, downlink: its place (L, D).
        locator: the 32-bit uSID locator.
        mtu: L3 MTU of its plane ports in bytes; ``nic_mtu`` = mtu - 40 for its NIC device.
        planes: number of planes.
        t1_per_plane: T1 count of each plane; an EV of plane p names T1 0..count-1.
        ports: one :class:`HostPort` per plane, indexed by plane.
        mode: ``"srv6"`` (uSID source routing, design 3.1) or ``"ecmp"`` (EV-hash mode: no outer
            header, the switches hash the EV; ECMP contract section 5).
    """

    name: str
    nic_address: ipaddress.IPv6Address
    leaf: int
    downlink: int
    locator: int
    mtu: int
    nic_mtu: int
    planes: int
    t1_per_plane: tuple[int, ...]
    ports: tuple[HostPort, ...]
    mode: str = "srv6"
