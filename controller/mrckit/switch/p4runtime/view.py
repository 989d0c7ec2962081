"""The server's view of a switch's tables: every entry and default action, mirrored in a backend.

The view answers existence checks (ALREADY_EXISTS, NOT_FOUND) and Reads without walking BPF
maps; each change goes to the backend first and to the view only if the backend accepted it,
so a refused update leaves both unchanged. ``load`` rebuilds the view from the backend (the
pinned maps) after a restart. P4Runtime spec 1.4 section 9.1 (INSERT/MODIFY/DELETE semantics,
default entries: MODIFY only, MODIFY without an action resets the initial default).
"""

import grpc
from finsy.proto import p4r

from .backend import Backend
from .entries import Entry
from .errors import P4RuntimeError, invalid
from .p4info import Pipeline, TableInfo

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE


class TableView:
    """Entries by table name and key, and the default entry of each table."""

    def __init__(self, backend: Backend, pipeline: Pipeline):
        self.backend = backend
        self.pipeline = pipeline
        self.entries: dict[str, dict[tuple, Entry]] = {t.name: {} for t in pipeline.tables.values()}
        self.defaults: dict[str, Entry] = {}

    def load(self) -> None:
        """Fill the view from the backend's current tables and default actions."""
        for table in self.pipeline.tables.values():
            rows = self.entries[table.name]
            rows.clear()
            for key, action, params in self.backend.read_entries(table.name):
                rows[key] = Entry(table, key, action, params)
            action, params = self.backend.read_default(table.name)
            self.defaults[table.name] = Entry(table, (), action, params, default=True)

    def clear(self) -> None:
        """Delete every entry, restore every initial default action and zero the counters: a
        committed pipeline starts from scratch, as on bmv2 (spec 7.3, VERIFY_AND_COMMIT)."""
        self.backend.reset_counters()
        for table in self.pipeline.tables.values():
            for key in list(self.entries[table.name]):
                self.backend.delete_entry(table.name, key)
                del self.entries[table.name][key]
            self._set_default(self._initial_default(table))

    def apply(self, kind: int, entry: Entry):
        """Apply one update; return a function that undoes it. Raises ``P4RuntimeError``."""
        if entry.default:
            return self._apply_default(kind, entry)
        rows = self.entries[entry.table.name]
        old = rows.get(entry.key)
        where = f"table {entry.table.name!r} key {_show(entry.key)}"
        if kind == INSERT and old is not None:
            raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS, f"{where}: entry already exists")
        if kind in (MODIFY, DELETE) and old is None:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, f"{where}: no such entry")
        if kind == INSERT and len(rows) >= entry.table.spec.size:
            raise P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED, f"table {entry.table.name!r} is full ({entry.table.spec.size} entries)")
        if kind == DELETE:
            self._delete(rows, entry)
            return lambda: self._put(rows, old)
        self._put(rows, entry)
        if old is None:
            return lambda: self._delete(rows, entry)
        return lambda: self._put(rows, old)

    def _apply_default(self, kind: int, entry: Entry):
        if kind != MODIFY:
            raise invalid(f"table {entry.table.name!r}: the default entry can only be modified")
        old = self.defaults[entry.table.name]
        if entry.action is None:
            entry = self._initial_default(entry.table)
        self._set_default(entry)
        return lambda: self._set_default(old)

    def _put(self, rows: dict, entry: Entry) -> None:
        _backend_call(self.backend.write_entry, entry.table.name, entry.key, entry.action, entry.params)
        rows[entry.key] = entry

    def _delete(self, rows: dict, entry: Entry) -> None:
        _backend_call(self.backend.delete_entry, entry.table.name, entry.key)
        del rows[entry.key]

    def _set_default(self, entry: Entry) -> None:
        _backend_call(self.backend.write_default, entry.table.name, entry.action, entry.params)
        self.defaults[entry.table.name] = entry

    @staticmethod
    def _initial_default(table: TableInfo) -> Entry:
        return Entry(table, (), table.spec.default_action, {}, default=True)


def _backend_call(fn, *args) -> None:
    # The backend refuses what the map cannot hold; the view must not change then.
    try:
        fn(*args)
    except NotImplementedError as exc:
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, str(exc)) from exc
    except (ValueError, KeyError) as exc:
        raise invalid(str(exc)) from exc
    except OSError as exc:
        raise P4RuntimeError(grpc.StatusCode.INTERNAL, f"BPF map update failed: {exc}") from exc


def _show(key: tuple) -> str:
    return "(" + ", ".join(hex(k) if isinstance(k, int) else str(k) for k in key) + ")"
