"""Write and Read over real gRPC into the real maps: every table, default actions, counters, and
every refusal with its code, the batch error format, and the maps left unchanged."""

import subprocess

import grpc
import pytest
from finsy.proto import p4r

from support import p4rt
from support.p4rt_harness import load_p4info

from mrckit.wire.constants import DropReason
from mrckit.topology.entries import TableEntry

OK, INVALID, NOT_FOUND, EXISTS, ABORTED, RANGE, INTERNAL = 0, 3, 5, 6, 10, 11, 13
KEY = 0xFCBBBB001001
MY = 0xFCBBBB000101
PORT = dict(src_mac=0x020000000001, dst_mac=0x020000000002, faces_host=1, trim_threshold=8, ecn_threshold=4)


@pytest.fixture
def p4info(client):
    info = load_p4info()
    client.set_pipeline(info)
    return info


def _batch(client, *updates, **kw):
    with pytest.raises(grpc.RpcError) as info:
        client.write(*updates, **kw)
    assert info.value.code() == grpc.StatusCode.UNKNOWN
    return [code for code, _ in p4rt.batch_errors(info.value)], info.value


def _read_all(client, p4info, table=None):
    return client.read(p4rt.read_table(p4info, table))


def test_insert_read_modify_delete_every_table(client, switch, p4info):
    E = p4rt.entry
    client.write(p4rt.update("INSERT", E(p4info, "my_usid", MY, "usid_un")),
                 p4rt.update("INSERT", E(p4info, "usid_fib", KEY, "set_egress", port=511)),
                 p4rt.update("INSERT", E(p4info, "port_config", 7, "set_port", **PORT)))
    assert switch.tables.direct.read("my_usid")[0].key == MY
    assert switch.tables.direct.read("usid_fib")[0].params == {"port": 511}
    assert switch.tables.direct.read("port_config")[0].params == PORT
    got = sorted(_read_all(client, p4info), key=lambda e: e.table_entry.table_id)
    want = sorted([p4r.Entity(table_entry=E(p4info, "my_usid", MY, "usid_un")),
                   p4r.Entity(table_entry=E(p4info, "usid_fib", KEY, "set_egress", port=511)),
                   p4r.Entity(table_entry=E(p4info, "port_config", 7, "set_port", **PORT))],
                  key=lambda e: e.table_entry.table_id)
    assert got == want  # canonical bytestrings: exactly what a canonical client sent

    client.write(p4rt.update("MODIFY", E(p4info, "usid_fib", KEY, "drop")),
                 p4rt.update("MODIFY", E(p4info, "port_config", 7, "set_port", **{**PORT, "faces_host": 0})))
    assert [(e.action, e.params) for e in switch.tables.direct.read("usid_fib")] == [("drop", {})]
    assert switch.tables.direct.read("port_config")[0].params["faces_host"] == 0
    assert client.read(p4rt.read_table(p4info, "usid_fib", KEY))[0].table_entry.action.action.action_id == \
        p4rt.ids(p4info, "usid_fib", "drop")[1]

    client.write(p4rt.update("DELETE", E(p4info, "my_usid", MY)),
                 p4rt.update("DELETE", E(p4info, "usid_fib", KEY)),
                 p4rt.update("DELETE", E(p4info, "port_config", 7)))
    assert _read_all(client, p4info) == []
    assert all(switch.tables.direct.read(t) == [] for t in ("my_usid", "usid_fib", "port_config"))


def test_padded_bytestrings_accepted_and_read_back_canonical(client, switch, p4info):
    padded = p4rt.entry(p4info, "usid_fib", KEY.to_bytes(6, "big"), "set_egress", port=(3).to_bytes(2, "big"))
    client.write(p4rt.update("INSERT", padded))
    (got,) = client.read(p4rt.read_table(p4info, "usid_fib"))
    assert got.table_entry.action.action.params[0].value == b"\x03"
    assert switch.tables.direct.read("usid_fib")[0].params == {"port": 3}
    zero = p4rt.entry(p4info, "usid_fib", 0x1, "set_egress", port=b"\x00\x00")
    client.write(p4rt.update("INSERT", zero))
    (got,) = client.read(p4rt.read_table(p4info, "usid_fib", 0x1))
    assert got.table_entry.action.action.params[0].value == b"\x00"
    assert got.table_entry.match[0].exact.value == b"\x01"


