"""Property tests over random fabric sizes and random port numbering and node order:

- for every host pair and every EV class (plane x T1, with a random salt), the reference walk
  through the compiled tables reaches the destination host's port along exactly the links that
  ``paths`` lists for that EV;
- every compiled table entry is used by some walk, and no walk misses an entry;
- the EV classes of every link match exactly the (source, destination, EV) whose path crosses it;
- YAML dump and load give back the same fabric and the same tables.
"""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrckit.topology import (
    compile_fabric, dumps_topology, ev_classes_for_link, generate_clos,
    loads_topology, path_for_ev, paths,
)
from mrckit.topology.walk import Walker
from mrckit.wire import ev_pack, parse_nic_address

from support.topology_gen import fabric_sizes, scramble


def _evs(topo, src, dst, salt):
    """One EV per EV class from src to dst: every (plane, T1) pair."""
    return [ev_pack(p, t, salt) for p in range(topo.planes) for t in range(topo.t1_per_plane[p])]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=fabric_sizes, seed=st.integers(0, 2**32), salt=st.integers(0, 2**20 - 1))
def test_walk_follows_paths_and_uses_every_entry(size, seed, salt):
    topo = scramble(generate_clos(**size), seed)
    fabric = compile_fabric(topo)
    walker = Walker(fabric)
    used = set()
    for src in topo.hosts:
        for dst in topo.hosts:
            if src == dst:
                continue
            for ev in _evs(topo, src, dst, salt):
                trace = walker.walk(src.name, dst.name, ev)
                path = path_for_ev(topo, src.name, dst.name, ev)
                assert trace.drop is None, (src, dst, hex(ev), trace)
                assert (trace.reached, trace.port, trace.delivered) == (dst.name, f"plane{path.plane}", True)
                assert trace.links == path.links
                assert tuple(h.switch for h in trace.hops) == path.nodes[1:-1]
                assert trace.da == path.da
                for hop in trace.hops:
                    # my_usid, usid_fib and port_config, each exactly once per switch
                    assert [e.table for e in hop.hits] == ["my_usid", "usid_fib", "port_config"]
                    used.update((hop.switch, e) for e in hop.hits)
    compiled = {(s.name, e) for s in topo.switches for e in fabric.entries(s.name)}
    assert used == compiled


@settings(max_examples=10, deadline=None)
@given(size=fabric_sizes, seed=st.integers(0, 2**32))
def test_paths_cover_every_ev_class(size, seed):
    topo = scramble(generate_clos(**size), seed)
    for src in topo.hosts[:3]:
        for dst in topo.hosts:
            if src == dst:
                continue
            found = paths(topo, src.name, dst.name)
            same_leaf = src.leaf == dst.leaf
            assert len(found) == (topo.planes if same_leaf else sum(topo.t1_per_plane))
            for ev in _evs(topo, src, dst, 0):
                assert [p for p in found if p.takes(ev)] == [path_for_ev(topo, src.name, dst.name, ev)]


@settings(max_examples=8, deadline=None)
@given(size=fabric_sizes, seed=st.integers(0, 2**32), salt=st.integers(0, 2**20 - 1))
def test_link_ev_classes_match_exactly_the_crossing_paths(size, seed, salt):
    topo = scramble(generate_clos(**size), seed)
    classes = {ln.name: ev_classes_for_link(topo, ln.name) for ln in topo.links()}
    for src in topo.hosts:
        sloc = parse_nic_address(src.nic_address)
        for dst in topo.hosts:
            if src == dst:
                continue
            dloc = parse_nic_address(dst.nic_address)
            for ev in _evs(topo, src, dst, salt):
                crossed = set(path_for_ev(topo, src.name, dst.name, ev).links)
                for name, cls in classes.items():
                    assert any(c.matches(ev, sloc, dloc) for c in cls) == (name in crossed), (name, src, dst, ev)


@settings(max_examples=10, deadline=None)
@given(size=fabric_sizes, seed=st.integers(0, 2**32))
def test_yaml_round_trip(size, seed):
    topo = scramble(generate_clos(**size), seed)
    text = dumps_topology(topo)
    again = loads_topology(text, "rt.yaml")
    assert dumps_topology(again) == text
    a, b = compile_fabric(topo), compile_fabric(again)
    for sw in topo.switches:
        assert a.switch(sw.name) == b.switch(sw.name)
    for host in topo.hosts:
        assert a.host(host.name) == b.host(host.name)
