"""Table entries: ``p4.v1.TableEntry`` to ``TableEntry`` and back, with every check of the spec.

The protobuf message stays at the gRPC edge: ``parse`` turns it into the one table entry of
mrckit, ``mrckit.topology.entries.TableEntry`` (the type the topology compiler emits and the
eBPF switch's maps take), whose ``match`` holds one value per match field by name (exact:
int; lpm: (value, prefix_len); ternary: (value, mask); optional: int or None for a wildcard),
and either an action with integer parameters by name or, in an indirect table (implemented by
an action profile), the ``member`` or ``group`` it names. An entry's ``metadata`` (opaque
bytes) and ``controller_metadata`` (a uint64) are P4Runtime's alone: they travel beside the
entry as a ``Metadata`` pair. P4Runtime spec 1.4 sections 9.1 (TableEntry), 9.1.2 (action
specification: direct action vs. member or group id), 8.4 (bytestrings) and 9.1.1 (match
formats: canonical, don't-care fields omitted).
"""

import grpc
from finsy.proto import p4r

from ...topology.entries import TableEntry
from . import bytestrings
from .errors import P4RuntimeError, invalid
from .p4info import ActionInfo, Pipeline, TableInfo


MEMBER, GROUP = "member", "group"
"""The two kinds of reference an indirect table entry makes (``TableEntry.target``)."""

Metadata = tuple[bytes, int]
"""An entry's (``metadata``, ``controller_metadata``), kept and read back untouched (spec 9.1)."""
NO_METADATA: Metadata = (b"", 0)


def key_of(table: TableInfo, entry: TableEntry) -> tuple:
    """The entry's match values in P4Info field order: what the server indexes entries by."""
    return tuple(entry.match[f.name] for f in table.fields.values())


def metadata_of(msg: p4r.TableEntry) -> Metadata:
    """The (metadata, controller_metadata) an INSERT or MODIFY sets."""
    return bytes(msg.metadata), msg.controller_metadata


def table_of(pipeline: Pipeline, table_id: int) -> TableInfo:
    """The table with P4Runtime id ``table_id``; INVALID_ARGUMENT if the P4Info has none."""
    table = pipeline.tables.get(table_id)
    if table is None:
        raise invalid(f"unknown table id {table_id:#x}")
    return table


def parse(pipeline: Pipeline, msg: p4r.TableEntry, need_action: bool) -> TableEntry:
    """Check ``msg`` against the P4Info and return it as a ``TableEntry`` (empty ``match``
    for the default entry; no action for a DELETE, or for a default entry MODIFY that resets
    the initial default). ``need_action`` is true for INSERT and MODIFY.

    Raises ``P4RuntimeError`` (INVALID_ARGUMENT for a malformed entry, PERMISSION_DENIED for a
    const default action).
    """
    table = table_of(pipeline, msg.table_id)
    where = f"table {table.name!r}"
    needs_priority = any(f.match in ("ternary", "range", "optional") for f in table.fields.values())
    if msg.priority != 0 and not needs_priority:
        raise invalid(f"{where}: priority {msg.priority} given for a table without ternary/range/optional fields")
    if msg.priority == 0 and needs_priority and need_action and not msg.is_default_action:
        raise invalid(f"{where}: entries of a table with ternary/range/optional fields need a priority > 0")
    if msg.HasField("counter_data") or msg.HasField("meter_config") or msg.idle_timeout_ns:
        raise invalid(f"{where}: has no direct counter, meter or idle timeout")
    if msg.is_default_action:
        if msg.match:
            raise invalid(f"{where}: a default entry has no match fields")
        if table.const_default:
            why = " (an indirect table's default entry is a constant NoAction, spec 9.1.4)" if table.profile_id else ""
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED, f"{where}: the default action is const{why}")
        if not msg.HasField("action"):
            return TableEntry(table.name, {})
        name, params = parse_action(table, msg.action, default=True)
        return TableEntry(table.name, {}, name, params)
    match = parse_match(table, msg.match)
    if not need_action:
        return TableEntry(table.name, match)
    if not msg.HasField("action"):
        raise invalid(f"{where}: entry has no action")
    if table.profile_id:
        kind, ref_id = parse_ref(pipeline, table, msg.action)
        return TableEntry(table.name, match, member=ref_id if kind == "member" else None,
                          group=ref_id if kind == "group" else None)
    name, params = parse_action(table, msg.action, default=False)
    return TableEntry(table.name, match, name, params)


