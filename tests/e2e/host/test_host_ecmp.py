"""EV-hash (ecmp) mode on real veth, sockets and XDP: two hosts whose plane ports are
wired to each other, agents in ecmp mode, an RDMA write from the endpoint, probes, denials."""

import hashlib
import os
import struct
import subprocess
from pathlib import Path

import grpc
import pytest
from support.host_fabric import clos
from support.host_helpers import udp_socket, wait_for
from support.hostpair import host_pair

from mrckit import netns
from mrckit.endpoint import Endpoint, QpConfig
from mrckit.host.agent import DENIALS_NOT_APPLIED
from mrckit.host.config import Settings
from mrckit.host.maps import Reason
from mrckit.host.service import serve
from mrckit.proto import host_agent_pb2 as pb
from mrckit.proto import host_agent_pb2_grpc as pbg
from mrckit.wire.constants import EvState, Opcode

pytestmark = pytest.mark.root
SIZE = 8 << 20


def test_rdma_write_between_ecmp_hosts_is_plain_on_the_wire_and_verifies(make_netns, tmp_path):
    with host_pair(make_netns, mode="ecmp") as (a, b):
        with netns.enter(a.ns):
            ep_a = Endpoint(a.nic)
        with netns.enter(b.ns):
            ep_b = Endpoint(b.nic)
        cap = _capture(a.ns, "plane0", tmp_path / "plane0.pcap", 400)
        try:
            mr = ep_b.register_mr(SIZE, rkey=0x1000)
            ep_b.create_qp(a.nic, qpn=0x200, remote_qpn=0x100, config=QpConfig())
            qp = ep_a.create_qp(b.nic, qpn=0x100, remote_qpn=0x200, config=QpConfig())
            data = os.urandom(SIZE)
            ep_a.write(qp, data, 0, 0x1000, imm=0x5EC).wait(120)
            assert hashlib.sha256(mr.buf).digest() == hashlib.sha256(data).digest()
            recv = ep_b.poll_recv(10)
            assert recv is not None and recv.imm == 0x5EC
            cap.wait(30)
        finally:
            ep_a.close(), ep_b.close()
            if cap.poll() is None:
                cap.terminate(), cap.wait(10)
        sa, sb = a.agent.stats(), b.agent.stats()
        # No outer header anywhere: sent as is, received as is.
        assert sa["dp_tx_plain"] >= SIZE // 2048 and sa["dp_tx_encap"] == 0
        assert sb["dp_rx_plain"] >= SIZE // 2048 and sb["dp_rx_decap"] == 0
        # The SACKs came back as plain packets and acked A's EVs in the dataplane.
        assert sa["dp_rx_plain"] > 0 and sa["dp_fb_sack"] > 0 and sa["dp_fb_unknown_peer"] == 0
        rows = a.agent.ev_table(b.nic)
        per_plane = {p: sum(r["tx_packets"] for r in rows if r["plane"] == p) for p in (0, 1)}
        assert min(per_plane.values()) > SIZE // 2048 // 4, per_plane
        assert sum(r["acked"] for r in rows) > 0
        assert {r["path"] for r in rows} == {b.nic}  # opaque: the DA is all a host knows
        # On the wire: Ethernet | IPv6 (next header 17) | UDP, the EV in flow label and sport.
        # (EVs that lost a packet were retired and replaced by backups during the write)
        evs = set(a.agent.template.active).union(*a.agent.template.backups.values())
        frames = [f for f in _pcap_frames(tmp_path / "plane0.pcap") if f[12:14] == b"\x86\xdd"]
        data_frames = [f for f in frames if f[20] == 17 and len(f) > 70
                       and Opcode.WRITE_FIRST <= f[62] <= Opcode.WRITE_ONLY_IMM]
        assert len(data_frames) > 100 and not [f for f in frames if f[20] == 41]
        wire_evs = {(int.from_bytes(f[54:56], "big") << 16) | int.from_bytes(f[16:18], "big") for f in data_frames}
        assert wire_evs <= evs and len(wire_evs) > 20
        assert {f[6:12] for f in data_frames} == {bytes.fromhex(a.cfg.ports[0].mac.replace(":", ""))}
        assert {f[0:6] for f in data_frames} == {bytes.fromhex(a.cfg.ports[0].neighbor_mac.replace(":", ""))}


