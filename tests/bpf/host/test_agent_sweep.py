"""The agent's sweep rules on the real dataplane maps, driven with BPF_PROG_TEST_RUN packets and
explicit times (design section 5): RTO retirement needs sibling evidence and several unacked
sends, replacement stays in the plane and avoids the suspect spine, a dead plane is not
replaced, and an idle SKIP ends after an RTO."""

import socket
import time

from support import host_pkt as pkt
import pytest
from support.host_pkt import Opcode

from mrckit.host.agent import HostAgent
from mrckit.host.config import AgentConfig, Port, Settings
from mrckit.host.evset import build_template
from mrckit.wire.addressing import port_address
from mrckit.wire.constants import EvState
from mrckit.wire.ev import ev_unpack

RTO = 10_000_000


@pytest.fixture
def agent(dp):
    ports = tuple(Port(p, f"plane{p}", port_address(p, 0, 0), pkt.MAC[p], pkt.NEIGH[p]) for p in (0, 1))
    cfg = AgentConfig("a", pkt.nic_address(0, 0), 0, 0, "nic0", ports, (4, 4),
                      settings=Settings(rto_ns=RTO, min_unacked=8, backups_per_plane=8, seed=4))
    a = HostAgent()
    a.cfg, a.dp, a._port_up = cfg, dp, {0: True, 1: True}
    a.template = build_template(cfg.t1_counts(), 128, 8, seed=4)
    dp.set_template(a.template.active)
    yield a
    a.dp = None  # the fixture closes the dataplane


def send(dp, rotations=1):
    frame = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(payload=b"x" * 8))
    for _ in range(128 * rotations):
        assert dp.egress.test_run(frame).retval == 7


def sack_all_but(dp, victim):
    for ev in (e["ev"] for e in rows_of(dp)):
        if ev != victim:
            frame = pkt.encapped(pkt.NIC_B, pkt.NIC_A, pkt.bth(Opcode.SACK) + pkt.seth(ev), ev=1,
                                 outer_tc=0, inner_tc=0)
            assert dp.ingress.test_run(frame).retval == 2


def rows_of(dp):
    s = dp.peer_set(pkt.NIC_B)
    return [dict(ev=s.slots[i].ev, state=s.slots[i].state) for i in range(s.n)]


def test_rto_retires_and_replaces_in_plane_avoiding_the_suspect_spine(agent):
    dp = agent.dp
    send(dp, 8)
    victim = rows_of(dp)[3]["ev"]
    sack_all_but(dp, victim)
    agent.sweep(now=time.monotonic_ns() + 2 * RTO)
    assert all(r["state"] == EvState.GOOD for r in rows_of(dp)), "no sibling sent later: no evidence yet"
    time.sleep(RTO / 2e9 + 0.002)
    send(dp, 1)
    sack_all_but(dp, victim)
    agent.sweep(now=time.monotonic_ns() + 2 * RTO)
    events = [(e.ev, e.reason) for e in agent.events.history]
    assert events[:2] == [(victim, "RTO_TIMEOUT"), (victim, "REPLACED")]
    new = rows_of(dp)[3]
    assert new["state"] == EvState.GOOD and new["ev"] != victim
    assert ev_unpack(new["ev"]).plane == ev_unpack(victim).plane
    assert ev_unpack(new["ev"]).t1 != ev_unpack(victim).t1
    assert victim in agent.peers[pkt.ip(pkt.NIC_B)].retired
    assert sum(r["state"] != EvState.GOOD for r in rows_of(dp)) == 0


def test_an_agent_whose_host_only_answers_goes_idle(agent):
    dp = agent.dp
    sack = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.bth(Opcode.SACK) + pkt.seth(0x12345))
    for _ in range(128):
        assert dp.egress.test_run(sack).retval == 7
    assert agent._sweep_and_schedule() is None  # nothing a sweep could judge: blocks
    assert dp.config.lookup(0).agent_idle == 1
    send(dp, 1)
    assert agent._sweep_and_schedule() is not None  # writes unacked: sweeps on


