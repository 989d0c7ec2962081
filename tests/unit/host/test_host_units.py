"""The host agent's pure parts: EV templates, config validation and mapping, EP packets."""

import ipaddress

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrckit.errors import MrcError
from mrckit.host import probe as P
from mrckit.host.config import AgentConfig, Port, Settings, from_proto, from_topology, to_proto
from mrckit.host.evset import build_template
from mrckit.topology import compile_fabric, generate_clos
from mrckit.wire.addressing import nic_address, path_da, port_address
from mrckit.wire.constants import Dscp, Ecn, EpOp
from mrckit.wire.ev import ev_pack, ev_unpack
from mrckit.wire.headers import ep_request
from mrckit.wire.icrc import icrc_check
from mrckit.wire.layers import MrcBTH
from mrckit.wire.packet import mrc_frame


def test_template_is_equal_per_plane_and_spreads_over_t1():
    t = build_template({0: 4, 1: 3}, count=128, backups_per_plane=9, seed=1)
    assert len(t.active) == len(set(t.active) | set()) == 128
    fields = [ev_unpack(ev) for ev in t.active]
    assert [f.plane for f in fields] == [0] * 64 + [1] * 64
    per_t1 = {(f.plane, f.t1): 0 for f in fields}
    for f in fields:
        per_t1[f.plane, f.t1] += 1
    assert per_t1 == {(0, 0): 16, (0, 1): 16, (0, 2): 16, (0, 3): 16, (1, 0): 22, (1, 1): 21, (1, 2): 21}
    assert {p: len(v) for p, v in t.backups.items()} == {0: 9, 1: 9}
    every = t.active + t.backups[0] + t.backups[1]
    assert len(set(every)) == len(every) and all(ev_unpack(ev).plane == 1 for ev in t.backups[1])


def test_template_t1_draws_put_each_plane_on_the_drawn_t1s_only():
    """t1_draws N: a plane's active EVs cross only N T1s drawn with replacement (seeded per
    draw_seed), and so do their backups; 0 is the default spread."""
    t = build_template({0: 8, 1: 8}, count=128, backups_per_plane=8, seed=1, t1_draws=2, draw_seed="1/h")
    for plane in (0, 1):
        used = {ev_unpack(ev).t1 for ev in t.active if ev_unpack(ev).plane == plane}
        assert 1 <= len(used) <= 2
        assert {ev_unpack(ev).t1 for ev in t.backups[plane]} <= used
    assert t == build_template({0: 8, 1: 8}, count=128, backups_per_plane=8, seed=1, t1_draws=2, draw_seed="1/h")
    hosts = [build_template({0: 8}, 128, 0, seed=1, t1_draws=1, draw_seed=f"1/h{i}") for i in range(40)]
    assert len({ev_unpack(h.active[0]).t1 for h in hosts}) > 1  # the draws differ per host
    every = build_template({0: 8}, 128, 0, seed=1)
    assert build_template({0: 8}, 128, 0, seed=1, t1_draws=0, draw_seed="x") == every
    with pytest.raises(ValueError, match="t1_draws 257"):
        build_template({0: 8}, 128, 0, t1_draws=257)


@pytest.mark.parametrize("kwargs, message", [
    (dict(t1_counts={0: 4}, count=100), "outside 128..256"),
    (dict(t1_counts={0: 4, 1: 4, 2: 4}, count=128), "not a multiple of the 3 planes"),
    (dict(t1_counts={0: 0}, count=128), "T1 count 0"),
    (dict(t1_counts={}, count=128), "at least one plane"),
])
def test_template_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_template(**kwargs)


def _config(**over) -> AgentConfig:
    ports = tuple(Port(p, f"plane{p}", port_address(p, 2, 3), f"02:00:00:00:0{p}:01", f"02:00:00:00:0{p}:02")
                  for p in (0, 1))
    base = dict(name="h", nic_address=nic_address(2, 3), leaf=2, downlink=3, nic_device="nic0",
                ports=ports, t1_per_plane=(4, 4))
    base.update(over)
    return AgentConfig(**base)


