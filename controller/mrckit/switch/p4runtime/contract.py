"""What the eBPF switch program implements, in P4 terms: the tables, actions and counters of
design section 4 ("The P4Runtime contract") and /work/shared/SWITCH_CONTRACT.md.

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
    """A table: key fields, the actions it may carry, and its initial default action."""

    name: str
    keys: tuple[KeySpec, ...]
    actions: tuple[ActionSpec, ...]
    default_action: str
    size: int


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

    def table(self, name: str) -> TableSpec:
        """The table called ``name``; KeyError if the program has none."""
        return {t.name: t for t in self.tables}[name]

    def counter(self, name: str) -> CounterSpec:
        """The counter called ``name``; KeyError if the program has none."""
        return {c.name: c for c in self.counters}[name]


TABLE_SIZE = {"my_usid": 4096, "usid_fib": 65536, "port_config": T.MAX_PORTS}
"""Entries per table: the max_entries of the BPF maps (SWITCH_CONTRACT.md)."""


def from_switch_tables() -> Contract:
    """The contract of the mrc_switch program, read from ``mrckit.switch.tables`` (the one
    description of its P4 names, widths and default actions that the map encoding uses)."""
    tables = tuple(
        TableSpec(spec.name, (KeySpec(spec.key_field, spec.key_bits),),
                  tuple(ActionSpec(name, tuple(a.params.items())) for name, a in spec.actions.items()),
                  spec.default_action, TABLE_SIZE[spec.name])
        for spec in T.TABLES.values())
    counters = tuple(CounterSpec(name, T.COUNTER_SIZE[name]) for name in T.COUNTERS)
    return Contract(tables, counters)


MRC_SWITCH = from_switch_tables()
"""The mrc_switch program (P4 ``p4src/mrc_switch.p4``, eBPF ``ebpf/mrc_switch.bpf.c``)."""