def test_under_traffic_the_agent_sweeps_at_the_earliest_rto_verdict(agent):
    send(agent.dp, 1)
    s = agent.dp.peer_set(pkt.NIC_B)
    first = min(s.slots[i].pending_ns for i in range(s.n))
    nxt = agent._sweep_and_schedule()
    # Not every probe interval (1 ms): no verdict can fall before the oldest unacked send's RTO.
    assert nxt is not None and nxt * 1e9 >= first + RTO - 1_000


def test_an_ev_to_replace_is_swept_every_probe_period(agent):
    pkt.configure_host_a(agent.dp, path_retire=True)
    lose_one(agent.dp, 5)
    assert agent._next_sweep() <= time.monotonic() + agent._probe_period()


@pytest.fixture
def looping(agent):
    """``agent`` with stand-in sockets, so that a turn of its loop runs (nothing arrives)."""
    agent._udp, agent._ipr = (socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) for _ in range(2))
    agent._udp.setblocking(False)  # the sweep reads it dry, as the agent's own
    yield agent
    agent._udp.close()
    agent._ipr.close()
    agent._udp = agent._ipr = None


def test_a_wake_waits_a_sweep_period_and_a_loss_is_swept_at_once(looping):
    agent, dp = looping, looping.dp
    pkt.configure_host_a(dp, path_retire=True)
    ring = dp.events_fd()
    assert agent._sweep_and_schedule() is None  # nothing sent: the agent blocks
    sweeps = agent.counters["sweeps"]
    send(dp, 1)  # the doorbell: one WAKE
    before = time.monotonic()
    deadline = agent._turn({ring}, ring, None)
    assert (agent.counters["dataplane_wakes"], agent.counters["sweeps"]) == (1, sweeps)
    assert deadline >= before + agent._sweep_period()
    lose_one(dp, 5)  # LOSS and PATH_LOSS: replace them now, not at the next RTO verdict
    agent._turn({ring}, ring, deadline)
    assert agent.counters["sweeps"] == sweeps + 1
    assert agent.counters["events_replaced"] > 0 and agent.counters["loop_errors"] == 0


def test_few_unacked_sends_do_not_retire(agent):
    dp = agent.dp
    send(dp, 1)
    victim = rows_of(dp)[0]["ev"]
    time.sleep(RTO / 2e9 + 0.002)
    send(dp, 1)
    sack_all_but(dp, victim)
    agent.sweep(now=time.monotonic_ns() + 2 * RTO)
    assert [e for e in agent.events.history if e.reason == "RTO_TIMEOUT"] == []  # 2 sends < 8


def test_dead_plane_is_not_replaced_and_idle_skip_expires(agent):
    dp = agent.dp
    send(dp, 1)
    rows = rows_of(dp)
    plane1 = next(i for i, r in enumerate(rows) if r["ev"] >> 28 == 1)
    dp.write_slot(pkt.NIC_B, plane1, state=EvState.ASSUMED_BAD)
    dp.write_slot(pkt.NIC_B, 0, state=EvState.SKIP)
    agent._port_up[1] = False
    agent.sweep(now=time.monotonic_ns() + 2 * RTO)
    after = rows_of(dp)
    assert after[plane1] == dict(ev=rows[plane1]["ev"], state=EvState.ASSUMED_BAD)
    assert after[0]["state"] == EvState.GOOD
    assert [e.reason for e in agent.events.history] == ["SKIP_EXPIRED"]


def lose_one(dp, psn):
    """A data PSN sent, a later one delivered, and the first retransmitted unanswered: tc
    egress retires its EV (and path)."""
    frame = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(psn=psn, dqpn=0x42))
    assert dp.egress.test_run(frame).retval == 7
    pkt.deliver_later(dp, psn + 1)
    rtx = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(psn=psn, dqpn=0x42, flags=0x20))
    assert dp.egress.test_run(rtx).retval == 7