@pytest.mark.parametrize("over, message", [
    (dict(leaf=5), "is leaf 2 downlink 3, but the config says 5/3"),
    (dict(nic_device=""), "nic_device is empty"),
    (dict(ports=()), "ports is empty"),
    (dict(t1_per_plane=(4,)), r"ports\[1\] \(plane1\): plane 1 has no T1 count"),
    (dict(settings=Settings(ev_count=131)), "settings.ev_count 131"),
    (dict(settings=Settings(xdp_mode="fast")), "settings.xdp_mode 'fast'"),
    (dict(settings=Settings(retirement="spine")), "settings.retirement 'spine': use path or ev"),
    (dict(settings=Settings(ev_min_active=129)), "settings.ev_min_active 129 must be 0..128"),
    (dict(settings=Settings(t1_draws=300)), "settings.t1_draws 300 must be 0..256"),
])
def test_config_errors_name_the_field(over, message):
    with pytest.raises(MrcError, match=message):
        _config(**over).validate()


def test_config_bad_mac_and_wrong_plane_address():
    bad_mac = (Port(0, "plane0", port_address(0, 2, 3), "02:00:00", "02:00:00:00:00:02"),)
    with pytest.raises(MrcError, match=r"ports\[0\] \(plane0\): MAC '02:00:00'"):
        _config(ports=bad_mac, t1_per_plane=(4,)).validate()
    wrong = (Port(0, "plane0", port_address(1, 2, 3), "02:00:00:00:00:01", "02:00:00:00:00:02"),)
    with pytest.raises(MrcError, match="is on plane 1, not 0"):
        _config(ports=wrong, t1_per_plane=(4,)).validate()


def test_proto_round_trip_and_defaults():
    cfg = _config(settings=Settings(ev_count=192, rto_ns=7, seed=9))
    assert from_proto(to_proto(cfg)) == cfg
    req = to_proto(_config())
    req.settings.Clear()
    assert from_proto(req).settings == Settings()
    policy = _config(settings=Settings(retirement="ev", ev_min_active=40, pinned_ev=True, t1_draws=2))
    assert from_proto(to_proto(policy)) == policy


def test_ev_set_policy_defaults():
    cfg = _config()
    assert cfg.path_retire and cfg.settings.min_active == 32 and not cfg.settings.pinned_ev
    assert not _config(mode="ecmp", t1_per_plane=()).path_retire  # paths are opaque there
    assert _config(settings=Settings(ev_count=192)).settings.min_active == 48


def test_from_topology_host_config():
    compiled = compile_fabric(generate_clos(planes=2, spines=3, leaves=2, hosts_per_leaf=2), "ebpf")
    host = compiled.host("h1-1")
    cfg = from_topology(host, "nic0")
    cfg.validate()
    assert (cfg.leaf, cfg.downlink, cfg.t1_per_plane) == (1, 1, (3, 3))
    assert [p.ifname for p in cfg.ports] == ["plane0", "plane1"]
    assert cfg.ports[1].address == port_address(1, 1, 1)
    assert cfg.ports[0].neighbor_mac == ":".join(f"{b:02x}" for b in host.ports[0].t0_mac.to_bytes(6, "big"))


def test_encapsulated_frame_follows_the_evs_path():
    ev = ev_pack(1, 2, 0x54321)
    port = P.PortView(bytes.fromhex("020000000a01"), bytes.fromhex("02000000f001"),
                      ipaddress.IPv6Address(port_address(1, 0, 0)))
    l4 = ep_request(EpOp.PORT_STATUS_UPDATE, 0, 0b01, 0, 0)
    frame = P.encapsulated_frame(port, 0xFCBBBB00, 0, nic_address(0, 0), nic_address(3, 4), 3, 4, ev, l4)
    pkt = Ether(frame)
    outer, inner = pkt[IPv6], pkt[IPv6].payload
    assert (pkt.dst, pkt.src) == ("02:00:00:00:f0:01", "02:00:00:00:0a:01")
    assert outer.dst == str(path_da(1, 2, 0, 3, 4)) and outer.src == str(port_address(1, 0, 0))
    assert (outer.nh, outer.tc >> 2, outer.fl, inner.fl) == (41, 46, 0x4321, 0x4321)
    assert (inner[UDP].sport, inner[UDP].dport, inner[UDP].chksum) == (ev >> 16, 4791, 0)
    assert icrc_check(bytes(inner)) and bytes(inner[UDP].payload)[:-4] == l4
    oracle = mrc_frame(MrcBTH(l4 + bytes(4), icrc=None), ev=ev, inner_src=nic_address(0, 0),
                       inner_dst=nic_address(3, 4), outer_src=port_address(1, 0, 0),
                       outer_dst=path_da(1, 2, 0, 3, 4), dscp=Dscp.CONTROL, ecn=Ecn.NOT_ECT,
                       src_mac="02:00:00:00:0a:01", dst_mac="02:00:00:00:f0:01")
    assert frame == bytes(oracle)


