"""The one mapping from the switch's P4 names to the maps of ``ebpf/mrc_switch.bpf.c``.

The pipeline contract, ``mrckit.wire.pipeline.MRC_SWITCH``, declares the tables, keys,
actions, sizes and counters (design section 4; EV-hash mode's ``ipv6_fib`` and
``ecmp_selector``, docs/ecmp-mode.md) and the eBPF target's action ids; ``docs/ebpf-switch.md``
fixes the map layouts. This module only checks, encodes and decodes: it turns a table entry
(``mrckit.topology.entries.TableEntry``) or action profile member into map key and value bytes
and back, so the eBPF manager, the P4Runtime server and the conformance suite share one encoding.

The ctypes structures below mirror the C structs byte for byte (tests compare them with the
BTF of the compiled object).
"""

from __future__ import annotations

import ctypes
import ipaddress

from ..errors import MrcError
from ..topology.entries import ActionProfileMember, TableEntry
from ..wire import pipeline as P
from ..wire.pipeline import (BPF_ACTION_IDS, ECMP_ID_BITS, ECMP_SELECTOR, MRC_SWITCH, PORT_COUNT,
                             USID_SLOTS, TableSpec)

ECMP_PROFILE = MRC_SWITCH.action_profile(ECMP_SELECTOR)
"""The contract of ``ecmp_selector``: members (``size``), groups, members per group."""


class UsidKey(ctypes.Structure):
    """C ``struct usid_key``: the first 48 bits of the outer DA, network order, plus 2 pad bytes."""

    _fields_ = [("prefix", ctypes.c_uint8 * 6), ("pad", ctypes.c_uint8 * 2)]


class TableAction(ctypes.Structure):
    """C ``struct table_action``: an action id (``pipeline.BPF_ACTION_IDS``) and, for set_egress, the port."""

    _fields_ = [("action", ctypes.c_uint32), ("port", ctypes.c_uint32)]


class PortConfig(ctypes.Structure):
    """C ``struct port_config``: MACs, host-facing flag, thresholds in packets; valid=0: no entry."""

    _fields_ = [("src_mac", ctypes.c_uint8 * 6), ("dst_mac", ctypes.c_uint8 * 6),
                ("faces_host", ctypes.c_uint8), ("valid", ctypes.c_uint8),
                ("pad", ctypes.c_uint8 * 2), ("trim_threshold", ctypes.c_uint32),
                ("ecn_threshold", ctypes.c_uint32)]


class Counter(ctypes.Structure):
    """C ``struct counter``: one CPU's share of a packets-and-bytes counter."""

    _fields_ = [("packets", ctypes.c_uint64), ("bytes", ctypes.c_uint64)]


class VQueue(ctypes.Structure):
    """C ``struct vqueue``: the virtual finish time (CLOCK_MONOTONIC ns at which the queue
    empties) and, for a drain rate of 0, the packet count."""

    _fields_ = [("busy_until_ns", ctypes.c_uint64), ("backlog", ctypes.c_uint64)]


