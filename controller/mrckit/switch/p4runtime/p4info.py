"""A P4Info checked against the loaded program, with the id lookups the server needs.

``Pipeline.build(p4info, contract)`` refuses (INVALID_ARGUMENT) a P4Info that is malformed
(duplicate ids, dangling action references) or that does not match the program: a missing or
extra table, action, action profile or counter, a key or parameter with another name, width or
match kind, a table implemented otherwise (direct vs. by an action profile), or an action
profile larger than its maps (members, members per group).
P4 objects are matched by their P4Info alias, which p4c sets to the short name (``usid_fib``
for ``MyIngress.usid_fib``). P4Runtime spec 1.4 sections 6 (P4Info) and 7.
"""

from dataclasses import dataclass

from finsy.proto import p4i

from ...wire.pipeline import ActionProfileSpec, Contract, TableSpec
from .errors import invalid

_MATCH = {
    p4i.MatchField.EXACT: "exact", p4i.MatchField.LPM: "lpm",
    p4i.MatchField.TERNARY: "ternary", p4i.MatchField.OPTIONAL: "optional",
    p4i.MatchField.RANGE: "range",
}


@dataclass(frozen=True)
class FieldInfo:
    """A match field of a table: P4Runtime id, P4 name, width in bits, match kind."""

    id: int
    name: str
    bits: int
    match: str


@dataclass(frozen=True)
class ActionInfo:
    """An action usable in a table: id, short name, params {id: (name, bits)}, scope flags."""

    id: int
    name: str
    params: dict
    table_ok: bool
    default_ok: bool


@dataclass(frozen=True)
class TableInfo:
    """A table of the P4Info, bound to its spec in the contract. ``profile_id`` is the action
    profile of an indirect table (0: a direct table); the default entry of an indirect table is
    constant (P4Runtime spec 1.4 section 9.1.4), so ``const_default`` is then true."""

    id: int
    name: str
    fields: dict  # id -> FieldInfo, in P4Info order
    actions: dict  # id -> ActionInfo
    const_default: bool
    spec: TableSpec
    profile_id: int = 0

    def action_by_name(self, name: str) -> ActionInfo:
        """The action called ``name`` (short name); KeyError if the table has none."""
        return next(a for a in self.actions.values() if a.name == name)


@dataclass(frozen=True)
class ProfileInfo:
    """An action profile of the P4Info, bound to its spec in the contract.

    ``actions`` (id -> ActionInfo) are those of the tables it implements; ``max_group_size``
    is the members one group may hold: the P4Info's value (``declared_max_group_size``), or the
    program's when the P4Info says 0 (no ``@max_group_size``); ``weights_disallowed`` as in the
    P4Info (then 0 is the only valid member weight, else 1 is: mrckit has no weighted members).
    """

    id: int
    name: str
    with_selector: bool
    size: int
    max_group_size: int
    declared_max_group_size: int
    weights_disallowed: bool
    actions: dict
    spec: ActionProfileSpec

    @property
    def weight(self) -> int:
        """The member weight this profile reads back (and accepts)."""
        return 0 if self.weights_disallowed else 1


@dataclass(frozen=True)
class CounterInfo:
    """An indirect counter of the P4Info: id, short name, number of cells."""

    id: int
    name: str
    size: int


def short_name(preamble) -> str:
    """The alias of a P4Info preamble, or the last dotted part of its name."""
    return preamble.alias or preamble.name.rsplit(".", 1)[-1]


class Pipeline:
    """A P4Info that matches ``contract``: ``tables``, ``counters`` and ``profiles`` (action
    profiles) keyed by P4Runtime id."""

    def __init__(self, p4info: p4i.P4Info, tables: dict, counters: dict, profiles: dict | None = None):
        self.p4info = p4info
        self.tables = tables
        self.counters = counters
        self.profiles = profiles or {}

    def table_by_name(self, name: str) -> TableInfo:
        """The table called ``name``; KeyError if absent."""
        return next(t for t in self.tables.values() if t.name == name)

    @classmethod
    def build(cls, p4info: p4i.P4Info, contract: Contract) -> "Pipeline":
        """Check ``p4info`` against ``contract``; raise INVALID_ARGUMENT listing every mismatch."""
        problems: list[str] = []
        actions = _index_actions(p4info, problems)
        tables = {}
        by_name = {short_name(t.preamble): t for t in p4info.tables}
        for spec in contract.tables:
            if spec.name not in by_name:
                problems.append(f"table {spec.name!r} is missing from the P4Info")
                continue
            info = _table(by_name[spec.name], spec, actions, problems)
            tables[info.id] = info
        for name in by_name.keys() - {t.name for t in contract.tables}:
            problems.append(f"table {name!r} is not implemented by the eBPF program")
        profiles = _profiles(p4info, contract, tables, problems)
        counters = _counters(p4info, contract, problems)
        _unsupported(p4info, problems)
        if problems:
            raise invalid("P4Info does not match the loaded eBPF program: " + "; ".join(problems))
        return cls(p4info, tables, counters, profiles)


def _index_actions(p4info, problems) -> dict:
    actions = {}
    for action in p4info.actions:
        if action.preamble.id in actions:
            problems.append(f"action id {action.preamble.id:#x} is used twice")
        actions[action.preamble.id] = action
    return actions


