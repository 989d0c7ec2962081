"""The spec items of P4Runtime 1.4 on both targets: the eBPF switch's server and bmv2
(``simple_switch_grpc``, skipped where it is not installed), through the same raw client
(finsy's generated stubs) and through finsy itself. Where bmv2 answers differently, the test
asserts bmv2's answer and docs/p4runtime.md ("bmv2 differences") lists it as bmv2's."""

import asyncio

import finsy as fy
import grpc
import pytest
from finsy.proto import p4r, p4r_grpc

from support import p4rt
from support.p4rt_harness import DEVICE_CONFIG, DEVICE_ID, P4INFO_PATH, Client, load_p4info

from mrckit.switch.bmv2 import Bmv2Switch, find_tool

OK, NOT_FOUND, EXISTS = 0, 5, 6
Set = p4r.SetForwardingPipelineConfigRequest


@pytest.fixture(params=["ebpf", "bmv2"])
def target(request, make_netns):
    """(name, P4Runtime address) of a fresh switch of each kind."""
    if request.param == "ebpf":
        yield "ebpf", request.getfixturevalue("server").address
        return
    if find_tool("simple_switch_grpc") is None:
        pytest.skip("simple_switch_grpc (bmv2) not found on PATH or in /opt/p4tools/bin")
    ns = make_netns()
    sw = Bmv2Switch(ns, ns, {}, json_path=None, device_id=DEVICE_ID).start()
    try:
        yield "bmv2", sw.grpc_address
    finally:
        sw.stop()


@pytest.fixture
def clients(target):
    made = []

    def make(election_id):
        c = Client(target[1], election_id)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def _code(call):
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def _fib_entry(p4info, key, metadata=b"", cookie=0):
    msg = p4rt.entry(p4info, "usid_fib", key, "drop")
    msg.metadata, msg.controller_metadata = metadata, cookie
    return msg


def _fib(client, p4info, **filters):
    query = p4r.TableEntry(table_id=p4rt.ids(p4info, "usid_fib")[0], **filters)
    return sorted(int.from_bytes(e.table_entry.match[0].exact.value, "big")
                  for e in client.read(p4r.Entity(table_entry=query)))


def test_no_backup_is_promoted_and_election_id_past_is_reported(target, clients):
    primary, backup = clients(9), clients(4)
    assert (backup.answer.status.code, backup.answer.election_id.low) == (EXISTS, 9)
    primary.close()
    update = backup.next_arbitration()
    if target[0] == "bmv2":  # bmv2 (PI) promotes the backup, as before P4Runtime 1.1
        assert (update.status.code, update.election_id.low) == (OK, 4)
        return
    assert (update.status.code, update.election_id.low) == (NOT_FOUND, 9)
    again = backup.arbitrate(5)
    assert (again.status.code, again.election_id.low) == (NOT_FOUND, 9)
    assert backup.arbitrate(10).status.code == OK


def test_controller_rearbitrates_above_election_id_past(target, clients):
    """A controller whose clock-based id is below the one a departed primary used arbitrates
    again above election_id_past and becomes primary; it never takes over from a live one.
    bmv2 grants a lower id once the primary has left (it keeps no election_id_past), so there
    the controller keeps its own id."""
    from mrckit.control import SwitchTarget, open_session
    from mrckit.control import load_pipeline
    from mrckit.errors import MrcError

    switch, pipeline = SwitchTarget("sw", target[1], DEVICE_ID), load_pipeline()
    clients(1000).close()  # a predecessor with a higher id came and went

    async def connect(election_id):
        session = await open_session(switch, pipeline, election_id, timeout=30)
        await session.close()
        return session.election_id

    assert asyncio.run(connect(10)) == (10 if target[0] == "bmv2" else 1001)
    holder = clients(2000)
    assert holder.answer.status.code == OK
    with pytest.raises(MrcError, match="not primary"):
        asyncio.run(connect(10))


