"""The switch pipeline contract: the one declaration of the mrc_switch program's P4Runtime view.

Design section 4 ("The P4Runtime contract") and docs/ecmp-mode.md fix tables ``my_usid``,
``usid_fib``, ``port_config`` and ``ipv6_fib``, the action selector ``ecmp_selector`` and six
indirect counters. This module declares them once: names, keys (field, match kind, width in
bits), actions and their parameters (name, width in bits), sizes in entries, default actions,
action profiles and counters, plus the eBPF target's codes for them (action ids in
``struct table_action``, ``table_defaults`` slots, ``fib_ref`` kinds, cache sizes).

Every other view is derived from it:

- ``python -m mrckit.wire.gen`` writes ``ebpf/include/mrc_pipeline_gen.h`` (C ``#define``) and
  ``p4src/include/mrc_pipeline.p4`` (P4 ``#define``), which ``ebpf/mrc_switch.bpf.c`` and
  ``p4src/mrc_switch.p4`` use for their sizes; a test fails when those files are stale;
- ``tests/p4/test_p4_artifacts.py`` asserts the committed P4Info equals :data:`MRC_SWITCH`;
- the eBPF target's P4Runtime server refuses a P4Info that does not fit :data:`MRC_SWITCH`
  (``mrckit.switch.p4runtime.p4info``); ``mrckit.switch.tables`` encodes entries by it; the
  topology compiler names its entries with the constants below.

It lives in ``wire`` because both ``switch`` and ``topology`` may import ``wire`` (design
section 2) and neither may import the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass

from .constants import DropReason

# --- P4 names ---------------------------------------------------------------------------------
MY_USID = "my_usid"
USID_FIB = "usid_fib"
PORT_CONFIG = "port_config"
IPV6_FIB = "ipv6_fib"
"""The LPM table of EV-hash mode, implemented by the action selector ``ecmp_selector``."""
ECMP_SELECTOR = "ecmp_selector"
"""The action profile (with selector) of ``ipv6_fib``: it hashes the flow label and UDP source port."""

DA_PREFIX_FIELD = "hdr.outer_ipv6.dst_addr[127:80]"
"""Exact key of ``my_usid`` and ``usid_fib``: the first 48 bits of the outer DA (locator, uSID)."""
EGRESS_PORT_FIELD = "standard_metadata.egress_spec"
"""Exact key of ``port_config``: the egress port (9 bits)."""
FIB_DST_FIELD = "hdr.outer_ipv6.dst_addr"
"""LPM key of ``ipv6_fib``: the full 128-bit DA of the first IPv6 header."""

USID_UN = "usid_un"
SET_EGRESS = "set_egress"
DROP = "drop"
SET_PORT = "set_port"
NO_ACTION = "NoAction"

COUNTER_NAMES = ("rx_port", "tx_port", "trim_port", "ecn_port", "drop_port", "drop_reason")
"""Indirect packets-and-bytes counters: per port, except ``drop_reason`` (by DropReason)."""

# --- Widths and sizes -------------------------------------------------------------------------
PORT_BITS = 9
"""v1model ports: 9 bits, numbered from 0."""
PORT_COUNT = 1 << PORT_BITS
"""Switch ports 0..511, the full 9-bit range: the eBPF target's per-port arrays and counters."""
THRESHOLD_NONE = 0xFFFFFFFF
"""A trim or ECN threshold never reached: the value of a port with no ``port_config`` entry."""
ECMP_ID_BITS = 32
"""Member and group ids are P4Runtime uint32."""
ECMP_HASH_BITS = 32
"""Output width of the selector's CRC-32 (``mrckit.wire.ecmp``)."""