def _table(table, spec: TableSpec, actions: dict, problems: list) -> TableInfo:
    where = f"table {spec.name!r}"
    fields = {}
    if len(table.match_fields) != len(spec.keys):
        problems.append(f"{where} has {len(table.match_fields)} match fields, the program has {len(spec.keys)}")
    for mf, key in zip(table.match_fields, spec.keys):
        kind = _MATCH.get(mf.match_type, "unknown")
        if (mf.name, mf.bitwidth, kind) != (key.name, key.bits, key.match):
            problems.append(
                f"{where} match field {mf.name!r} is {kind} {mf.bitwidth} bits, "
                f"the program has {key.name!r} {key.match} {key.bits} bits")
        fields[mf.id] = FieldInfo(mf.id, mf.name, mf.bitwidth, kind)
    refs = {}
    for ref in table.action_refs:
        if ref.id not in actions:
            problems.append(f"{where} refers to unknown action id {ref.id:#x}")
            continue
        action = actions[ref.id]
        refs[ref.id] = ActionInfo(
            ref.id, short_name(action.preamble),
            {p.id: (p.name, p.bitwidth) for p in action.params},
            table_ok=ref.scope != p4i.ActionRef.DEFAULT_ONLY,
            default_ok=ref.scope != p4i.ActionRef.TABLE_ONLY,
        )
    _check_actions(where, refs, spec, problems)
    if table.size > spec.size:
        problems.append(f"{where} has size {table.size}, the program's map holds {spec.size} entries")
    if table.const_default_action_id and table.const_default_action_id not in refs:
        problems.append(f"{where} const default action id {table.const_default_action_id:#x} is not one of its actions")
    if bool(table.implementation_id) != bool(spec.implementation):
        problems.append(f"{where} is implemented by action profile id {table.implementation_id:#x}, the program's is direct"
                        if table.implementation_id else
                        f"{where} is direct, the program implements it with action profile {spec.implementation!r}")
    const_default = bool(table.const_default_action_id) or bool(table.implementation_id)
    return TableInfo(table.preamble.id, spec.name, fields, refs, const_default, spec, table.implementation_id)


def _check_actions(where: str, refs: dict, spec: TableSpec, problems: list) -> None:
    have = {a.name: a for a in refs.values()}
    want = {a.name: a for a in spec.actions}
    for name in want.keys() - have.keys():
        problems.append(f"{where} lacks action {name!r}")
    for name in have.keys() - want.keys():
        problems.append(f"{where} action {name!r} is not implemented by the eBPF program")
    for name in want.keys() & have.keys():
        got = tuple(have[name].params.values())
        if got != want[name].params:
            problems.append(f"{where} action {name!r} has parameters {list(got)}, the program has {list(want[name].params)}")


def _profiles(p4info, contract: Contract, tables: dict, problems: list) -> dict:
    by_name = {short_name(p.preamble): p for p in p4info.action_profiles}
    profiles = {}
    for spec in contract.action_profiles:
        profile = by_name.get(spec.name)
        if profile is None:
            problems.append(f"action profile {spec.name!r} is missing from the P4Info")
            continue
        info = _profile(profile, spec, tables, problems)
        profiles[info.id] = info
    for name in by_name.keys() - {p.name for p in contract.action_profiles}:
        problems.append(f"action profile {name!r} is not implemented by the eBPF program")
    for table in tables.values():
        if table.profile_id and table.profile_id not in profiles:
            problems.append(f"table {table.name!r} is implemented by action profile id {table.profile_id:#x}, "
                            f"not {table.spec.implementation!r}")
    return profiles


def _profile(profile, spec: ActionProfileSpec, tables: dict, problems: list) -> ProfileInfo:
    where = f"action profile {spec.name!r}"
    if profile.with_selector != spec.with_selector:
        problems.append(f"{where} is {'an action selector' if profile.with_selector else 'without selector'}, "
                        f"the program's is {'an action selector' if spec.with_selector else 'without selector'}")
    if profile.size > spec.size:
        problems.append(f"{where} has size {profile.size}, the program holds {spec.size} members")
    if profile.max_group_size > spec.max_group_size:
        problems.append(f"{where} has max_group_size {profile.max_group_size}, "
                        f"the program's groups hold {spec.max_group_size} members")
    names = {t.id: t.name for t in tables.values()}
    served = sorted(names.get(i, f"{i:#x}") for i in profile.table_ids)
    if served != sorted(spec.tables):
        problems.append(f"{where} implements tables {served}, the program's implements {sorted(spec.tables)}")
    users = [t for t in tables.values() if t.name in spec.tables]
    actions = users[0].actions if users else {}
    return ProfileInfo(profile.preamble.id, spec.name, profile.with_selector, profile.size,
                       profile.max_group_size or spec.max_group_size, profile.max_group_size,
                       profile.weights_disallowed, actions, spec)


def _counters(p4info, contract: Contract, problems: list) -> dict:
    by_name = {short_name(c.preamble): c for c in p4info.counters}
    counters = {}
    for spec in contract.counters:
        counter = by_name.get(spec.name)
        if counter is None:
            problems.append(f"counter {spec.name!r} is missing from the P4Info")
            continue
        if counter.size != spec.size:
            problems.append(f"counter {spec.name!r} has {counter.size} cells, the program has {spec.size}")
        if counter.spec.unit != p4i.CounterSpec.BOTH:
            problems.append(f"counter {spec.name!r} is not packets_and_bytes")
        counters[counter.preamble.id] = CounterInfo(counter.preamble.id, spec.name, counter.size)
    for name in by_name.keys() - {c.name for c in contract.counters}:
        problems.append(f"counter {name!r} is not implemented by the eBPF program")
    return counters


def _unsupported(p4info, problems: list) -> None:
    for kind in ("direct_counters", "meters", "direct_meters", "registers", "digests", "value_sets"):
        for obj in getattr(p4info, kind):
            problems.append(f"{kind[:-1].replace('_', ' ')} {short_name(obj.preamble)!r} is not implemented by the eBPF program")
