"""Table entry metadata (spec 9.1: stored and read back, also after a server restart) and the
Read filters of spec 11.1 (action, priority, metadata, controller_metadata), over real gRPC."""

import grpc
import pytest
from finsy.proto import p4r

from support import p4rt
from support.p4rt_harness import Client, load_p4info

from mrckit.switch.p4runtime import MRC_SWITCH, Device, EbpfBackend, P4RuntimeServer


def _entry(p4info, key, action="drop", metadata=b"", cookie=0, **params):
    msg = p4rt.entry(p4info, "usid_fib", key, action, **params)
    msg.metadata, msg.controller_metadata = metadata, cookie
    return msg


def _read(client, query):
    return [e.table_entry for e in client.read(p4r.Entity(table_entry=query))]


def _keys(found):
    return sorted(int.from_bytes(e.match[0].exact.value, "big") for e in found)


def _serve(switch, state_dir, address):
    backend = EbpfBackend.open(switch.name)
    return P4RuntimeServer(Device(backend, MRC_SWITCH, 1, state_dir), address).start(), backend


def test_metadata_is_read_back_modified_and_survives_a_restart(switch, state_dir, tmp_path):
    address = f"unix:{tmp_path}/p4rt.sock"
    p4info = load_p4info()
    srv, backend = _serve(switch, state_dir, address)
    try:
        client = Client(address)
        client.set_pipeline(p4info)
        client.write(p4rt.update("INSERT", _entry(p4info, 1, metadata=b"\x00one", cookie=11)),
                     p4rt.update("INSERT", _entry(p4info, 2)))
        client.write(p4rt.update("MODIFY", _entry(p4info, 2, metadata=b"two", cookie=2**64 - 1)))
        before = _read(client, p4r.TableEntry(table_id=p4rt.ids(p4info, "usid_fib")[0]))
        client.close()
    finally:
        srv.stop(0)
        backend.close()
    assert [(e.metadata, e.controller_metadata) for e in before] == [(b"\x00one", 11), (b"two", 2**64 - 1)]
    srv, backend = _serve(switch, state_dir, address)
    try:
        client = Client(address, 2)
        after = _read(client, p4r.TableEntry(table_id=p4rt.ids(p4info, "usid_fib")[0]))
        assert after == before
        client.write(p4rt.update("DELETE", p4rt.entry(p4info, "usid_fib", 1)))
        client.write(p4rt.update("INSERT", _entry(p4info, 1)))  # a new entry: no old metadata
        assert [e.metadata for e in _read(client, p4rt.read_table(p4info, "usid_fib", 1).table_entry)] == [b""]
        client.close()
    finally:
        srv.stop(0)
        backend.close()


@pytest.fixture
def filled(client):
    p4info = load_p4info()
    client.set_pipeline(p4info)
    client.write(p4rt.update("INSERT", _entry(p4info, 1, metadata=b"a", cookie=7)),
                 p4rt.update("INSERT", _entry(p4info, 2, metadata=b"b", cookie=7)),
                 p4rt.update("INSERT", _entry(p4info, 3, "set_egress", port=4)),
                 p4rt.update("INSERT", _entry(p4info, 4, "set_egress", port=5)))
    return client, p4info, p4rt.ids(p4info, "usid_fib")[0]


def test_read_filters_on_action_id(filled):
    client, p4info, table_id = filled
    query = p4r.TableEntry(table_id=table_id)
    query.action.action.action_id = p4rt.ids(p4info, "usid_fib", "set_egress")[1]
    assert _keys(_read(client, query)) == [3, 4]
    query.action.action.action_id = p4rt.ids(p4info, "usid_fib", "drop")[1]
    assert _keys(_read(client, query)) == [1, 2]


def _read_errors(client, *queries):
    with pytest.raises(grpc.RpcError) as info:
        client.read(*(p4r.Entity(table_entry=q) for q in queries))
    assert info.value.code() == grpc.StatusCode.UNKNOWN
    return [c for c, _ in p4rt.batch_errors(info.value)]


def test_read_filters_the_spec_does_not_define_are_refused_per_request(filled):
    """Spec 9.1.6: only a direct action id filters by action (not its parameters, nor a member
    or group id), and table id 0 takes no other filter. Spec 13.3: the valid requests of the
    batch are answered, each invalid one gets its own p4.v1.Error."""
    client, p4info, table_id = filled
    by_param = p4r.TableEntry(table_id=table_id)
    by_param.action.action.action_id = p4rt.ids(p4info, "usid_fib", "set_egress")[1]
    by_param.action.action.params.add(param_id=1, value=b"\x05")
    by_member = p4r.TableEntry(table_id=p4rt.ids(p4info, "ipv6_fib")[0])
    by_member.action.action_profile_member_id = 1
    every_table = p4r.TableEntry(controller_metadata=7)
    codes = _read_errors(client, p4r.TableEntry(table_id=table_id), by_param, by_member, every_table)
    assert codes == [0, grpc.StatusCode.UNIMPLEMENTED.value[0], grpc.StatusCode.UNIMPLEMENTED.value[0],
                     grpc.StatusCode.INVALID_ARGUMENT.value[0]]
    assert _read_errors(client, p4r.TableEntry(table_id=table_id), p4r.TableEntry(table_id=0x02FFFFFF)) == [0, 3]


def test_read_of_an_empty_entity_is_invalid(filled):
    client, _p4info, _table_id = filled
    with pytest.raises(grpc.RpcError) as info:
        client.read(p4r.Entity())
    assert [c for c, _ in p4rt.batch_errors(info.value)] == [grpc.StatusCode.INVALID_ARGUMENT.value[0]]


def test_read_filters_on_metadata_controller_metadata_and_priority(filled):
    client, _p4info, table_id = filled
    assert _keys(_read(client, p4r.TableEntry(table_id=table_id, controller_metadata=7))) == [1, 2]
    assert _keys(_read(client, p4r.TableEntry(table_id=table_id, metadata=b"b"))) == [2]
    assert _keys(_read(client, p4r.TableEntry(table_id=table_id, metadata=b"b", controller_metadata=8))) == []
    assert _keys(_read(client, p4r.TableEntry(table_id=table_id, priority=10))) == []  # every entry has priority 0
    assert _keys(_read(client, p4r.TableEntry(table_id=table_id))) == [1, 2, 3, 4]


def test_metadata_of_writes_after_verify_and_save_is_replayed(client):
    p4info = load_p4info()
    client.set_pipeline(p4info)
    client.set_pipeline(p4info, action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_SAVE)
    client.write(p4rt.update("INSERT", _entry(p4info, 9, metadata=b"saved", cookie=3)))
    req = client._stamp(p4r.SetForwardingPipelineConfigRequest(action=p4r.SetForwardingPipelineConfigRequest.COMMIT))
    client.stub.SetForwardingPipelineConfig(req)
    found = _read(client, p4rt.read_table(p4info, "usid_fib", 9).table_entry)
    assert [(e.metadata, e.controller_metadata) for e in found] == [(b"saved", 3)]


def test_reconcile_and_commit_keeps_metadata(client):
    p4info = load_p4info()
    client.set_pipeline(p4info)
    client.write(p4rt.update("INSERT", _entry(p4info, 5, metadata=b"kept", cookie=1)))
    client.set_pipeline(p4info, action=p4r.SetForwardingPipelineConfigRequest.RECONCILE_AND_COMMIT)
    assert [e.metadata for e in _read(client, p4rt.read_table(p4info, "usid_fib", 5).table_entry)] == [b"kept"]
    with pytest.raises(grpc.RpcError):
        client.write(p4rt.update("INSERT", _entry(p4info, 5)))