# --- eBPF target codes (docs/ebpf-switch.md) ---------------------------------------------------
BPF_ACTION_IDS = {NO_ACTION: 0, USID_UN: 1, SET_EGRESS: 2, DROP: 3}
"""``struct table_action.action`` of each action a my_usid/usid_fib entry or a member may hold;
0 is NoAction so that a fresh all-zero map value is NoAction."""
BPF_DEFAULT_SLOTS = {MY_USID: 0, USID_FIB: 1}
"""Index in the ``table_defaults`` array of each table whose default action is writable there."""
FIB_REF_KINDS = {1: "member", 2: "group"}
"""``struct fib_ref.kind`` -> what an ipv6_fib entry names."""
USID_SLOTS = 4096
"""Direct-mapped cache slots per uSID table, indexed by the low 12 bits of the uSID (a power of two)."""
IFINDEX_SLOTS = 1024
"""Direct-mapped cache slots of ``ifindex_port`` (a power of two)."""


@dataclass(frozen=True)
class KeySpec:
    """One match field: P4 name, width in bits, match kind ("exact", "lpm", "ternary", "optional")."""

    name: str
    bits: int
    match: str = "exact"


@dataclass(frozen=True)
class ActionSpec:
    """An action: its P4 name and its parameters as (name, width in bits), in order."""

    name: str
    params: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class TableSpec:
    """A table: key fields, the actions it may carry, its initial default action, its size in
    entries, ``implementation``: the action profile of an indirect table (None: direct), and
    ``default_only``: the actions allowed only as its default (P4Info ``DEFAULT_ONLY`` scope)."""

    name: str
    keys: tuple[KeySpec, ...]
    actions: tuple[ActionSpec, ...]
    default_action: str
    size: int
    implementation: str | None = None
    default_only: tuple[str, ...] = ()

    def action(self, name: str) -> ActionSpec:
        """The action called ``name``; KeyError if the table has none."""
        return {a.name: a for a in self.actions}[name]


@dataclass(frozen=True)
class ActionProfileSpec:
    """An action profile (``with_selector``: an action selector) shared by ``tables``.

    ``size`` is the number of members it holds, ``max_groups`` the number of groups and
    ``max_group_size`` the members one group may have (P4 ``@max_group_size``; the BPF maps'
    max_entries and array size).
    """

    name: str
    tables: tuple[str, ...]
    with_selector: bool
    size: int
    max_groups: int
    max_group_size: int


@dataclass(frozen=True)
class CounterSpec:
    """An indirect packets-and-bytes counter array of ``size`` cells."""

    name: str
    size: int


@dataclass(frozen=True)
class Contract:
    """The whole program: tables, indirect counters and action profiles, looked up by P4 name."""

    tables: tuple[TableSpec, ...]
    counters: tuple[CounterSpec, ...]
    action_profiles: tuple[ActionProfileSpec, ...] = ()

    def table(self, name: str) -> TableSpec:
        """The table called ``name``; KeyError if the program has none."""
        return {t.name: t for t in self.tables}[name]

    def counter(self, name: str) -> CounterSpec:
        """The counter called ``name``; KeyError if the program has none."""
        return {c.name: c for c in self.counters}[name]

    def action_profile(self, name: str) -> ActionProfileSpec:
        """The action profile called ``name``; KeyError if the program has none."""
        return {p.name: p for p in self.action_profiles}[name]


_DA_PREFIX = KeySpec(DA_PREFIX_FIELD, 48)
_SET_EGRESS = ActionSpec(SET_EGRESS, (("port", PORT_BITS),))
_DROP = ActionSpec(DROP)
_NO_ACTION = ActionSpec(NO_ACTION)

MRC_SWITCH = Contract(
    tables=(
        TableSpec(MY_USID, (_DA_PREFIX,), (ActionSpec(USID_UN), _NO_ACTION), NO_ACTION, 4096),
        TableSpec(USID_FIB, (_DA_PREFIX,), (_SET_EGRESS, _DROP), DROP, 65536),
        TableSpec(PORT_CONFIG, (KeySpec(EGRESS_PORT_FIELD, PORT_BITS),),
                  (ActionSpec(SET_PORT, (("src_mac", 48), ("dst_mac", 48), ("faces_host", 1),
                                         ("trim_threshold", 32), ("ecn_threshold", 32))), _NO_ACTION),
                  NO_ACTION, PORT_COUNT),
        # The default entry of an indirect table is a constant NoAction (P4Runtime spec 1.4
        # section 9.1.4; p4c adds it default-only): a miss goes on to the uN tables.
        TableSpec(IPV6_FIB, (KeySpec(FIB_DST_FIELD, 128, "lpm"),), (_SET_EGRESS, _DROP, _NO_ACTION),
                  NO_ACTION, 65536, implementation=ECMP_SELECTOR, default_only=(NO_ACTION,)),
    ),
    counters=tuple(CounterSpec(name, PORT_COUNT) for name in COUNTER_NAMES[:-1])
    + (CounterSpec("drop_reason", len(DropReason)),),
    action_profiles=(
        ActionProfileSpec(ECMP_SELECTOR, (IPV6_FIB,), with_selector=True, size=4096, max_groups=1024,
                          max_group_size=256),
    ),
)
"""The mrc_switch program (P4 ``p4src/mrc_switch.p4``, eBPF ``ebpf/mrc_switch.bpf.c``)."""