class QueueRate(ctypes.Structure):
    """C ``struct queue_rate``: drain rate (packets/s, 0 = never drains), its service time
    per packet (ns, 1e9 / rate, at least 1; 0 for rate 0) and the data queue's capacity
    (packets, 0 = unbounded)."""

    _fields_ = [("rate_pps", ctypes.c_uint64), ("service_ns", ctypes.c_uint64), ("capacity", ctypes.c_uint64)]

    @classmethod
    def of(cls, pps: int, capacity: int = 0) -> "QueueRate":
        return cls(pps, max(1, 1_000_000_000 // pps) if pps else 0, capacity)


class PortState(ctypes.Structure):
    """C ``struct port_state``: one port's ``port_config`` entry, virtual queue, drain rate and
    admin state (``down``: 0 up, 1 down), one map value so that the program looks a port up
    once. Each part has its own writer, which writes only that part (``mrckit.switch.port_state``)."""

    _fields_ = [("config", PortConfig), ("queue", VQueue), ("rate", QueueRate),
                ("down", ctypes.c_uint32), ("pad", ctypes.c_uint32)]


class IfindexSlot(ctypes.Structure):
    """C ``struct ifindex_slot``: one entry of the direct-mapped ifindex -> port cache."""

    _fields_ = [("ifindex", ctypes.c_uint32), ("port", ctypes.c_uint32)]


class UsidSlot(ctypes.Structure):
    """C ``struct usid_slot``: one slot of the my_usid/usid_fib caches (``count`` hash entries
    share it; with exactly 1 and ``hash_only`` 0, ``prefix`` and ``act`` are that entry; with
    ``hash_only`` 1 the program asks the hash)."""

    _fields_ = [("prefix", ctypes.c_uint8 * 6), ("hash_only", ctypes.c_uint8), ("pad", ctypes.c_uint8),
                ("count", ctypes.c_uint32), ("act", TableAction)]


def usid_slot_index(prefix: int) -> int:
    """The cache slot of a 48-bit prefix."""
    return prefix & (USID_SLOTS - 1)


def short_name(name: str) -> str:
    """``MyIngress.usid_fib`` -> ``usid_fib``: P4Info names carry the control's prefix."""
    return name.rsplit(".", 1)[-1]


def table_spec(table: str) -> TableSpec:
    """The contract of a direct table (short or control-qualified name).

    Raises:
        MrcError: no such direct table (``ipv6_fib`` takes routes, not entries).
    """
    name = short_name(table)
    if name == P.IPV6_FIB:
        raise MrcError(f"table {table!r} is indirect (its entries name {ECMP_SELECTOR} members and groups): "
                       "write it through the ECMP selector")
    if name not in P.TABLE_NAMES:
        raise MrcError(f"unknown table {table!r}: the switch has {', '.join(P.TABLE_NAMES)}")
    return MRC_SWITCH.table(name)


def check_key(spec: TableSpec, key: int) -> int:
    """Return ``key`` if it fits the table's one key field, else raise MrcError naming the table."""
    (field_,) = spec.keys
    if not isinstance(key, int) or not 0 <= key < (1 << field_.bits):
        raise MrcError(f"table {spec.name}: key {key!r} does not fit {field_.name} ({field_.bits} bits)")
    if spec.name == P.PORT_CONFIG and key >= PORT_COUNT:
        raise MrcError(f"table port_config: port {key} outside 0..{PORT_COUNT - 1}")
    return key


def entry_key(spec: TableSpec, match: dict) -> int:
    """The key of a ``TableEntry.match`` for ``spec``: the value of its one key field, checked.

    Raises:
        MrcError: ``match`` names other fields than the table's key field, or the value does not fit.
    """
    (field_,) = spec.keys
    if set(match) != {field_.name}:
        raise MrcError(f"table {spec.name}: match {sorted(match)} given, the key is {field_.name!r}")
    return check_key(spec, match[field_.name])


def check_entry(entry: TableEntry) -> tuple[TableSpec, int, str, dict[str, int]]:
    """Check a direct table's entry: (table spec, key, short action name, params).

    Raises:
        MrcError: not a ``TableEntry``, an unknown or indirect table, a bad key, an action the
            table lacks, or parameters missing, extra or too wide (the message names which).
    """
    if not isinstance(entry, TableEntry):
        raise MrcError(f"{entry!r} is not a TableEntry")
    spec = table_spec(entry.table)
    key = entry_key(spec, entry.match)
    if entry.action is None:
        raise MrcError(f"table {spec.name}: entry {key:#x} names no action")
    name, params = check_action(spec, entry.action, entry.params)
    return spec, key, name, params


def check_entry_key(entry: TableEntry) -> tuple[TableSpec, int]:
    """(table spec, key) of a direct table's entry, checked: what a delete needs.

    Raises:
        MrcError: an unknown or indirect table, or a bad key.
    """
    if not isinstance(entry, TableEntry):
        raise MrcError(f"{entry!r} is not a TableEntry")
    spec = table_spec(entry.table)
    return spec, entry_key(spec, entry.match)


def _check_params(where: str, act: P.ActionSpec, params: dict[str, int] | None,
                  bools: bool = True) -> dict[str, int]:
    # ``bools``: table entries have always taken True/False for a 1-bit parameter; members never did.
    params = dict(params or {})
    widths = dict(act.params)
    if set(params) != set(widths):
        raise MrcError(f"{where}, action {act.name}: parameters {sorted(params)} given, {sorted(widths)} expected")
    for pname, width in widths.items():
        value = params[pname]
        if not isinstance(value, int) or (isinstance(value, bool) and not bools) or not 0 <= value < (1 << width):
            raise MrcError(f"{where}, action {act.name}: {pname}={value!r} does not fit {width} bits")
    return params


def check_action(spec: TableSpec, action: str, params: dict[str, int] | None) -> tuple[str, dict[str, int]]:
    """Validate ``action`` and its ``params`` for ``spec``; return (short action name, params).

    Raises:
        MrcError: the action is not one of the table's, a parameter is missing, extra, or does
            not fit its width.
    """
    name = short_name(action)
    names = [a.name for a in spec.actions]
    if name not in names:
        raise MrcError(f"table {spec.name}: action {action!r} is not one of {', '.join(names)}")
    return name, _check_params(f"table {spec.name}", spec.action(name), params)


def usid_key(prefix: int) -> UsidKey:
    """The map key of a 48-bit DA prefix (locator << 16 | uSID)."""
    key = UsidKey()
    key.prefix[:] = list(prefix.to_bytes(6, "big"))
    return key


def usid_key_value(key: UsidKey) -> int:
    """The 48-bit prefix held in a ``UsidKey``."""
    return int.from_bytes(bytes(key.prefix), "big")


def encode_usid_action(spec: TableSpec, action: str, params: dict[str, int]) -> TableAction:
    """The ``struct table_action`` of a my_usid/usid_fib action (already validated)."""
    return TableAction(BPF_ACTION_IDS[action], params.get("port", 0))


def _decode_action(actions: tuple[P.ActionSpec, ...], value: TableAction) -> tuple[str, dict[str, int]] | None:
    for act in actions:
        if BPF_ACTION_IDS.get(act.name) == value.action:
            return act.name, ({"port": value.port} if act.params else {})
    return None


def decode_usid_action(spec: TableSpec, value: TableAction) -> tuple[str, dict[str, int]]:
    """(action name, params) of a ``struct table_action``; raises MrcError on a foreign id."""
    found = _decode_action(spec.actions, value)
    if found is not None:
        return found
    if spec.name == P.USID_FIB and value.action == BPF_ACTION_IDS[P.NO_ACTION]:
        return P.DROP, {}  # a fresh all-zero default entry means drop (contract)
    raise MrcError(f"table {spec.name}: map holds unknown action id {value.action}")


def encode_port_config(params: dict[str, int]) -> PortConfig:
    """The ``struct port_config`` of a set_port action (already validated)."""
    pc = PortConfig()
    pc.src_mac[:] = list(params["src_mac"].to_bytes(6, "big"))
    pc.dst_mac[:] = list(params["dst_mac"].to_bytes(6, "big"))
    pc.faces_host = params["faces_host"]
    pc.valid = 1
    pc.trim_threshold = params["trim_threshold"]
    pc.ecn_threshold = params["ecn_threshold"]
    return pc


def decode_port_config(pc: PortConfig) -> dict[str, int]:
    """The set_port parameters held in a valid ``struct port_config``."""
    return {"src_mac": int.from_bytes(bytes(pc.src_mac), "big"),
            "dst_mac": int.from_bytes(bytes(pc.dst_mac), "big"),
            "faces_host": pc.faces_host, "trim_threshold": pc.trim_threshold,
            "ecn_threshold": pc.ecn_threshold}


def mac_int(mac: str) -> int:
    """``"02:00:00:00:00:01"`` -> 48-bit integer. Raises MrcError on a malformed MAC."""
    parts = mac.split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise MrcError(f"malformed MAC address {mac!r} (expected six hex bytes with colons)")
    try:
        return int("".join(parts), 16)
    except ValueError:
        raise MrcError(f"malformed MAC address {mac!r}") from None


# --- EV-hash (ECMP) mode: ipv6_fib and its action selector (docs/ecmp-mode.md) ---
FIB_REF_MEMBER, FIB_REF_GROUP = (code for code, kind in sorted(P.FIB_REF_KINDS.items()))
"""``struct fib_ref.kind`` of a route to a member, and to a group (``P.FIB_REF_KINDS``)."""


class Ipv6LpmKey(ctypes.Structure):
    """C ``struct ipv6_lpm_key``: prefix length in bits, then the 128-bit address, network order."""

    _fields_ = [("prefixlen", ctypes.c_uint32), ("addr", ctypes.c_uint8 * 16)]


class FibRef(ctypes.Structure):
    """C ``struct fib_ref``: what an ipv6_fib entry names, FIB_REF_MEMBER/FIB_REF_GROUP and its id."""

    _fields_ = [("kind", ctypes.c_uint32), ("id", ctypes.c_uint32)]


class EcmpGroup(ctypes.Structure):
    """C ``struct ecmp_group``: ``count`` member ids in ``member[0:count]``, ascending."""

    _fields_ = [("count", ctypes.c_uint32), ("member", ctypes.c_uint32 * ECMP_PROFILE.max_group_size)]


def lpm_key(prefix: ipaddress.IPv6Network) -> Ipv6LpmKey:
    """The ``ipv6_fib`` map key of an IPv6 prefix."""
    key = Ipv6LpmKey(prefix.prefixlen)
    key.addr[:] = list(prefix.network_address.packed)
    return key


def lpm_prefix(key: Ipv6LpmKey) -> ipaddress.IPv6Network:
    """The IPv6 prefix held in an ``Ipv6LpmKey``."""
    return ipaddress.IPv6Network((bytes(key.addr), key.prefixlen))


def check_ecmp_id(what: str, value: int) -> int:
    """Return ``value`` if it is a uint32 id, else raise MrcError naming ``what`` ("member"...)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < (1 << ECMP_ID_BITS):
        raise MrcError(f"action profile {ECMP_SELECTOR}: {what} id {value!r} is not a 32-bit unsigned integer")
    return value


def check_member(member: ActionProfileMember) -> tuple[int, TableAction]:
    """(member id, ``struct table_action``) of an ``ecmp_selector`` member (set_egress(port)
    or drop()).

    Raises:
        MrcError: another action profile, a bad id, another action, a parameter missing, extra
            or too wide for its bits.
    """
    if not isinstance(member, ActionProfileMember):
        raise MrcError(f"{member!r} is not an ActionProfileMember")
    if member.profile != ECMP_SELECTOR:
        raise MrcError(f"action profile {member.profile!r}: the switch has only {ECMP_SELECTOR}")
    member_id = check_ecmp_id("member", member.member_id)
    where = f"action profile {ECMP_SELECTOR}, member {member_id}"
    action = member.action
    name = short_name(action) if isinstance(action, str) else action
    act = next((a for a in P.MEMBER_ACTIONS if a.name == name), None)
    if act is None:
        raise MrcError(f"{where}: action {action!r} is not one of {', '.join(a.name for a in P.MEMBER_ACTIONS)}")
    params = _check_params(where, act, member.params, bools=False)
    return member_id, TableAction(BPF_ACTION_IDS[act.name], params.get("port", 0))


def decode_member(member_id: int, value: TableAction) -> ActionProfileMember:
    """The ``ecmp_selector`` member held in a ``struct table_action``; MrcError on a foreign id."""
    found = _decode_action(P.MEMBER_ACTIONS, value)
    if found is None:
        raise MrcError(f"action profile {ECMP_SELECTOR}: map holds unknown action id {value.action}")
    return ActionProfileMember(member_id, *found)


def encode_group(members: tuple[int, ...]) -> EcmpGroup:
    """The ``struct ecmp_group`` of already checked, sorted member ids."""
    group = EcmpGroup(len(members))
    group.member[:len(members)] = list(members)
    return group


def decode_group(group: EcmpGroup) -> tuple[int, ...]:
    """The member ids of a ``struct ecmp_group``, ascending."""
    return tuple(group.member[:min(group.count, ECMP_PROFILE.max_group_size)])
