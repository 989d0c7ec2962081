"""The one mapping from the switch's P4 names to the maps of ``ebpf/mrc_switch.bpf.c``.

Design section 4 fixes the P4Runtime contract (tables ``my_usid``, ``usid_fib``, ``port_config``;
counters ``rx_port``, ``tx_port``, ``trim_port``, ``ecn_port``, ``drop_port``, ``drop_reason``);
EV-hash mode adds table ``ipv6_fib`` and action selector ``ecmp_selector`` (docs/ecmp-mode.md);
``docs/ebpf-switch.md`` fixes the map layouts. This module only encodes and decodes: it turns a
table entry given by P4 names (table, key, action, parameters) into map key and value bytes and
back, so the eBPF manager, the P4Runtime server and the conformance suite share one encoding.

The ctypes structures below mirror the C structs byte for byte (tests compare them with the
BTF of the compiled object).
"""

from __future__ import annotations

import ctypes
import ipaddress
from dataclasses import dataclass, field

from ..errors import MrcError
from ..wire.constants import DropReason

MAX_PORTS = 512
"""Switch ports 0..511, the full 9-bit v1model range (design section 4)."""
USID_KEY_FIELD = "hdr.outer_ipv6.dst_addr[127:80]"
PORT_KEY_FIELD = "standard_metadata.egress_spec"
THRESHOLD_NONE = 0xFFFFFFFF
"""A threshold never reached: the value of a port with no ``port_config`` entry."""

# Action ids of ``struct table_action`` (C enum table_action_id).
ACTION_NOACTION = 0
ACTION_USID_UN = 1
ACTION_SET_EGRESS = 2
ACTION_DROP = 3
# Indexes of the ``table_defaults`` array.
DEFAULT_INDEX = {"my_usid": 0, "usid_fib": 1}

COUNTERS = ("rx_port", "tx_port", "trim_port", "ecn_port", "drop_port", "drop_reason")
"""Indirect packets-and-bytes counters: per port, except ``drop_reason`` (by DropReason)."""
COUNTER_SIZE = {name: MAX_PORTS for name in COUNTERS} | {"drop_reason": len(DropReason)}


class UsidKey(ctypes.Structure):
    """C ``struct usid_key``: the first 48 bits of the outer DA, network order, plus 2 pad bytes."""

    _fields_ = [("prefix", ctypes.c_uint8 * 6), ("pad", ctypes.c_uint8 * 2)]