def test_default_actions_modify_read_and_reset(client, switch, p4info):
    E = p4rt.entry
    client.write(p4rt.update("MODIFY", E(p4info, "usid_fib", None, "set_egress", default=True, port=9)),
                 p4rt.update("MODIFY", E(p4info, "my_usid", None, "usid_un", default=True)))
    assert switch.tables.direct.default("usid_fib") == TableEntry("usid_fib", {}, "set_egress", {"port": 9})
    assert switch.tables.direct.default("my_usid") == TableEntry("my_usid", {}, "usid_un")
    (d,) = client.read(p4rt.read_table(p4info, "usid_fib", default=True))
    assert d.table_entry.is_default_action and d.table_entry.action.action.params[0].value == b"\x09"
    assert _read_all(client, p4info) == []  # a wildcard read leaves default entries out
    reset = p4r.TableEntry(table_id=p4rt.ids(p4info, "usid_fib")[0], is_default_action=True)
    client.write(p4rt.update("MODIFY", reset))
    assert switch.tables.direct.default("usid_fib") == TableEntry("usid_fib", {}, "drop")
    (d,) = client.read(p4rt.read_table(p4info, "port_config", default=True))
    assert d.table_entry.action.action.action_id == p4rt.ids(p4info, "port_config", "NoAction")[1]


def _negative_cases(p4info):
    E = p4rt.entry
    table_id, _ = p4rt.ids(p4info, "usid_fib")
    unknown_table = E(p4info, "usid_fib", KEY, "drop")
    unknown_table.table_id = 0x02FFFFFF
    unknown_action = E(p4info, "usid_fib", KEY, "drop")
    unknown_action.action.action.action_id = 0x01FFFFFF
    foreign_action = E(p4info, "usid_fib", KEY, "drop")
    foreign_action.action.action.action_id = p4rt.ids(p4info, "my_usid", "usid_un")[1]
    return {
        "key too wide": ("INSERT", E(p4info, "usid_fib", 1 << 48, "drop"), RANGE),
        "param too wide": ("INSERT", E(p4info, "usid_fib", KEY, "set_egress", port=512), RANGE),
        "port key too wide": ("INSERT", E(p4info, "port_config", 512, "set_port", **PORT), RANGE),
        "1-bit param too wide": ("INSERT", E(p4info, "port_config", 1, "set_port", **{**PORT, "faces_host": 2}), RANGE),
        "empty bytestring": ("INSERT", E(p4info, "usid_fib", b"", "drop"), RANGE),
        "unknown table id": ("INSERT", unknown_table, INVALID),
        "unknown action id": ("INSERT", unknown_action, INVALID),
        "action of another table": ("INSERT", foreign_action, INVALID),
        "missing key": ("INSERT", E(p4info, "usid_fib", None, "drop"), INVALID),
        "missing action": ("INSERT", E(p4info, "usid_fib", KEY), INVALID),
        "missing param": ("INSERT", p4r.TableEntry(table_id=table_id, match=E(p4info, "usid_fib", KEY).match,
                                                   action=p4r.TableAction(action=p4r.Action(action_id=p4rt.ids(p4info, "usid_fib", "set_egress")[1]))), INVALID),
        "priority on an exact table": ("INSERT", p4r.TableEntry(table_id=table_id, priority=10, match=E(p4info, "usid_fib", KEY).match,
                                                                action=E(p4info, "usid_fib", KEY, "drop").action), INVALID),
        "insert default": ("INSERT", E(p4info, "usid_fib", None, "drop", default=True), INVALID),
        "delete default": ("DELETE", E(p4info, "usid_fib", None, None, default=True), INVALID),
        "duplicate insert": ("INSERT", E(p4info, "usid_fib", 0xFCBBBB00AAAA, "drop"), EXISTS),
        "delete absent": ("DELETE", E(p4info, "usid_fib", 0xFCBBBB00BBBB), NOT_FOUND),
        "modify absent": ("MODIFY", E(p4info, "my_usid", 0xFCBBBB00BBBB, "usid_un"), NOT_FOUND),
        "delete absent port": ("DELETE", E(p4info, "port_config", 3), NOT_FOUND),
    }


