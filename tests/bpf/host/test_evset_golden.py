"""BPF_PROG_TEST_RUN golden tests of the EV set policy (docs/host.md, "EV set policy"):
path-aware retirement, the ev_min_active floor, equal planes and pinned-EV mode."""

from support import host_pkt as pkt
import pytest
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from mrckit.host.evset import build_template
from mrckit.host.maps import Reason
from mrckit.wire.constants import BTH_FLAG_RTX, EvState

TC_ACT_REDIRECT, TC_ACT_SHOT = 7, 2
T1 = pkt.T1_PER_PLANE


def template(count=128):
    """128 EVs over 2 planes x 4 T1: 16 EVs on each of the 8 paths toward a peer on leaf 1."""
    return build_template({0: T1, 1: T1}, count=count, backups_per_plane=0, seed=7).active


def path_of(ev: int) -> tuple[int, int]:
    return ev >> 28, (ev >> 20) & 0xFF


def send(dp, psn=1, rtx=False, dqpn=0x42, dst=pkt.NIC_B) -> int:
    """One data packet through tc egress; returns its EV."""
    l4 = pkt.write_payload(flags=BTH_FLAG_RTX if rtx else 0, psn=psn, dqpn=dqpn)
    res = dp.egress.test_run(pkt.plain(pkt.NIC_A, dst, l4))
    assert res.retval == TC_ACT_REDIRECT
    out = Ether(res.data)
    return (out[UDP].sport << 16) | (out.payload.fl & 0xFFFF)


def states(dp, peer=pkt.NIC_B) -> dict[int, tuple[int, int]]:
    s = dp.peer_set(peer)
    return {s.slots[i].ev: (s.slots[i].state, s.slots[i].reason) for i in range(s.n)}


def lose(dp, psn, dst=pkt.NIC_B, ecmp=False) -> int:
    """Send PSN ``psn``, deliver a later one, and retransmit ``psn`` unanswered: the original's
    EV lost it. Returns it."""
    ev = send(dp, psn, dst=dst)
    pkt.deliver_later(dp, psn + 1, dst=dst, ecmp=ecmp)
    send(dp, psn, rtx=True, dst=dst)
    return ev


@pytest.fixture
def path_dp(dp):
    pkt.configure_host_a(dp, path_retire=True)
    dp.set_template(template())
    return dp


def test_one_loss_retires_exactly_the_paths_evs_toward_that_peer(path_dp):
    dp = path_dp
    send(dp, 900, dst=pkt.NIC_C)  # peer C's set exists before the loss toward B
    dp.poll_events()
    lost = lose(dp, 1)
    st = states(dp)
    retired = {ev for ev, (s, _) in st.items() if s == EvState.ASSUMED_BAD}
    assert retired == {ev for ev in st if path_of(ev) == path_of(lost)} and len(retired) == 16
    assert st[lost] == (EvState.ASSUMED_BAD, Reason.LOSS)
    assert {st[ev][1] for ev in retired - {lost}} == {Reason.PATH_LOSS}
    events = dp.poll_events()
    assert sorted(e.ev for e in events if e.new_state == EvState.ASSUMED_BAD) == sorted(retired)
    assert dp.stat_values()["PATH_RETIRED"] == 15
    # only toward that peer: C's set is untouched
    assert {s for s, _ in states(dp, pkt.NIC_C).values()} == {EvState.GOOD}
    # and nothing is sent on the dead path afterwards
    assert all(path_of(send(dp, 100 + i)) != path_of(lost) for i in range(200))


def test_same_leaf_peer_path_is_the_plane(path_dp):
    """Toward a peer under the same T0 the path has no T1: one loss retires the plane's EVs."""
    lost = lose(path_dp, 1, dst=pkt.NIC_C)
    st = states(path_dp, pkt.NIC_C)
    retired = {ev for ev, (s, _) in st.items() if s == EvState.ASSUMED_BAD}
    assert retired == {ev for ev in st if ev >> 28 == lost >> 28} and len(retired) == 64


def test_per_ev_retirement_when_path_retire_is_off(dp):
    dp.set_template(template())
    lost = lose(dp, 1)
    st = states(dp)
    assert [ev for ev, (s, _) in st.items() if s != EvState.GOOD] == [lost]


def test_ecmp_mode_retires_per_ev_even_with_path_retire(ecmp_dp):
    pkt.configure_host_a(ecmp_dp, mode="ecmp", path_retire=True)
    ecmp_dp.set_template(template())
    lost = lose(ecmp_dp, 1, ecmp=True)
    assert [ev for ev, (s, _) in states(ecmp_dp).items() if s != EvState.GOOD] == [lost]


def test_floor_holds_with_every_path_failing(dp):
    pkt.configure_host_a(dp, path_retire=True, min_active=32)
    dp.set_template(template())
    first_dead, psn = None, 1
    for _ in range(40):  # far more losses than paths: every path fails, again and again
        ev = lose(dp, psn)
        psn += 1
        first_dead = first_dead or path_of(ev)
        st = states(dp)
        active = sum(1 for s, _ in st.values() if s in (EvState.GOOD, EvState.SKIP))
        assert active >= 32
    stats = dp.stat_values()
    assert stats["TX_DROP_NO_GOOD_EV"] == 0 and stats["FLOOR_RESTORED"] >= 32
    floor_events = [e for e in dp.poll_events() if e.reason == Reason.FLOOR]
    assert floor_events and all(e.new_state == EvState.GOOD for e in floor_events)


