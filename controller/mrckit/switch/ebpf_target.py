"""The eBPF switch target: load ``mrc_switch.bpf.o``, attach it to a switch's ports, and drive
its maps by P4 names (design section 4; map layouts in ``docs/ebpf-switch.md``).

Two classes:

- :class:`SwitchTables` reads and writes one switch's maps by P4 names: table entries
  (``my_usid``, ``usid_fib``, ``port_config``), EV-hash mode's ``ecmp_selector`` members and
  groups and ``ipv6_fib`` routes (docs/ecmp-mode.md), counters, port admin state,
  queue drain rate.
  It works on a freshly loaded object or on the maps pinned under
  ``/sys/fs/bpf/mrckit/switch/<name>/`` (:meth:`SwitchTables.open_pinned`), so the P4Runtime
  server and the conformance suite share this one mapping.
- :class:`EbpfSwitch` sets one switch up in its network namespace (load, pin, attach XDP to
  every port, fill the DEVMAP from inside the namespace, optionally start its P4Runtime
  server) and tears it down completely.

>>> with EbpfSwitch("s0", "mrcsw", {0: "p0", 1: "p1"}) as sw:      # doctest: +SKIP
...     sw.tables.write_entry("usid_fib", 0xFCBBBB001001, "set_egress", {"port": 1})
...     sw.tables.counter("tx_port", 1)
"""

from __future__ import annotations

import ctypes
import errno
import ipaddress
import os
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .. import netns
from ..bpf import BPF_EXIST, BPF_NOEXIST
from ..bpf.attach import ifindex_of, xdp_attach, xdp_detach, xdp_query
from ..bpf.errors import BpfError
from ..bpf.fs import BPFFS, ensure_bpffs, pin_path, unpin
from ..bpf.maps import Map
from ..bpf.objects import BpfObject
from ..errors import MrcError
from ..topology.entries import TableEntry
from ..wire import pipeline as P
from . import tables as T

if TYPE_CHECKING:  # the server package imports this module: import it lazily at run time
    from .p4runtime.process import ServerOptions, ServerProcess

OBJECT = "mrc_switch"
PROGRAM = "mrc_switch"
PIN_DIR = "switch"
DEFAULT_QUEUE_RATE_PPS = 1_000_000
"""Drain rate of every port's virtual queue after set-up (packets/s), a fast veth's rate."""
MAX_QUEUE_RATE_PPS = 1_000_000_000
"""The C side multiplies elapsed ns by the rate in 64 bits; 1e9 pps keeps that exact."""

_u32 = ctypes.c_uint32
MAP_TYPES: dict[str, tuple[type, type]] = {
    "my_usid": (T.UsidKey, T.TableAction),
    "usid_fib": (T.UsidKey, T.TableAction),
    "my_usid_slots": (_u32, T.UsidSlot),
    "usid_fib_slots": (_u32, T.UsidSlot),
    "table_defaults": (_u32, T.TableAction),
    "port_config": (_u32, T.PortConfig),
    **{name: (_u32, T.Counter) for name in P.COUNTER_NAMES},
    "tx_ports": (_u32, _u32),
    "ifindex_port": (_u32, _u32),
    "ifindex_slots": (_u32, T.IfindexSlot),
    "port_admin": (_u32, _u32),
    "vqueue": (_u32, T.VQueue),
    "queue_rate": (_u32, T.QueueRate),
    "ipv6_fib": (T.Ipv6LpmKey, T.FibRef),
    "ipv6_fib_state": (_u32, _u32),
    "ecmp_member": (_u32, T.TableAction),
    "ecmp_group": (_u32, T.EcmpGroup),
}
"""Every map of ``mrc_switch.bpf.c`` with its key and value ctypes (the pinned set)."""


class EntryExists(MrcError):
    """An insert found the key present (P4Runtime ALREADY_EXISTS)."""


class EntryNotFound(MrcError):
    """A modify or delete found no entry for the key (P4Runtime NOT_FOUND)."""


class EntryInUse(MrcError):
    """A delete of an ECMP member still in a group or named by a route, or of a group still
    named by a route (P4Runtime FAILED_PRECONDITION)."""


class UnknownReference(MrcError):
    """A group naming a member that does not exist, or a route naming a member or group that
    does not exist (P4Runtime NOT_FOUND)."""


