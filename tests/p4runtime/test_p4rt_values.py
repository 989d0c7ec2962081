"""P4Runtime values without a server: bytestrings (spec 8.3), match kinds the tables may declare
(exact, LPM, ternary, optional: spec 9.1.1), and the P4Info check against the program."""

import grpc
import pytest
from finsy.proto import p4i, p4r

from support.p4rt_harness import load_p4info

from mrckit.switch.p4runtime import bytestrings, entries
from mrckit.wire.pipeline import MRC_SWITCH, ActionSpec, Contract, KeySpec, TableSpec
from mrckit.switch.p4runtime.errors import P4RuntimeError
from mrckit.switch.p4runtime.p4info import Pipeline


@pytest.mark.parametrize("data,bits,value", [
    (b"\x00", 9, 0), (b"\x01\xff", 9, 511), (b"\x00\x00\x01\xff", 9, 511), (b"\x01", 1, 1),
    (b"\xfc\xbb\xbb\x00\x10\x01", 48, 0xFCBBBB001001), (b"\x00" * 8, 48, 0),
])
def test_decode_accepts_canonical_and_padded(data, bits, value):
    assert bytestrings.decode(data, bits, "f") == value


@pytest.mark.parametrize("data,bits", [(b"", 9), (b"\x02\x00", 9), (b"\x02", 1), (b"\x01" + b"\x00" * 6, 48)])
def test_decode_refuses_empty_or_too_wide(data, bits):
    with pytest.raises(P4RuntimeError) as info:
        bytestrings.decode(data, bits, "table t field f")
    assert info.value.code == grpc.StatusCode.OUT_OF_RANGE and "table t field f" in info.value.message


@pytest.mark.parametrize("value,data", [(0, b"\x00"), (1, b"\x01"), (511, b"\x01\xff"), (1 << 40, b"\x01" + bytes(5))])
def test_encode_is_canonical(value, data):
    assert bytestrings.encode(value) == data


# A P4Info and contract with one table of every match kind (EV-hash mode will add LPM tables).
KINDS = Contract(tables=(TableSpec("t", (KeySpec("a", 32, "lpm"), KeySpec("b", 16, "ternary"),
                                         KeySpec("c", 8, "optional"), KeySpec("d", 9)),
                                   (ActionSpec("NoAction"),), "NoAction", 16),), counters=())


def _kinds_pipeline():
    info = p4i.P4Info()
    t = info.tables.add()
    t.preamble.id, t.preamble.name, t.preamble.alias = 0x02000001, "C.t", "t"
    for i, (name, bits, kind) in enumerate([("a", 32, 3), ("b", 16, 4), ("c", 8, 6), ("d", 9, 2)], 1):
        t.match_fields.add(id=i, name=name, bitwidth=bits, match_type=kind)
    t.action_refs.add(id=0x01000001)
    a = info.actions.add()
    a.preamble.id, a.preamble.name, a.preamble.alias = 0x01000001, "NoAction", "NoAction"
    return Pipeline.build(info, KINDS)


def _key(**fields):
    table = next(iter(_kinds_pipeline().tables.values()))
    ms = []
    if "a" in fields:
        ms.append(p4r.FieldMatch(field_id=1, lpm=p4r.FieldMatch.LPM(value=fields["a"][0], prefix_len=fields["a"][1])))
    if "b" in fields:
        ms.append(p4r.FieldMatch(field_id=2, ternary=p4r.FieldMatch.Ternary(value=fields["b"][0], mask=fields["b"][1])))
    if "c" in fields:
        ms.append(p4r.FieldMatch(field_id=3, optional=p4r.FieldMatch.Optional(value=fields["c"])))
    ms.append(p4r.FieldMatch(field_id=4, exact=p4r.FieldMatch.Exact(value=fields.get("d", b"\x01"))))
    return tuple(entries.parse_match(table, ms).values())


def test_match_kinds_parse_with_omitted_wildcards():
    assert _key(a=(b"\x0a\x00\x00\x00", 8), b=(b"\x12\x00", b"\xff\x00"), c=b"\x07") == \
        ((0x0A000000, 8), (0x1200, 0xFF00), 7, 1)
    assert _key() == ((0, 0), (0, 0), None, 1)  # don't-care fields are omitted, exact is not


