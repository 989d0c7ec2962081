"""The server's view of a switch's tables: every entry and default action, mirrored in a backend.

The view answers existence checks (ALREADY_EXISTS, NOT_FOUND) and Reads without walking BPF
maps; each change goes to the backend first and to the view only if the backend accepted it,
so a refused update leaves both unchanged. ``load`` rebuilds the view from the backend (the
pinned maps) after a restart. An indirect table's entries name action profile members and
groups, which ``profiles`` (a ``ProfileView``) holds: an entry may name only one that exists,
and the view counts the references. P4Runtime spec 1.4 section 9.1 (INSERT/MODIFY/DELETE
semantics, default entries: MODIFY only, MODIFY without an action resets the initial default;
an indirect table's default entry is a constant NoAction).
"""

import ipaddress
from dataclasses import replace

import grpc
from finsy.proto import p4r

from .backend import Backend
from .entries import Entry
from .errors import P4RuntimeError, backend_call, invalid
from .p4info import Pipeline, TableInfo
from .profile_view import ProfileView

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE


class TableView:
    """Entries by table name and key, the default entry of each table, and the action
    profiles' members and groups (``profiles``)."""

    def __init__(self, backend: Backend, pipeline: Pipeline):
        self.backend = backend
        self.pipeline = pipeline
        self.entries: dict[str, dict[tuple, Entry]] = {t.name: {} for t in pipeline.tables.values()}
        self.defaults: dict[str, Entry] = {}
        self.profiles = ProfileView(backend, pipeline)

    def load(self, max_sizes: dict[int, int] | None = None) -> None:
        """Fill the view from the backend's current tables, default actions, members and
        groups; ``max_sizes`` are the groups' stored max_size ({group id: max_size})."""
        self.profiles.load(max_sizes or {})
        self.profiles.refs.clear()
        for table in self.pipeline.tables.values():
            rows = self.entries[table.name]
            rows.clear()
            if table.profile_id:
                for key, ref in self.backend.read_routes(table.name):
                    rows[key] = Entry(table, key, None, {}, ref=ref)
                    self.profiles.refs[ref] += 1
                self.defaults[table.name] = self._initial_default(table)
                continue
            for key, action, params in self.backend.read_entries(table.name):
                rows[key] = Entry(table, key, action, params)
            action, params = self.backend.read_default(table.name)
            self.defaults[table.name] = Entry(table, (), action, params, default=True)

    def metadata(self) -> dict[tuple[str, tuple], tuple[bytes, int]]:
        """{(table name, key): (metadata, controller_metadata)} of the entries that carry any
        (the maps do not hold them, so the server stores them beside the pipeline)."""
        return {(name, key): (e.metadata, e.controller_metadata)
                for name, rows in self.entries.items() for key, e in rows.items()
                if e.metadata or e.controller_metadata}

    def set_metadata(self, stored: dict[tuple[str, tuple], tuple[bytes, int]]) -> None:
        """Give the entries that exist the metadata of ``stored`` (as ``metadata`` returns it);
        what names no entry is ignored (the maps are the truth)."""
        for (name, key), (meta, cookie) in stored.items():
            entry = self.entries.get(name, {}).get(key)
            if entry is not None:
                self.entries[name][key] = replace(entry, metadata=meta, controller_metadata=cookie)

    def adopt_metadata(self, other: "TableView | None") -> None:
        """Take the entry metadata of ``other`` (the view of the pipeline being replaced)."""
        if other is not None:
            self.set_metadata(other.metadata())

    def clear(self) -> None:
        """Delete every entry, member and group, restore every initial default action and zero
        the counters: a committed pipeline starts from scratch, as on bmv2 (spec 7.3,
        VERIFY_AND_COMMIT)."""
        self.backend.reset_counters()
        for table in self.pipeline.tables.values():
            rows = self.entries[table.name]
            for entry in list(rows.values()):
                self._delete(rows, entry)
            if not table.profile_id:
                self._set_default(self._initial_default(table))
        self.profiles.clear()

    def apply(self, kind: int, entry: Entry):
        """Apply one update; return a function that undoes it. Raises ``P4RuntimeError``."""
        if entry.default:
            return self._apply_default(kind, entry)
        rows = self.entries[entry.table.name]
        old = rows.get(entry.key)
        where = f"table {entry.table.name!r} key {_show(entry.table, entry.key)}"
        if kind == INSERT and old is not None:
            raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS, f"{where}: entry already exists")
        if kind in (MODIFY, DELETE) and old is None:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, f"{where}: no such entry")
        if kind == INSERT and len(rows) >= entry.table.spec.size:
            raise P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED, f"table {entry.table.name!r} is full ({entry.table.spec.size} entries)")
        if kind == DELETE:
            self._delete(rows, old)
            return lambda: self._put(rows, old, modify=False)
        if entry.ref is not None:
            self.profiles.check_ref(entry.ref, where)
        self._put(rows, entry, modify=old is not None)
        if old is None:
            return lambda: self._delete(rows, entry)
        return lambda: self._put(rows, old, modify=True)

    def _apply_default(self, kind: int, entry: Entry):
        if kind != MODIFY:
            raise invalid(f"table {entry.table.name!r}: the default entry can only be modified")
        old = self.defaults[entry.table.name]
        if entry.action is None:
            entry = self._initial_default(entry.table)
        self._set_default(entry)
        return lambda: self._set_default(old)

    def _put(self, rows: dict, entry: Entry, modify: bool) -> None:
        name = entry.table.name
        if entry.ref is None:
            backend_call(self.backend.write_entry, name, entry.key, entry.action, entry.params)
        else:
            backend_call(self.backend.write_route, name, entry.key, entry.ref, modify)
        self._count(rows.get(entry.key), -1)
        rows[entry.key] = entry
        self._count(entry, +1)

    def _delete(self, rows: dict, entry: Entry) -> None:
        name = entry.table.name
        backend_call(self.backend.delete_route if entry.table.profile_id else self.backend.delete_entry, name, entry.key)
        del rows[entry.key]
        self._count(entry, -1)

    def _count(self, entry: Entry | None, step: int) -> None:
        if entry is not None and entry.ref is not None:
            self.profiles.refs[entry.ref] += step

    def _set_default(self, entry: Entry) -> None:
        backend_call(self.backend.write_default, entry.table.name, entry.action, entry.params)
        self.defaults[entry.table.name] = entry

    @staticmethod
    def _initial_default(table: TableInfo) -> Entry:
        return Entry(table, (), table.spec.default_action, {}, default=True)


def _show(table: TableInfo, key: tuple) -> str:
    return "(" + ", ".join(_show_field(f, k) for f, k in zip(table.fields.values(), key)) + ")"


def _show_field(field, value) -> str:
    if field.match == "exact":
        return hex(value)
    if field.match == "lpm" and field.bits == 128:
        return str(ipaddress.IPv6Network(value))  # (address, prefix length)
    if field.match == "lpm":
        return f"{value[0]:#x}/{value[1]}"
    return str(value)