def test_role_change_on_a_live_stream_is_failed_precondition(target):
    def arbitration(role=""):
        msg = p4r.StreamMessageRequest()
        msg.arbitration.device_id = DEVICE_ID
        msg.arbitration.election_id.low = 1
        if role:
            msg.arbitration.role.name = role
        return msg

    with grpc.insecure_channel(target[1]) as channel:
        stream = p4r_grpc.P4RuntimeStub(channel).StreamChannel(iter([arbitration(), arbitration("other")]))
        if target[0] == "bmv2":  # bmv2 (PI) lets the stream change its role: it ends with OK
            assert all(m.HasField("arbitration") for m in stream)
            return
        with pytest.raises(grpc.RpcError) as info:
            for _ in stream:
                pass
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_commit_with_a_config_is_invalid(target, clients):
    name, _ = target
    client = clients(1)
    req = client._stamp(p4r.SetForwardingPipelineConfigRequest(action=Set.COMMIT))
    req.config.p4info.CopyFrom(load_p4info())
    req.config.p4_device_config = DEVICE_CONFIG
    exc = _code(lambda: client.stub.SetForwardingPipelineConfig(req))
    # bmv2 (PI) refuses it too, but as UNKNOWN "Error in second phase of device update"
    assert exc.code() == (grpc.StatusCode.INVALID_ARGUMENT if name == "ebpf" else grpc.StatusCode.UNKNOWN)


def test_writes_after_verify_and_save_survive_commit(target, clients):
    name, _ = target
    client, p4info = clients(1), load_p4info()
    client.set_pipeline(p4info, cookie=1)
    client.write(p4rt.update("INSERT", _fib_entry(p4info, 1)))
    client.set_pipeline(p4info, action=Set.VERIFY_AND_SAVE, cookie=2)
    client.write(p4rt.update("INSERT", _fib_entry(p4info, 2)))
    client.stub.SetForwardingPipelineConfig(client._stamp(p4r.SetForwardingPipelineConfigRequest(action=Set.COMMIT)))
    assert _fib(client, p4info) == [2]  # cleared at the save, the write since then replayed


def test_metadata_is_read_back(target, clients):
    client, p4info = clients(1), load_p4info()
    client.set_pipeline(p4info)
    client.write(p4rt.update("INSERT", _fib_entry(p4info, 1, b"\x00meta", 77)))
    (found,) = client.read(p4rt.read_table(p4info, "usid_fib", 1))
    assert (found.table_entry.metadata, found.table_entry.controller_metadata) == (b"\x00meta", 77)