@pytest.mark.parametrize("bad,words", [
    (dict(a=(b"\x0a\x00\x00\x01", 8)), "beyond its /8"),
    (dict(a=(b"\x0a", 0)), "prefix length 0"),
    (dict(a=(b"\x0a", 33)), "prefix length 33"),
    (dict(b=(b"\x12\x01", b"\xff\x00")), "outside its mask"),
    (dict(b=(b"\x00", b"\x00")), "all-zero mask"),
])
def test_match_kinds_refuse_non_canonical(bad, words):
    with pytest.raises(P4RuntimeError) as info:
        _key(**bad)
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT and words in info.value.message


@pytest.mark.parametrize("bad,words", [
    (dict(c=b"\x01\x00"), "does not fit in 8 bits"),
    (dict(d=b""), "empty"),
    (dict(a=(b"\x01\x00\x00\x00\x00", 8)), "does not fit in 32 bits"),
])
def test_bytestrings_out_of_range_are_refused_with_out_of_range(bad, words):
    """Spec 8.3: an empty string, or a value wider than the field, is OUT_OF_RANGE."""
    with pytest.raises(P4RuntimeError) as info:
        _key(**bad)
    assert info.value.code == grpc.StatusCode.OUT_OF_RANGE and words in info.value.message


def test_bytestrings_of_any_length_are_accepted_if_the_value_fits():
    """Spec 8.3: a receiver puts no limit on the string's length, only on the value."""
    assert _key(c=b"\x00\x00\x00\x00\x07", d=b"\x00" * 20 + b"\x01") == ((0, 0), (0, 0), 7, 1)
    assert _key(c=b"\x00", d=b"\x00\x00") == ((0, 0), (0, 0), 0, 0)


def test_missing_exact_field_and_wrong_kind_are_refused():
    table = next(iter(_kinds_pipeline().tables.values()))
    with pytest.raises(P4RuntimeError, match="exact match field missing"):
        entries.parse_match(table, [])
    with pytest.raises(P4RuntimeError, match="is exact, got lpm"):
        entries.parse_match(table, [p4r.FieldMatch(field_id=4, lpm=p4r.FieldMatch.LPM(value=b"\x01", prefix_len=1))])


def test_mrc_switch_p4info_matches_the_program():
    pipeline = Pipeline.build(load_p4info(), MRC_SWITCH)
    assert sorted(t.name for t in pipeline.tables.values()) == ["ipv6_fib", "my_usid", "port_config", "usid_fib"]
    assert sorted(c.name for c in pipeline.counters.values()) == sorted(c.name for c in MRC_SWITCH.counters)
    (selector,) = pipeline.profiles.values()
    assert (selector.name, selector.with_selector, selector.max_group_size) == ("ecmp_selector", True, 256)
    assert pipeline.table_by_name("ipv6_fib").profile_id == selector.id


def test_every_mismatch_is_listed():
    info = load_p4info()
    info.tables[0].match_fields[0].bitwidth = 40
    next(a for a in info.actions if a.preamble.alias == "set_port").params[2].bitwidth = 8
    del info.counters[-1]
    with pytest.raises(P4RuntimeError) as exc:
        Pipeline.build(info, MRC_SWITCH)
    msg = exc.value.message
    assert "40 bits" in msg and "faces_host" in msg and "drop_reason" in msg


def test_const_default_action_cannot_be_modified():
    info = load_p4info()
    fib = next(t for t in info.tables if t.preamble.alias == "usid_fib")
    drop_id = next(a.preamble.id for a in info.actions if a.preamble.alias == "drop")
    fib.const_default_action_id = drop_id
    pipeline = Pipeline.build(info, MRC_SWITCH)
    msg = p4r.TableEntry(table_id=fib.preamble.id, is_default_action=True)
    msg.action.action.action_id = drop_id
    with pytest.raises(P4RuntimeError) as exc:
        entries.parse(pipeline, msg, need_action=True)
    assert exc.value.code == grpc.StatusCode.PERMISSION_DENIED


def test_action_scopes_are_enforced():
    info = load_p4info()
    fib = next(t for t in info.tables if t.preamble.alias == "usid_fib")
    drop_id = next(a.preamble.id for a in info.actions if a.preamble.alias == "drop")
    next(r for r in fib.action_refs if r.id == drop_id).scope = p4i.ActionRef.DEFAULT_ONLY
    pipeline = Pipeline.build(info, MRC_SWITCH)
    msg = p4r.TableEntry(table_id=fib.preamble.id)
    msg.match.add(field_id=1).exact.value = b"\x01"
    msg.action.action.action_id = drop_id
    with pytest.raises(P4RuntimeError, match="defaultonly"):
        entries.parse(pipeline, msg, need_action=True)
    msg.ClearField("match")
    msg.is_default_action = True
    assert entries.parse(pipeline, msg, need_action=True).action == "drop"


