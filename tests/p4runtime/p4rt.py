"""Raw P4Runtime messages built by P4 names from a P4Info, without client-side checks, so
tests can also send what a careless client would (wrong widths, unknown ids)."""

from finsy.proto import p4r


def _by_alias(items, name):
    return next(i for i in items if i.preamble.alias == name or i.preamble.name.endswith("." + name) or i.preamble.name == name)


def ids(p4info, table: str, action: str | None = None):
    """(table id, action id) by short names."""
    t = _by_alias(p4info.tables, table)
    return t.preamble.id, (_by_alias(p4info.actions, action).preamble.id if action else None)


def value(v: int, nbytes: int | None = None) -> bytes:
    """Canonical bytestring of ``v``, or padded to ``nbytes`` (both are legal on the wire)."""
    n = nbytes or max(1, (v.bit_length() + 7) // 8)
    return v.to_bytes(n, "big")


def entry(p4info, table: str, key: int | bytes | None, action: str | None = None, default=False, **params) -> p4r.TableEntry:
    """A TableEntry; ``key`` as int (canonical), bytes (as is) or None (no match field)."""
    table_id, action_id = ids(p4info, table, action)
    msg = p4r.TableEntry(table_id=table_id, is_default_action=default)
    if key is not None:
        field = _by_alias(p4info.tables, table).match_fields[0]
        msg.match.add(field_id=field.id).exact.value = key if isinstance(key, bytes) else value(key)
    if action is not None:
        act = _by_alias(p4info.actions, action)
        msg.action.action.action_id = action_id
        for p in act.params:
            v = params[p.name]
            msg.action.action.params.add(param_id=p.id, value=v if isinstance(v, bytes) else value(v))
    return msg


def update(kind: str, table_entry: p4r.TableEntry) -> p4r.Update:
    """An Update of type INSERT/MODIFY/DELETE."""
    return p4r.Update(type=getattr(p4r.Update, kind), entity=p4r.Entity(table_entry=table_entry))


def counter(p4info, name: str | None = None, index: int | None = None) -> p4r.Entity:
    """A CounterEntry read query (None = wildcard)."""
    msg = p4r.CounterEntry(counter_id=_by_alias(p4info.counters, name).preamble.id if name else 0)
    if index is not None:
        msg.index.index = index
    return p4r.Entity(counter_entry=msg)


def read_table(p4info, table: str | None = None, key: int | None = None, default=False) -> p4r.Entity:
    """A TableEntry read query: all tables, one table, one key, or the default entry."""
    msg = p4r.TableEntry(table_id=ids(p4info, table)[0] if table else 0, is_default_action=default)
    if key is not None:
        msg.CopyFrom(entry(p4info, table, key))
    return p4r.Entity(table_entry=msg)


def batch_errors(exc) -> list:
    """The per-update (canonical_code, message) of a failed Write (spec batch error format)."""
    from finsy.proto import rpc_status
    for k, v in exc.trailing_metadata():
        if k == "grpc-status-details-bin":
            status = rpc_status.Status.FromString(v)
            out = []
            for any_ in status.details:
                err = p4r.Error()
                any_.Unpack(err)
                out.append((err.canonical_code, err.message))
            return out
    return []
