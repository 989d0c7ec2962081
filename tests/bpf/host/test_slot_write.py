"""The agent's writes to a live EV set (``mrc_host_slot_write``, a syscall program) keep every
count the dataplane made since the agent's read: a state change leaves the counters alone, a
replacement hands the old EV's last counts back and resumes the new EV's, and a write to a
slot whose EV changed meanwhile, to an unknown peer or past the set's end changes nothing."""

import ctypes

from support import host_pkt as pkt
import pytest

from mrckit.host.maps import EvSlot, SlotWrite, SlotWriteResult
from mrckit.wire.constants import EvState
from mrckit.wire.ev import ev_pack

FRAME = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(payload=b"x" * 8))


@pytest.fixture(autouse=True)
def template(dp):
    dp.set_template([ev_pack(p, t1, 0x100 + i) for i, (p, t1) in
                     enumerate((p, t1) for p in (0, 1) for t1 in range(4))])


def send(dp, n):
    for _ in range(n):
        assert dp.egress.test_run(FRAME).retval == 7  # TC_ACT_REDIRECT


def total_tx(evset):
    return sum(evset.slots[i].tx_packets for i in range(evset.n))


def test_a_state_change_keeps_the_counts_sent_after_the_read(dp):
    send(dp, 200)
    snapshot = dp.peer_set(pkt.NIC_B)
    send(dp, 300)  # the dataplane goes on while the agent decides
    snapshot.slots[2].state, snapshot.slots[2].reason = EvState.SKIP, 5
    assert dp.merge_slots(pkt.NIC_B, snapshot, {2}) == {}
    live = dp.peer_set(pkt.NIC_B)
    assert total_tx(live) == 500
    assert (live.slots[2].state, live.slots[2].reason) == (EvState.SKIP, 5)
    assert live.slots[2].tx_packets > snapshot.slots[2].tx_packets


def test_a_replacement_hands_back_the_old_evs_last_counts(dp):
    send(dp, 256)
    snapshot = dp.peer_set(pkt.NIC_B)
    old_ev = snapshot.slots[3].ev
    send(dp, 256)
    seen = dp.peer_set(pkt.NIC_B).slots[3].tx_packets
    new = EvSlot(ev=old_ev ^ 0x1234, state=EvState.GOOD, tx_packets=1000, tx_bytes=99)
    snapshot.slots[3] = new  # a backup that carried 1000 packets in an earlier life
    last = dp.merge_slots(pkt.NIC_B, snapshot, {3})
    assert list(last) == [old_ev] and last[old_ev].tx_packets == seen > 0
    live = dp.peer_set(pkt.NIC_B)
    assert (live.slots[3].ev, live.slots[3].tx_packets, live.slots[3].tx_bytes) == (old_ev ^ 0x1234, 1000, 99)
    assert (live.slots[3].acked, live.slots[3].last_tx_ns) == (0, 0)
    assert total_tx(live) - 1000 + seen == 512


def _cmd(peer, index, expect_ev, **fields):
    return SlotWrite(peer=(ctypes.c_uint8 * 16).from_buffer_copy(pkt.ip(peer).packed), index=index,
                     expect_ev=expect_ev, ev=fields.pop("ev", expect_ev), **fields)


def test_stale_unknown_or_out_of_range_writes_change_nothing(dp):
    send(dp, 64)
    before = bytes(dp.peer_set(pkt.NIC_B))
    ev = dp.peer_set(pkt.NIC_B).slots[0].ev
    run = dp.slot_writer.run_syscall
    assert run(_cmd(pkt.NIC_B, 0, ev ^ 1, state=EvState.DENIED)) == SlotWriteResult.STALE
    assert run(_cmd(pkt.NIC_B, 4096, ev, state=EvState.DENIED)) == SlotWriteResult.BAD_INDEX
    assert run(_cmd(pkt.NIC_B, dp.peer_set(pkt.NIC_B).n, ev)) == SlotWriteResult.BAD_INDEX
    assert run(_cmd(pkt.NIC_A, 0, ev, state=EvState.DENIED)) == SlotWriteResult.NO_PEER
    assert bytes(dp.peer_set(pkt.NIC_B)) == before
    assert not dp.write_slot(pkt.NIC_A, 0, state=EvState.DENIED)
    assert not dp.write_slot(pkt.NIC_B, 4096, state=EvState.DENIED)
