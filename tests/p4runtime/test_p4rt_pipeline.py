"""SetForwardingPipelineConfig / GetForwardingPipelineConfig / Capabilities over real gRPC."""

import grpc
import pytest
from finsy.proto import p4r

from support import p4rt
from support.p4rt_harness import DEVICE_CONFIG, Client, load_p4info

from mrckit.topology.entries import TableEntry

Set = p4r.SetForwardingPipelineConfigRequest
Get = p4r.GetForwardingPipelineConfigRequest
FIB_KEY = 0xFCBBBB001001


def _frame() -> bytes:
    from support.p4rt_frames import frame
    return frame("fcbb:bb00:ffff:1001::")  # my_usid's default is usid_un here: one shift


def _code(call):
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details()


def test_before_pipeline_write_read_get_fail_with_failed_precondition(client, switch):
    p4info = load_p4info()
    before = switch.snapshot()
    ins = p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", FIB_KEY, "set_egress", port=1))
    assert _code(lambda: client.write(ins))[0] == grpc.StatusCode.FAILED_PRECONDITION
    assert _code(lambda: client.read(p4rt.read_table(p4info)))[0] == grpc.StatusCode.FAILED_PRECONDITION
    code, details = _code(client.get_pipeline)
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "no forwarding pipeline config" in details.lower()
    assert switch.snapshot() == before


def test_get_returns_config_and_cookie_untouched_per_response_type(client):
    p4info = load_p4info()
    client.set_pipeline(p4info, cookie=0xC0FFEE)
    full = client.get_pipeline(Get.ALL).config
    assert full.p4info == p4info and full.p4_device_config == DEVICE_CONFIG and full.cookie.cookie == 0xC0FFEE
    only = client.get_pipeline(Get.COOKIE_ONLY).config
    assert only.cookie.cookie == 0xC0FFEE and not only.HasField("p4info") and only.p4_device_config == b""
    info = client.get_pipeline(Get.P4INFO_AND_COOKIE).config
    assert info.p4info == p4info and info.p4_device_config == b""
    dev = client.get_pipeline(Get.DEVICE_CONFIG_AND_COOKIE).config
    assert dev.p4_device_config == DEVICE_CONFIG and not dev.HasField("p4info")


def test_verify_installs_nothing_and_verify_and_commit_clears_tables(client, switch):
    p4info = load_p4info()
    client.set_pipeline(p4info, action=Set.VERIFY)
    assert _code(client.get_pipeline)[0] == grpc.StatusCode.FAILED_PRECONDITION
    client.set_pipeline(p4info, action=Set.VERIFY_AND_COMMIT, cookie=1)
    client.write(p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", FIB_KEY, "set_egress", port=1)),
                 p4rt.update("MODIFY", p4rt.entry(p4info, "my_usid", None, "usid_un", default=True)))
    switch.wire_ports([1], ingress=0)
    assert switch.run(_frame())[0] == 4  # XDP_REDIRECT: counted in rx_port and tx_port
    assert switch.tables.counters.read("tx_port", 1)[0] == 1
    client.set_pipeline(p4info, action=Set.VERIFY_AND_COMMIT, cookie=2)
    assert switch.tables.counters.read("tx_port", 1) == (0, 0) and switch.tables.counters.read("rx_port", 0) == (0, 0)
    assert switch.tables.direct.read("usid_fib") == []
    assert switch.tables.direct.default("my_usid") == TableEntry("my_usid", {}, "NoAction")
    assert client.get_pipeline(Get.COOKIE_ONLY).config.cookie.cookie == 2


