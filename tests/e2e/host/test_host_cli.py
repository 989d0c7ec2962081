"""`mrc host up/ev/deny/down` as real processes in namespaces, and the gRPC API against them."""

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
import yaml
from support import host_pkt as pkt
from support.host_pkt import Opcode
from support.hostpair import PORT_MTU, mac

from mrckit import netns
from mrckit.host.nicdev import create_nic_device, nic_mtu
from mrckit.host.probing import PROBE_REPORT_NS
from mrckit.proto import host_agent_pb2 as pb
from mrckit.proto import host_agent_pb2_grpc as pbg
from mrckit.wire.addressing import nic_address, port_address
from mrckit.wire.constants import QP_ENDPOINT_OPS

pytestmark = pytest.mark.root
MRC = [str(Path(sys.executable).parent / "mrc")]


def config(i: int, path: Path, mode: str = "srv6") -> Path:
    doc = {"host": {"name": f"mrct{os.getpid()}h{i}", "nic_address": str(nic_address(i, 0)), "leaf": i, "downlink": 0,
                    "nic_device": "nic0", "t1_per_plane": [4, 4], "mode": mode,
                    "ports": [{"plane": p, "ifname": f"plane{p}", "address": str(port_address(p, i, 0)),
                               "mac": mac(i, p), "neighbor_mac": mac(1 - i, p)} for p in (0, 1)]},
           "settings": {"probe_interval_ns": 5_000_000, "rto_ns": 1_000_000_000, "seed": 11}}
    path.write_text(yaml.safe_dump(doc))
    return path