def test_probe_answer_brings_the_paths_evs_back_together(agent):
    from mrckit.host.state import ProbeTarget
    dp = agent.dp
    pkt.configure_host_a(dp, path_retire=True)
    lose_one(dp, 5)
    rows = rows_of(dp)
    bad = [r["ev"] for r in rows if r["state"] == EvState.ASSUMED_BAD]
    assert len(bad) == 16 and len({(ev >> 28, (ev >> 20) & 0xFF) for ev in bad}) == 1
    peer = pkt.ip(pkt.NIC_B)
    st = agent.peers.setdefault(peer, agent._new_peer_state())
    st.probes[bad[0]] = ProbeTarget()
    for _ in range(agent.cfg.settings.probe_successes):
        agent._probe_result(peer, bad[0], ok=True, now=time.monotonic_ns())
    assert all(r["state"] == EvState.GOOD for r in rows_of(dp))
    back = [e.ev for e in agent.events.history if e.reason == "PROBE_OK"]
    assert sorted(back) == sorted(bad)


def test_agent_floor_restores_least_recently_failed(agent):
    dp = agent.dp
    send(dp, 1)
    s = dp.peer_set(pkt.NIC_B)
    for i in range(s.n - 10):  # all but 10 retired, slot i failing at time 1000 + i
        s.slots[i].state, s.slots[i].bad_ns = EvState.ASSUMED_BAD, 1000 + i
    dp.put_peer_set(pkt.NIC_B, s)
    agent._port_up = {0: False, 1: False}  # no replacement: only the floor acts
    agent.sweep(now=time.monotonic_ns())
    after = dp.peer_set(pkt.NIC_B)
    good = [i for i in range(after.n) if after.slots[i].state == EvState.GOOD]
    assert len(good) == agent.cfg.settings.min_active == 32
    assert sorted(good) == list(range(22)) + list(range(after.n - 10, after.n))
    assert sum(1 for e in agent.events.history if e.reason == "FLOOR") == 22


def deny_first_path(agent):
    """Every slot toward B on the first slot's path (plane and T1) made DENIED. Returns the
    peer, its state, and the EVs of that path in slot order."""
    dp = agent.dp
    send(dp, 1)
    peer = pkt.ip(pkt.NIC_B)
    st = agent.peers.setdefault(peer, agent._new_peer_state())
    rows = rows_of(dp)
    path = [i for i, r in enumerate(rows) if ev_unpack(r["ev"])[:2] == ev_unpack(rows[0]["ev"])[:2]]
    for i in path:
        dp.write_slot(pkt.NIC_B, i, state=EvState.DENIED)
    return peer, st, [rows[i]["ev"] for i in path]


def probe_once(agent, peer, st):
    """One probing pass toward ``peer`` whose probes count as sent (nothing leaves the host).
    Returns the time of the pass and the EVs probed."""
    sent, now = [], time.monotonic_ns()

    def fake_send(_peer, ev, target, t):
        target.last_probe_ns, target.outstanding = t, len(sent) + 1
        agent._outstanding[len(sent) + 1] = (_peer, ev, t)
        sent.append(ev)
        return True

    agent._send_probe = fake_send
    agent._probe_peer(peer, st, agent.dp.peer_set(pkt.NIC_B), now, [64])
    return now, sent


def probes_sent(agent, peer, st):
    """The EVs one probing pass toward ``peer`` sends probes on (nothing leaves the host)."""
    return probe_once(agent, peer, st)[1]


def test_probe_results_across_a_denied_link_are_published_per_path_and_on_change(agent):
    from mrckit.host.probing import PROBE_REPORT_NS
    from mrckit.host.state import ProbeTarget
    peer, st, evs = deny_first_path(agent)
    for ev in evs:
        st.probes[ev] = ProbeTarget()
    t0 = time.monotonic_ns()

    def results():
        return [(e.ev, e.probe_ok) for e in agent.events.history if e.reason == "PROBE_RESULT"]

    for k, ev in enumerate(evs):  # the same answer on every EV of the path: one event
        agent._probe_result(peer, ev, ok=True, now=t0 + k)
    assert results() == [(evs[0], True)]
    agent._probe_result(peer, evs[1], ok=False, now=t0 + 100)  # a change: at once
    agent._probe_result(peer, evs[2], ok=False, now=t0 + 200)
    agent._probe_result(peer, evs[3], ok=False, now=t0 + 100 + PROBE_REPORT_NS)  # the same, later
    assert results() == [(evs[0], True), (evs[1], False), (evs[3], False)]
    assert agent.counters["probe_results_held"] == len(evs) - 1 + 1