def test_reconcile_and_commit_keeps_entries_and_takes_new_cookie(client, switch):
    p4info = load_p4info()
    client.set_pipeline(p4info, cookie=1)
    client.write(p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", FIB_KEY, "set_egress", port=5)))
    client.set_pipeline(p4info, action=Set.RECONCILE_AND_COMMIT, cookie=7)
    assert client.get_pipeline(Get.COOKIE_ONLY).config.cookie.cookie == 7
    assert [(e.key, e.params) for e in switch.tables.direct.read("usid_fib")] == [(FIB_KEY, {"port": 5})]
    assert len(client.read(p4rt.read_table(p4info, "usid_fib"))) == 1


def _commit(client, with_config=False):
    req = client._stamp(p4r.SetForwardingPipelineConfigRequest(action=Set.COMMIT))
    if with_config:
        req.config.p4info.CopyFrom(load_p4info())
    return client.stub.SetForwardingPipelineConfig(req)


def _fib(client, p4info):
    return sorted(e.table_entry.match[0].exact.value for e in client.read(p4rt.read_table(p4info, "usid_fib")))


def test_verify_and_save_then_commit(client):
    p4info = load_p4info()
    client.set_pipeline(p4info, action=Set.VERIFY_AND_SAVE, cookie=9)
    assert _code(client.get_pipeline)[0] == grpc.StatusCode.FAILED_PRECONDITION
    _commit(client)
    assert client.get_pipeline(Get.COOKIE_ONLY).config.cookie.cookie == 9


def test_writes_after_verify_and_save_are_replayed_at_commit_and_forwarding_waits(client, switch):
    """proto Action: VERIFY_AND_SAVE leaves the forwarding state alone; COMMIT realizes the
    saved config by replaying the writes made since it was saved."""
    p4info = load_p4info()
    client.set_pipeline(p4info, cookie=1)
    client.write(p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", 1, "drop")))
    client.set_pipeline(p4info, action=Set.VERIFY_AND_SAVE, cookie=2)
    client.write(p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", 2, "drop")),
                 p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", 3, "drop")))
    client.write(p4rt.update("DELETE", p4rt.entry(p4info, "usid_fib", 3)))
    # the saved config's state answers reads; the maps and the committed config are untouched
    assert _fib(client, p4info) == [b"\x02"]
    assert [e.key for e in switch.tables.direct.read("usid_fib")] == [1]
    assert client.get_pipeline(Get.COOKIE_ONLY).config.cookie.cookie == 1
    # a refused write is checked against the saved state and not replayed
    code, _ = _code(lambda: client.write(p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", 2, "drop"))))
    assert code == grpc.StatusCode.UNKNOWN
    _commit(client)
    assert [e.key for e in switch.tables.direct.read("usid_fib")] == [2]
    assert _fib(client, p4info) == [b"\x02"]
    assert client.get_pipeline(Get.COOKIE_ONLY).config.cookie.cookie == 2
    assert _code(lambda: _commit(client))[0] == grpc.StatusCode.FAILED_PRECONDITION  # nothing saved now


def test_commit_with_a_config_is_invalid_and_keeps_the_saved_one(client):
    p4info = load_p4info()
    client.set_pipeline(p4info, action=Set.VERIFY_AND_SAVE, cookie=5)
    code, details = _code(lambda: _commit(client, with_config=True))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "COMMIT carries no config" in details
    _commit(client)
    assert client.get_pipeline(Get.COOKIE_ONLY).config.cookie.cookie == 5


def test_verify_and_commit_drops_a_saved_config(client):
    p4info = load_p4info()
    client.set_pipeline(p4info, action=Set.VERIFY_AND_SAVE, cookie=5)
    client.set_pipeline(p4info, action=Set.VERIFY_AND_COMMIT, cookie=6)
    assert _code(lambda: _commit(client))[0] == grpc.StatusCode.FAILED_PRECONDITION
    assert client.get_pipeline(Get.COOKIE_ONLY).config.cookie.cookie == 6


def test_unknown_action_is_invalid(client):
    code, details = _code(lambda: client.set_pipeline(load_p4info(), action=77))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "action 77" in details


def _mutations():
    """(description, function that breaks a P4Info, words the refusal must contain)."""
    def key_width(p):
        p.tables[1].match_fields[0].bitwidth = 32

    def missing_table(p):
        del p.tables[0]

    def param_width(p):
        next(a for a in p.actions if a.preamble.name.endswith("set_egress")).params[0].bitwidth = 16

    def extra_counter(p):
        c = p.counters.add()
        c.CopyFrom(p.counters[0])
        c.preamble.id, c.preamble.name, c.preamble.alias = 0x12FFFFFF, "MyIngress.extra", "extra"

    def dangling_action(p):
        p.tables[0].action_refs.add(id=0x01FFFFFF)

    def table_size(p):
        p.tables[1].size = 1 << 20

    def counter_size(p):
        p.counters[0].size = 256

    def match_kind(p):
        p.tables[1].match_fields[0].match_type = 3  # LPM

    return [
        ("key width", key_width, ["usid_fib", "48"]),
        ("missing table", missing_table, ["missing"]),
        ("param width", param_width, ["set_egress", "port"]),
        ("extra counter", extra_counter, ["extra", "not implemented"]),
        ("dangling action ref", dangling_action, ["unknown action id"]),
        ("counter size", counter_size, ["256"]),
        ("table size", table_size, ["1048576", "65536"]),
        ("match kind", match_kind, ["lpm", "exact"]),
    ]


@pytest.mark.parametrize("what,breaks,words", _mutations(), ids=[m[0] for m in _mutations()])
def test_mismatching_p4info_is_refused_naming_the_mismatch(client, switch, what, breaks, words):
    good = load_p4info()
    client.set_pipeline(good, cookie=1)
    client.write(p4rt.update("INSERT", p4rt.entry(good, "usid_fib", FIB_KEY, "set_egress", port=2)))
    before = switch.snapshot()
    bad = load_p4info()
    breaks(bad)
    for action in (Set.VERIFY, Set.VERIFY_AND_COMMIT, Set.RECONCILE_AND_COMMIT):
        code, details = _code(lambda action=action: client.set_pipeline(bad, action=action, cookie=2))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        for word in words:
            assert word in details, details
    assert switch.snapshot() == before
    assert client.get_pipeline(Get.COOKIE_ONLY).config.cookie.cookie == 1


def test_config_without_p4info_is_invalid(client):
    req = p4r.SetForwardingPipelineConfigRequest(device_id=1, action=Set.VERIFY_AND_COMMIT)
    req.election_id.low = 1
    req.config.p4_device_config = b"x"
    assert _code(lambda: client.stub.SetForwardingPipelineConfig(req))[0] == grpc.StatusCode.INVALID_ARGUMENT


def test_backup_cannot_set_pipeline(server, client):
    backup = Client(server.address, election_id=None)
    try:
        code, _ = _code(lambda: backup.set_pipeline(load_p4info()))
        assert code == grpc.StatusCode.PERMISSION_DENIED
        assert _code(client.get_pipeline)[0] == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        backup.close()


def test_wrong_device_id_is_not_found(client):
    req = p4r.GetForwardingPipelineConfigRequest(device_id=99)
    assert _code(lambda: client.stub.GetForwardingPipelineConfig(req))[0] == grpc.StatusCode.NOT_FOUND


def test_capabilities(client):
    version = client.stub.Capabilities(p4r.CapabilitiesRequest()).p4runtime_api_version
    assert version.startswith("1.4")
