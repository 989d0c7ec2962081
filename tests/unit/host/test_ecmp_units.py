"""EV-hash (ecmp) mode's pure parts in the host agent: opaque EV templates, the
config's mode, the plain probe frame and the per-plane statistics."""

import dataclasses
import ipaddress
from types import SimpleNamespace

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrckit.errors import MrcError
from mrckit.host import probe as P
from mrckit.host.config import AgentConfig, Port, from_proto, from_topology, to_proto
from mrckit.host.evset import build_template
from mrckit.host.planestats import SetReports, plane_rows, sum_planes
from mrckit.topology import compile_fabric, generate_clos
from mrckit.wire.addressing import nic_address, port_address
from mrckit.wire.constants import EpOp, EvState
from mrckit.wire.ev import ev_pack
from mrckit.wire.headers import ep_request
from mrckit.wire.icrc import icrc_check


def test_opaque_template_is_equal_per_plane_with_random_bits_below_the_plane():
    t = build_template({0: 1, 1: 1}, count=128, backups_per_plane=8, seed=2, opaque=True)
    assert [ev >> 28 for ev in t.active] == [0] * 64 + [1] * 64
    assert {p: [ev >> 28 for ev in v] for p, v in t.backups.items()} == {0: [0] * 8, 1: [1] * 8}
    every = t.active + t.backups[0] + t.backups[1]
    assert len(set(every)) == len(every)
    # One T1 per plane, yet the T1 field (bits 27..20) varies: it names nothing in this mode.
    assert len({(ev >> 20) & 0xFF for ev in t.active}) > 40
    assert build_template({0: 1, 1: 1}, 128, 8, seed=2, opaque=True) == t  # seeded


def _config(**over) -> AgentConfig:
    ports = tuple(Port(p, f"plane{p}", port_address(p, 2, 3), f"02:00:00:00:0{p}:01", f"02:00:00:00:0{p}:02")
                  for p in (0, 1))
    base = dict(name="h", nic_address=nic_address(2, 3), leaf=2, downlink=3, nic_device="nic0",
                ports=ports, t1_per_plane=(4, 4), mode="ecmp")
    base.update(over)
    return AgentConfig(**base)


def test_mode_is_checked_and_ecmp_needs_no_t1_counts():
    with pytest.raises(MrcError, match="host h: mode 'mpls': use srv6 or ecmp"):
        _config(mode="mpls").validate()
    cfg = _config(t1_per_plane=())
    cfg.validate()
    assert cfg.opaque_evs and cfg.t1_counts() == {0: 1, 1: 1}
    with pytest.raises(MrcError, match="plane 0 has no T1 count"):
        _config(t1_per_plane=(), mode="srv6").validate()


def test_mode_survives_proto_yaml_and_topology(tmp_path):
    cfg = _config()
    assert from_proto(to_proto(cfg)) == cfg
    req = to_proto(cfg)
    req.host.mode = ""  # an older controller says nothing: SRv6
    assert from_proto(req).mode == "srv6"
    from mrckit.host.run import load_config

    path = tmp_path / "h.yaml"
    path.write_text("host:\n  name: h\n  nic_address: 2001:db8:100:2::4\n  leaf: 2\n  downlink: 3\n"
                    "  nic_device: nic0\n  mode: ecmp\n  ports:\n"
                    "  - {plane: 0, ifname: plane0, address: '2001:db8:200:2::4',"
                    " mac: '02:00:00:00:00:01', neighbor_mac: '02:00:00:00:00:02'}\n")
    assert load_config(path).mode == "ecmp"
    host = compile_fabric(generate_clos(planes=2, leaves=2), "ebpf").host("h1-0")
    assert from_topology(host, "nic0").mode == "srv6"
    assert from_topology(dataclasses.replace(host, mode="ecmp"), "nic0").mode == "ecmp"