def test_read_filters_on_action_and_metadata(target, clients):
    name, _ = target
    client, p4info = clients(1), load_p4info()
    client.set_pipeline(p4info)
    client.write(p4rt.update("INSERT", _fib_entry(p4info, 1, b"a", 7)), p4rt.update("INSERT", _fib_entry(p4info, 2, b"b")),
                 p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", 3, "set_egress", port=4)))
    by_action = p4r.TableAction()
    by_action.action.action_id = p4rt.ids(p4info, "usid_fib", "set_egress")[1]
    if name == "bmv2":  # bmv2 (PI) ignores these filters: every entry of the table comes back
        assert _fib(client, p4info, action=by_action) == _fib(client, p4info, metadata=b"b") == [1, 2, 3]
        return
    assert _fib(client, p4info, action=by_action) == [3]
    assert _fib(client, p4info, metadata=b"b") == [2]
    assert _fib(client, p4info, controller_metadata=7) == [1]


def test_bytestrings_padded_are_accepted_too_wide_are_out_of_range(target, clients):
    name, _ = target
    client, p4info = clients(1), load_p4info()
    client.set_pipeline(p4info)
    client.write(p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", b"\x00" * 10 + b"\x05", "drop")))
    assert _fib(client, p4info) == [5]
    exc = _code(lambda: client.write(p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", 1 << 48, "drop"))))
    assert exc.code() == grpc.StatusCode.UNKNOWN
    expected = grpc.StatusCode.OUT_OF_RANGE if name == "ebpf" else grpc.StatusCode.INVALID_ARGUMENT
    assert [c for c, _ in p4rt.batch_errors(exc)] == [expected.value[0]]


def test_batch_errors_have_one_detail_per_update_in_order(target, clients):
    client, p4info = clients(1), load_p4info()
    client.set_pipeline(p4info)
    client.write(p4rt.update("INSERT", _fib_entry(p4info, 1)))
    exc = _code(lambda: client.write(p4rt.update("INSERT", _fib_entry(p4info, 2)),
                                     p4rt.update("INSERT", _fib_entry(p4info, 1)),
                                     p4rt.update("DELETE", p4rt.entry(p4info, "usid_fib", 9))))
    assert exc.code() == grpc.StatusCode.UNKNOWN
    assert [c for c, _ in p4rt.batch_errors(exc)] == [OK, EXISTS, NOT_FOUND]


def test_finsy_reads_back_metadata_and_filters_by_action(target):
    async def run():
        opts = fy.SwitchOptions(p4info=P4INFO_PATH, p4blob=DEVICE_CONFIG, device_id=DEVICE_ID)
        async with fy.Switch("sw", target[1], opts) as sw:
            await sw.delete_all()
            await sw.insert([fy.P4TableEntry("usid_fib", match=fy.P4TableMatch(**{"hdr.outer_ipv6.dst_addr[127:80]": 1}),
                                             action=fy.P4TableAction("drop"), metadata=b"finsy"),
                             fy.P4TableEntry("usid_fib", match=fy.P4TableMatch(**{"hdr.outer_ipv6.dst_addr[127:80]": 2}),
                                             action=fy.P4TableAction("set_egress", port=3))])
            everything = [e async for e in sw.read(fy.P4TableEntry("usid_fib"))]
            dropped = [e async for e in sw.read(fy.P4TableEntry("usid_fib", action=fy.P4TableAction("drop")))]
            return everything, dropped

    everything, dropped = asyncio.run(run())
    assert sorted(e.metadata for e in everything) == [b"", b"finsy"]
    # bmv2 (PI) ignores the action filter
    assert sorted(e.metadata for e in dropped) == ([b"finsy"] if target[0] == "ebpf" else [b"", b"finsy"])


def test_finsy_sees_one_error_per_failed_update_of_a_batch(target):
    """Spec 12: a batch that fails in part is UNKNOWN with one detail per update, in order;
    finsy keeps the failed ones, by their index in the batch."""
    def fib(key, action="drop", **params):
        return fy.P4TableEntry("usid_fib", match=fy.P4TableMatch(**{"hdr.outer_ipv6.dst_addr[127:80]": key}),
                               action=fy.P4TableAction(action, **params))

    async def run():
        opts = fy.SwitchOptions(p4info=P4INFO_PATH, p4blob=DEVICE_CONFIG, device_id=DEVICE_ID)
        async with fy.Switch("sw", target[1], opts) as sw:
            await sw.delete_all()
            await sw.insert([fib(1)])
            with pytest.raises(fy.P4ClientError) as info:
                await sw.write([+fib(2), +fib(1), -fib(9), +fib(3, "set_egress", port=4)])
            keys = sorted([int(v) for e in [e async for e in sw.read(fy.P4TableEntry("usid_fib"))]
                           for v in dict(e.match).values()])
            return info.value, keys

    exc, keys = asyncio.run(run())
    assert exc.code == fy.GRPCStatusCode.UNKNOWN
    assert {i: e.canonical_code for i, e in exc.details.items()} == {
        1: fy.GRPCStatusCode.ALREADY_EXISTS, 2: fy.GRPCStatusCode.NOT_FOUND}
    assert keys == [1, 2, 3]  # the updates that could be applied were


def test_p4runtime_shell_metadata_and_filters(target, tmp_path):
    from support.p4rt_shell import SHELL_PYTHON, shell
    if not SHELL_PYTHON.exists():
        pytest.skip("p4runtime-shell virtualenv .venv-p4rt missing: run `make p4rt-shell`")
    shell(target[1], "setup", tmp_path)
    out = shell(target[1], "metadata", tmp_path)
    tagged, plain = ["fcbbbb00a001", b"shell".hex()], ["fcbbbb00a002", ""]
    assert out["all"] == [tagged, plain]
    if target[0] == "bmv2":  # bmv2 (PI) ignores the metadata and action filters
        assert out["by_metadata"] == out["by_action"] == [tagged, plain]
    else:
        assert (out["by_metadata"], out["by_action"]) == ([tagged], [plain])


def test_p4runtime_shell_below_election_id_past_is_not_primary(target, clients, tmp_path):
    """p4runtime-shell arbitrates once, with election id 1, and has no re-arbitration: after a
    primary with id 1000 came and went, the spec keeps election_id_past at 1000, so the shell
    is not primary and its write is refused. bmv2 (PI) keeps no election_id_past and lets it
    write."""
    from support.p4rt_shell import SHELL_PYTHON, shell
    if not SHELL_PYTHON.exists():
        pytest.skip("p4runtime-shell virtualenv .venv-p4rt missing: run `make p4rt-shell`")
    shell(target[1], "setup", tmp_path)
    clients(1000).close()
    out = shell(target[1], "arbitration", tmp_path)
    if target[0] == "bmv2":
        assert out["error"] is None
    else:
        assert "PERMISSION_DENIED" in out["error"]
