"""A ``Backend`` held in memory: the tables of a pipeline saved but not yet committed.

Between SetForwardingPipelineConfig VERIFY_AND_SAVE and COMMIT the forwarding state must not
change (P4Runtime spec 1.4 section 14, ``p4runtime.proto`` Action), yet the client's writes for
the saved config must be checked as they arrive and replayed at COMMIT. The server checks them
against a ``TableView`` over this backend, which starts empty and knows no target limits; what
only the real target refuses is reported when COMMIT replays the writes.
"""

from ...topology.entries import ActionProfileGroup, ActionProfileMember, TableEntry


class MemoryBackend:
    """Entries (default entries apart), members and groups in dicts; counters are all zero."""

    def __init__(self):
        self.entries: dict[str, dict[tuple, TableEntry]] = {}
        self.defaults: dict[str, TableEntry] = {}
        self.members: dict[int, ActionProfileMember] = {}
        self.groups: dict[int, ActionProfileGroup] = {}

    def identity(self) -> str:
        """Never the identity of real maps: nothing is stored for it."""
        return "memory"

    def write_entry(self, entry: TableEntry, modify: bool) -> None:
        self.entries.setdefault(entry.table, {})[entry.identity()] = entry

    def delete_entry(self, entry: TableEntry) -> None:
        self.entries.get(entry.table, {}).pop(entry.identity(), None)

    def read_entries(self, table: str) -> list[TableEntry]:
        return list(self.entries.get(table, {}).values())

    def write_default(self, entry: TableEntry) -> None:
        self.defaults[entry.table] = entry

    def read_default(self, table: str) -> TableEntry:
        return self.defaults[table]

    def read_counter(self, name: str) -> list[tuple[int, int]]:
        raise KeyError(f"counter {name!r}: a saved, uncommitted pipeline has no counters")

    def reset_counters(self) -> None:
        pass

    def write_member(self, member: ActionProfileMember, modify: bool) -> None:
        self.members[member.member_id] = member

    def delete_member(self, member_id: int) -> None:
        self.members.pop(member_id, None)

    def read_members(self) -> list[ActionProfileMember]:
        return list(self.members.values())

    def write_group(self, group: ActionProfileGroup, modify: bool) -> None:
        self.groups[group.group_id] = group

    def delete_group(self, group_id: int) -> None:
        self.groups.pop(group_id, None)

    def read_groups(self) -> list[ActionProfileGroup]:
        return list(self.groups.values())