class TableAction(ctypes.Structure):
    """C ``struct table_action``: an ACTION_* id and, for set_egress, the port."""

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
    """C ``struct queue_rate``: drain rate (packets/s, 0 = never drains) and its service time
    per packet (ns, 1e9 / rate, at least 1; 0 for rate 0)."""

    _fields_ = [("rate_pps", ctypes.c_uint64), ("service_ns", ctypes.c_uint64)]

    @classmethod
    def of(cls, pps: int) -> "QueueRate":
        return cls(pps, max(1, 1_000_000_000 // pps) if pps else 0)


class IfindexSlot(ctypes.Structure):
    """C ``struct ifindex_slot``: one entry of the direct-mapped ifindex -> port cache."""

    _fields_ = [("ifindex", ctypes.c_uint32), ("port", ctypes.c_uint32)]


IFINDEX_SLOTS = 1024


class UsidSlot(ctypes.Structure):
    """C ``struct usid_slot``: one slot of the my_usid/usid_fib caches (``count`` hash entries
    share it; with exactly 1 and ``hash_only`` 0, ``prefix`` and ``act`` are that entry; with
    ``hash_only`` 1 the program asks the hash)."""

    _fields_ = [("prefix", ctypes.c_uint8 * 6), ("hash_only", ctypes.c_uint8), ("pad", ctypes.c_uint8),
                ("count", ctypes.c_uint32), ("act", TableAction)]


USID_SLOTS = 4096
"""Cache slots per table, indexed by the low 12 bits of the uSID (role and index)."""


def usid_slot_index(prefix: int) -> int:
    """The cache slot of a 48-bit prefix."""
    return prefix & (USID_SLOTS - 1)


@dataclass(frozen=True)
class ActionSpec:
    """One P4 action: its id in ``struct table_action`` and its parameters' widths in bits."""

    action_id: int
    params: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TableSpec:
    """One P4 table: its key field (exact match), key width in bits, and allowed actions."""

    name: str
    key_field: str
    key_bits: int
    actions: dict[str, ActionSpec]
    default_action: str


TABLES: dict[str, TableSpec] = {
    "my_usid": TableSpec("my_usid", USID_KEY_FIELD, 48,
                         {"usid_un": ActionSpec(ACTION_USID_UN), "NoAction": ActionSpec(ACTION_NOACTION)},
                         "NoAction"),
    "usid_fib": TableSpec("usid_fib", USID_KEY_FIELD, 48,
                          {"set_egress": ActionSpec(ACTION_SET_EGRESS, {"port": 9}),
                           "drop": ActionSpec(ACTION_DROP)},
                          "drop"),
    "port_config": TableSpec("port_config", PORT_KEY_FIELD, 9,
                             {"set_port": ActionSpec(-1, {"src_mac": 48, "dst_mac": 48, "faces_host": 1,
                                                          "trim_threshold": 32, "ecn_threshold": 32}),
                              "NoAction": ActionSpec(ACTION_NOACTION)},
                             "NoAction"),
}


@dataclass(frozen=True)
class TableEntry:
    """A table entry by P4 names: key is the exact-match value as an integer (48-bit DA prefix,
    or 9-bit port); params maps each action parameter name to an integer."""

    table: str
    key: int
    action: str
    params: dict[str, int] = field(default_factory=dict)


def short_name(name: str) -> str:
    """``MyIngress.usid_fib`` -> ``usid_fib``: P4Info names carry the control's prefix."""
    return name.rsplit(".", 1)[-1]


def table_spec(table: str) -> TableSpec:
    """The spec of ``table`` (short or control-qualified name). Raises MrcError if unknown."""
    spec = TABLES.get(short_name(table))
    if spec is None:
        raise MrcError(f"unknown table {table!r}: the switch has {', '.join(TABLES)}")
    return spec


def check_key(spec: TableSpec, key: int) -> int:
    """Return ``key`` if it fits the table's key width, else raise MrcError naming the table."""
    if not isinstance(key, int) or not 0 <= key < (1 << spec.key_bits):
        raise MrcError(f"table {spec.name}: key {key!r} does not fit {spec.key_field} ({spec.key_bits} bits)")
    if spec.name == "port_config" and key >= MAX_PORTS:
        raise MrcError(f"table port_config: port {key} outside 0..{MAX_PORTS - 1}")
    return key


def check_action(spec: TableSpec, action: str, params: dict[str, int] | None) -> tuple[str, dict[str, int]]:
    """Validate ``action`` and its ``params`` for ``spec``; return (short action name, params).

    Raises:
        MrcError: the action is not one of the table's, a parameter is missing, extra, or does
            not fit its width.
    """
    name = short_name(action)
    act = spec.actions.get(name)
    if act is None:
        raise MrcError(f"table {spec.name}: action {action!r} is not one of {', '.join(spec.actions)}")
    params = dict(params or {})
    if set(params) != set(act.params):
        raise MrcError(f"table {spec.name}, action {name}: parameters {sorted(params)} given, "
                       f"{sorted(act.params)} expected")
    for pname, width in act.params.items():
        value = params[pname]
        if not isinstance(value, int) or not 0 <= value < (1 << width):
            raise MrcError(f"table {spec.name}, action {name}: {pname}={value!r} does not fit {width} bits")
    return name, params


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
    return TableAction(spec.actions[action].action_id, params.get("port", 0))


def decode_usid_action(spec: TableSpec, value: TableAction) -> tuple[str, dict[str, int]]:
    """(action name, params) of a ``struct table_action``; raises MrcError on a foreign id."""
    for name, act in spec.actions.items():
        if act.action_id == value.action:
            return name, ({"port": value.port} if act.params else {})
    if spec.name == "usid_fib" and value.action == ACTION_NOACTION:
        return "drop", {}  # a fresh all-zero default entry means drop (contract)
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
IPV6_FIB = "ipv6_fib"
"""The LPM table of EV-hash mode (P4Info ``MrcIngress.ipv6_fib``), implemented by ECMP_SELECTOR."""
IPV6_FIB_KEY_FIELD = "hdr.outer_ipv6.dst_addr"
"""Its one P4Info match field: the full 128-bit DA of the first IPv6 header, LPM."""
ECMP_SELECTOR = "ecmp_selector"
"""The action profile (with selector) whose members and groups ipv6_fib entries name."""
IPV6_FIB_SIZE = 65536
"""Entries of ipv6_fib (max_entries of the ``ipv6_fib`` LPM trie)."""
ECMP_MAX_MEMBERS = 4096
"""Members of ecmp_selector (max_entries of ``ecmp_member``; the P4 action profile size)."""
ECMP_MAX_GROUPS = 1024
"""Groups of ecmp_selector (max_entries of ``ecmp_group``)."""
ECMP_MAX_GROUP_SIZE = 256
"""Members per group (``@max_group_size(256)``; C ECMP_MAX_GROUP_SIZE)."""
ECMP_ID_BITS = 32
"""Member and group ids are P4Runtime uint32."""
MEMBER_ACTIONS: dict[str, ActionSpec] = {"set_egress": ActionSpec(ACTION_SET_EGRESS, {"port": 9}),
                                         "drop": ActionSpec(ACTION_DROP)}
"""The actions an ecmp_selector member may take: the actions of ipv6_fib (those of usid_fib)."""
FIB_REF_MEMBER = 1
FIB_REF_GROUP = 2
FIB_REF_KINDS = {FIB_REF_MEMBER: "member", FIB_REF_GROUP: "group"}
"""C enum fib_ref_kind -> the name read_routes gives it."""


class Ipv6LpmKey(ctypes.Structure):
    """C ``struct ipv6_lpm_key``: prefix length in bits, then the 128-bit address, network order."""

    _fields_ = [("prefixlen", ctypes.c_uint32), ("addr", ctypes.c_uint8 * 16)]


class FibRef(ctypes.Structure):
    """C ``struct fib_ref``: what an ipv6_fib entry names, FIB_REF_MEMBER/FIB_REF_GROUP and its id."""

    _fields_ = [("kind", ctypes.c_uint32), ("id", ctypes.c_uint32)]


class EcmpGroup(ctypes.Structure):
    """C ``struct ecmp_group``: ``count`` member ids in ``member[0:count]``, ascending."""

    _fields_ = [("count", ctypes.c_uint32), ("member", ctypes.c_uint32 * ECMP_MAX_GROUP_SIZE)]


def ipv6_prefix(prefix) -> ipaddress.IPv6Network:
    """``prefix`` (an IPv6Network or its text, host bits zero) as an IPv6Network.

    Raises:
        MrcError: not an IPv6 prefix, or host bits set (``2001:db8::1/64``).
    """
    if isinstance(prefix, ipaddress.IPv6Network):
        return prefix
    if not isinstance(prefix, str):
        raise MrcError(f"table {IPV6_FIB}: prefix {prefix!r} is not an IPv6 prefix")
    try:
        return ipaddress.IPv6Network(prefix)
    except ValueError as exc:
        raise MrcError(f"table {IPV6_FIB}: prefix {prefix!r}: {exc}") from None


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


def check_member_action(member_id: int, action: str, params: dict[str, int] | None) -> TableAction:
    """The ``struct table_action`` of member ``member_id``'s action (set_egress(port) or drop()).

    Raises:
        MrcError: another action, a parameter missing, extra or too wide for its bits.
    """
    where = f"action profile {ECMP_SELECTOR}, member {member_id}"
    name = short_name(action) if isinstance(action, str) else action
    act = MEMBER_ACTIONS.get(name)
    if act is None:
        raise MrcError(f"{where}: action {action!r} is not one of {', '.join(MEMBER_ACTIONS)}")
    params = dict(params or {})
    if set(params) != set(act.params):
        raise MrcError(f"{where}, action {name}: parameters {sorted(params)} given, {sorted(act.params)} expected")
    for pname, width in act.params.items():
        value = params[pname]
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < (1 << width):
            raise MrcError(f"{where}, action {name}: {pname}={value!r} does not fit {width} bits")
    return TableAction(act.action_id, params.get("port", 0))


def decode_member_action(value: TableAction) -> tuple[str, dict[str, int]]:
    """(action name, params) of a member's ``struct table_action``; MrcError on a foreign id."""
    for name, act in MEMBER_ACTIONS.items():
        if act.action_id == value.action:
            return name, ({"port": value.port} if act.params else {})
    raise MrcError(f"action profile {ECMP_SELECTOR}: map holds unknown action id {value.action}")


def encode_group(members: tuple[int, ...]) -> EcmpGroup:
    """The ``struct ecmp_group`` of already checked, sorted member ids."""
    group = EcmpGroup(len(members))
    group.member[:len(members)] = list(members)
    return group


def decode_group(group: EcmpGroup) -> tuple[int, ...]:
    """The member ids of a ``struct ecmp_group``, ascending."""
    return tuple(group.member[:min(group.count, ECMP_MAX_GROUP_SIZE)])