@pytest.mark.parametrize("text, message", [
    ("host: [1, 2]\n", r"'host' must be a mapping, got list"),
    ("host: foo\n", r"'host' must be a mapping, got str"),
    ("host: {name: x}\nsettings: 5\n", r"'settings' must be a mapping, got int"),
    ("host: {name: x, locator: zz}\n", r"host.locator 'zz' is not an integer"),
    ("host: {name: x, nic_address: 8.8.8.8}\n", r"host x: nic_address '8.8.8.8' is not an IPv6 address"),
    ("host: {name: x, bogus: 1}\n", r"has no field named \"bogus\""),
    ("host:\n  name: [\n", r"c.yaml:3: not valid YAML"),
])
def test_config_file_mistakes_are_one_line_errors(tmp_path, text, message):
    from mrckit.host.run import load_config

    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(MrcError, match=message) as info:
        load_config(path)
    assert "\n" not in str(info.value)


def test_config_file_that_is_not_text(tmp_path):
    from mrckit.host.run import load_config

    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(MrcError, match="not a UTF-8 text file"):
        load_config(path)


def test_host_down_never_signals_a_process_that_is_no_agent(tmp_path, monkeypatch):
    """A pid file left by a crashed (or another namespace's) agent may name any process now:
    `mrc host down` removes the file and leaves that process alone."""
    import subprocess

    from mrckit.host import run

    monkeypatch.setattr(run, "RUN_DIR", tmp_path)
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        cfg = _config(ports=(), name="hx", nic_device="mrcnosuch0")
        run.pid_file("hx").write_text(str(bystander.pid))
        done = run.stop_agent(cfg, timeout=0.5)
        assert bystander.poll() is None, "stop_agent signalled a process that is not an agent"
        assert not run.pid_file("hx").exists()
        assert any("stale pid file" in line for line in done)
    finally:
        bystander.kill()
        bystander.wait()


def test_an_agent_removes_only_its_own_pid_file(tmp_path, monkeypatch):
    from mrckit.host import run

    monkeypatch.setattr(run, "RUN_DIR", tmp_path)
    path = run.pid_file("hy")
    assert path == tmp_path / "host-hy.pid"
    path.write_text("4242")  # another agent of the same name took the file since
    run._release_pid_file(path, 1234)
    assert path.read_text() == "4242"
    run._release_pid_file(path, 4242)
    assert not path.exists()


@pytest.mark.parametrize("ev, message", [("zz", "'zz' is not an EV"), ("0x1ffffffff", "is not a 32-bit EV")])
def test_host_deny_checks_the_ev_before_connecting(ev, message):
    from click.testing import CliRunner

    from mrckit.cli import main

    result = CliRunner().invoke(main, ["host", "deny", "unix:/nonexistent.sock", "--ev", ev])
    assert result.exit_code == 2 and message in result.output and "--ev" in result.output, result.output


def test_agents_on_their_own_sockets_never_share_a_pid_file(tmp_path, monkeypatch):
    """Two fabrics whose hosts share names run each agent on its own socket: each keeps its
    pid beside that socket, so neither overwrites nor removes the other's."""
    from mrckit.host import run

    monkeypatch.setattr(run, "RUN_DIR", tmp_path)
    a = run.pid_file("h0-0", f"unix:{tmp_path}/fab-a/host-h0-0.sock")
    b = run.pid_file("h0-0", f"unix:{tmp_path}/fab-b/host-h0-0.sock")
    assert a == tmp_path / "fab-a/host-h0-0.sock.pid" and b == tmp_path / "fab-b/host-h0-0.sock.pid"
    assert run.pid_file("h0-0", run.default_address("h0-0")) == run.pid_file("h0-0") == tmp_path / "host-h0-0.pid"
    assert run.pid_file("h0-0", "[2001:db8::1]:50051") == tmp_path / "host-h0-0.pid"
