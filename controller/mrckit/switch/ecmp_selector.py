"""The eBPF switch's EV-hash mode state: the action selector ``ecmp_selector`` (members and
groups) and the indirect LPM table ``ipv6_fib`` whose entries name them (docs/ecmp-mode.md).

Members and groups are ``mrckit.topology.entries.ActionProfileMember`` / ``ActionProfileGroup``
and ``ipv6_fib`` entries are ``TableEntry`` values made by ``TableEntry.route``: the types the
topology compiler emits. Every method checks everything, then makes one map write, so a
refused call changes nothing. The maps are the source of truth (several processes write
through pins), so the referential checks read them.
"""

from __future__ import annotations

import errno
import ipaddress

from ..bpf import BPF_EXIST, BPF_NOEXIST
from ..bpf.errors import BpfError
from ..bpf.maps import Map
from ..errors import MrcError
from ..topology.entries import ActionProfileGroup, ActionProfileMember, TableEntry
from ..wire import pipeline as P
from . import tables as T
from .errors import EntryExists, EntryInUse, EntryNotFound, GroupTooLarge, UnknownReference


class EcmpSelector:
    """Members, groups and ``ipv6_fib`` routes of one eBPF switch, through its maps (``maps``:
    map name -> ``Map``, as ``SwitchTables`` holds them)."""

    def __init__(self, maps: dict[str, Map]):
        self.maps = maps

    # --- members ---
    def write_member(self, member: ActionProfileMember, *, modify: bool = False) -> None:
        """Insert ``member`` (or, with ``modify``, replace its action): ``set_egress`` with
        ``{"port": 0..511}``, or ``drop`` (no_route when chosen).

        Raises:
            MrcError: bad id (not uint32), action or parameters, or the selector full (its ``size`` in
                the pipeline contract);
            EntryExists (insert of a present member); EntryNotFound (modify of an absent one).
        """
        member_id, act = T.check_member(member)
        self._write_once("ecmp_member", member_id, act, modify, f"member {member_id}")

    def delete_member(self, member_id: int) -> None:
        """Delete member ``member_id``.

        Raises:
            MrcError: bad id; EntryNotFound (absent); EntryInUse (a group holds it or a route
            names it, both listed).
        """
        member_id = T.check_ecmp_id("member", member_id)
        if self.maps["ecmp_member"].lookup(member_id) is None:
            raise EntryNotFound(f"action profile {P.ECMP_SELECTOR}: no member {member_id}")
        users = [f"group {g.group_id}" for g in self.groups() if member_id in g.members]
        users += [f"route {p}" for p in self._routes_to(T.FIB_REF_MEMBER, member_id)]
        if users:
            raise EntryInUse(f"action profile {P.ECMP_SELECTOR}: member {member_id} is still used by "
                             f"{', '.join(users)}; remove it from them first")
        self.maps["ecmp_member"].delete(member_id)

    def members(self) -> list[ActionProfileMember]:
        """Every member, by ascending id, e.g. ``[ActionProfileMember(2, "set_egress", {"port": 1})]``."""
        return [T.decode_member(mid, act) for mid, act in sorted(self.maps["ecmp_member"].items())]

    # --- groups ---
    def write_group(self, group: ActionProfileGroup, *, modify: bool = False) -> None:
        """Insert ``group`` (its member ids in any order, each once; stored ascending, the order
        the EV hash indexes, docs/ecmp-mode.md section 3), or with ``modify`` replace its
        members. An empty group is allowed: a route to it drops (no_route).

        Raises:
            MrcError: bad id, a member id listed twice or not uint32, or ``max_groups`` groups already
            (pipeline contract); GroupTooLarge (more than ``max_group_size`` members); UnknownReference (a member that does not
            exist); EntryExists / EntryNotFound (insert of a present / modify of an absent group).
        """
        if not isinstance(group, ActionProfileGroup):
            raise MrcError(f"{group!r} is not an ActionProfileGroup")
        group_id = T.check_ecmp_id("group", group.group_id)
        members = [T.check_ecmp_id("member", m) for m in group.members]
        where = f"action profile {P.ECMP_SELECTOR}, group {group_id}"
        if len(members) > T.ECMP_PROFILE.max_group_size:
            raise GroupTooLarge(f"{where}: {len(members)} members, at most {T.ECMP_PROFILE.max_group_size}")
        twice = sorted({m for m in members if members.count(m) > 1})
        if twice:
            raise MrcError(f"{where}: member {', '.join(map(str, twice))} listed twice")
        unknown = [m for m in sorted(members) if self.maps["ecmp_member"].lookup(m) is None]
        if unknown:
            raise UnknownReference(f"{where}: no member {', '.join(map(str, unknown))}; write members first")
        self._write_once("ecmp_group", group_id, T.encode_group(tuple(sorted(members))), modify,
                         f"group {group_id}")

    def delete_group(self, group_id: int) -> None:
        """Delete group ``group_id``.

        Raises:
            MrcError: bad id; EntryNotFound (absent); EntryInUse (a route names it, listed).
        """
        group_id = T.check_ecmp_id("group", group_id)
        if self.maps["ecmp_group"].lookup(group_id) is None:
            raise EntryNotFound(f"action profile {P.ECMP_SELECTOR}: no group {group_id}")
        users = [str(p) for p in self._routes_to(T.FIB_REF_GROUP, group_id)]
        if users:
            raise EntryInUse(f"action profile {P.ECMP_SELECTOR}: group {group_id} is still used by "
                             f"route {', '.join(users)}; delete or repoint those first")
        self.maps["ecmp_group"].delete(group_id)

    def groups(self) -> list[ActionProfileGroup]:
        """Every group, by ascending id, its member ids ascending."""
        return [ActionProfileGroup(gid, T.decode_group(g)) for gid, g in sorted(self.maps["ecmp_group"].items())]

    # --- ipv6_fib ---
    def write_route(self, entry: TableEntry, *, modify: bool = False) -> None:
        """Insert an ``ipv6_fib`` entry (``TableEntry.route``): packets whose first IPv6 DA falls
        in its prefix (longest prefix wins) take its member's action, or the member of its group
        their EV hashes to (docs/ecmp-mode.md). With ``modify``, repoint an existing entry.

        Raises:
            MrcError: not an ``ipv6_fib`` entry, its prefix not an IPv6 prefix (or host bits
            set), not exactly one of member/group, or the table full (its ``size`` in the
            pipeline contract); UnknownReference (no such member/group);
            EntryExists / EntryNotFound (insert of a present / modify of an absent prefix).
        """
        prefix = _route_prefix(entry)
        if entry.target is None:
            raise MrcError(f"table {P.IPV6_FIB}, prefix {prefix}: give exactly one of member and group")
        kind, ref_id = entry.target
        ref_id = T.check_ecmp_id(kind, ref_id)
        if self.maps[f"ecmp_{kind}"].lookup(ref_id) is None:
            raise UnknownReference(f"table {P.IPV6_FIB}, prefix {prefix}: no {kind} {ref_id} in "
                                   f"{P.ECMP_SELECTOR}; write it first")
        ref = T.FibRef(T.FIB_REF_MEMBER if kind == "member" else T.FIB_REF_GROUP, ref_id)
        # Flag before the write, so the program never skips a route that is present, and after
        # it, so a concurrent delete that found the table empty cannot leave the flag clear.
        self._set_routes_present(True)
        self._write_once("ipv6_fib", T.lpm_key(prefix), ref, modify, f"prefix {prefix}", table=P.IPV6_FIB)
        self._set_routes_present(True)

    def delete_route(self, entry: TableEntry) -> None:
        """Delete the ``ipv6_fib`` entry of exactly ``entry``'s prefix (what it names is not
        looked at).

        Raises:
            MrcError: not an ``ipv6_fib`` entry of an IPv6 prefix; EntryNotFound (no entry of
            exactly that prefix).
        """
        prefix = _route_prefix(entry)
        if not self.maps["ipv6_fib"].delete(T.lpm_key(prefix)):
            raise EntryNotFound(f"table {P.IPV6_FIB}: no entry for prefix {prefix}")
        self.sync_routes_present()

    def routes(self) -> list[TableEntry]:
        """Every ``ipv6_fib`` entry, by prefix (address, then length)."""
        out = []
        for key, ref in self.maps["ipv6_fib"].items():
            kind = P.FIB_REF_KINDS.get(ref.kind)
            if kind is None:
                raise MrcError(f"table {P.IPV6_FIB}: map holds unknown reference kind {ref.kind}")
            out.append(TableEntry.route(T.lpm_prefix(key), **{kind: ref.id}))
        return sorted(out, key=lambda e: e.key)

    def sync_routes_present(self) -> None:
        """Set ``ipv6_fib_state`` from ``ipv6_fib``: the switch skips its LPM lookup while the
        table is empty. Cleared only after a look finds it empty, then looked at again, so an
        insert running at the same time (which sets the flag after its write) always wins."""
        if self._routes_empty():
            self._set_routes_present(False)
            if not self._routes_empty():
                self._set_routes_present(True)
        else:
            self._set_routes_present(True)

    def clear(self) -> None:
        """Delete every ipv6_fib entry, then every group, then every member (dependents first)."""
        for route in self.routes():
            self.delete_route(route)
        for group in self.groups():
            self.delete_group(group.group_id)
        for member in self.members():
            self.delete_member(member.member_id)

    def _set_routes_present(self, on: bool) -> None:
        self.maps["ipv6_fib_state"].update(0, 1 if on else 0)

    def _routes_empty(self) -> bool:
        return next(iter(self.maps["ipv6_fib"].keys()), None) is None

    def _routes_to(self, kind: int, ref_id: int) -> list[ipaddress.IPv6Network]:
        """The prefixes of the ipv6_fib entries naming (kind, ref_id), sorted."""
        return sorted(T.lpm_prefix(key) for key, ref in self.maps["ipv6_fib"].items()
                      if (ref.kind, ref.id) == (kind, ref_id))

    def _write_once(self, map_name: str, key, value, modify: bool, what: str,
                    table: str = P.ECMP_SELECTOR) -> None:
        """One update with the kernel doing the existence check (BPF_EXIST / BPF_NOEXIST), so
        that an LPM prefix is matched exactly and nothing is half-written."""
        kind = "table" if table == P.IPV6_FIB else "action profile"
        try:
            self.maps[map_name].update(key, value, BPF_EXIST if modify else BPF_NOEXIST)
        except BpfError as exc:
            if exc.errno == errno.EEXIST:
                raise EntryExists(f"{kind} {table}: {what} exists") from None
            if exc.errno == errno.ENOENT:
                raise EntryNotFound(f"{kind} {table}: no {what}") from None
            if exc.errno in (errno.E2BIG, errno.ENOSPC, errno.ENOMEM):
                raise MrcError(f"{kind} {table}: full ({self.maps[map_name].max_entries} entries), "
                               f"cannot add {what}") from None
            raise


def _route_prefix(entry: TableEntry) -> ipaddress.IPv6Network:
    """The prefix of an ``ipv6_fib`` entry, checked; MrcError naming what is wrong."""
    if not isinstance(entry, TableEntry) or T.short_name(entry.table) != P.IPV6_FIB:
        raise MrcError(f"{entry!r} is not an {P.IPV6_FIB} TableEntry")
    if set(entry.match) != {P.FIB_DST_FIELD}:
        raise MrcError(f"table {P.IPV6_FIB}: match {sorted(entry.match)} given, the key is {P.FIB_DST_FIELD!r}")
    value = entry.match[P.FIB_DST_FIELD]
    try:
        return ipaddress.IPv6Network(value)
    except (ValueError, TypeError) as exc:
        raise MrcError(f"table {P.IPV6_FIB}: prefix {value!r}: {exc}") from None
