"""StreamChannel arbitration (P4Runtime spec section 5) with real gRPC clients."""

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc

from support import p4rt
from support.p4rt_harness import DEVICE_ID, Client, load_p4info

OK, NOT_FOUND, EXISTS = 0, 5, 6


def _insert(p4info, key):
    return p4rt.update("INSERT", p4rt.entry(p4info, "usid_fib", key, "drop"))


def _denied(client, p4info, key):
    with pytest.raises(grpc.RpcError) as info:
        client.write(_insert(p4info, key))
    return info.value.code() == grpc.StatusCode.PERMISSION_DENIED


@pytest.fixture
def clients(server):
    made = []

    def make(election_id):
        c = Client(server.address, election_id)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def test_primary_change_notifies_everyone_and_moves_write_access(server, switch, clients):
    first = clients(1)
    assert first.answer.status.code == OK
    p4info = load_p4info()
    first.set_pipeline(p4info)
    first.write(_insert(p4info, 1))

    second = clients(5)
    assert (second.answer.status.code, second.answer.election_id.low) == (OK, 5)
    # the newcomer became primary: both streams hear it, with the highest election id
    update = first.next_arbitration()
    assert (update.status.code, update.election_id.low) == (EXISTS, 5)
    assert _denied(first, p4info, 2)
    second.write(_insert(p4info, 2))
    assert sorted(e.key for e in switch.tables.direct.read("usid_fib")) == [1, 2]

    # a lower id joins as backup and is answered alone
    third = clients(3)
    assert (third.answer.status.code, third.answer.election_id.low) == (EXISTS, 5)
    assert _denied(third, p4info, 3)
    assert len(third.read(p4rt.read_table(p4info))) == 2  # backups may read

    # the primary leaves: no backup is promoted (spec 5.4); everyone hears NOT_FOUND with the
    # highest id ever seen (election_id_past), not the highest live one
    second.close()
    for c in (first, third):
        update = c.next_arbitration()
        assert (update.status.code, update.election_id.low) == (NOT_FOUND, 5)
    assert _denied(third, p4info, 3) and _denied(first, p4info, 3)
    # arbitrating again below election_id_past leaves the role without a primary
    again = third.arbitrate(3)
    assert (again.status.code, again.election_id.low) == (NOT_FOUND, 5)
    assert _denied(third, p4info, 3)

    # an id >= election_id_past takes over, and everyone hears
    assert first.arbitrate(9).status.code == OK
    update = third.next_arbitration()
    assert (update.status.code, update.election_id.low) == (EXISTS, 9)
    first.write(_insert(p4info, 4))
    assert sorted(e.key for e in switch.tables.direct.read("usid_fib")) == [1, 2, 4]


def test_primary_may_come_back_with_election_id_past(server, clients):
    primary, backup = clients(8), clients(2)
    assert backup.answer.status.code == EXISTS
    primary.close()
    assert backup.next_arbitration().status.code == NOT_FOUND
    returning = clients(8)  # equal to election_id_past: primary again (spec 5.3)
    assert (returning.answer.status.code, returning.answer.election_id.low) == (OK, 8)
    assert backup.next_arbitration().status.code == EXISTS


def test_repeated_arbitration_is_answered_again(server, clients):
    c = clients(7)
    assert c.answer.status.code == OK and c.arbitrate(7).status.code == OK
    low = clients(4)
    assert (low.answer.status.code, low.answer.election_id.low) == (EXISTS, 7)
    assert low.arbitrate(4).status.code == EXISTS


def test_duplicate_election_id_is_refused(server, clients):
    clients(2)
    with pytest.raises(grpc.RpcError) as info:
        Client(server.address, 2)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "election id" in info.value.details()


def test_client_without_election_id_is_backup_and_primary_leaving_leaves_none(server, clients):
    primary = clients(1)
    watcher = clients(None)
    assert watcher.answer.status.code == EXISTS
    primary.close()
    update = watcher.next_arbitration()
    assert update.status.code == NOT_FOUND
    assert _denied(watcher, load_p4info(), 1)


def test_write_with_stale_election_id_is_denied(server, clients):
    c = clients(3)
    p4info = load_p4info()
    c.set_pipeline(p4info)
    c.election_id = 2  # the request no longer carries the primary's id
    assert _denied(c, p4info, 1)


def test_arbitration_for_another_device_is_not_found(server):
    msg = p4r.StreamMessageRequest()
    msg.arbitration.device_id = 77
    msg.arbitration.election_id.low = 1
    with grpc.insecure_channel(server.address) as channel, pytest.raises(grpc.RpcError) as info:
        next(p4r_grpc.P4RuntimeStub(channel).StreamChannel(iter([msg])))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def _stream(server, *messages):
    """Send ``messages`` on one StreamChannel; return the status code that ends it."""
    with grpc.insecure_channel(server.address) as channel, pytest.raises(grpc.RpcError) as info:
        for _ in p4r_grpc.P4RuntimeStub(channel).StreamChannel(iter(messages)):
            pass
    return info.value.code(), info.value.details()


def _arbitration(device_id=DEVICE_ID, election_id=1, role=""):
    msg = p4r.StreamMessageRequest()
    msg.arbitration.device_id = device_id
    msg.arbitration.election_id.low = election_id
    if role:
        msg.arbitration.role.name = role
    return msg


def test_live_stream_changing_role_or_device_is_failed_precondition(server):
    code, details = _stream(server, _arbitration(), _arbitration(role="other"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "role" in details
    code, details = _stream(server, _arbitration(), _arbitration(device_id=DEVICE_ID + 1))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "device" in details


def test_primary_downgrading_itself_leaves_no_primary_and_everyone_hears(server, clients):
    primary, backup = clients(6), clients(2)
    assert backup.answer.status.code == EXISTS
    answer = primary.arbitrate(4)  # below its own old id, which stays election_id_past
    assert (answer.status.code, answer.election_id.low) == (NOT_FOUND, 6)
    update = backup.next_arbitration()
    assert (update.status.code, update.election_id.low) == (NOT_FOUND, 6)
    assert _denied(primary, load_p4info(), 1)
    assert primary.arbitrate(6).status.code == OK  # back to election_id_past: primary again
    assert backup.next_arbitration().status.code == EXISTS
