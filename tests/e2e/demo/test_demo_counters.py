"""Switch counters in the demo report: folding per-switch counter reads into the report's
per-plane, per-spine, trim, ECN and drop figures (no fabric needed)."""

from mrckit.apps.demo.counters import fabric_counts
from mrckit.topology import generate_clos


def test_spines_planes_trims_and_drops_are_summed():
    topo = generate_clos()  # 2 planes x (3 T0 + 2 T1)
    reads = {}

    def read(name):
        sw = next(s for s in topo.switches if s.name == name)
        reads[name] = True
        base = 100 * (sw.plane + 1) + 10 * sw.index
        return {"tx_port": {0: base, 1: 1, 2: 2}, "trim_port": {0: 1}, "ecn_port": {1: 2},
                "drop_reason": {2: 1, 4: 3, 9: 5}}

    counts = fabric_counts(topo, read)
    assert set(reads) == {s.name for s in topo.switches}
    assert [(s.switch, s.plane, s.spine, s.packets) for s in counts.per_spine] == [
        ("p0-t1-0", 0, 0, 103), ("p0-t1-1", 0, 1, 113), ("p1-t1-0", 1, 0, 203), ("p1-t1-1", 1, 1, 213)]
    assert counts.per_plane == {"0": 216, "1": 416}
    assert counts.trimmed == 10 and counts.ecn_marked == 20
    assert counts.dropped["no_route"] == 10 and counts.dropped["port_down"] == 30
    assert counts.dropped["9"] == 50 and counts.dropped["congestion"] == 0