class GroupTooLarge(MrcError):
    """A group of more members than ``ecmp_selector`` allows per group (256, the pipeline contract)
    (P4Runtime RESOURCE_EXHAUSTED)."""


def switch_pin_dir(name: str) -> str:
    """``/sys/fs/bpf/mrckit/switch/<name>``; raises ValueError for a name with ``/``."""
    return pin_path(PIN_DIR, name)


def _check_port(port: int) -> int:
    if not isinstance(port, int) or not 0 <= port < P.PORT_COUNT:
        raise MrcError(f"switch port {port!r} outside 0..{P.PORT_COUNT - 1}")
    return port


class SwitchTables:
    """P4-name access to the maps of one eBPF switch.

    Keys are integers: the 48-bit DA prefix (locator << 16 | uSID) for ``my_usid`` and
    ``usid_fib``, the 9-bit port for ``port_config``. Action parameters are integers of the
    widths of design section 4 (MACs as 48-bit integers, thresholds in packets).
    Table and action names may carry a P4Info control prefix (``MyIngress.usid_fib``).
    ``ipv6_fib`` (an indirect LPM table) has its own methods: ``write_member``/``write_group``/
    ``write_route`` and their delete/read counterparts, keyed by uint32 member and group ids
    and IPv6 prefixes, with the referential checks of docs/ecmp-mode.md.
    """

    def __init__(self, maps: dict[str, Map], *, owned: bool = False):
        missing = set(MAP_TYPES) - set(maps)
        if missing:
            raise MrcError(f"switch maps missing: {', '.join(sorted(missing))}")
        self.maps, self._owned = maps, owned

    @classmethod
    def from_object(cls, obj: BpfObject) -> "SwitchTables":
        """The maps of a loaded ``mrc_switch`` object (they live as long as the object)."""
        return cls({name: obj.map(name, key_type=k, value_type=v) for name, (k, v) in MAP_TYPES.items()})

    @classmethod
    def open_pinned(cls, name: str) -> "SwitchTables":
        """The maps pinned for switch ``name``; close the result when done.

        Raises:
            MrcError: the switch is not set up (no pins), naming the folder.
        """
        folder = switch_pin_dir(name)
        maps: dict[str, Map] = {}
        try:
            for map_name, (k, v) in MAP_TYPES.items():
                maps[map_name] = Map.from_pin(os.path.join(folder, map_name), key_type=k, value_type=v)
        except BpfError as exc:
            for m in maps.values():
                m.close()
            raise MrcError(f"switch {name} is not set up: {exc}") from None
        return cls(maps, owned=True)

    def close(self) -> None:
        """Close the map fds opened by :meth:`open_pinned` (no-op otherwise)."""
        if self._owned:
            for m in self.maps.values():
                m.close()
            self._owned = False

    # --- table entries ---
    def write_entry(self, table: str, key: int, action: str, params: dict[str, int] | None = None,
                    *, mode: str = "upsert") -> None:
        """Write one entry. ``mode``: "insert" (P4Runtime INSERT), "modify" or "upsert".

        Raises:
            MrcError: unknown table/action, bad key or parameters (nothing is written);
            EntryExists (insert of a present key); EntryNotFound (modify of an absent key).
        """
        spec = T.table_spec(table)
        key = T.check_key(spec, key)
        name, params = T.check_action(spec, action, params)
        if mode not in ("insert", "modify", "upsert"):
            raise MrcError(f"write mode {mode!r}: use insert, modify or upsert")
        present = self._present(spec, key)
        if mode == "insert" and present:
            raise EntryExists(f"table {spec.name}: an entry for key 0x{key:x} exists")
        if mode == "modify" and not present:
            raise EntryNotFound(f"table {spec.name}: no entry for key 0x{key:x}")
        if spec.name == "port_config":
            if name == "NoAction":
                raise MrcError("table port_config: entries take set_port; NoAction is only the default")
            self.maps["port_config"].update(key, T.encode_port_config(params))
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
        keys = []
        for e in entries:
            spec = T.table_spec(e.table)
            keys.append(T.entry_key(spec, e.match))
            T.check_action(spec, e.action, e.params)
        for e, key in zip(entries, keys):
            self.write_entry(e.table, key, e.action, e.params)

    def delete_entry(self, table: str, key: int) -> None:
        """Delete the entry at ``key``. Raises MrcError (bad table/key) or EntryNotFound."""
        spec = T.table_spec(table)
        key = T.check_key(spec, key)
        if not self._present(spec, key):
            raise EntryNotFound(f"table {spec.name}: no entry for key 0x{key:x}")
        if spec.name == "port_config":
            self.maps["port_config"].update(key, T.PortConfig())
        else:
            self.maps[spec.name].delete(T.usid_key(key))
            self._slot_removed(spec.name, key)

    def read_entries(self, table: str) -> list[TableEntry]:
        """Every entry of ``table``, sorted by key, as the topology compiler's ``TableEntry``
        (``match`` = {the table's one key field: value}). Raises MrcError for an unknown table."""
        spec = T.table_spec(table)
        (field,) = spec.keys
        out = []
        if spec.name == P.PORT_CONFIG:
            for port, pc in self.maps["port_config"].items():
                if pc.valid:
                    out.append(TableEntry(spec.name, {field.name: port}, P.SET_PORT, T.decode_port_config(pc)))
        else:
            for key, value in self.maps[spec.name].items():
                name, params = T.decode_usid_action(spec, value)
                out.append(TableEntry(spec.name, {field.name: T.usid_key_value(key)}, name, params))
        return sorted(out, key=lambda e: e.key)

    def clear_table(self, table: str) -> None:
        """Delete every entry of ``table`` and restore its default action."""
        for entry in self.read_entries(table):
            self.delete_entry(entry.table, entry.key)
        spec = T.table_spec(table)
        if spec.name in P.BPF_DEFAULT_SLOTS:
            self.set_default_action(spec.name, spec.default_action)

    def set_default_action(self, table: str, action: str, params: dict[str, int] | None = None) -> None:
        """Set the default action of ``my_usid`` or ``usid_fib``.

        Raises:
            MrcError: ``port_config`` (its default, no entry, is fixed) or a bad action.
        """
        spec = T.table_spec(table)
        if spec.name not in P.BPF_DEFAULT_SLOTS:
            raise MrcError(f"table {spec.name}: the default action is fixed ({spec.default_action})")
        name, params = T.check_action(spec, action, params)
        self.maps["table_defaults"].update(P.BPF_DEFAULT_SLOTS[spec.name], T.encode_usid_action(spec, name, params))

    def default_action(self, table: str) -> tuple[str, dict[str, int]]:
        """(action, params) of the default action of ``table``."""
        spec = T.table_spec(table)
        if spec.name not in P.BPF_DEFAULT_SLOTS:
            return spec.default_action, {}
        return T.decode_usid_action(spec, self.maps["table_defaults"].lookup(P.BPF_DEFAULT_SLOTS[spec.name]))

    # --- EV-hash (ECMP) mode: ecmp_selector members and groups, ipv6_fib routes ---
    # docs/ecmp-mode.md. Every method checks everything, then makes one map write, so a
    # refused call changes nothing. The maps are the source of truth (several processes write
    # through pins), so the referential checks read them.
    def write_member(self, member_id: int, action: str, params: dict[str, int] | None = None, *,
                     modify: bool = False) -> None:
        """Insert member ``member_id`` of ``ecmp_selector`` (or, with ``modify``, replace its
        action): ``set_egress`` with ``{"port": 0..511}``, or ``drop`` (no_route when chosen).

        Raises:
            MrcError: bad id (not uint32), action or parameters, or the selector full (its ``size`` in
                the pipeline contract);
            EntryExists (insert of a present member); EntryNotFound (modify of an absent one).
        """
        member_id = T.check_ecmp_id("member", member_id)
        act = T.check_member_action(member_id, action, params)
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
        users = [f"group {g}" for g, members in self.read_groups().items() if member_id in members]
        users += [f"route {p}" for p in self._routes_to(T.FIB_REF_MEMBER, member_id)]
        if users:
            raise EntryInUse(f"action profile {P.ECMP_SELECTOR}: member {member_id} is still used by "
                             f"{', '.join(users)}; remove it from them first")
        self.maps["ecmp_member"].delete(member_id)

    def read_members(self) -> dict[int, tuple[str, dict[str, int]]]:
        """Every member: id -> (action, params), e.g. ``{2: ("set_egress", {"port": 1})}``."""
        return {mid: T.decode_member_action(act) for mid, act in sorted(self.maps["ecmp_member"].items())}

    def write_group(self, group_id: int, members: Iterable[int], *, modify: bool = False) -> None:
        """Insert group ``group_id`` of ``ecmp_selector`` holding ``members`` (member ids, any
        order, each once; stored ascending, the order the EV hash indexes, docs/ecmp-mode.md
        section 3), or with ``modify`` replace its members. An empty group is allowed: a route
        to it drops (no_route).

        Raises:
            MrcError: bad id, a member id listed twice or not uint32, or ``max_groups`` groups already
            (pipeline contract); GroupTooLarge (more than ``max_group_size`` members); UnknownReference (a member that does not
            exist); EntryExists / EntryNotFound (insert of a present / modify of an absent group).
        """
        group_id = T.check_ecmp_id("group", group_id)
        members = [T.check_ecmp_id("member", m) for m in members]
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

    def read_groups(self) -> dict[int, tuple[int, ...]]:
        """Every group: id -> its member ids, ascending."""
        return {gid: T.decode_group(g) for gid, g in sorted(self.maps["ecmp_group"].items())}

    def write_route(self, prefix: ipaddress.IPv6Network | str, *, member: int | None = None,
                    group: int | None = None, modify: bool = False) -> None:
        """Insert an ``ipv6_fib`` entry: packets whose first IPv6 DA falls in ``prefix`` (longest
        prefix wins) take ``member``'s action, or the member of ``group`` their EV hashes to
        (docs/ecmp-mode.md). With ``modify``, repoint an existing entry.

        Raises:
            MrcError: not an IPv6 prefix (or host bits set), not exactly one of member/group,
            or the table full (its ``size`` in the pipeline contract); UnknownReference (no such member/group);
            EntryExists / EntryNotFound (insert of a present / modify of an absent prefix).
        """
        prefix = T.ipv6_prefix(prefix)
        if (member is None) == (group is None):
            raise MrcError(f"table {P.IPV6_FIB}, prefix {prefix}: give exactly one of member= and group=")
        kind, ref_id = ("member", member) if member is not None else ("group", group)
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

    def delete_route(self, prefix: ipaddress.IPv6Network | str) -> None:
        """Delete the ``ipv6_fib`` entry of exactly ``prefix``.

        Raises:
            MrcError: not an IPv6 prefix; EntryNotFound (no entry of exactly that prefix).
        """
        prefix = T.ipv6_prefix(prefix)
        if not self.maps["ipv6_fib"].delete(T.lpm_key(prefix)):
            raise EntryNotFound(f"table {P.IPV6_FIB}: no entry for prefix {prefix}")
        self.sync_routes_present()

    def _set_routes_present(self, on: bool) -> None:
        self.maps["ipv6_fib_state"].update(0, 1 if on else 0)

    def _routes_empty(self) -> bool:
        return next(iter(self.maps["ipv6_fib"].keys()), None) is None

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

    def read_routes(self) -> dict[ipaddress.IPv6Network, tuple[str, int]]:
        """Every ``ipv6_fib`` entry: prefix -> ("member" | "group", id)."""
        out = {}
        for key, ref in self.maps["ipv6_fib"].items():
            kind = P.FIB_REF_KINDS.get(ref.kind)
            if kind is None:
                raise MrcError(f"table {P.IPV6_FIB}: map holds unknown reference kind {ref.kind}")
            out[T.lpm_prefix(key)] = (kind, ref.id)
        return dict(sorted(out.items(), key=lambda kv: (kv[0].network_address, kv[0].prefixlen)))

    def _routes_to(self, kind: int, ref_id: int) -> list[ipaddress.IPv6Network]:
        """The prefixes of the ipv6_fib entries naming (kind, ref_id), sorted."""
        return sorted(T.lpm_prefix(key) for key, ref in self.maps["ipv6_fib"].items()
                      if (ref.kind, ref.id) == (kind, ref_id))

    def clear_ecmp(self) -> None:
        """Delete every ipv6_fib entry, then every group, then every member (dependents first)."""
        for prefix in self.read_routes():
            self.delete_route(prefix)
        for group_id in self.read_groups():
            self.delete_group(group_id)
        for member_id in self.read_members():
            self.delete_member(member_id)

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
        if spec.name == "port_config":
            return bool(self.maps["port_config"].lookup(key).valid)
        return self.maps[spec.name].lookup(T.usid_key(key)) is not None

    # --- counters ---
    def counter(self, name: str, index: int) -> tuple[int, int]:
        """(packets, bytes) of counter ``name`` at ``index``, summed over CPUs.

        Raises:
            MrcError: unknown counter or index out of range.
        """
        cmap = self._counter_map(name)
        if not isinstance(index, int) or not 0 <= index < cmap.max_entries:
            raise MrcError(f"counter {name}: index {index!r} outside 0..{cmap.max_entries - 1}")
        total = cmap.lookup_sum(index)
        return total.packets, total.bytes

    def counters(self, name: str) -> dict[int, tuple[int, int]]:
        """Non-zero cells of counter ``name``: index -> (packets, bytes)."""
        out = {}
        for index, total in self._counter_map(name).items_sum():
            if total.packets or total.bytes:
                out[index] = (total.packets, total.bytes)
        return out

    def reset_counters(self) -> None:
        """Zero every counter cell on every CPU."""
        for name in P.COUNTER_NAMES:
            cmap = self.maps[name]
            zero = [T.Counter() for _ in range(cmap.ncpus)]
            for index in range(cmap.max_entries):
                cmap.update(index, zero)

    def _counter_map(self, name: str) -> Map:
        short = T.short_name(name)
        if short not in P.COUNTER_NAMES:
            raise MrcError(f"unknown counter {name!r}: the switch has {', '.join(P.COUNTER_NAMES)}")
        return self.maps[short]

    # --- target settings: admin state and queues ---
    def set_port_up(self, port: int, up: bool) -> None:
        """Set the admin state of ``port``; a down port drops (reason port_down)."""
        self.maps["port_admin"].update(_check_port(port), 0 if up else 1)

    def port_up(self, port: int) -> bool:
        """The admin state of ``port``."""
        return self.maps["port_admin"].lookup(_check_port(port)) == 0

    def set_queue_rate(self, port: int, pps: int) -> None:
        """Set the drain rate of ``port``'s virtual queue in packets/s (0 = never drains).

        Raises:
            MrcError: port out of range or rate outside 0..MAX_QUEUE_RATE_PPS.
        """
        if not isinstance(pps, int) or not 0 <= pps <= MAX_QUEUE_RATE_PPS:
            raise MrcError(f"queue rate {pps!r} pps outside 0..{MAX_QUEUE_RATE_PPS}")
        self.maps["queue_rate"].update(_check_port(port), T.QueueRate.of(pps))

    def queue_rate(self, port: int) -> int:
        """The drain rate of ``port``'s virtual queue (packets/s)."""
        return self.maps["queue_rate"].lookup(_check_port(port)).rate_pps

    def queue_depth(self, port: int) -> int:
        """The depth of ``port``'s virtual queue now, in packets (design section 4)."""
        q = self.maps["vqueue"].lookup(_check_port(port))
        service_ns = self.maps["queue_rate"].lookup(_check_port(port)).service_ns
        if service_ns == 0:
            return q.backlog
        left = q.busy_until_ns - time.monotonic_ns()  # bpf_ktime_get_ns() is CLOCK_MONOTONIC
        return max(0, -(-left // service_ns))

    def reset_queues(self, ports: Iterable[int] | None = None) -> None:
        """Empty the virtual queues of ``ports`` (default: all)."""
        for port in (range(P.PORT_COUNT) if ports is None else ports):
            self.maps["vqueue"].update(_check_port(port), T.VQueue())

    # --- port wiring (called from inside the switch's namespace) ---
    def bind_port(self, port: int, ifindex: int) -> None:
        """Wire switch ``port`` to interface ``ifindex``: the DEVMAP entry for redirects and the
        reverse entry for the ingress port. Call it inside the switch's namespace: the kernel
        resolves DEVMAP ifindexes in the caller's namespace (design section 9)."""
        self.maps["tx_ports"].update(_check_port(port), ifindex)
        self.maps["ifindex_port"].update(ifindex, port)
        slot = ifindex % P.IFINDEX_SLOTS
        if self.maps["ifindex_slots"].lookup(slot).ifindex in (0, ifindex):
            self.maps["ifindex_slots"].update(slot, T.IfindexSlot(ifindex, port))

    def init_defaults(self) -> None:
        """Default actions of design section 4 and default queue rates, on a fresh switch."""
        self.set_default_action("my_usid", "NoAction")
        self.set_default_action("usid_fib", "drop")
        for port in range(P.PORT_COUNT):
            self.maps["queue_rate"].update(port, T.QueueRate.of(DEFAULT_QUEUE_RATE_PPS))


class EbpfSwitch:
    """One eBPF switch: the XDP program on every port of ``ports`` in namespace ``netns``.

    Args:
        name: the switch's name; its maps are pinned under ``/sys/fs/bpf/mrckit/switch/<name>/``.
        netns: the namespace holding the port interfaces (None: the caller's namespace).
        ports: switch port number (0..511) -> interface name.
        xdp_mode: "native" (default; design section 9 explains the veth traps), "generic", "auto".
        entries: table entries (``TableEntry``) written at set-up, before any port is attached.
        p4runtime: serve P4Runtime for this switch: an address (``unix:/path`` or
            ``host:port``) or a ``mrckit.switch.p4runtime.process.ServerOptions`` (device id,
            TLS, state folder, log file). None: no server.

    :meth:`setup` is idempotent and reuses pinned maps, so a restarted manager keeps its
    tables; :meth:`teardown` stops the server, detaches and unpins everything, and is
    idempotent too. ``server`` is the running server process (or None).
    Redirecting into a veth needs NAPI on its peer (an XDP program or ``gro on``); the
    fabric builder sets that on the far ends, which this switch cannot reach.
    """

    def __init__(self, name: str, netns: str | None, ports: dict[int, str], *, xdp_mode: str = "native",
                 entries: Iterable[TableEntry] = (), p4runtime: "str | ServerOptions | None" = None):
        if not name or "/" in name or name in (".", ".."):
            raise MrcError(f"switch name {name!r}: must be a plain name")
        for port in ports:
            _check_port(port)
        if len(set(ports.values())) != len(ports):
            raise MrcError(f"switch {name}: an interface appears on two ports: {ports}")
        self.name, self.netns, self.ports, self.xdp_mode = name, netns, dict(ports), xdp_mode
        self.entries = list(entries)
        self.p4runtime = _server_options(p4runtime)
        self.server: ServerProcess | None = None
        self.pin_dir = switch_pin_dir(name)
        self._obj: BpfObject | None = None
        self.tables: SwitchTables | None = None
        self.attach_modes: dict[int, str] = {}

    def setup(self, *, wait: bool = True) -> "EbpfSwitch":
        """Load (reusing pins), pin, wire the DEVMAP, attach to every port, then start the
        P4Runtime server (if ``p4runtime`` was given) and wait until it serves.

        ``wait=False`` returns once the server process is started; call :meth:`wait_ready`
        (or :func:`wait_servers` for several switches, which start in parallel) before use.

        Raises:
            MrcError / BpfError: namespace or interface missing, verifier refusal (with log),
            attach refused, the server exited or stayed silent (with its last log lines).
            Whatever was done is undone before the error propagates.
        """
        ensure_bpffs()
        try:
            self._load()
            self.tables.apply(self.entries)
            with self._in_netns():
                for port, iface in self.ports.items():
                    self.tables.bind_port(port, ifindex_of(iface))
                    self.attach_modes[port] = xdp_attach(iface, self._obj.program(PROGRAM), self.xdp_mode,
                                                         replace=True)
            if self.p4runtime is not None and self.server is None:
                from .p4runtime.process import ServerProcess
                self.server = ServerProcess(self.name, self.p4runtime, self.netns)
            if wait:
                self.wait_ready()
        except BaseException:
            self.teardown()
            raise
        return self

    def wait_ready(self, timeout: float | None = None) -> "EbpfSwitch":
        """Return once the P4Runtime server serves (at once without a server).

        Raises:
            MrcError: the server exited or did not serve within ``timeout`` s (default
                ``process.READY_TIMEOUT_S``); the whole switch is torn down first.
        """
        wait_servers([self], timeout)
        return self

    def _load(self) -> None:
        fresh = not os.path.isdir(self.pin_dir)
        os.makedirs(os.path.dirname(self.pin_dir), exist_ok=True)  # libbpf makes only the last folder
        obj = BpfObject.open(OBJECT)
        try:
            for map_name in MAP_TYPES:
                path = os.path.join(self.pin_dir, map_name)
                # reuse_pin, not libbpf's own pin check: the kernel adds BPF_F_RDONLY_PROG to
                # every DEVMAP, which libbpf then reports as a parameter mismatch.
                if not obj.map(map_name).reuse_pin(path):
                    obj.map(map_name).set_pin_path(path)
            obj.load()
        except BaseException:
            obj.close()
            raise
        self._obj = obj
        self.tables = SwitchTables.from_object(obj)
        if fresh:
            self.tables.init_defaults()
        self.tables.sync_routes_present()  # pins from an older object may hold routes already

    def _in_netns(self):
        import contextlib
        return netns.enter(self.netns) if self.netns else contextlib.nullcontext()

    def teardown(self) -> None:
        """Stop the P4Runtime server (SIGTERM, SIGKILL after ``process.STOP_TIMEOUT_S``; its
        unix socket and stored pipeline go with it), detach from every port, unpin every map and remove the pin
        folder. Idempotent: a missing namespace, interface or pin is skipped."""
        self._stop_server()
        if self.netns is None or netns.exists(self.netns):
            with self._in_netns():
                for iface in self.ports.values():
                    try:
                        if xdp_query(iface).mode is not None:
                            xdp_detach(iface)
                    except BpfError:
                        pass  # the interface is gone, and its attachment with it
        remove_pins(self.name)
        if self._obj is not None:
            self._obj.close()
            self._obj, self.tables = None, None
        self.attach_modes = {}

    def _stop_server(self) -> None:
        if self.p4runtime is None:
            return
        from .p4runtime import server, store

        if self.server is not None:
            self.server.stop()
            self.server = None
            path = server.unix_path(self.p4runtime.address)
            if path and os.path.exists(path):
                os.unlink(path)  # a SIGKILLed server leaves its socket behind
        # The stored pipeline names maps about to be unpinned: it could never be used again.
        folder = self.p4runtime.state_dir or store.default_dir(self.name)
        store.remove(folder)
        if self.p4runtime.state_dir is None and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()

    def __enter__(self) -> "EbpfSwitch":
        return self.setup()

    def __exit__(self, *exc) -> None:
        self.teardown()


def wait_servers(switches: Iterable[EbpfSwitch], timeout: float | None = None, progress=None) -> None:
    """Wait until the P4Runtime server of every switch (set up with ``wait=False``) serves;
    ``progress(n)``: see ``process.wait_all``.

    Raises:
        MrcError: a server exited or stayed silent for ``timeout`` s (default
            ``process.READY_TIMEOUT_S``), naming its switch, with its last log lines; that
            switch is torn down first (the others are left to the caller).
    """
    switches = [sw for sw in switches if sw.server is not None]
    if not switches:
        return
    from .p4runtime import process

    try:
        process.wait_all([sw.server for sw in switches], process.READY_TIMEOUT_S if timeout is None else timeout,
                         progress)
    except process.ServerStartError as exc:
        next(sw for sw in switches if sw.server is exc.server).teardown()
        raise


def _server_options(p4runtime) -> "ServerOptions | None":
    if p4runtime is None:
        return None
    from .p4runtime.process import ServerOptions

    return ServerOptions(p4runtime) if isinstance(p4runtime, str) else p4runtime


def remove_pins(name: str) -> None:
    """Unpin every map of switch ``name`` and remove its folder (quiet when absent)."""
    folder = switch_pin_dir(name)
    if not os.path.isdir(folder):
        return
    for entry in os.listdir(folder):
        unpin(os.path.join(folder, entry))
    os.rmdir(folder)


def pinned_switches() -> list[str]:
    """Names of switches with pins under ``/sys/fs/bpf/mrckit/switch``."""
    root = os.path.join(BPFFS, "mrckit", PIN_DIR)
    return sorted(os.listdir(root)) if os.path.isdir(root) else []
