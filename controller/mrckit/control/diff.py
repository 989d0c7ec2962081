"""The difference between the table entries a switch should hold and those it holds.

Pure: no I/O. P4Runtime identifies an entry by its table and match (P4Runtime spec 9.1), so
an entry present on both sides with another action or other parameters is a MODIFY, one
only desired an INSERT, one only present a DELETE (design section 7: after a restart or
reconnect, write only the difference).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import MrcError
from ..topology import TableEntry


@dataclass(frozen=True)
class EntryDiff:
    """What to write so that the switch holds exactly the desired entries.

    Attributes:
        insert: desired entries the switch lacks.
        modify: desired entries whose action or parameters differ on the switch.
        delete: entries on the switch that are not desired (stale), as read.
    """

    insert: tuple[TableEntry, ...] = ()
    modify: tuple[TableEntry, ...] = ()
    delete: tuple[TableEntry, ...] = ()

    def __len__(self) -> int:
        return len(self.insert) + len(self.modify) + len(self.delete)

    def summary(self) -> str:
        """``"2 insert, 0 modify, 1 delete"``."""
        return f"{len(self.insert)} insert, {len(self.modify)} modify, {len(self.delete)} delete"


def _by_identity(entries: Iterable[TableEntry], what: str) -> dict[tuple, TableEntry]:
    out: dict[tuple, TableEntry] = {}
    for e in entries:
        key = e.identity()
        if key in out:
            raise MrcError(f"{what}: two entries for {e.table} {dict(e.match)}: {out[key]} and {e}")
        out[key] = e
    return out


def diff_entries(desired: Iterable[TableEntry], actual: Iterable[TableEntry]) -> EntryDiff:
    """The writes that turn ``actual`` into ``desired``; both are lists of table entries.

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
        elif (cur.action, cur.params) != (e.action, e.params):
            modify.append(e)
    delete = [e for key, e in have.items() if key not in want]
    return EntryDiff(tuple(insert), tuple(modify), tuple(delete))