def test_probe_results_of_retired_paths_are_published_until_they_come_back(agent):
    """The controller confirms weak evidence by failing probes (docs/controller.md): a retired
    EV's results are published as PROBE_RESULT, per path and on change, until its successes
    bring it back (PROBE_OK, no result)."""
    from mrckit.host.state import ProbeTarget
    dp = agent.dp
    send(dp, 1)
    peer = pkt.ip(pkt.NIC_B)
    st = agent.peers.setdefault(peer, agent._new_peer_state())
    ev = rows_of(dp)[0]["ev"]
    st.retired[ev] = ProbeTarget()
    t0 = time.monotonic_ns()
    agent._probe_result(peer, ev, ok=False, now=t0)
    agent._probe_result(peer, ev, ok=False, now=t0 + 1)  # the same result: held
    for k in range(agent.cfg.settings.probe_successes):
        agent._probe_result(peer, ev, ok=True, now=t0 + 2 + k)
    got = [(e.reason, e.ev, e.probe_ok, e.new_state) for e in agent.events.history
           if e.reason in ("PROBE_RESULT", "PROBE_OK")]
    assert got == [("PROBE_RESULT", ev, False, EvState.ASSUMED_BAD), ("PROBE_RESULT", ev, True, EvState.ASSUMED_BAD),
                   ("PROBE_OK", ev, True, EvState.GOOD)]
    assert ev not in st.retired


def retire_paths(agent, per_path=3):
    """``per_path`` EVs of each of two paths toward B retired (out of the set, probed); the
    peer state and the two paths' EV lists."""
    from mrckit.host.state import ProbeTarget
    send(agent.dp, 1)  # the set toward B exists once a packet went there
    rows = rows_of(agent.dp)
    paths = list(dict.fromkeys(ev_unpack(r["ev"])[:2] for r in rows))  # (plane, T1), in order
    one, other = ([r["ev"] for r in rows if ev_unpack(r["ev"])[:2] == p][:per_path] for p in paths[:2])
    st = agent.peers.setdefault(pkt.ip(pkt.NIC_B), agent._new_peer_state())
    for ev in one + other:
        st.retired[ev] = ProbeTarget()
    return st, one, other


def test_a_retired_path_shares_one_probe_and_comes_back_whole(agent):
    """Path-aware retirement: one probe per interval answers for every retired EV of its path
    (they take the same links), and its successes bring them all back to the backups."""
    peer, now = pkt.ip(pkt.NIC_B), time.monotonic_ns()
    st, one, other = retire_paths(agent)
    probed = [ev for ev, _ in agent._one_per_path(peer, list(st.retired.items()), now)]
    assert probed == [one[0], other[0]]
    st.retired[one[0]].outstanding, st.retired[other[0]].last_probe_ns = 7, now
    assert agent._one_per_path(peer, list(st.retired.items()), now) == []  # one in flight, one probed just now
    for k in range(agent.cfg.settings.probe_successes):
        agent._probe_result(peer, one[0], ok=True, now=now + k)
    assert sorted(e.ev for e in agent.events.history if e.reason == "PROBE_OK") == sorted(one)
    assert sorted(st.retired) == sorted(other)
    assert all(ev in st.backups[ev_unpack(ev).plane] for ev in one)


