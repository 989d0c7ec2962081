"""100k packets through tc egress: the planes share the traffic equally, a plane's GOOD EVs share
its half uniformly, no other EV is used (design section 5: pseudo-random spraying with a scan
order re-randomised every rotation; docs/host.md: equal planes)."""

from support import host_pkt as pkt
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from mrckit.host.evset import build_template
from mrckit.wire.constants import EvState

PACKETS = 100_000
TOLERANCE = 0.02
"""Each GOOD EV's packet count is within 2 % of the uniform share of its plane. The rotation scheme uses
every GOOD EV once per rotation, so the real spread is one packet; 2 % leaves room for the
rotations cut short at the start and the end of the run."""


def test_100k_packets_spread_uniformly_over_good_evs_only(dp):
    tmpl = build_template({0: pkt.T1_PER_PLANE, 1: pkt.T1_PER_PLANE}, count=128, seed=1)
    dp.set_template(tmpl.active)
    frame = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(payload=b"x" * 16))
    assert dp.egress.test_run(frame).retval == 7  # creates peer B's set
    bad = {3: EvState.SKIP, 10: EvState.ASSUMED_BAD, 20: EvState.DENIED, 77: EvState.SKIP,
           100: EvState.ASSUMED_BAD}
    for slot, state in bad.items():
        dp.write_slot(pkt.NIC_B, slot, state=state, reset=True)
    # SKIP normally expires after a rotation; pin these two for the whole run.
    peer = dp.peer_set(pkt.NIC_B)
    for slot in (3, 77):
        peer.slots[slot].skip_until_rot = 0xFFFFFFFF
    for slot in range(peer.n):
        peer.slots[slot].tx_packets = 0
    dp.put_peer_set(pkt.NIC_B, peer)
    # A denied link covers peers as well: plane 1's T1 2 toward leaf 1.
    dp.deny_link(1, pkt.B_LEAF, "t1", 2, True)
    denied_path = {i for i, ev in enumerate(tmpl.active) if ev >> 28 == 1 and (ev >> 20) & 0xFF == 2}
    assert len(denied_path) == 16

    orders = []
    for i in range(PACKETS):
        res = dp.egress.test_run(frame)
        assert res.retval == 7
        if i < 3 * 100:
            out = Ether(res.data)
            orders.append((out[UDP].sport << 16) | out.fl)

    peer = dp.peer_set(pkt.NIC_B)
    counts = {i: peer.slots[i].tx_packets for i in range(peer.n)}
    unusable = set(bad) | denied_path
    assert {i: counts[i] for i in unusable if counts[i]} == {}
    good = [counts[i] for i in counts if i not in unusable]
    assert sum(good) == PACKETS
    # Equal planes: each plane carries half, shared equally by its usable EVs.
    for plane in (0, 1):
        mine = [counts[i] for i in counts if i not in unusable and tmpl.active[i] >> 28 == plane]
        assert abs(sum(mine) - PACKETS / 2) <= 1
        share = PACKETS / 2 / len(mine)
        assert max(abs(c - share) for c in mine) <= TOLERANCE * share, (min(mine), max(mine), share)
    # The scan order changes from one rotation to the next: the sequence is not periodic.
    n_good = len(good)
    assert set(orders) == {tmpl.active[i] for i in counts if i not in unusable}
    assert orders[:n_good] != orders[n_good:2 * n_good]
