"""What the eBPF switch program implements, in P4 terms: the tables, actions, action profiles
and counters of design section 4 ("The P4Runtime contract"), docs/ebpf-switch.md and,
for EV-hash mode, table ``ipv6_fib`` (LPM) implemented by the action selector ``ecmp_selector``
(``docs/p4runtime.md``, "Action profiles").

The server checks every P4Info it is given against this description, so a P4Info that does not
match the loaded BPF program is refused with a message naming the difference. ``MRC_SWITCH`` is
derived from ``mrckit.switch.tables`` (names, widths, default actions), the module that also
encodes the maps, so the two cannot drift apart.
"""

from dataclasses import dataclass

from .. import tables as T


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
    entries, and ``implementation``: the action profile of an indirect table (None: direct)."""

    name: str
    keys: tuple[KeySpec, ...]
    actions: tuple[ActionSpec, ...]
    default_action: str
    size: int
    implementation: str | None = None


@dataclass(frozen=True)
class ActionProfileSpec:
    """An action profile (``with_selector``: an action selector) shared by ``tables``.

    ``size`` is the number of members it holds, ``max_groups`` the number of groups and
    ``max_group_size`` the members one group may have (the BPF maps' max_entries and array size).
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
    """The whole program: tables and indirect counters, looked up by P4 name."""

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


TABLE_SIZE = {"my_usid": 4096, "usid_fib": 65536, "port_config": T.MAX_PORTS}
"""Entries per table: the max_entries of the BPF maps (docs/ebpf-switch.md)."""


def _actions(actions: dict) -> tuple[ActionSpec, ...]:
    return tuple(ActionSpec(name, tuple(a.params.items())) for name, a in actions.items())


def ipv6_fib() -> tuple[TableSpec, ActionProfileSpec]:
    """Table ``ipv6_fib`` and its action selector ``ecmp_selector`` (EV-hash mode, issue 11).

    The key is the full 128-bit DA, LPM (the selector fields, flow label and UDP source port,
    are not in the P4Info). Members take the actions of ``usid_fib``; the default entry of an
    indirect table is a constant NoAction (P4Runtime spec 1.4 section 9.1.4), here: a miss goes
    on to the uN tables.
    """
    table = TableSpec(T.IPV6_FIB, (KeySpec(T.IPV6_FIB_KEY_FIELD, 128, "lpm"),),
                      _actions(T.MEMBER_ACTIONS) + (ActionSpec("NoAction"),), "NoAction",
                      T.IPV6_FIB_SIZE, implementation=T.ECMP_SELECTOR)
    profile = ActionProfileSpec(T.ECMP_SELECTOR, (T.IPV6_FIB,), with_selector=True, size=T.ECMP_MAX_MEMBERS,
                                max_groups=T.ECMP_MAX_GROUPS, max_group_size=T.ECMP_MAX_GROUP_SIZE)
    return table, profile


def from_switch_tables() -> Contract:
    """The contract of the mrc_switch program, read from ``mrckit.switch.tables`` (the one
    description of its P4 names, widths and default actions that the map encoding uses)."""
    tables = tuple(
        TableSpec(spec.name, (KeySpec(spec.key_field, spec.key_bits),), _actions(spec.actions),
                  spec.default_action, TABLE_SIZE[spec.name])
        for spec in T.TABLES.values())
    fib, selector = ipv6_fib()
    counters = tuple(CounterSpec(name, T.COUNTER_SIZE[name]) for name in T.COUNTERS)
    return Contract(tables + (fib,), counters, (selector,))


MRC_SWITCH = from_switch_tables()
"""The mrc_switch program (P4 ``p4src/mrc_switch.p4``, eBPF ``ebpf/mrc_switch.bpf.c``)."""