TABLE_NAMES = tuple(t.name for t in MRC_SWITCH.tables if t.implementation is None)
"""The direct tables, whose entries are ``TableEntry`` values (``ipv6_fib`` takes routes)."""
MEMBER_ACTIONS = tuple(a for a in MRC_SWITCH.table(IPV6_FIB).actions if a.name != NO_ACTION)
"""The actions an ``ecmp_selector`` member may take: those of ipv6_fib but its default NoAction."""


def generated_constants() -> list[tuple[str, list[tuple[str, int, bool, str]]]]:
    """The C/P4 constants of the contract, in groups: ``[(title, [(name, value, in_p4, doc)])]``.

    Names are ``MRC_<TABLE>_SIZE`` for tables, ``MRC_<PROFILE>_SIZE`` / ``_MAX_GROUPS`` /
    ``_MAX_GROUP_SIZE`` for action profiles, ``MRC_ACTION_<NAME>`` for the eBPF action ids,
    ``MRC_DEFAULT_<TABLE>`` for ``table_defaults`` slots, ``MRC_FIB_REF_<KIND>``. ``in_p4`` is
    False for what only the eBPF target has (the P4 program would not use it).
    """
    tables = [(f"MRC_{t.name.upper()}_SIZE", t.size, True, "entries" if i == 0 else "")
              for i, t in enumerate(MRC_SWITCH.tables)]
    profiles = []
    for p in MRC_SWITCH.action_profiles:
        stem = f"MRC_{p.name.upper()}"
        profiles += [(f"{stem}_SIZE", p.size, True, "members"), (f"{stem}_MAX_GROUPS", p.max_groups, True, "groups"),
                     (f"{stem}_MAX_GROUP_SIZE", p.max_group_size, True, "members per group")]
    profiles.append(("MRC_ECMP_HASH_BITS", ECMP_HASH_BITS, True, "selector hash width"))
    return [
        ("Ports and thresholds", [
            ("MRC_PORT_BITS", PORT_BITS, True, "v1model port width"),
            ("MRC_PORT_COUNT", PORT_COUNT, True, "ports 0..511: per-port arrays and counters"),
            ("MRC_THRESHOLD_NONE", THRESHOLD_NONE, True, "a threshold never reached"),
        ]),
        ("Table sizes", tables),
        ("Action profiles", profiles),
        ("eBPF target: struct table_action ids", [
            (f"MRC_ACTION_{name.upper()}", code, False, "") for name, code in BPF_ACTION_IDS.items()]),
        ("eBPF target: table_defaults slots", [
            (f"MRC_DEFAULT_{name.upper()}", slot, False, "") for name, slot in BPF_DEFAULT_SLOTS.items()]
            + [("MRC_DEFAULT_SLOTS", len(BPF_DEFAULT_SLOTS), False, "size of table_defaults")]),
        ("eBPF target: struct fib_ref kinds", [
            (f"MRC_FIB_REF_{kind.upper()}", code, False, "") for code, kind in FIB_REF_KINDS.items()]),
        ("eBPF target: direct-mapped caches (powers of two)", [
            ("MRC_USID_SLOTS", USID_SLOTS, False, "low 12 bits of a uSID"),
            ("MRC_IFINDEX_SLOTS", IFINDEX_SLOTS, False, "")]),
    ]
