"""What the P4Runtime server needs from a switch target, in P4 names only.

The server never encodes BPF maps itself: ``mrckit.switch.ebpf_target.SwitchTables`` owns the
mapping from P4 names to maps (see docs/ebpf-switch.md), and ``EbpfBackend`` below
only adapts its calls to this interface. Keys are tuples with one item per match field, in P4Info order
(exact fields: ``int``; LPM fields: ``(value, prefix length)``); parameters are ``{name: int}``.
The indirect table ``ipv6_fib`` names action profile members and groups (``ref`` = ("member" or
"group", id)); the program has one action profile, ``ecmp_selector``.
"""

import ipaddress
from collections.abc import Iterable
from typing import Protocol

import grpc

from ...bpf.errors import BpfError
from ...errors import MrcError
from ..ebpf_target import EntryExists, EntryInUse, EntryNotFound, GroupTooLarge, SwitchTables, UnknownReference
from .errors import P4RuntimeError


class Backend(Protocol):
    """A switch's tables and counters by P4 names. Errors: ValueError/KeyError for what the
    target cannot hold, NotImplementedError for what it does not support, OSError from maps."""

    def write_entry(self, table: str, key: tuple, action: str, params: dict) -> None:
        """Insert or overwrite the entry ``key`` of ``table``."""

    def delete_entry(self, table: str, key: tuple) -> None:
        """Remove the entry ``key`` of ``table``."""

    def read_entries(self, table: str) -> Iterable[tuple[tuple, str, dict]]:
        """Every entry of ``table`` as (key, action, params)."""

    def write_default(self, table: str, action: str, params: dict) -> None:
        """Set the default action of ``table``."""

    def read_default(self, table: str) -> tuple[str, dict]:
        """The default action of ``table`` as (action, params)."""

    def read_counter(self, name: str) -> list[tuple[int, int]]:
        """Every cell of indirect counter ``name`` as (packets, bytes), summed over CPUs."""

    def reset_counters(self) -> None:
        """Zero every counter cell (a new pipeline starts from zero, as on bmv2)."""

    def identity(self) -> str:
        """A string that changes when the maps are re-created (so a stored pipeline is stale)."""

    def write_route(self, table: str, key: tuple, ref: tuple[str, int], modify: bool) -> None:
        """Insert (or with ``modify`` replace) the indirect table entry ``key`` naming ``ref``."""

    def delete_route(self, table: str, key: tuple) -> None:
        """Remove the indirect table entry ``key``."""

    def read_routes(self, table: str) -> Iterable[tuple[tuple, tuple[str, int]]]:
        """Every entry of indirect table ``table`` as (key, ref)."""

    def write_member(self, member_id: int, action: str, params: dict, modify: bool) -> None:
        """Insert (or with ``modify`` replace) action profile member ``member_id``."""

    def delete_member(self, member_id: int) -> None:
        """Remove member ``member_id`` (in no group, named by no entry)."""

    def read_members(self) -> dict[int, tuple[str, dict]]:
        """Every member as {member id: (action, params)}."""

    def write_group(self, group_id: int, members: tuple[int, ...], modify: bool) -> None:
        """Insert (or with ``modify`` replace) group ``group_id`` of existing members."""

    def delete_group(self, group_id: int) -> None:
        """Remove group ``group_id`` (named by no entry)."""

    def read_groups(self) -> dict[int, tuple[int, ...]]:
        """Every group as {group id: member ids}."""


class EbpfBackend:
    """``Backend`` over ``SwitchTables`` (a freshly loaded switch, or its pins through
    ``EbpfBackend.open(name)``). Existence checks are the server's (its view), so entries are
    written in upsert mode; ``MrcError`` from the mapping becomes ValueError."""

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
        return ",".join(str(self.tables.maps[n].id) for n in ("my_usid", "usid_fib", "port_config"))

    def write_entry(self, table: str, key: tuple, action: str, params: dict) -> None:
        _mapped(self.tables.write_entry, table, _one(key), action, params, mode="upsert")

    def delete_entry(self, table: str, key: tuple) -> None:
        _mapped(self.tables.delete_entry, table, _one(key))

    def read_entries(self, table: str):
        return [((e.key,), e.action, e.params) for e in self.tables.read_entries(table)]

    def write_default(self, table: str, action: str, params: dict) -> None:
        spec_default, _ = self.tables.default_action(table)
        if table == "port_config":
            if action != spec_default:
                raise NotImplementedError(f"the eBPF program fixes the default action of {table} to {spec_default}")
            return
        _mapped(self.tables.set_default_action, table, action, params)

    def read_default(self, table: str) -> tuple[str, dict]:
        return self.tables.default_action(table)

    def reset_counters(self) -> None:
        self.tables.reset_counters()

    def read_counter(self, name: str) -> list[tuple[int, int]]:
        size = self.tables.maps[name].max_entries
        cells = [(0, 0)] * size
        for index, cell in self.tables.counters(name).items():
            cells[index] = cell
        return cells

    # -- ipv6_fib and ecmp_selector (SwitchTables checks references too) ---------------------
    def write_route(self, table: str, key: tuple, ref: tuple[str, int], modify: bool) -> None:
        kind, ref_id = ref
        _mapped(self.tables.write_route, _prefix(table, key), modify=modify, **{kind: ref_id})

    def delete_route(self, table: str, key: tuple) -> None:
        _mapped(self.tables.delete_route, _prefix(table, key))

    def read_routes(self, table: str):
        return [(((int(net.network_address), net.prefixlen),), ref) for net, ref in self.tables.read_routes().items()]

    def write_member(self, member_id: int, action: str, params: dict, modify: bool) -> None:
        _mapped(self.tables.write_member, member_id, action, params, modify=modify)

    def delete_member(self, member_id: int) -> None:
        _mapped(self.tables.delete_member, member_id)

    def read_members(self) -> dict[int, tuple[str, dict]]:
        return self.tables.read_members()

    def write_group(self, group_id: int, members: tuple[int, ...], modify: bool) -> None:
        _mapped(self.tables.write_group, group_id, members, modify=modify)

    def delete_group(self, group_id: int) -> None:
        _mapped(self.tables.delete_group, group_id)

    def read_groups(self) -> dict[int, tuple[int, ...]]:
        return self.tables.read_groups()


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


def _prefix(table: str, key: tuple) -> ipaddress.IPv6Network:
    if len(key) != 1 or not isinstance(key[0], tuple):
        raise ValueError(f"table {table}: the eBPF program takes one LPM key field, got {key!r}")
    value, prefix_len = key[0]
    return ipaddress.IPv6Network((value, prefix_len))


def _one(key: tuple) -> int:
    if len(key) != 1 or not isinstance(key[0], int):
        raise ValueError(f"the eBPF tables take one exact key field, got {key!r}")
    return key[0]