def test_floor_restores_the_least_recently_failed_first(dp):
    pkt.configure_host_a(dp, path_retire=True, min_active=32)
    dp.set_template(template())
    dead = []
    while len(dead) < 7:  # 7 of the 8 paths dead: 16 GOOD EVs, below the floor of 32
        ev = lose(dp, 10 + len(dead) * 3)
        assert path_of(ev) not in dead
        dead.append(path_of(ev))
    st = states(dp)
    back = {path_of(ev) for ev, (_, r) in st.items() if r == Reason.FLOOR}
    assert back == {dead[0]}  # the oldest failure comes back, not the newest
    assert sum(1 for s, _ in st.values() if s == EvState.GOOD) == 32


def test_plane_shares_equal_with_half_of_one_plane_retired(dp):
    evs = template()
    dp.set_template(evs)
    frame = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(payload=b"x" * 16))
    assert dp.egress.test_run(frame).retval == TC_ACT_REDIRECT
    plane1 = [i for i, ev in enumerate(evs) if ev >> 28 == 1]
    for i in plane1[:len(plane1) // 2]:
        dp.write_slot(pkt.NIC_B, i, state=EvState.ASSUMED_BAD)
    per_plane = [0, 0]
    for _ in range(100_000):
        res = dp.egress.test_run(frame)
        assert res.retval == TC_ACT_REDIRECT
    s = dp.peer_set(pkt.NIC_B)
    for i in range(s.n):
        per_plane[s.slots[i].ev >> 28] += s.slots[i].tx_packets
    total = sum(per_plane) - 1  # the first packet made the set
    assert abs(per_plane[0] - total / 2) <= 0.01 * total / 2
    assert abs(per_plane[1] - total / 2) <= 0.01 * total / 2


def test_pinned_mode_sends_every_packet_of_a_qp_on_one_ev(dp):
    pkt.configure_host_a(dp, pinned=True, min_active=0)
    dp.set_template(template())
    used = {qp: set() for qp in (0x11, 0x12, 0x13, 0x14)}
    for qp in used:
        for psn in range(200):
            used[qp].add(send(dp, psn, dqpn=qp))
    assert all(len(evs) == 1 for evs in used.values())
    assert len(set().union(*used.values())) > 1  # QPs are spread over the set
    # no retirement: a retransmission keeps the EV and retires nothing
    qp_ev = next(iter(used[0x11]))
    assert send(dp, 5, rtx=True, dqpn=0x11) == qp_ev
    assert {s for s, _ in states(dp).values()} == {EvState.GOOD}
    stats = dp.stat_values()
    assert stats["TX_PINNED"] == 4 * 200 + 1 and stats["RTX_SEEN"] == 0
    s = dp.peer_set(pkt.NIC_B)
    assert sum(1 for i in range(s.n) if s.slots[i].tx_packets) == len(set().union(*used.values()))


def test_pinned_qp_on_a_down_port_is_dropped_not_moved(dp):
    pkt.configure_host_a(dp, pinned=True)
    dp.set_template(template())
    ev = send(dp, 1)
    dp.set_port_up(ev >> 28, False)
    l4 = pkt.write_payload(psn=2, dqpn=0x42)
    assert dp.egress.test_run(pkt.plain(pkt.NIC_A, pkt.NIC_B, l4)).retval == TC_ACT_SHOT
    assert dp.stat_values()["TX_DROP_PINNED_DOWN"] == 1


def sack(dp, ev: int, ack_psn: int) -> None:
    """A SACK triggered by ``ack_psn`` on ``ev``: cack_psn 3 below it, ack_psn_offset +3."""
    import struct
    from support.host_pkt import Dscp, Opcode
    seth = struct.pack(">HhIHHIBBhQ", 0, 3, ev, 0, 0, (ack_psn - 3) & 0xFFFFFF, 0, 4, 0, 0)
    l4 = pkt.bth(Opcode.SACK, dqpn=0x77) + seth + bytes(8)
    frame = pkt.encapped(pkt.NIC_B, pkt.NIC_A, l4, ev=0x1, outer_tc=pkt.tclass(Dscp.CONTROL),
                         inner_tc=pkt.tclass(Dscp.CONTROL))
    assert dp.ingress.test_run(frame).retval == 2


def test_undone_loss_brings_its_paths_evs_back_together(path_dp):
    """A spurious retransmission (the original's SACK comes after all) undoes the LOSS, and so
    the path-aware retirement it caused: the siblings retired in that step come back."""
    dp = path_dp
    lost = lose(dp, 1)
    assert sum(1 for s, _ in states(dp).values() if s == EvState.ASSUMED_BAD) == 16
    sack(dp, lost, 1)
    st = states(dp)
    assert {s for s, _ in st.values()} == {EvState.GOOD}
    assert {r for ev, (_, r) in st.items() if path_of(ev) == path_of(lost)} == {Reason.LOSS_UNDONE}
    assert dp.stat_values()["LOSS_UNDONE"] == 16