def test_plain_probe_frame_is_the_data_packet_shape():
    ev = ev_pack(1, 0x7A, 0x54321)
    port = P.PortView(bytes.fromhex("020000000a01"), bytes.fromhex("02000000f001"),
                      ipaddress.IPv6Address(port_address(1, 0, 0)))
    l4 = ep_request(EpOp.EV_PROBE, 5, 0b11, ev_pack(1, 0, 9), 0)
    frame = P.plain_frame(port, nic_address(0, 0), nic_address(3, 4), ev, l4)
    pkt = Ether(frame)
    ip = pkt[IPv6]
    assert (pkt.dst, pkt.src) == ("02:00:00:00:f0:01", "02:00:00:00:0a:01")
    assert (ip.src, ip.dst) == (str(nic_address(0, 0)), str(nic_address(3, 4)))
    assert (ip.nh, ip.hlim, ip.tc >> 2, ip.fl) == (17, 64, 46, 0x4321)
    assert (ip[UDP].sport, ip[UDP].dport, ip[UDP].chksum) == (0x17A5, 4791, 0)
    assert len(frame) == 14 + 40 + 8 + len(l4) + 4  # no outer header
    assert icrc_check(bytes(ip)) and bytes(ip[UDP].payload)[:-4] == l4


def _slot(ev, state, tx=0, acked=0):
    return SimpleNamespace(ev=ev, state=state, tx_packets=tx, tx_bytes=100 * tx, acked=acked, nacks=0, skips=0)


def test_plane_rows_count_states_retired_and_traffic():
    slots = [_slot(ev_pack(0, 0, 1), EvState.GOOD, 10, 9), _slot(ev_pack(0, 0, 2), EvState.ASSUMED_BAD, 4, 0),
             _slot(ev_pack(1, 0, 3), EvState.SKIP, 7, 7), _slot(ev_pack(1, 0, 4), EvState.GOOD, 1, 1)]
    rows = plane_rows("p", slots, [ev_pack(0, 0, 5)], {0: True, 1: False},
                      override={ev_pack(1, 0, 4): EvState.ASSUMED_BAD})
    assert [(r["plane"], r["port_up"], r["evs"], r["good"], r["skip"], r["assumed_bad"], r["retired"],
             r["tx_packets"], r["tx_bytes"], r["acked"]) for r in rows] == [
        (0, True, 2, 1, 0, 1, 1, 14, 1400, 9), (1, False, 2, 0, 1, 1, 0, 8, 800, 8)]
    total = sum_planes(rows + plane_rows("q", slots[:1], [], {0: True, 1: False}), {0: True, 1: False, 2: True})
    assert [(r["plane"], r["peer"], r["evs"], r["tx_packets"]) for r in total] == [
        (0, "", 3, 24), (1, "", 2, 8), (2, "", 0, 0)]


def test_set_reports_give_each_event_the_row_plane_rows_gives_with_its_override():
    # One read of a set reports a path's worth of events: every report is the row of the
    # EV's plane with that EV (and only it) in its new state, and the counters of its slot.
    states = (EvState.GOOD, EvState.SKIP, EvState.ASSUMED_BAD, EvState.DENIED)
    slots = [_slot(ev_pack(p, t, salt), states[(p + t + salt) % 4], tx=salt + 1, acked=salt)
             for p in (0, 1) for t in range(2) for salt in range(8)]
    slots.append(_slot(ev_pack(1, 1, 3), EvState.GOOD, tx=99))  # an EV held twice
    retired, port_up = [ev_pack(0, 3, 1), ev_pack(1, 2, 2)], {0: True, 1: False}
    reports = SetReports("p", slots, retired, port_up, ("tx_packets", "acked"))
    events = [(s.ev, new) for s in slots for new in states] + [(ev_pack(2, 0, 0), EvState.ASSUMED_BAD),
                                                               (ev_pack(0, 3, 1), EvState.ASSUMED_BAD)]
    for ev, new in events:
        counters, row = reports.report(ev, new)
        plane = ev >> 28
        want = plane_rows("p", [s for s in slots if s.ev >> 28 == plane], [r for r in retired if r >> 28 == plane],
                          port_up, override={ev: new})
        first = next((s for s in slots if s.ev == ev), None)
        assert row == (want[0] if want else None)
        assert counters == (None if first is None else {"tx_packets": first.tx_packets, "acked": first.acked})
    # plane 0 holds 4 EVs in each state; a SKIP one goes bad, and the next report starts afresh
    bad = reports.report(ev_pack(0, 0, 1), EvState.ASSUMED_BAD)[1]
    assert (bad["good"], bad["skip"], bad["assumed_bad"], bad["denied"], bad["retired"]) == (4, 3, 5, 4, 1)
    again = reports.report(ev_pack(0, 0, 2), EvState.ASSUMED_BAD)[1]
    assert (again["skip"], again["assumed_bad"]) == (4, 4)
