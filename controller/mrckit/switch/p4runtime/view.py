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

import grpc
from finsy.proto import p4r

from ...topology.entries import TableEntry
from .backend import Backend
from .entries import NO_METADATA, Metadata, key_of
from .errors import P4RuntimeError, backend_call, invalid
from .p4info import Pipeline, TableInfo
from .profile_view import ProfileView

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE


class TableView:
    """Entries (``TableEntry``) by table name and key (``entries.key_of``), the default entry
    of each table, the entries' P4Runtime metadata (``meta``, by (table name, key), only where
    set) and the action profiles' members and groups (``profiles``)."""

    def __init__(self, backend: Backend, pipeline: Pipeline):
        self.backend = backend
        self.pipeline = pipeline
        self.tables: dict[str, TableInfo] = {t.name: t for t in pipeline.tables.values()}
        self.entries: dict[str, dict[tuple, TableEntry]] = {name: {} for name in self.tables}
        self.defaults: dict[str, TableEntry] = {}
        self.meta: dict[tuple[str, tuple], Metadata] = {}
        self.profiles = ProfileView(backend, pipeline)

    def load(self, max_sizes: dict[int, int] | None = None) -> None:
        """Fill the view from the backend's current tables, default actions, members and
        groups; ``max_sizes`` are the groups' stored max_size ({group id: max_size}). The
        metadata is cleared (the maps do not hold it: ``set_metadata``)."""
        self.profiles.load(max_sizes or {})
        self.profiles.refs.clear()
        self.meta.clear()
        for table in self.tables.values():
            rows = self.entries[table.name]
            rows.clear()
            for entry in self.backend.read_entries(table.name):
                rows[key_of(table, entry)] = entry
                self._count(entry, +1)
            self.defaults[table.name] = self._initial_default(table) if table.profile_id \
                else self.backend.read_default(table.name)

    def metadata(self) -> dict[tuple[str, tuple], Metadata]:
        """{(table name, key): (metadata, controller_metadata)} of the entries that carry any
        (the maps do not hold them, so the server stores them beside the pipeline)."""
        return dict(self.meta)

    def set_metadata(self, stored: dict[tuple[str, tuple], Metadata]) -> None:
        """Give the entries that exist the metadata of ``stored`` (as ``metadata`` returns it);
        what names no entry is ignored (the maps are the truth)."""
        for (name, key), meta in stored.items():
            if key in self.entries.get(name, {}) and meta != NO_METADATA:
                self.meta[(name, key)] = meta

    def adopt_metadata(self, other: "TableView | None") -> None:
        """Take the entry metadata of ``other`` (the view of the pipeline being replaced)."""
        if other is not None:
            self.set_metadata(other.metadata())

    def clear(self) -> None:
        """Delete every entry, member and group, restore every initial default action and zero
        the counters: a committed pipeline starts from scratch, as on bmv2 (spec 7.3,
        VERIFY_AND_COMMIT)."""
        self.backend.reset_counters()
        for table in self.tables.values():
            for key in list(self.entries[table.name]):
                self._delete(table, key)
            if not table.profile_id:
                self._set_default(self._initial_default(table))
        self.profiles.clear()

    def apply(self, kind: int, entry: TableEntry, meta: Metadata = NO_METADATA):
        """Apply one update of ``entry`` (as ``entries.parse`` returns it; ``meta`` its
        metadata, set by INSERT and MODIFY); return a function that undoes it. Raises
        ``P4RuntimeError``."""
        table = self.tables[entry.table]
        if entry.is_default:
            return self._apply_default(kind, table, entry)
        rows, key = self.entries[table.name], key_of(table, entry)
        old = rows.get(key)
        where = f"table {table.name!r} key {_show(table, key)}"
        if kind == INSERT and old is not None:
            raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS, f"{where}: entry already exists")
        if kind in (MODIFY, DELETE) and old is None:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, f"{where}: no such entry")
        if kind == INSERT and len(rows) >= table.spec.size:
            raise P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED, f"table {table.name!r} is full ({table.spec.size} entries)")
        old_meta = self.meta.get((table.name, key), NO_METADATA)
        if kind == DELETE:
            assert old is not None  # a DELETE of a missing entry is NOT_FOUND above
            self._delete(table, key)
            return lambda: self._put(table, key, old, old_meta, modify=False)
        if entry.target is not None:
            self.profiles.check_ref(entry.target, where)
        self._put(table, key, entry, meta, modify=old is not None)
        if old is None:
            return lambda: self._delete(table, key)
        return lambda: self._put(table, key, old, old_meta, modify=True)

    def _apply_default(self, kind: int, table: TableInfo, entry: TableEntry):
        if kind != MODIFY:
            raise invalid(f"table {table.name!r}: the default entry can only be modified")
        old = self.defaults[table.name]
        if entry.action is None:
            entry = self._initial_default(table)
        self._set_default(entry)
        return lambda: self._set_default(old)

    def _put(self, table: TableInfo, key: tuple, entry: TableEntry, meta: Metadata, modify: bool) -> None:
        backend_call(self.backend.write_entry, entry, modify)
        rows = self.entries[table.name]
        self._count(rows.get(key), -1)
        rows[key] = entry
        self._count(entry, +1)
        if meta == NO_METADATA:
            self.meta.pop((table.name, key), None)
        else:
            self.meta[(table.name, key)] = meta

    def _delete(self, table: TableInfo, key: tuple) -> None:
        rows = self.entries[table.name]
        backend_call(self.backend.delete_entry, rows[key])
        self._count(rows.pop(key), -1)
        self.meta.pop((table.name, key), None)

    def _count(self, entry: TableEntry | None, step: int) -> None:
        if entry is not None and entry.target is not None:
            self.profiles.refs[entry.target] += step

    def _set_default(self, entry: TableEntry) -> None:
        backend_call(self.backend.write_default, entry)
        self.defaults[entry.table] = entry

    @staticmethod
    def _initial_default(table: TableInfo) -> TableEntry:
        return TableEntry(table.name, {}, table.spec.default_action)


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