def start(ns: str, cfg: Path, sock: str) -> subprocess.Popen:
    proc = subprocess.Popen(["nsenter", f"--net=/var/run/netns/{ns}", "--", *MRC, "host", "up",
                             str(cfg), "--listen", f"unix:{sock}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "serving on" in line:
            return proc
    raise AssertionError(f"mrc host up failed: {''.join(lines)} {proc.stderr.read()}")


@pytest.fixture
def agents(make_netns, tmp_path):
    yield from _agents(make_netns, tmp_path, "srv6")


@pytest.fixture
def ecmp_agents(make_netns, tmp_path):
    yield from _agents(make_netns, tmp_path, "ecmp")


def _agents(make_netns, tmp_path, mode: str):
    ns = [make_netns(), make_netns()]
    for p in (0, 1):
        netns.veth(ns[0], f"plane{p}", ns[1], f"plane{p}", mtu=PORT_MTU)
        for i in (0, 1):
            netns.run(["ip", "link", "set", f"plane{p}", "address", mac(i, p)], ns=ns[i])
    procs = []
    try:
        for i in (0, 1):
            create_nic_device("nic0", nic_address(i, 0), nic_mtu({'plane0': PORT_MTU}), ns=ns[i])
            procs.append(start(ns[i], config(i, tmp_path / f"h{i}.yaml", mode), str(tmp_path / f"h{i}.sock")))
        yield ns, procs, tmp_path
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(10)


def test_grpc_api_and_cli_against_running_agents(agents):
    ns, procs, tmp = agents
    a_sock, b_nic = f"unix:{tmp}/h0.sock", str(nic_address(1, 0))
    stub = pbg.HostAgentStub(grpc.insecure_channel(a_sock))
    events: queue.Queue = queue.Queue()
    stream = stub.WatchEvents(pb.WatchEventsRequest())
    threading.Thread(target=_pump, args=(stream, events), daemon=True).start()
    with netns.enter(ns[0]):
        tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        tx.bind((str(nic_address(0, 0)), 0))
    for _ in range(50):
        tx.sendto(bytes(100), (b_nic, 4791))
    time.sleep(0.2)
    stats = stub.GetStats(pb.GetStatsRequest(include_evs=True))
    assert stats.counters["dp_tx_encap"] == 50 and len(stats.peers) == 1
    assert len(stats.peers[0].evs) == 128 and {e.plane for e in stats.peers[0].evs} == {0, 1}

    # Deny a link: every EV toward b over plane 0's T1 2 now crosses a denied link.
    res = stub.SetEvState(pb.SetEvStateRequest(link="p0/t0-1/t1-2", denied=True))
    assert (res.evs_changed, res.link_changed) == (16, True)
    crossing = {e.ev for e in stats.peers[0].evs if e.plane == 0 and e.t1 == 2}
    before = {e.ev: e.tx_packets for e in stats.peers[0].evs}
    for _ in range(200):
        tx.sendto(bytes(100), (b_nic, 4791))
    time.sleep(0.1)
    after = stub.GetStats(pb.GetStatsRequest(include_evs=True)).peers[0].evs
    assert all(e.tx_packets == before[e.ev] for e in after if e.ev in crossing)
    # The agent probes the EVs crossing it and reports its path's results as events: the first
    # at once, then one per path per PROBE_REPORT_NS while they say the same.
    seen = _collect(events, lambda got: sum(e.reason == "PROBE_RESULT" for e in got) >= 2, timeout=10)
    results = [e for e in seen if e.reason == "PROBE_RESULT"]
    assert all(e.probe_ok and e.ev in crossing and e.link == "p0/t0-1/t1-2" for e in results)
    assert results[1].timestamp_ns - results[0].timestamp_ns >= PROBE_REPORT_NS
    assert any(e.reason == "LINK_DENIED" and e.link == "p0/t0-1/t1-2" for e in seen)

    # Deny one EV by value for every peer; the CLI table shows it.
    victim = next(e.ev for e in after if e.plane == 1)
    res = stub.SetEvState(pb.SetEvStateRequest(ev=pb.EvTarget(ev=victim), denied=True))
    assert res.evs_changed == 1
    out = subprocess.run([*MRC, "host", "ev", a_sock, "--state", "DENIED"], capture_output=True, text=True)
    assert out.returncode == 0 and f"0x{victim:08x}" in out.stdout
    seen = _collect(events, lambda got: any(e.reason == "API_DENY" and e.ev == victim for e in got))
    assert any(e.reason == "API_DENY" and e.timestamp_ns > 0 and e.wall_time_ns > 0 for e in seen)
    with pytest.raises(grpc.RpcError) as err:
        stub.SetEvState(pb.SetEvStateRequest(link="p0/t9/x", denied=True))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "link name" in err.value.details()
    tx.close()

    # SIGTERM: the agent detaches everything it attached.
    procs[0].send_signal(signal.SIGTERM)
    assert procs[0].wait(10) == 0
    links = netns.run(["ip", "link"], ns=ns[0]).stdout.decode()
    assert "xdp" not in links
    assert netns.run(["tc", "filter", "show", "dev", "nic0", "egress"], ns=ns[0]).stdout.strip() == b""

    # `mrc host down CONFIG` stops the other agent through its pid file and detaches.
    out = subprocess.run([*MRC, "host", "down", str(tmp / "h1.yaml")], capture_output=True, text=True)
    assert out.returncode == 0 and f"stopped agent pid {procs[1].pid}" in out.stdout, out
    assert procs[1].wait(10) == 0
    assert "xdp" not in netns.run(["ip", "link"], ns=ns[1]).stdout.decode()


def test_cli_in_ecmp_mode_shows_planes_and_says_denials_are_not_applied(ecmp_agents):
    ns, procs, tmp = ecmp_agents
    a_sock, b_nic = f"unix:{tmp}/h0.sock", str(nic_address(1, 0))
    with netns.enter(ns[0]):
        tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        tx.bind((str(nic_address(0, 0)), 0))
    with tx:
        for _ in range(64):
            tx.sendto(bytes(100), (b_nic, 4791))
    stub = pbg.HostAgentStub(grpc.insecure_channel(a_sock))
    assert _wait(lambda: stub.GetStats(pb.GetStatsRequest()).counters["dp_tx_plain"] == 64)
    out = subprocess.run([*MRC, "host", "deny", a_sock, "--link", "p0/t0-1/t1-2"], capture_output=True, text=True)
    assert out.returncode == 0 and "0 EVs affected, denied-links map changed" in out.stdout
    assert "note: ecmp mode: EVs are opaque" in out.stdout
    out = subprocess.run([*MRC, "host", "planes", a_sock], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "ecmp mode" in out.stdout and "links denied: p0/t0-1/t1-2 (recorded, not applied" in out.stdout
    # Data rows (rich draws the header with heavy bars): peer, plane, port, EVs, ..., tx pkts.
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in out.stdout.splitlines()
             if line.count("│") > 10]
    totals = [c for c in cells if c[0] == "(all)"]
    assert [(c[1], c[2], c[3]) for c in totals] == [("0", "up", "64"), ("1", "up", "64")]
    assert sum(int(c[9]) for c in totals) == 64
    assert [(c[0], c[9]) for c in cells if c[0] == b_nic] == [(b_nic, c[9]) for c in totals]
    # The receiver counts QP 0x2 packets (probes), not data, by the path they came on: plane,
    # T1 ("-": opaque), sender.
    b_stub = pbg.HostAgentStub(grpc.insecure_channel(f"unix:{tmp}/h1.sock"))
    assert not b_stub.GetStats(pb.GetStatsRequest()).rx_paths
    with netns.enter(ns[0]):
        tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        tx.bind((str(nic_address(0, 0)), 0))
    with tx:
        for _ in range(64):
            tx.sendto(pkt.bth(Opcode.EP_REQ, dqpn=QP_ENDPOINT_OPS) + bytes(16), (b_nic, 4791))
    assert _wait(lambda: sum(r.packets for r in b_stub.GetStats(pb.GetStatsRequest()).rx_paths) == 64)
    out = subprocess.run([*MRC, "host", "planes", f"unix:{tmp}/h1.sock"], capture_output=True, text=True)
    assert out.returncode == 0 and "arrivals" in out.stdout, out.stderr
    a_nic = str(nic_address(0, 0))
    arrivals = [[c.strip() for c in line.split("│")[1:-1]] for line in out.stdout.splitlines() if a_nic in line]
    assert {(r[0], r[1]) for r in arrivals} == {("0", "-"), ("1", "-")}
    assert sum(int(r[3]) for r in arrivals) == 64
    out = subprocess.run([*MRC, "host", "ev", a_sock], capture_output=True, text=True)
    assert out.returncode == 0 and "(ecmp mode)" in out.stdout and b_nic in out.stdout
    # EVs are opaque in ecmp mode: the T1 column (peer, slot, EV, plane, T1, ...) names no spine.
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.stdout.splitlines()
            if line.count("│") > 10 and b_nic in line]
    assert rows and {r[4] for r in rows} == {"-"}


def test_host_names_resolve_in_the_fabric_chosen(ecmp_agents, tmp_path, monkeypatch):
    """Two running fabrics configure a host of the same name (here: the two agents): the name
    alone is refused, --fabric picks the agent and the output names the fabric. Each fabric's
    controller serves only its northbound (its loops would configure the agents)."""
    import asyncio

    from click.testing import CliRunner

    from mrckit.cli import main
    from mrckit.control import Controller, HostTarget, load_pipeline, northbound
    from mrckit.control import client as controller_client
    from mrckit.topology import generate_clos

    ns, procs, tmp = ecmp_agents
    run_dir = tmp_path / "run"
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    servers = []
    try:
        for fab, i in (("fab-a", 0), ("fab-b", 1)):
            ctl = Controller(generate_clos(), [], [HostTarget("h0-0", f"unix:{tmp}/h{i}.sock")], load_pipeline(),
                             name=fab, run_dir=run_dir)
            servers.append(asyncio.run_coroutine_threadsafe(northbound.serve(ctl, ctl.address), loop).result(30))
        monkeypatch.setattr(controller_client, "RUN_DIR", run_dir)
        out = CliRunner().invoke(main, ["host", "ev", "h0-0"])
        assert out.exit_code == 2 and "host 'h0-0' is in 2 running fabrics: fab-a, fab-b" in out.output
        for fab in ("fab-a", "fab-b"):
            out = CliRunner().invoke(main, ["host", "planes", "h0-0", "--fabric", fab])
            assert out.exit_code == 0, out.output
            assert f"planes of h0-0 (fabric {fab}, ecmp mode)" in out.stdout
            out = CliRunner().invoke(main, ["host", "ev", "h0-0", "--fabric", fab])
            assert out.exit_code == 0 and f"fabric {fab}, ecmp mode" in out.stdout, out.output
    finally:
        for server, address in servers:
            asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


def _wait(cond, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end and not cond():
        time.sleep(0.02)
    return cond()


def _pump(stream, q: queue.Queue) -> None:
    try:
        for event in stream:
            q.put(event)
    except grpc.RpcError:
        pass  # the agent went away at the end of the test


def _collect(q: queue.Queue, done, timeout: float = 5.0):
    got, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            got.append(q.get(timeout=0.1))
        except queue.Empty:
            pass
        if done(got):
            return got
    raise AssertionError(f"condition not met; {len(got)} events: {sorted({e.reason for e in got})}")


def test_bad_config_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("host: {name: h, nic_address: 2001:db8:100::1, leaf: 3, downlink: 0, nic_device: nic0,"
                   " t1_per_plane: [2], ports: [{plane: 0, ifname: p0, address: '2001:db8:200::1',"
                   " mac: '02:00:00:00:00:01', neighbor_mac: '02:00:00:00:00:02'}]}\n")
    out = subprocess.run([*MRC, "host", "up", str(bad)], capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "leaf 0 downlink 0, but the config says 3/0" in out.stderr


def test_create_nic_takes_the_smallest_plane_port_mtu_minus_the_outer_header(make_netns, tmp_path):
    """Every packet must fit whichever plane tc egress picks, so the NIC device gets the
    smallest plane-port MTU minus ENCAP_LEN (40), not the largest."""
    ns = [make_netns(), make_netns()]
    for p, mtu in ((0, PORT_MTU), (1, PORT_MTU - 1000)):
        netns.veth(ns[0], f"plane{p}", ns[1], f"plane{p}", mtu=mtu)
        for i in (0, 1):
            netns.run(["ip", "link", "set", f"plane{p}", "address", mac(i, p)], ns=ns[i])
    sock = str(tmp_path / "h0.sock")
    proc = subprocess.Popen(["nsenter", f"--net=/var/run/netns/{ns[0]}", "--", *MRC, "host", "up",
                             str(config(0, tmp_path / "h0.yaml")), "--listen", f"unix:{sock}", "--create-nic"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = ""
        for line in proc.stdout:
            out += line
            if "serving on" in line:
                break
        assert "serving on" in out, proc.stderr.read()
        shown = netns.run(["ip", "-o", "link", "show", "nic0"], ns=ns[0]).stdout.decode()
        assert f" mtu {PORT_MTU - 1000 - 40} " in shown
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


def test_create_nic_refuses_a_port_mtu_that_leaves_less_than_ipv6s_minimum(make_netns, tmp_path):
    ns = [make_netns(), make_netns()]
    for p, mtu in ((0, PORT_MTU), (1, 1300)):
        netns.veth(ns[0], f"plane{p}", ns[1], f"plane{p}", mtu=mtu)
    proc = subprocess.run(["nsenter", f"--net=/var/run/netns/{ns[0]}", "--", *MRC, "host", "up",
                           str(config(0, tmp_path / "h0.yaml")), "--listen", f"unix:{tmp_path}/h0.sock",
                           "--create-nic"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "plane port plane1 has MTU 1300" in proc.stderr and "1320" in proc.stderr
    assert "nic0" not in netns.run(["ip", "-o", "link", "show"], ns=ns[0]).stdout.decode()
