"""A ``Backend`` held in memory: the tables of a pipeline saved but not yet committed.

Between SetForwardingPipelineConfig VERIFY_AND_SAVE and COMMIT the forwarding state must not
change (P4Runtime spec 1.4 section 14, ``p4runtime.proto`` Action), yet the client's writes for
the saved config must be checked as they arrive and replayed at COMMIT. The server checks them
against a ``TableView`` over this backend, which starts empty and knows no target limits; what
only the real target refuses is reported when COMMIT replays the writes.
"""

from collections.abc import Iterable


class MemoryBackend:
    """Entries, routes, default actions, members and groups in dicts; counters are all zero."""

    def __init__(self):
        self.entries: dict[str, dict[tuple, tuple[str, dict]]] = {}
        self.routes: dict[str, dict[tuple, tuple[str, int]]] = {}
        self.defaults: dict[str, tuple[str, dict]] = {}
        self.members: dict[int, tuple[str, dict]] = {}
        self.groups: dict[int, tuple[int, ...]] = {}

    def identity(self) -> str:
        """Never the identity of real maps: nothing is stored for it."""
        return "memory"

    def write_entry(self, table: str, key: tuple, action: str, params: dict) -> None:
        self.entries.setdefault(table, {})[key] = (action, dict(params))

    def delete_entry(self, table: str, key: tuple) -> None:
        self.entries.get(table, {}).pop(key, None)

    def read_entries(self, table: str) -> Iterable[tuple[tuple, str, dict]]:
        return [(k, a, p) for k, (a, p) in self.entries.get(table, {}).items()]

    def write_default(self, table: str, action: str, params: dict) -> None:
        self.defaults[table] = (action, dict(params))

    def read_default(self, table: str) -> tuple[str, dict]:
        return self.defaults[table]

    def read_counter(self, name: str) -> list[tuple[int, int]]:
        raise KeyError(f"counter {name!r}: a saved, uncommitted pipeline has no counters")

    def reset_counters(self) -> None:
        pass

    def write_route(self, table: str, key: tuple, ref: tuple[str, int], modify: bool) -> None:
        self.routes.setdefault(table, {})[key] = ref

    def delete_route(self, table: str, key: tuple) -> None:
        self.routes.get(table, {}).pop(key, None)

    def read_routes(self, table: str) -> Iterable[tuple[tuple, tuple[str, int]]]:
        return list(self.routes.get(table, {}).items())

    def write_member(self, member_id: int, action: str, params: dict, modify: bool) -> None:
        self.members[member_id] = (action, dict(params))

    def delete_member(self, member_id: int) -> None:
        self.members.pop(member_id, None)

    def read_members(self) -> dict[int, tuple[str, dict]]:
        return dict(self.members)

    def write_group(self, group_id: int, members: tuple[int, ...], modify: bool) -> None:
        self.groups[group_id] = tuple(members)

    def delete_group(self, group_id: int) -> None:
        self.groups.pop(group_id, None)

    def read_groups(self) -> dict[int, tuple[int, ...]]:
        return dict(self.groups)
