"""An idle agent costs nothing (docs/host.md "An idle agent"): with no traffic and no
EV to probe it runs no sweep; a send wakes it through the dataplane's ring, it sweeps while the
send is unacked and goes idle again; a denied EV keeps it probing until the denial is lifted."""

import time

from support import host_pkt as pkt
from support.host_helpers import udp_socket, wait_for
from support.hostpair import host_pair

from mrckit.host.config import Settings

RTO_NS = 20_000_000
QUIET_S = 1.0


def _sweeps(agent) -> int:
    return agent.stats()["agent_sweeps"]


def _idle(agent) -> bool:
    """The agent is blocked: no sweep over a quiet period of many sweep periods."""
    before = _sweeps(agent)
    time.sleep(QUIET_S)
    return _sweeps(agent) == before


def test_idle_agent_runs_no_sweep_and_a_send_wakes_it(make_netns):
    settings = Settings(rto_ns=RTO_NS, probe_interval_ns=5_000_000, seed=3)
    with host_pair(make_netns, settings=settings) as (a, b):
        assert wait_for(lambda: _idle(a.agent), 20)
        sleeps, sweeps = a.agent.stats()["agent_idle_sleeps"], _sweeps(a.agent)
        tx = udp_socket(a.ns, a.nic, 0)
        try:
            tx.sendto(pkt.write_payload(), (b.nic, 4791))  # no SACK comes back: unacked for an RTO
            assert wait_for(lambda: a.agent.stats()["agent_idle_sleeps"] > sleeps, 20)
            stats = a.agent.stats()
            assert stats["agent_dataplane_wakes"] >= 1 and stats["agent_sweeps"] > sweeps
            assert _idle(a.agent)
        finally:
            tx.close()


def test_a_denied_ev_is_probed_until_the_denial_is_lifted(make_netns):
    settings = Settings(rto_ns=RTO_NS, probe_interval_ns=5_000_000, seed=3)
    with host_pair(make_netns, settings=settings) as (a, b):
        tx = udp_socket(a.ns, a.nic, 0)
        try:
            tx.sendto(bytes(64), (b.nic, 4791))  # A meets B
            assert wait_for(lambda: a.agent.ev_table(b.nic))
            assert wait_for(lambda: _idle(a.agent), 20)
            ev = a.agent.ev_table(b.nic)[3]["ev"]
            a.agent.set_ev_denied(b.nic, ev, True)
            probes = a.agent.stats().get("agent_probes_sent", 0)
            assert wait_for(lambda: a.agent.stats().get("agent_probes_sent", 0) >= probes + 3, 20)
            assert not _idle(a.agent)
            a.agent.set_ev_denied(b.nic, ev, False)
            assert wait_for(lambda: _idle(a.agent), 20)
        finally:
            tx.close()