def test_rdma_write_across_an_ecmp_clos_of_ebpf_switches(make_netns):
    """Two planes of eBPF switches with ipv6_fib routes and ecmp_selector groups (compiled in
    EV-hash mode): the switches hash the hosts' EVs over both spines of each plane."""
    with clos(make_netns, Settings(rto_ns=100_000_000, probe_interval_ns=5_000_000, seed=7),
              mode="ecmp") as fab:
        a, b = "h0-0", "h1-0"
        assert {cfg.mode for cfg in fab.configs.values()} == {"ecmp"}
        with netns.enter(fab.ns[a]):
            ep_a = Endpoint(fab.nic(a))
        with netns.enter(fab.ns[b]):
            ep_b = Endpoint(fab.nic(b))
        try:
            mr = ep_b.register_mr(SIZE, rkey=0x1000)
            ep_b.create_qp(fab.nic(a), qpn=0x200, remote_qpn=0x100, config=QpConfig())
            qp = ep_a.create_qp(fab.nic(b), qpn=0x100, remote_qpn=0x200, config=QpConfig())
            data = os.urandom(SIZE)
            ep_a.write(qp, data, 0, 0x1000).wait(120)
            assert hashlib.sha256(mr.buf).digest() == hashlib.sha256(data).digest()
        finally:
            ep_a.close(), ep_b.close()
        packets = SIZE // 2048
        for plane in (0, 1):
            for spine in (0, 1):  # every spine of every plane carried a share of the write
                from_leaf0 = fab.port_packets(f"p{plane}-t1-{spine}", "rx_port")[0]
                assert from_leaf0 > packets // 16, (plane, spine, from_leaf0)
        sa, sb = fab.agents[a].stats(), fab.agents[b].stats()
        assert sa["dp_tx_plain"] >= packets and sa["dp_tx_encap"] == 0 and sa["dp_fb_sack"] > 0
        assert sb["dp_rx_plain"] >= packets and sb["dp_rx_decap"] == 0


