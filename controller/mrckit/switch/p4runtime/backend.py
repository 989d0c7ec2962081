"""What the P4Runtime server needs from a switch target: its entries, members and groups as
mrckit's own types, and its counters.

Entries are ``mrckit.topology.entries.TableEntry`` values (a direct table's with an action, the
indirect ``ipv6_fib``'s naming a ``member`` or ``group``; a default entry has no match), members
and groups ``ActionProfileMember`` / ``ActionProfileGroup``: the types the topology compiler
emits, so one entry type runs from the compiler to the maps. The server never encodes BPF maps
itself: ``mrckit.switch.ebpf_target.SwitchTables`` owns the mapping from P4 names to maps (see
docs/ebpf-switch.md), and ``EbpfBackend`` below only adapts its calls to this interface. The
program has one action profile, ``ecmp_selector``.
"""

from collections.abc import Iterable
from typing import Protocol

import grpc

from ...bpf.errors import BpfError
from ...errors import MrcError
from ...topology.entries import ActionProfileGroup, ActionProfileMember, TableEntry
from ...wire.pipeline import BPF_DEFAULT_SLOTS, IPV6_FIB
from ..ebpf_target import SwitchTables
from ..errors import EntryExists, EntryInUse, EntryNotFound, GroupTooLarge, UnknownReference
from .errors import P4RuntimeError


class Backend(Protocol):
    """A switch's tables and counters by P4 names. Errors: ValueError/KeyError for what the
    target cannot hold, NotImplementedError for what it does not support, OSError from maps."""

    def write_entry(self, entry: TableEntry, modify: bool) -> None:
        """Insert (or with ``modify`` replace) ``entry``, of a direct or an indirect table."""

    def delete_entry(self, entry: TableEntry) -> None:
        """Remove the entry with ``entry``'s table and match."""

    def read_entries(self, table: str) -> Iterable[TableEntry]:
        """Every entry of ``table``."""

    def write_default(self, entry: TableEntry) -> None:
        """Set the default entry (no match) of a direct table."""

    def read_default(self, table: str) -> TableEntry:
        """The default entry of direct table ``table``."""

    def read_counter(self, name: str) -> list[tuple[int, int]]:
        """Every cell of indirect counter ``name`` as (packets, bytes), summed over CPUs."""

    def reset_counters(self) -> None:
        """Zero every counter cell (a new pipeline starts from zero, as on bmv2)."""

    def identity(self) -> str:
        """A string that changes when the maps are re-created (so a stored pipeline is stale)."""

    def write_member(self, member: ActionProfileMember, modify: bool) -> None:
        """Insert (or with ``modify`` replace) an action profile member."""

    def delete_member(self, member_id: int) -> None:
        """Remove member ``member_id`` (in no group, named by no entry)."""

    def read_members(self) -> Iterable[ActionProfileMember]:
        """Every member."""

    def write_group(self, group: ActionProfileGroup, modify: bool) -> None:
        """Insert (or with ``modify`` replace) a group of existing members."""

    def delete_group(self, group_id: int) -> None:
        """Remove group ``group_id`` (named by no entry)."""

    def read_groups(self) -> Iterable[ActionProfileGroup]:
        """Every group."""


class EbpfBackend:
    """``Backend`` over ``SwitchTables`` (a freshly loaded switch, or its pins through
    ``EbpfBackend.open(name)``). Existence checks are the server's (its view), so direct
    entries are written in upsert mode; ``MrcError`` from the mapping becomes ValueError, or
    the P4Runtime code of its class."""

    def __init__(self, tables: SwitchTables):
        self.tables = tables

    @classmethod
    def open(cls, switch: str) -> "EbpfBackend":
        """The pinned maps of switch ``switch``. Raises MrcError if it is not set up."""
        return cls(SwitchTables.open_pinned(switch))

    def close(self) -> None:
        """Close the map fds (the pins stay)."""
        self.tables.close()

    def identity(self) -> str:
        """Kernel ids of the table maps: new maps (a re-created switch) get new ids."""
        return ",".join(str(self.tables.maps[n].id) for n in ("my_usid", "usid_fib", "port_state"))

    def write_entry(self, entry: TableEntry, modify: bool) -> None:
        if entry.target is not None:
            _mapped(self.tables.ecmp.write_route, entry, modify=modify)
        else:
            _mapped(self.tables.direct.write, entry, mode="upsert")

    def delete_entry(self, entry: TableEntry) -> None:
        if entry.table == IPV6_FIB:
            _mapped(self.tables.ecmp.delete_route, entry)
        else:
            _mapped(self.tables.direct.delete, entry)

    def read_entries(self, table: str) -> list[TableEntry]:
        if table == IPV6_FIB:
            return self.tables.ecmp.routes()
        return self.tables.direct.read(table)

    def write_default(self, entry: TableEntry) -> None:
        fixed = self.tables.direct.default(entry.table)
        if entry.table not in BPF_DEFAULT_SLOTS:
            if entry.action != fixed.action:
                raise NotImplementedError(f"the eBPF program fixes the default action of {entry.table} to {fixed.action}")
            return
        _mapped(self.tables.direct.set_default, entry)

    def read_default(self, table: str) -> TableEntry:
        return self.tables.direct.default(table)

    def reset_counters(self) -> None:
        self.tables.counters.reset()

    def read_counter(self, name: str) -> list[tuple[int, int]]:
        return self.tables.counters.cells(name)

    # -- ecmp_selector (SwitchTables checks references too) ---------------------------------
    def write_member(self, member: ActionProfileMember, modify: bool) -> None:
        _mapped(self.tables.ecmp.write_member, member, modify=modify)

    def delete_member(self, member_id: int) -> None:
        _mapped(self.tables.ecmp.delete_member, member_id)

    def read_members(self) -> list[ActionProfileMember]:
        return self.tables.ecmp.members()

    def write_group(self, group: ActionProfileGroup, modify: bool) -> None:
        _mapped(self.tables.ecmp.write_group, group, modify=modify)

    def delete_group(self, group_id: int) -> None:
        _mapped(self.tables.ecmp.delete_group, group_id)

    def read_groups(self) -> list[ActionProfileGroup]:
        return self.tables.ecmp.groups()


# What SwitchTables refuses, as P4Runtime codes (the server's view checks first, so these
# mean the maps changed behind its back).
_CODES = ((EntryExists, grpc.StatusCode.ALREADY_EXISTS), (EntryNotFound, grpc.StatusCode.NOT_FOUND),
          (UnknownReference, grpc.StatusCode.NOT_FOUND), (EntryInUse, grpc.StatusCode.FAILED_PRECONDITION),
          (GroupTooLarge, grpc.StatusCode.RESOURCE_EXHAUSTED))


def _mapped(fn, *args, **kwargs) -> None:
    try:
        fn(*args, **kwargs)
    except BpfError as exc:
        raise OSError(exc.errno, str(exc)) from exc
    except MrcError as exc:
        for kind, code in _CODES:
            if isinstance(exc, kind):
                raise P4RuntimeError(code, str(exc)) from exc
        raise ValueError(str(exc)) from exc
