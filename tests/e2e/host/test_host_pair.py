"""Two hosts wired port to port: the dataplane and the agent over real veth, sockets and XDP."""

from support.host_helpers import udp_socket, wait_for
from support.hostpair import PORT_MTU, host_pair

from mrckit import netns
from mrckit.host.maps import Reason
from mrckit.wire.constants import EvState


def test_ordinary_socket_traffic_arrives_intact_over_both_planes(make_netns):
    with host_pair(make_netns) as (a, b):
        rx = udp_socket(b.ns, b.nic, 4791)
        tx = udp_socket(a.ns, a.nic, 0)
        payloads = [bytes([i]) * (100 + 10 * i) for i in range(200)]
        for p in payloads:
            tx.sendto(p, (b.nic, 4791))
        got = [rx.recvfrom(4096) for _ in payloads]
        assert sorted(d for d, _ in got) == sorted(payloads)
        assert {addr[0] for _, addr in got} == {a.nic}
        rows = a.agent.ev_table(b.nic)
        per_plane = {p: sum(r["tx_packets"] for r in rows if r["plane"] == p) for p in (0, 1)}
        assert per_plane[0] > 50 and per_plane[1] > 50 and sum(per_plane.values()) == 200
        assert b.agent.stats()["dp_rx_decap"] == 200
        tx.close(), rx.close()


def test_probe_restores_an_assumed_bad_ev_after_replacing_it(make_netns):
    with host_pair(make_netns) as (a, b):
        tx = udp_socket(a.ns, a.nic, 0)
        tx.sendto(bytes(64), (b.nic, 4791))  # creates A's EV set for B
        assert wait_for(lambda: a.agent.ev_table(b.nic))
        victim = a.agent.ev_table(b.nic)[5]
        q = a.agent.events.subscribe()
        with a.agent._lock:
            a.agent.dp.write_slot(b.nic, 5, state=EvState.ASSUMED_BAD)
        a.agent.wake()  # a write behind the agent's back: it may be idle
        events = []
        assert wait_for(lambda: _drain(q, events) and any(e.reason == "PROBE_OK" for e in events))
        replaced = next(e for e in events if e.reason == Reason.REPLACED.name)
        assert replaced.ev == victim["ev"] and replaced.replaced_by >> 28 == victim["plane"]
        ok = next(e for e in events if e.reason == "PROBE_OK")
        assert (ok.ev, ok.old_state, ok.new_state) == (victim["ev"], EvState.ASSUMED_BAD, EvState.GOOD)
        stats = a.agent.stats()
        assert stats["agent_probes_ok"] >= 3 and b.agent.stats()["agent_probes_answered"] >= 3
        assert a.agent.ev_table(b.nic)[5]["ev"] == replaced.replaced_by
        tx.close()


def _drain(q, out):
    while not q.empty():
        out.append(q.get())
    return True


def test_a_frame_too_large_for_the_plane_port_is_dropped_and_counted_at_tc_egress(make_netns):
    """nic0's MTU raised to the plane ports' own (40 bytes too much): a datagram that fits nic0
    but not the port once encapsulated is dropped by tc egress (TX_DROP_OVERSIZE) rather than
    counted sent and lost in the veth; one that fits after the outer header arrives."""
    with host_pair(make_netns) as (a, b):
        netns.run(["ip", "link", "set", "nic0", "mtu", str(PORT_MTU)], ns=a.ns)
        rx = udp_socket(b.ns, b.nic, 4791)
        tx = udp_socket(a.ns, a.nic, 0)
        fits = bytes(PORT_MTU - 40 - 48)          # IPv6 + UDP + payload = port MTU - 40
        too_big = bytes(PORT_MTU - 40 - 48 + 1)   # one byte more: 1 byte over once encapsulated
        tx.sendto(too_big, (b.nic, 4791))
        tx.sendto(fits, (b.nic, 4791))
        data, _ = rx.recvfrom(65536)
        assert data == fits
        st = a.agent.stats()
        assert (st["dp_tx_drop_oversize"], st["dp_tx_encap"]) == (1, 1)
        assert sum(r["tx_packets"] for r in a.agent.ev_table(b.nic)) == 1
        tx.close(), rx.close()


def test_the_agents_socket_holds_a_burst_of_probes_while_the_agent_is_descheduled(make_netns):
    """Every peer's probes and answers arrive on the agent's socket; with the kernel's default
    receive buffer a burst overflowed it while a busy machine held the agent off the CPU."""
    from mrckit.host.agent import AGENT_SOCKET_BUFFER_BYTES

    with host_pair(make_netns) as (a, _):
        out = netns.run(["ss", "-uamnH", "sport", "=", ":4792"], ns=a.ns).stdout.decode()
        rb = int(out.split("rb")[1].split(",")[0])
        assert rb >= AGENT_SOCKET_BUFFER_BYTES  # the kernel doubles it for its bookkeeping
