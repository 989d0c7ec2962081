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


# -- EV-hash mode: ipv6_fib (LPM, indirect) and the action selector ecmp_selector ----------------
def profile_id(p4info, name: str = "ecmp_selector") -> int:
    """P4Runtime id of an action profile by short name."""
    return _by_alias(p4info.action_profiles, name).preamble.id


def member(p4info, member_id: int, action: str | None = None, **params) -> p4r.ActionProfileMember:
    """An ActionProfileMember of ecmp_selector (no action: for DELETE and reads)."""
    msg = p4r.ActionProfileMember(action_profile_id=profile_id(p4info), member_id=member_id)
    if action is not None:
        act = _by_alias(p4info.actions, action)
        msg.action.action_id = act.preamble.id
        for p in act.params:
            msg.action.params.add(param_id=p.id, value=value(params[p.name]))
    return msg


def group(p4info, group_id: int, members=(), max_size: int = 0, weight: int = 1) -> p4r.ActionProfileGroup:
    """An ActionProfileGroup of ecmp_selector with ``members`` (ids, in the given order)."""
    msg = p4r.ActionProfileGroup(action_profile_id=profile_id(p4info), group_id=group_id, max_size=max_size)
    for m in members:
        msg.members.add(member_id=m, weight=weight)
    return msg


def route(p4info, prefix: str | None, member_id: int | None = None, group_id: int | None = None) -> p4r.TableEntry:
    """An ipv6_fib entry for ``prefix`` ("2001:db8::/64"; None or a /0: the field is omitted)
    naming a member or a group (neither: for DELETE and reads)."""
    import ipaddress
    table = _by_alias(p4info.tables, "ipv6_fib")
    msg = p4r.TableEntry(table_id=table.preamble.id)
    net = ipaddress.IPv6Network(prefix) if prefix else None
    if net is not None and net.prefixlen:
        m = msg.match.add(field_id=table.match_fields[0].id)
        m.lpm.value, m.lpm.prefix_len = value(int(net.network_address)), net.prefixlen
    if member_id is not None:
        msg.action.action_profile_member_id = member_id
    if group_id is not None:
        msg.action.action_profile_group_id = group_id
    return msg


def entity_update(kind: str, msg) -> p4r.Update:
    """An Update of type INSERT/MODIFY/DELETE of a TableEntry, ActionProfileMember or Group."""
    field = {p4r.TableEntry: "table_entry", p4r.ActionProfileMember: "action_profile_member",
             p4r.ActionProfileGroup: "action_profile_group"}[type(msg)]
    return p4r.Update(type=getattr(p4r.Update, kind), entity=p4r.Entity(**{field: msg}))


def read_members(p4info=None, member_id: int = 0) -> p4r.Entity:
    """A member read query: every profile (no ``p4info``), ecmp_selector, or one member."""
    return p4r.Entity(action_profile_member=p4r.ActionProfileMember(
        action_profile_id=profile_id(p4info) if p4info else 0, member_id=member_id))


def read_groups(p4info=None, group_id: int = 0) -> p4r.Entity:
    """A group read query: every selector (no ``p4info``), ecmp_selector, or one group."""
    return p4r.Entity(action_profile_group=p4r.ActionProfileGroup(
        action_profile_id=profile_id(p4info) if p4info else 0, group_id=group_id))
