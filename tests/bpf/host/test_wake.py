"""The idle agent's doorbell (docs/host.md, "An idle agent"): while ``host_config.agent_idle``
is set, the first send that elicits an ack (a write or a PROBE, tc egress) or the first
SACK/NACK (XDP ingress) clears it and pushes one WAKE record to ``ev_events``; nothing is pushed
while the agent is awake. A SACK or NACK that this host sends starts no RTO clock and rings
no bell."""

from support import host_pkt as pkt
from support.host_pkt import Dscp, Opcode

from mrckit.host.maps import Reason
from mrckit.wire.constants import PETH_LEN
from mrckit.wire.ev import ev_pack

EVS = [ev_pack(0, 1, 0x111), ev_pack(0, 2, 0x222), ev_pack(1, 1, 0x333), ev_pack(1, 3, 0x444)]


def send(dp) -> None:
    assert dp.egress.test_run(pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload())).retval == 7


def sack_frame(ev: int) -> bytes:
    return pkt.encapped(pkt.NIC_B, pkt.NIC_A, pkt.bth(Opcode.SACK) + pkt.seth(ev), ev=ev_pack(0, 3, 0xABCDE),
                        outer_tc=pkt.tclass(Dscp.CONTROL), inner_tc=pkt.tclass(Dscp.CONTROL))


def sent_slots(dp) -> list:
    """The slots of the set toward B that carried something."""
    sent = dp.peer_set(pkt.NIC_B)
    return [sent.slots[i] for i in range(sent.n) if sent.slots[i].tx_packets]


def wakes(dp) -> list:
    return [e for e in dp.poll_events() if e.reason == Reason.WAKE]


def test_a_send_wakes_an_idle_agent_once(dp):
    dp.set_template(EVS)
    send(dp)
    assert wakes(dp) == []  # awake: no record
    dp.set_agent_idle(True)
    send(dp)
    [wake] = wakes(dp)
    assert (wake.ev, bytes(wake.peer), wake.old_state, wake.new_state) == (0, bytes(16), 0, 0)
    assert wake.ts_ns > 0 and dp.config.lookup(0).agent_idle == 0
    send(dp)
    assert wakes(dp) == []  # the flag is down until the agent sets it again


def test_a_sent_sack_starts_no_rto_clock_and_lets_the_agent_sleep(dp):
    dp.set_template(EVS)
    dp.set_agent_idle(True)
    sack = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.bth(Opcode.SACK) + pkt.seth(EVS[0]))
    nack = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.bth(Opcode.NACK) + pkt.neth(EVS[0], 1))
    for frame in (sack, nack):
        assert dp.egress.test_run(frame).retval == 7
    slots = sent_slots(dp)
    assert sum(s.tx_packets for s in slots) == 2 and all(s.last_tx_ns > 0 for s in slots)
    assert [(s.pending_ns, s.unacked_tx) for s in slots] == [(0, 0)] * len(slots)
    assert wakes(dp) == [] and dp.config.lookup(0).agent_idle == 1


def test_a_probe_starts_the_rto_clock_and_wakes_the_agent(dp):
    dp.set_template(EVS)
    dp.set_agent_idle(True)
    probe = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.bth(Opcode.PROBE) + bytes(PETH_LEN))
    assert dp.egress.test_run(probe).retval == 7
    [slot] = sent_slots(dp)
    assert (slot.unacked_tx, slot.pending_ns) == (1, slot.last_tx_ns)
    assert len(wakes(dp)) == 1 and dp.config.lookup(0).agent_idle == 0


def test_an_ack_wakes_an_idle_agent(dp):
    dp.set_template(EVS)
    send(dp)
    dp.poll_events()
    ev = sent_slots(dp)[0].ev
    dp.set_agent_idle(True)
    assert dp.ingress.test_run(sack_frame(ev)).retval == 2  # XDP_PASS
    assert len(wakes(dp)) == 1 and dp.config.lookup(0).agent_idle == 0


def test_set_host_keeps_the_idle_flag(dp):
    dp.set_agent_idle(True)
    pkt.configure_host_a(dp)
    assert dp.config.lookup(0).agent_idle == 1
