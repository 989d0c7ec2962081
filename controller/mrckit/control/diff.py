"""The difference between the table entries a switch should hold and those it holds.

Pure: no I/O. P4Runtime identifies an entry by its table and match (P4Runtime spec 9.1), so
an entry present on both sides with another action or other parameters is a MODIFY, one
only desired an INSERT, one only present a DELETE (design section 7: after a restart or
reconnect, write only the difference). Action profile members and groups are identified by
their id, ``ipv6_fib`` routes by their prefix: :func:`diff_ecmp` diffs the three of EV-hash
mode and orders the writes so that nothing ever refers to what does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import MrcError
from ..topology import ActionProfileGroup, ActionProfileMember, SwitchConfig, TableEntry


@dataclass(frozen=True)
class EntryDiff:
    """What to write so that the switch holds exactly the desired entries.

    Attributes:
        insert: desired entries the switch lacks.
        modify: desired entries whose action or parameters differ on the switch.
        delete: entries on the switch that are not desired (stale), as read.
    """

    insert: tuple = ()
    modify: tuple = ()
    delete: tuple = ()

    def __len__(self) -> int:
        return len(self.insert) + len(self.modify) + len(self.delete)

    def summary(self) -> str:
        """``"2 insert, 0 modify, 1 delete"``."""
        return f"{len(self.insert)} insert, {len(self.modify)} modify, {len(self.delete)} delete"


def _by_identity(entries: Iterable, what: str) -> dict[tuple, object]:
    out: dict[tuple, object] = {}
    for e in entries:
        key = e.identity()
        if key in out:
            name = f"{e.table} {dict(e.match)}" if isinstance(e, TableEntry) else " ".join(map(str, key))
            raise MrcError(f"{what}: two entries for {name}: {out[key]} and {e}")
        out[key] = e
    return out


Entity = TableEntry | ActionProfileMember | ActionProfileGroup
"""What a switch holds: table entries (``ipv6_fib`` routes too), action profile members, groups."""


def diff_entries(desired: Iterable[Entity], actual: Iterable[Entity]) -> EntryDiff:
    """The writes that turn ``actual`` into ``desired``; both are lists of table entries (or
    of action profile members, groups or ``ipv6_fib`` routes: anything with ``identity()``).

    Output order is deterministic: the order of ``desired`` for insert and modify, of
    ``actual`` for delete.

    Raises:
        MrcError: ``desired`` names one (table, match) twice (a compiler bug). A switch that
            reports one twice is a broken switch: also MrcError.
    """
    want = _by_identity(desired, "desired entries")
    have = _by_identity(actual, "entries read from the switch")
    insert, modify = [], []
    for key, e in want.items():
        cur = have.get(key)
        if cur is None:
            insert.append(e)
        elif cur is not e and cur != e:  # same identity: another action, parameters, members or target
            modify.append(e)
    delete = [e for key, e in have.items() if key not in want]
    return EntryDiff(tuple(insert), tuple(modify), tuple(delete))


@dataclass(frozen=True)
class EcmpTables:
    """What a switch holds in EV-hash mode besides its table entries.

    Attributes:
        members: ``ecmp_selector`` members. groups: its groups. routes: ``ipv6_fib`` entries.
    """

    members: tuple[ActionProfileMember, ...] = ()
    groups: tuple[ActionProfileGroup, ...] = ()
    routes: tuple[TableEntry, ...] = ()

    @classmethod
    def of(cls, cfg: SwitchConfig) -> EcmpTables:
        """The members, groups and routes of a compiled switch."""
        return cls(cfg.members, cfg.groups, cfg.routes)

    def __len__(self) -> int:
        return len(self.members) + len(self.groups) + len(self.routes)


@dataclass(frozen=True)
class EcmpDiff:
    """The writes that turn one :class:`EcmpTables` into another: an :class:`EntryDiff` each."""

    members: EntryDiff = EntryDiff()
    groups: EntryDiff = EntryDiff()
    routes: EntryDiff = EntryDiff()

    def __len__(self) -> int:
        return len(self.members) + len(self.groups) + len(self.routes)

    def summary(self) -> str:
        """``"members 4 insert, 0 modify, 0 delete; groups ...; routes ..."``."""
        return "; ".join(f"{n} {d.summary()}" for n, d in
                         (("members", self.members), ("groups", self.groups), ("routes", self.routes)))

    def phases(self) -> list[list[tuple[str, object]]]:
        """The writes in dependency order, as phases of ``(kind, entity)`` with kind
        ``"insert"``, ``"modify"`` or ``"delete"``. P4Runtime may apply the updates of one
        WriteRequest in any order (spec 12.2), so each phase goes in requests of its own:

        1. members inserted or modified, by ascending id (bmv2 orders a group by member
           handles, which follow creation order: ``mrckit.wire.ecmp``);
        2. groups inserted or modified (their members exist);
        3. routes inserted or modified (their members and groups exist);
        4. routes deleted; 5. groups deleted (no route uses them); 6. members deleted.

        Empty phases are left out.
        """
        def upserts(d: EntryDiff, key=None):
            items = [("insert", e) for e in d.insert] + [("modify", e) for e in d.modify]
            return sorted(items, key=lambda kv: key(kv[1])) if key else items

        phases = [upserts(self.members, key=lambda m: m.member_id), upserts(self.groups), upserts(self.routes),
                  [("delete", e) for e in self.routes.delete], [("delete", e) for e in self.groups.delete],
                  [("delete", e) for e in self.members.delete]]
        return [p for p in phases if p]


def diff_ecmp(desired: EcmpTables, actual: EcmpTables) -> EcmpDiff:
    """The writes that turn the members, groups and routes ``actual`` into ``desired``
    (see :meth:`EcmpDiff.phases` for their order).

    Raises:
        MrcError: a member, group or route twice on one side.
    """
    return EcmpDiff(diff_entries(desired.members, actual.members), diff_entries(desired.groups, actual.groups),
                    diff_entries(desired.routes, actual.routes))