def parse_ref(pipeline: Pipeline, table: TableInfo, msg: p4r.TableAction) -> tuple[str, int]:
    """(MEMBER or GROUP, id) of an indirect table entry's action (spec 9.1.2).

    Raises ``P4RuntimeError``: INVALID_ARGUMENT for a direct action, an id of 0, or a group id
    when the profile has no selector; UNIMPLEMENTED for one-shot programming (an action set).
    """
    profile = pipeline.profiles[table.profile_id]
    where = f"table {table.name!r}"
    kind = msg.WhichOneof("type")
    if kind == "action":
        raise invalid(f"{where} is an indirect table (implementation {profile.name!r}): an entry names an "
                      "action profile member or group, not an action")
    if kind == "action_profile_action_set":
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                             f"{where}: mrckit does not support one-shot action selector programming; "
                             f"insert members and groups into {profile.name!r} and name them")
    if kind == "action_profile_group_id" and not profile.with_selector:
        raise invalid(f"{where}: action profile {profile.name!r} has no selector, so no groups")
    ref = (MEMBER, msg.action_profile_member_id) if kind == "action_profile_member_id" \
        else (GROUP, msg.action_profile_group_id)
    if ref[1] == 0:
        raise invalid(f"{where}: {ref[0]} id 0 (ids are non-zero)")
    return ref


def parse_match(table: TableInfo, matches) -> dict:
    """{field name: value} of ``matches`` (repeated FieldMatch), every field in P4Info order
    (an omitted LPM, ternary or optional field as its don't-care value)."""
    given = {}
    for m in matches:
        if m.field_id not in table.fields:
            raise invalid(f"table {table.name!r}: unknown match field id {m.field_id}")
        if m.field_id in given:
            raise invalid(f"table {table.name!r}: match field id {m.field_id} given twice")
        given[m.field_id] = m
    return {f.name: _field_value(table, f, given.get(f.id)) for f in table.fields.values()}


def _field_value(table: TableInfo, field, m):
    where = f"table {table.name!r} field {field.name!r}"
    kind = field.match
    if m is None:
        if kind == "exact":
            raise invalid(f"{where}: exact match field missing")
        return {"lpm": (0, 0), "ternary": (0, 0), "optional": None}[kind]
    if m.WhichOneof("field_match_type") != kind:
        raise invalid(f"{where}: is {kind}, got {m.WhichOneof('field_match_type')}")
    if kind == "exact":
        return bytestrings.decode(m.exact.value, field.bits, where)
    if kind == "optional":
        return bytestrings.decode(m.optional.value, field.bits, where)
    if kind == "lpm":
        return _lpm(m.lpm, field.bits, where)
    return _ternary(m.ternary, field.bits, where)


def _lpm(lpm, bits: int, where: str) -> tuple:
    value = bytestrings.decode(lpm.value, bits, where)
    plen = lpm.prefix_len
    if not 0 < plen <= bits:
        raise invalid(f"{where}: prefix length {plen} outside 1..{bits} (omit the field for /0)")
    if value & ((1 << (bits - plen)) - 1):
        raise invalid(f"{where}: value has bits set beyond its /{plen} prefix")
    return (value, plen)


def _ternary(ternary, bits: int, where: str) -> tuple:
    value = bytestrings.decode(ternary.value, bits, where)
    mask = bytestrings.decode(ternary.mask, bits, where)
    if mask == 0:
        raise invalid(f"{where}: all-zero mask (omit the field for a wildcard)")
    if value & ~mask:
        raise invalid(f"{where}: value has bits set outside its mask")
    return (value, mask)


def parse_action(table: TableInfo, msg: p4r.TableAction, default: bool) -> tuple[str, dict]:
    """(action name, {param name: int}) of a direct action, checked against the table."""
    where = f"table {table.name!r}"
    if msg.WhichOneof("type") != "action":
        raise invalid(f"{where} is a direct table: an entry takes an action, not an action profile member or group")
    action: ActionInfo | None = table.actions.get(msg.action.action_id)
    if action is None:
        raise invalid(f"{where}: unknown action id {msg.action.action_id:#x} for this table")
    if default and not action.default_ok:
        raise invalid(f"{where}: action {action.name!r} is @tableonly, not a default action")
    if not default and not action.table_ok:
        raise invalid(f"{where}: action {action.name!r} is @defaultonly")
    return action.name, parse_params(where, action, msg.action.params)