CASES = list(_negative_cases(load_p4info()))


@pytest.mark.parametrize("case", CASES)
def test_refused_update_has_its_code_and_leaves_maps_unchanged(client, switch, p4info, case):
    client.write(p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", 0xFCBBBB00AAAA, "set_egress", port=4)))
    kind, entry, code = _negative_cases(p4info)[case]
    before = switch.snapshot()
    codes, exc = _batch(client, p4rt.update(kind, entry))
    assert codes == [code], exc.details()
    assert switch.snapshot() == before


def test_continue_on_error_applies_the_good_updates_only(client, switch, p4info):
    E = p4rt.entry
    client.write(p4rt.update("INSERT", E(p4info, "usid_fib", 0xA, "drop")))
    codes, exc = _batch(client,
                        p4rt.update("INSERT", E(p4info, "usid_fib", 0xB, "set_egress", port=1)),
                        p4rt.update("INSERT", E(p4info, "usid_fib", 0xA, "set_egress", port=2)),  # exists
                        p4rt.update("INSERT", E(p4info, "usid_fib", 0xC, "set_egress", port=600)),  # width
                        p4rt.update("DELETE", E(p4info, "usid_fib", 0xD)),  # absent
                        p4rt.update("MODIFY", E(p4info, "usid_fib", 0xA, "set_egress", port=3)))
    assert codes == [OK, EXISTS, RANGE, NOT_FOUND, OK]
    messages = [m for _, m in p4rt.batch_errors(exc)]
    assert "does not fit in 9 bits" in messages[2] and "port" in messages[2]
    assert {e.key: e.params for e in switch.tables.direct.read("usid_fib")} == {0xA: {"port": 3}, 0xB: {"port": 1}}


def test_rollback_on_error_leaves_nothing(client, switch, p4info):
    E = p4rt.entry
    client.write(p4rt.update("INSERT", E(p4info, "usid_fib", 0xA, "drop")),
                 p4rt.update("MODIFY", E(p4info, "my_usid", None, "usid_un", default=True)))
    before = switch.snapshot()
    codes, _ = _batch(client,
                      p4rt.update("INSERT", E(p4info, "usid_fib", 0xB, "set_egress", port=1)),
                      p4rt.update("DELETE", E(p4info, "usid_fib", 0xA)),
                      p4rt.update("MODIFY", E(p4info, "my_usid", None, "NoAction", default=True)),
                      p4rt.update("INSERT", E(p4info, "usid_fib", 0xB, "drop")),  # exists now: fails
                      p4rt.update("INSERT", E(p4info, "usid_fib", 0xC, "drop")),
                      atomicity=p4r.WriteRequest.ROLLBACK_ON_ERROR)
    assert codes == [ABORTED, ABORTED, ABORTED, EXISTS, ABORTED]
    assert switch.snapshot() == before


def test_dataplane_atomic_is_unimplemented(client, p4info):
    with pytest.raises(grpc.RpcError) as info:
        client.write(p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", 0xA, "drop")),
                     atomicity=p4r.WriteRequest.DATAPLANE_ATOMIC)
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_read_by_key_and_wildcards(client, p4info):
    E = p4rt.entry
    client.write(*[p4rt.update("INSERT", E(p4info, "usid_fib", k, "set_egress", port=k)) for k in range(1, 6)],
                 p4rt.update("INSERT", E(p4info, "my_usid", MY, "usid_un")))
    assert len(_read_all(client, p4info)) == 6
    assert len(_read_all(client, p4info, "usid_fib")) == 5
    (one,) = client.read(p4rt.read_table(p4info, "usid_fib", 4))
    assert one.table_entry.action.action.params[0].value == b"\x04"
    assert client.read(p4rt.read_table(p4info, "usid_fib", 99)) == []
    with pytest.raises(grpc.RpcError) as info:  # spec 13.3: the batch error, per request
        client.read(p4rt.read_table(p4info, "usid_fib", 1 << 48))
    assert info.value.code() == grpc.StatusCode.UNKNOWN
    assert [c for c, _ in p4rt.batch_errors(info.value)] == [RANGE]


def test_counter_reads_wildcard_by_counter_and_index(client, switch, p4info):
    cells = client.read(p4rt.counter(p4info))
    assert len(cells) == 5 * 512 + len(DropReason)
    assert all(c.counter_entry.data.packet_count == 0 for c in cells)
    drops = client.read(p4rt.counter(p4info, "drop_reason"))
    assert [c.counter_entry.index.index for c in drops] == list(range(len(DropReason)))
    (one,) = client.read(p4rt.counter(p4info, "tx_port", 17))
    assert one.counter_entry.index.index == 17
    with pytest.raises(grpc.RpcError) as info:
        client.read(p4rt.counter(p4info, "drop_reason", len(DropReason)))
    assert info.value.code() == grpc.StatusCode.UNKNOWN
    assert [c for c, _ in p4rt.batch_errors(info.value)] == [INVALID]


def test_a_map_the_kernel_refuses_fails_its_update_with_internal_and_the_batch_goes_on(client, switch, p4info):
    """A kernel refusal (here a map frozen with BPF_MAP_FREEZE, so every syscall write gets
    EPERM) fails that update alone with INTERNAL; the other updates of the batch take effect,
    and the server keeps serving."""
    E = p4rt.entry
    map_id = switch.tables.maps["usid_fib"].id
    subprocess.run(["bpftool", "map", "freeze", "id", str(map_id)], check=True, capture_output=True)
    codes, err = _batch(client, p4rt.update("INSERT", E(p4info, "usid_fib", KEY, "set_egress", port=5)),
                        p4rt.update("INSERT", E(p4info, "my_usid", MY, "usid_un")))
    assert codes == [INTERNAL, OK]
    assert "BPF map update failed" in p4rt.batch_errors(err)[0][1]
    assert [e.key for e in switch.tables.direct.read("my_usid")] == [MY]
    assert switch.tables.direct.read("usid_fib") == []
    assert [e.table_entry.table_id for e in _read_all(client, p4info)] == [p4rt.ids(p4info, "my_usid")[0]]


def test_an_unexpected_error_in_one_update_is_internal_and_the_server_keeps_serving(client, switch, p4info, monkeypatch):
    """A bug in the server (an exception that is no refusal) fails its update with INTERNAL,
    logged; it does not end the RPC without per-update details, nor the server."""
    from mrckit.switch.p4runtime import view as view_mod

    E = p4rt.entry
    real = view_mod.TableView.apply

    def buggy(self, kind, entry, meta):
        if entry.table == "usid_fib":
            raise RuntimeError("injected bug")
        return real(self, kind, entry, meta)

    monkeypatch.setattr(view_mod.TableView, "apply", buggy)
    codes, err = _batch(client, p4rt.update("INSERT", E(p4info, "usid_fib", KEY, "set_egress", port=5)),
                        p4rt.update("INSERT", E(p4info, "my_usid", MY, "usid_un")))
    assert codes == [INTERNAL, OK]
    assert "injected bug" in p4rt.batch_errors(err)[0][1]
    monkeypatch.setattr(view_mod.TableView, "apply", real)
    client.write(p4rt.update("INSERT", E(p4info, "usid_fib", KEY, "set_egress", port=5)))
    assert [e.params for e in switch.tables.direct.read("usid_fib")] == [{"port": 5}]