def test_ecmp_agent_probes_opaque_evs_back_and_records_denials(make_netns, tmp_path):
    with host_pair(make_netns, mode="ecmp") as (a, b):
        server = serve(a.agent, f"unix:{tmp_path}/a.sock")
        stub = pbg.HostAgentStub(grpc.insecure_channel(f"unix:{tmp_path}/a.sock"))
        tx = udp_socket(a.ns, a.nic, 0)
        tx_b = udp_socket(b.ns, b.nic, 0)
        try:
            tx.sendto(bytes.fromhex("d100ffff00000011") + bytes(60), (b.nic, 4791))  # A meets B
            assert wait_for(lambda: a.agent.ev_table(b.nic))
            victim = a.agent.ev_table(b.nic)[5]
            q = a.agent.events.subscribe()
            with a.agent._lock:
                a.agent.dp.write_slot(b.nic, 5, state=EvState.ASSUMED_BAD)
            a.agent.wake()  # a write behind the agent's back: it may be idle
            events = []
            assert wait_for(lambda: _drain(q, events) and any(e.reason == "PROBE_OK" for e in events), 10)
            replaced = next(e for e in events if e.reason == Reason.REPLACED.name)
            assert replaced.ev == victim["ev"] and replaced.replaced_by >> 28 == victim["plane"]
            ok = next(e for e in events if e.reason == "PROBE_OK")
            assert (ok.ev, ok.new_state, ok.opaque) == (victim["ev"], EvState.GOOD, True)
            assert a.agent.stats()["agent_probes_ok"] >= 3 and b.agent.stats()["agent_probes_answered"] >= 3
            # A failure report carries the EV's counters and its plane's state, no link: B
            # echoes one of A's EVs in a SACK with ALWAYS_SKIP, a plain packet through B's
            # tc egress and A's XDP ingress.
            target = a.agent.ev_table(b.nic)[7]
            tx_b.sendto(_sack(target["ev"], m=2), (a.nic, 4791))
            assert wait_for(lambda: _drain(q, events) and any(
                e.ev == target["ev"] and e.reason == "SACK_ALWAYS_SKIP" for e in events), 5)
            bad = next(e for e in events if e.ev == target["ev"] and e.reason == "SACK_ALWAYS_SKIP")
            assert (bad.old_state, bad.new_state, bad.opaque, bad.link) == (EvState.GOOD, EvState.ASSUMED_BAD, True, "")
            assert bad.ev_counters["tx_packets"] == target["tx_packets"]
            assert bad.plane_stats["plane"] == target["plane"] and bad.plane_stats["assumed_bad"] >= 1
            assert bad.plane_stats["evs"] == 64 and bad.plane_stats["peer"] == b.nic
            # Link denials: accepted and recorded, applied to no EV (once the sweep replaced
            # the EV above, the slots hold still: no traffic now).
            assert wait_for(lambda: target["ev"] not in {ev for _, ev in _slots(a, b)}, 5)
            before = _slots(a, b)
            resp = stub.SetEvState(pb.SetEvStateRequest(link="p0/t0-1/t1-0", denied=True))
            assert (resp.evs_changed, resp.link_changed, resp.not_applied) == (0, True, DENIALS_NOT_APPLIED)
            a.agent.sweep()
            assert _slots(a, b) == before and set(before.values()) == {"GOOD"}
            assert list(a.agent.dp.denied.keys()) == [] and a.agent.dp.config.lookup(0).n_denied == 0
            stats = stub.GetStats(pb.GetStatsRequest())
            assert (stats.mode, list(stats.denied_links), stats.denials_applied) == ("ecmp", ["p0/t0-1/t1-0"], False)
            totals = {p.plane: p for p in stats.planes if not p.peer}
            assert sorted(totals) == [0, 1] and all(p.port_up and p.evs == 64 for p in totals.values())
            # the first packet's EV may be one the sweep replaced since: one more, on a current EV
            tx.sendto(bytes.fromhex("d100ffff00000011") + bytes(60), (b.nic, 4791))
            assert wait_for(lambda: sum(p.tx_packets for p in stub.GetStats(pb.GetStatsRequest()).planes
                                        if p.peer == b.nic) >= 1, 5)
        finally:
            tx.close(), tx_b.close()
            server.stop(0)


def _sack(ev: int, m: int) -> bytes:
    """BTH (SACK to QP 0x100) | SETH echoing ``ev`` with multipath state ``m`` | CC_STATE."""
    bth = struct.pack(">BBHII", Opcode.SACK, 0, 0xFFFF, 0x100, 1)
    seth = struct.pack(">HhIHHIBBhQ", m << 5, 0, ev, 1, 2, 1, 0, 4, 0, 0)
    return bth + seth + bytes(8)


def _slots(a, b) -> dict[int, str]:
    """A's EV slots toward B: (slot, EV) -> state."""
    return {(r["slot"], r["ev"]): r["state"] for r in a.agent.ev_table(b.nic) if not r["retired"]}


def _drain(q, out):
    while not q.empty():
        out.append(q.get())
    return True


def _capture(ns: str, ifname: str, path, count: int) -> subprocess.Popen:
    proc = subprocess.Popen(["nsenter", f"--net=/var/run/netns/{ns}", "--", "tcpdump", "-i", ifname,
                             "-s", "128", "-U", "-c", str(count), "-w", str(path), "ip6"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    proc.stderr.readline()  # "listening on ...": the capture is running
    return proc


def _pcap_frames(path):
    raw = Path(path).read_bytes()
    endian = "<" if raw[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    pos = 24
    while pos + 16 <= len(raw):
        incl = struct.unpack_from(endian + "I", raw, pos + 8)[0]
        yield raw[pos + 16:pos + 16 + incl]
        pos += 16 + incl