def parse_params(where: str, action: ActionInfo, params) -> dict:
    """{name: int} of an action's ``params`` (repeated Action.Param): every parameter exactly
    once, each within its width. Raises ``P4RuntimeError`` INVALID_ARGUMENT."""
    values = {}
    for p in params:
        if p.param_id not in action.params:
            raise invalid(f"{where} action {action.name!r}: unknown parameter id {p.param_id}")
        name, bits = action.params[p.param_id]
        if name in values:
            raise invalid(f"{where} action {action.name!r}: parameter {name!r} given twice")
        values[name] = bytestrings.decode(p.value, bits, f"{where} action {action.name!r} parameter {name!r}")
    missing = [n for n, _ in action.params.values() if n not in values]
    if missing:
        raise invalid(f"{where} action {action.name!r}: missing parameters {missing}")
    return values


def check_filters(query: p4r.TableEntry) -> None:
    """Refuse Read filters the spec does not allow (1.4 section 9.1.6 "Wildcard Reads"): any
    filter with table id 0 (INVALID_ARGUMENT), and an action filter other than a direct action
    id, i.e. on parameters or on a member or group id (UNIMPLEMENTED: this release of the spec
    supports only the action id)."""
    has_filter = query.match or query.HasField("action") or query.priority or query.controller_metadata \
        or query.metadata or query.is_default_action
    if not query.table_id and has_filter:
        raise invalid("a table entry read with table id 0 (every table) takes no other filter")
    if query.HasField("action"):
        kind = query.action.WhichOneof("type")
        if kind != "action" or query.action.action.params:
            raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                                 "a Read filters table entries by direct action id only, not by "
                                 + ("action parameters" if kind == "action" else "action profile member, group or action set"))


def selects(query: p4r.TableEntry, table: TableInfo, entry: TableEntry, meta: Metadata = NO_METADATA) -> bool:
    """Whether the Read filters of ``query`` (checked by ``check_filters``) select ``entry``
    (spec 1.4 section 9.1.6): a set action id, a non-zero ``priority`` or
    ``controller_metadata``, and a non-empty ``metadata`` must equal the entry's. The table and
    match are selected by the caller. This program's tables have no ternary, range or optional
    fields, so every entry has priority 0."""
    if query.priority:
        return False
    if query.controller_metadata and query.controller_metadata != meta[1]:
        return False
    if query.metadata and bytes(query.metadata) != meta[0]:
        return False
    if not query.HasField("action"):
        return True
    action = table.actions.get(query.action.action.action_id)
    return action is not None and entry.action == action.name


def to_proto(table: TableInfo, entry: TableEntry, meta: Metadata = NO_METADATA) -> p4r.TableEntry:
    """The canonical ``p4.v1.TableEntry`` of ``entry`` of ``table`` (as a Read returns it),
    with its ``meta``."""
    msg = p4r.TableEntry(table_id=table.id, is_default_action=entry.is_default)
    if not entry.is_default:
        for field, value in zip(table.fields.values(), key_of(table, entry)):
            _add_match(msg, field, value)
    if entry.member is not None:
        msg.action.action_profile_member_id = entry.member
    elif entry.group is not None:
        msg.action.action_profile_group_id = entry.group
    elif entry.action is not None:
        msg.action.action.CopyFrom(action_proto(table.action_by_name(entry.action), entry.params))
    msg.metadata, msg.controller_metadata = meta
    return msg


def action_proto(action: ActionInfo, params: dict) -> p4r.Action:
    """The canonical ``p4.v1.Action`` of ``action`` with ``params`` ({name: int})."""
    msg = p4r.Action(action_id=action.id)
    for pid, (name, _bits) in action.params.items():
        msg.params.add(param_id=pid, value=bytestrings.encode(params[name]))
    return msg


def _add_match(msg, field, value) -> None:
    if field.match == "exact":
        msg.match.add(field_id=field.id).exact.value = bytestrings.encode(value)
    elif field.match == "optional" and value is not None:
        msg.match.add(field_id=field.id).optional.value = bytestrings.encode(value)
    elif field.match == "lpm" and value[1]:
        m = msg.match.add(field_id=field.id)
        m.lpm.value, m.lpm.prefix_len = bytestrings.encode(value[0]), value[1]
    elif field.match == "ternary" and value[1]:
        m = msg.match.add(field_id=field.id)
        m.ternary.value, m.ternary.mask = bytestrings.encode(value[0]), bytestrings.encode(value[1])
