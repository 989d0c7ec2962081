"""The eBPF switch's direct tables: ``my_usid`` and ``usid_fib`` (the uSID tables) and
``port_config``, with their default actions (design section 4; map layouts in
docs/ebpf-switch.md).

Entries are ``mrckit.topology.entries.TableEntry`` values, the type the topology compiler
emits and the P4Runtime server parses into: the one table entry of mrckit. Keys are the
contract's one exact field: the 48-bit DA prefix (locator << 16 | uSID) of ``my_usid`` and
``usid_fib``, the 9-bit port of ``port_config``. Table and action names may carry a P4Info
control prefix (``MyIngress.usid_fib``).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..bpf.maps import Map
from ..errors import MrcError
from ..topology.entries import TableEntry
from ..wire import pipeline as P
from . import tables as T
from .errors import EntryExists, EntryNotFound
from .port_state import PortField

WRITE_MODES = ("insert", "modify", "upsert")
"""``DirectTables.write`` modes: P4Runtime INSERT, MODIFY, or either (the compiler's apply)."""


class DirectTables:
    """Read and write the direct tables of one eBPF switch through its maps (``maps``: map
    name -> ``Map``, as ``SwitchTables`` holds them); table ``port_config`` is the ``config``
    part of each port's ``port_state`` (``mrckit.switch.port_state``)."""

    def __init__(self, maps: dict[str, Map], port_config: PortField):
        self.maps, self.port_config = maps, port_config

    def write(self, entry: TableEntry, *, mode: str = "upsert") -> None:
        """Write one entry. ``mode``: "insert" (P4Runtime INSERT), "modify" or "upsert".

        >>> tables.direct.write(TableEntry.exact("usid_fib", 0xFCBBBB001001, "set_egress", {"port": 1}))  # doctest: +SKIP

        Raises:
            MrcError: unknown table/action, bad key or parameters (nothing is written);
            EntryExists (insert of a present key); EntryNotFound (modify of an absent key).
        """
        spec, key, name, params = T.check_entry(entry)
        if mode not in WRITE_MODES:
            raise MrcError(f"write mode {mode!r}: use insert, modify or upsert")
        present = self._present(spec, key)
        if mode == "insert" and present:
            raise EntryExists(f"table {spec.name}: an entry for key 0x{key:x} exists")
        if mode == "modify" and not present:
            raise EntryNotFound(f"table {spec.name}: no entry for key 0x{key:x}")
        if spec.name == P.PORT_CONFIG:
            if name == P.NO_ACTION:
                raise MrcError("table port_config: entries take set_port; NoAction is only the default")
            self.port_config.update(key, T.encode_port_config(params))
        else:
            act = T.encode_usid_action(spec, name, params)
            self.maps[spec.name].update(T.usid_key(key), act)
            self._slot_added(spec.name, key, act, new=not present)

    def apply(self, entries: Iterable[TableEntry]) -> None:
        """Write (upsert) every entry of a switch config, e.g. compiled by ``mrckit.topology``.
        All entries are validated before the first write, so bad input changes nothing.

        Raises:
            MrcError: the first bad entry, named by its table and key.
        """
        entries = list(entries)
        for e in entries:
            T.check_entry(e)
        for e in entries:
            self.write(e)

    def delete(self, entry: TableEntry) -> None:
        """Delete the entry with ``entry``'s table and match (its action is not looked at).

        Raises:
            MrcError (bad table/key) or EntryNotFound.
        """
        spec, key = T.check_entry_key(entry)
        if not self._present(spec, key):
            raise EntryNotFound(f"table {spec.name}: no entry for key 0x{key:x}")
        if spec.name == P.PORT_CONFIG:
            self.port_config.update(key, T.PortConfig())
        else:
            self.maps[spec.name].delete(T.usid_key(key))
            self._slot_removed(spec.name, key)

    def read(self, table: str) -> list[TableEntry]:
        """Every entry of ``table``, sorted by key (``match`` = {the table's one key field: value}).

        Raises:
            MrcError: an unknown table.
        """
        spec = T.table_spec(table)
        (field,) = spec.keys
        out = []
        if spec.name == P.PORT_CONFIG:
            for port, pc in self.port_config.items():
                if pc.valid:
                    out.append(TableEntry(spec.name, {field.name: port}, P.SET_PORT, T.decode_port_config(pc)))
        else:
            for key, value in self.maps[spec.name].items():
                name, params = T.decode_usid_action(spec, value)
                out.append(TableEntry(spec.name, {field.name: T.usid_key_value(key)}, name, params))
        return sorted(out, key=lambda e: e.key)

    def clear(self, table: str) -> None:
        """Delete every entry of ``table`` and restore its default action."""
        for entry in self.read(table):
            self.delete(entry)
        spec = T.table_spec(table)
        if spec.name in P.BPF_DEFAULT_SLOTS:
            self.set_default(TableEntry(spec.name, {}, spec.default_action))

    def set_default(self, entry: TableEntry) -> None:
        """Set the default action of ``my_usid`` or ``usid_fib`` to ``entry``'s (its match is
        empty: the default entry, P4Runtime spec 9.1.4).

        Raises:
            MrcError: ``port_config`` (its default, no entry, is fixed), a match given, or a bad action.
        """
        spec = T.table_spec(entry.table)
        if spec.name not in P.BPF_DEFAULT_SLOTS:
            raise MrcError(f"table {spec.name}: the default action is fixed ({spec.default_action})")
        if not entry.is_default:
            raise MrcError(f"table {spec.name}: a default entry has no match, got {entry.match}")
        name, params = T.check_action(spec, entry.action or "", entry.params)
        self.maps["table_defaults"].update(P.BPF_DEFAULT_SLOTS[spec.name], T.encode_usid_action(spec, name, params))

    def default(self, table: str) -> TableEntry:
        """The default entry of ``table`` (empty match, its action and params)."""
        spec = T.table_spec(table)
        if spec.name not in P.BPF_DEFAULT_SLOTS:
            return TableEntry(spec.name, {}, spec.default_action)
        action, params = T.decode_usid_action(spec, self.maps["table_defaults"].lookup(P.BPF_DEFAULT_SLOTS[spec.name]))
        return TableEntry(spec.name, {}, action, params)

    def init_defaults(self) -> None:
        """The default actions of design section 4, on a fresh switch: NoAction, drop."""
        self.set_default(TableEntry(P.MY_USID, {}, P.NO_ACTION))
        self.set_default(TableEntry(P.USID_FIB, {}, P.DROP))

    # The slot caches of the program (see struct usid_slot): the hash is written first and the
    # slot after, so a packet never finds a slot naming an entry the hash lacks. Both are O(1):
    # a delete that leaves one entry marks the slot hash_only instead of searching for it, and
    # the next write of the entry left (count 1: it is the only one) caches it again.
    def _slot_added(self, table: str, key: int, act: T.TableAction, *, new: bool) -> None:
        slots, idx = self.maps[f"{table}_slots"], T.usid_slot_index(key)
        slot = slots.lookup(idx)
        if new:
            slot.count += 1
        if slot.count == 1:
            slot.prefix[:] = list(key.to_bytes(6, "big"))
            slot.act, slot.hash_only = act, 0
        slots.update(idx, slot)

    def _slot_removed(self, table: str, key: int) -> None:
        slots, idx = self.maps[f"{table}_slots"], T.usid_slot_index(key)
        slot = slots.lookup(idx)
        slot.count = max(0, slot.count - 1)
        if slot.count == 1:
            slot.hash_only = 1
        elif slot.count == 0:
            slot = T.UsidSlot()
        slots.update(idx, slot)

    def _present(self, spec: T.TableSpec, key: int) -> bool:
        if spec.name == P.PORT_CONFIG:
            return bool(self.port_config.lookup(key).valid)
        return self.maps[spec.name].lookup(T.usid_key(key)) is not None