def test_ternary_table_entries_need_a_priority():
    pipeline = _kinds_pipeline()
    table = next(iter(pipeline.tables.values()))
    msg = p4r.TableEntry(table_id=table.id)
    msg.match.add(field_id=4).exact.value = b"\x01"
    msg.action.action.action_id = 0x01000001
    with pytest.raises(P4RuntimeError, match="need a priority"):
        entries.parse(pipeline, msg, need_action=True)
    msg.priority = 5
    assert tuple(entries.parse(pipeline, msg, need_action=True).match.values()) == ((0, 0), (0, 0), None, 1)


def _ecmp_mismatch(change):
    info = load_p4info()
    change(info, next(t for t in info.tables if t.preamble.alias == "ipv6_fib"), info.action_profiles[0])
    with pytest.raises(P4RuntimeError) as exc:
        Pipeline.build(info, MRC_SWITCH)
    assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
    return exc.value.message


@pytest.mark.parametrize("change, words", [
    (lambda i, t, p: setattr(t, "implementation_id", 0), "'ipv6_fib' is direct, the program implements it with action profile 'ecmp_selector'"),
    (lambda i, t, p: setattr(t.match_fields[0], "match_type", p4i.MatchField.EXACT), "is exact 128 bits, the program has 'hdr.outer_ipv6.dst_addr' lpm 128 bits"),
    (lambda i, t, p: setattr(t.match_fields[0], "bitwidth", 64), "lpm 64 bits"),
    (lambda i, t, p: setattr(p, "with_selector", False), "'ecmp_selector' is without selector"),
    (lambda i, t, p: setattr(p, "max_group_size", 512), "max_group_size 512, the program's groups hold 256"),
    (lambda i, t, p: setattr(p, "size", 8192), "size 8192, the program holds 4096 members"),
    (lambda i, t, p: i.ClearField("action_profiles"), "action profile 'ecmp_selector' is missing"),
    (lambda i, t, p: setattr(p.preamble, "alias", "other_selector"), "action profile 'other_selector' is not implemented"),
    (lambda i, t, p: setattr(t, "implementation_id", 0x11FFFFFF), "implemented by action profile id 0x11ffffff"),
])
def test_ecmp_mismatches_are_refused_by_name(change, words):
    assert words in _ecmp_mismatch(change)


def test_a_p4info_without_max_group_size_takes_the_programs():
    info = load_p4info()
    info.action_profiles[0].max_group_size = 0
    (profile,) = Pipeline.build(info, MRC_SWITCH).profiles.values()
    assert (profile.max_group_size, profile.declared_max_group_size) == (256, 0)


def test_max_size_rules_follow_the_p4info_max_group_size():
    """Spec 9.2.2.1: above a declared max_group_size: INVALID_ARGUMENT; with none declared, a
    max_size the target cannot hold: RESOURCE_EXHAUSTED."""
    from mrckit.switch.p4runtime import action_profiles

    info = load_p4info()
    group = p4r.ActionProfileGroup(action_profile_id=info.action_profiles[0].preamble.id, group_id=1, max_size=300)
    with pytest.raises(P4RuntimeError) as exc:
        action_profiles.parse_group(Pipeline.build(info, MRC_SWITCH), group, need_members=True)
    assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
    info.action_profiles[0].max_group_size = 0
    with pytest.raises(P4RuntimeError) as exc:
        action_profiles.parse_group(Pipeline.build(info, MRC_SWITCH), group, need_members=True)
    assert exc.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED and "at most 256" in exc.value.message
    group.max_size = 0  # the program's limit: 256 members
    group.members.extend(p4r.ActionProfileGroup.Member(member_id=m, weight=1) for m in range(1, 257))
    parsed, max_size = action_profiles.parse_group(Pipeline.build(info, MRC_SWITCH), group, need_members=True)
    assert (len(parsed.members), max_size) == (256, 0)
    group.members.add(member_id=257, weight=1)
    with pytest.raises(P4RuntimeError, match="more than its max size 256"):
        action_profiles.parse_group(Pipeline.build(info, MRC_SWITCH), group, need_members=True)
