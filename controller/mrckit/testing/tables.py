"""The tables model of a switch under test: mrckit's own entry types, indexed by their slot.

Tables are given by P4 names (design section 4, docs/ecmp-mode.md, "Ingress"), as
:class:`mrckit.topology.entries.TableEntry` (direct tables and ``ipv6_fib`` routes),
``ActionProfileMember`` and ``ActionProfileGroup``. Each entry has one slot (:func:`slot`):

- a ``TableEntry`` of an exact table: the table and its key, e.g. ``("usid_fib", 0xfcbbbb000400)``;
- a ``TableEntry.route`` of ``ipv6_fib``: the table and its ``ipaddress.IPv6Network``;
- an ``ActionProfileMember``: ``("ecmp_member", member id)``; a group: ``("ecmp_group", group id)``.

Entries are written members first, then groups, then routes, each in ascending key order, and
deleted in the reverse order (:data:`INSERT_ORDER`). A table of a user's own program (bmv2 with
its JSON and P4Info) sorts after the contract's tables, by name.
"""

from __future__ import annotations

import ipaddress

from ..topology.entries import ActionProfileGroup, ActionProfileMember, TableEntry

Entity = TableEntry | ActionProfileMember | ActionProfileGroup
Key = int | ipaddress.IPv6Network | tuple
Slot = tuple[str, Key]
Tables = dict[Slot, Entity]
"""slot -> entry."""

INSERT_ORDER = ("port_config", "ecmp_member", "ecmp_group", "ipv6_fib", "usid_fib", "my_usid")
"""Referenced entries before the entries that name them (members, then groups, then routes)."""


def slot(e: Entity) -> Slot:
    """Where the tables model keeps ``e``: (table or ``ecmp_member``/``ecmp_group``, key)."""
    if isinstance(e, ActionProfileMember):
        return "ecmp_member", e.member_id
    if isinstance(e, ActionProfileGroup):
        return "ecmp_group", e.group_id
    if e.table == "ipv6_fib":
        return e.table, e.prefix
    if len(e.match) == 1:
        return e.table, e.key
    return e.table, tuple(sorted(e.match.items()))


def tables_of(*entries: Entity) -> Tables:
    """The tables model holding ``entries``."""
    return {slot(e): e for e in entries}


def insert_order(key: Slot) -> tuple:
    """Table rank, then ascending key: members are created in ascending id order. Deletes
    go in the reverse order: routes before groups before members. Keys of one table have one
    type, so they compare with each other."""
    table, value = key
    rank = INSERT_ORDER.index(table) if table in INSERT_ORDER else len(INSERT_ORDER)
    if isinstance(value, ipaddress.IPv6Network):
        return rank, table, (int(value.network_address), value.prefixlen)
    return rank, table, value if isinstance(value, int) else str(value)
