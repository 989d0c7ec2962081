"""What the eBPF switch program implements, in P4 terms: the tables, actions and counters of
design section 4 ("The P4Runtime contract") and /work/shared/SWITCH_CONTRACT.md.

The server checks every P4Info it is given against this description, so a P4Info that does not
match the loaded BPF program is refused with a message naming the difference. It holds P4 names
and widths only; how they map onto BPF maps belongs to ``mrckit.switch.ebpf_target``.
"""

from dataclasses import dataclass


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


PORTS = 512  # 9-bit v1model ports, all usable on the eBPF target (design section 4)
USID_KEY = KeySpec("hdr.outer_ipv6.dst_addr[127:80]", 48)
NO_ACTION = ActionSpec("NoAction")

MRC_SWITCH = Contract(
    tables=(
        TableSpec("my_usid", (USID_KEY,), (ActionSpec("usid_un"), NO_ACTION), "NoAction", 4096),
        TableSpec(
            "usid_fib", (USID_KEY,),
            (ActionSpec("set_egress", (("port", 9),)), ActionSpec("drop")),
            "drop", 65536,
        ),
        TableSpec(
            "port_config", (KeySpec("standard_metadata.egress_spec", 9),),
            (
                ActionSpec("set_port", (
                    ("src_mac", 48), ("dst_mac", 48), ("faces_host", 1),
                    ("trim_threshold", 32), ("ecn_threshold", 32),
                )),
                NO_ACTION,
            ),
            "NoAction", PORTS,
        ),
    ),
    counters=tuple(CounterSpec(n, PORTS) for n in ("rx_port", "tx_port", "trim_port", "ecn_port", "drop_port"))
    + (CounterSpec("drop_reason", 6),),
)
"""The mrc_switch program (P4 ``p4src/mrc_switch.p4``, eBPF ``ebpf/mrc_switch.bpf.c``)."""