def test_per_ev_retirement_probes_every_retired_ev(agent):
    import dataclasses
    agent.cfg = dataclasses.replace(agent.cfg, settings=dataclasses.replace(agent.cfg.settings, retirement="ev"))
    peer, now = pkt.ip(pkt.NIC_B), time.monotonic_ns()
    st, one, other = retire_paths(agent)
    assert [ev for ev, _ in agent._one_per_path(peer, list(st.retired.items()), now)] == one + other
    for k in range(agent.cfg.settings.probe_successes):
        agent._probe_result(peer, one[0], ok=True, now=now + k)
    assert sorted(st.retired) == sorted(one[1:] + other)


def test_a_path_retired_in_the_set_shares_one_probe(agent):
    """The set's EVs that one loss retired with their path (LOSS, PATH_LOSS) are probed once
    per interval between them: the answer brings them all back (the test above)."""
    dp = agent.dp
    pkt.configure_host_a(dp, path_retire=True)
    lose_one(dp, 5)
    peer = pkt.ip(pkt.NIC_B)
    st = agent.peers.setdefault(peer, agent._new_peer_state())
    sent = probes_sent(agent, peer, st)
    bad = [r["ev"] for r in rows_of(dp) if r["state"] == EvState.ASSUMED_BAD]
    assert len(bad) == 16 and len(sent) == 1 and sent[0] in bad


def test_a_denied_path_shares_one_probe(agent):
    """The controller reads probe results per path (PROBE_RESULT): one probe per interval
    across a denied path serves all of its EVs."""
    peer, st, evs = deny_first_path(agent)
    assert len(evs) > 1 and probes_sent(agent, peer, st) == [evs[0]]
    assert sorted(st.probes) == sorted(evs)  # all watched, one probed


def test_a_path_that_stays_down_is_swept_at_its_probe_expiry_not_every_probe_period(agent):
    peer, st, evs = deny_first_path(agent)
    sack_all_but(agent.dp, victim=None)  # no RTO verdict to come: only the probe schedule
    t, sent = probe_once(agent, peer, st)
    assert sent == [evs[0]]
    assert agent._next_sweep() * 1e9 >= t + agent._probe_expiry() - 1_000  # float seconds: 1 us of rounding


def test_an_answered_probe_brings_the_next_sweep_to_a_probe_period(looping):
    from mrckit.wire.constants import EpOp, EpStatus
    from mrckit.wire.headers import EpResponse
    agent = looping
    peer, st, evs = deny_first_path(agent)
    sack_all_but(agent.dp, victim=None)
    t, sent = probe_once(agent, peer, st)
    deadline = agent._next_sweep()
    answer = EpResponse(EpOp.EV_PROBE, EpStatus.OK, 1, sent[0], 0, 0)
    agent._receive = lambda limit=64: agent._on_response(peer, answer)
    sweeps = agent.counters["sweeps"]
    got = agent._turn({agent._udp.fileno()}, agent.dp.events_fd(), deadline)
    assert agent.counters["probes_ok"] == 1 and st.probes[sent[0]].outstanding is None
    # The next sweep comes a probe period on, not at the expiry; a slow machine may have
    # reached it inside this very turn.
    assert agent.counters["sweeps"] == sweeps + 1 or got <= time.monotonic() + agent._probe_period() < deadline


def test_a_denied_path_is_probed_once_per_report_period(agent):
    """The controller denied the link: the agent watches it at the pace it reports results
    (PROBE_REPORT_NS), not every probe interval."""
    from mrckit.host.probing import PROBE_REPORT_NS
    peer, st, evs = deny_first_path(agent)
    agent._denied_links = {min(ln for ln in agent._links_of(peer, evs[0]) if "/t0-0/t1-" in ln)}  # this path's alone
    sack_all_but(agent.dp, victim=None)
    t, sent = probe_once(agent, peer, st)
    assert sent == [evs[0]]
    agent._expire_probes(t + agent._probe_expiry() + 1)  # lost: the link is down
    assert not agent._outstanding and st.probes[evs[0]].outstanding is None
    assert agent._next_sweep() * 1e9 >= t + PROBE_REPORT_NS - 1_000  # float seconds: 1 us of rounding
    later = t + 10 * agent.cfg.settings.probe_interval_ns
    assert agent._one_per_path(peer, list(st.probes.items()), later) == []
