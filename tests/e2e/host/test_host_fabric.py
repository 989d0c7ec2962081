"""The host dataplane and agents on a 2-plane, 2-spine Clos of eBPF switches (design 5)."""

import pytest
from support import drops
from support.host_fabric import clos
from support.host_helpers import udp_socket, wait_for

from mrckit.host.config import Settings

pytestmark = pytest.mark.root
WINDOW = 50  # datagrams in flight at once


def test_socket_traffic_crosses_every_plane_and_spine_intact(make_netns):
    with clos(make_netns, Settings(rto_ns=200_000_000, seed=5)) as fab:
        a, b = "h0-0", "h1-0"
        rx = udp_socket(fab.ns[b], fab.nic(b), 4791)
        tx = udp_socket(fab.ns[a], fab.nic(a), 0)
        # A BTH-shaped start (ACK to QP 0x11), so no payload looks like QP 0x2 traffic.
        payloads = [bytes.fromhex("d100ffff00000011") + i.to_bytes(4, "big") * (30 + i % 400)
                     for i in range(1000)]
        # In windows well inside a veth's 256-frame XDP ring: with no transport to retransmit,
        # a burst that overflows a ring on a busy machine (a real drop) would fail the test.
        # A lost datagram fails it with the drop and error counters that moved.
        before, got = drops.snapshot(fab.ns), []
        for w in range(0, len(payloads), WINDOW):
            for p in payloads[w:w + WINDOW]:
                tx.sendto(p, (fab.nic(b), 4791))
            try:
                got += [rx.recvfrom(4096)[0] for _ in payloads[w:w + WINDOW]]
            except TimeoutError:
                pytest.fail(f"a datagram of {w}..{w + WINDOW - 1} was lost; counters that grew: "
                            f"{drops.grown(before, drops.snapshot(fab.ns))}")
        got.sort()
        assert got == sorted(payloads)
        for plane in (0, 1):
            for spine in (0, 1):
                rx_ports = fab.port_packets(f"p{plane}-t1-{spine}", "rx_port")
                assert rx_ports[0] > 100, (plane, spine, rx_ports)  # from leaf 0
            assert fab.port_packets(f"p{plane}-t0-1")[0] > 200  # to host b on this plane
        tx.close(), rx.close()


def test_host_port_failure_moves_peers_off_the_plane_before_their_timeouts(make_netns):
    settings = Settings(rto_ns=30_000_000_000, probe_interval_ns=5_000_000, seed=6)
    with clos(make_netns, settings) as fab:
        a, b = "h0-0", "h1-0"
        rx_a = udp_socket(fab.ns[a], fab.nic(a), 4791)
        tx_b = udp_socket(fab.ns[b], fab.nic(b), 0)
        # a must know b as a live peer (as it would from its SACKs): send b one packet.
        rx_a.sendto(bytes(100), (fab.nic(b), 4791))
        for _ in range(300):
            tx_b.sendto(bytes(200), (fab.nic(a), 4791))
        for _ in range(300):
            rx_a.recvfrom(4096)
        q = fab.agents[b].events.subscribe()
        fab.set_link(a, "plane1", up=False)
        assert wait_for(lambda: fab.agents[b].stats().get("agent_port_status_received", 0) >= 1)
        table = fab.agents[b].ev_table(fab.nic(a))
        assert {r["state"] for r in table if r["plane"] == 1} == {"ASSUMED_BAD"}
        assert {r["state"] for r in table if r["plane"] == 0} == {"GOOD"}
        events = []
        while not q.empty():
            events.append(q.get())
        reasons = {e.reason for e in events if e.plane == 1}
        assert reasons == {"PEER_PORT_DOWN"}  # no RTO_TIMEOUT: the update came first
        before = {r["ev"]: r["tx_packets"] for r in table}
        for _ in range(300):
            tx_b.sendto(bytes(200), (fab.nic(a), 4791))
        for _ in range(300):
            rx_a.recvfrom(4096)
        after = fab.agents[b].ev_table(fab.nic(a))
        sent = {p: sum(r["tx_packets"] - before[r["ev"]] for r in after if r["plane"] == p) for p in (0, 1)}
        assert sent == {0: 300, 1: 0}
        # Port back up: probes over plane 1 restore the EVs at b.
        fab.set_link(a, "plane1", up=True)
        assert wait_for(lambda: {r["state"] for r in fab.agents[b].ev_table(fab.nic(a))} == {"GOOD"},
                        timeout=10)
        tx_b.close(), rx_a.close()
