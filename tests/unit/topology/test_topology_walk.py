"""The reference walk notices broken tables: a missing entry, a wrong MAC rewrite, a loop.
(The property tests show that correct tables deliver; these show that the walk can fail.)"""

import dataclasses

import pytest

from mrckit.topology import TopologyError, compile_fabric, generate_clos
from mrckit.topology.walk import MAX_SWITCH_HOPS, Walker
from mrckit.wire import ev_pack

EV = ev_pack(1, 1, 0x5)  # h0-0 -> h2-1: p1-t0-0, p1-t1-1, p1-t0-2


class Tampered:
    """A compiled fabric whose entries for one switch are edited by ``edit(entries)``."""

    def __init__(self, fabric, switch, edit):
        self._fabric, self._switch, self._edit = fabric, switch, edit
        self.topology = fabric.topology

    def host(self, name):
        return self._fabric.host(name)

    def switch(self, name):
        cfg = self._fabric.switch(name)
        if name != self._switch:
            return cfg
        return dataclasses.replace(cfg, entries=tuple(self._edit(list(cfg.entries))))


@pytest.fixture(scope="module")
def fabric():
    return compile_fabric(generate_clos())


def _walk(fabric, switch, edit, ev=EV):
    return Walker(Tampered(fabric, switch, edit)).walk("h0-0", "h2-1", ev)


def test_untampered_walk_delivers(fabric):
    trace = _walk(fabric, "p1-t1-1", lambda entries: entries)
    assert trace.delivered and trace.drop is None


def test_missing_fib_entry_is_no_route(fabric):
    trace = _walk(fabric, "p1-t1-1", lambda es: [e for e in es if not (e.table == "usid_fib" and e.key & 0xFFFF == 0x1402)])
    assert (trace.drop, trace.hops[-1].switch, trace.reached) == ("no_route", "p1-t1-1", None)
    assert trace.links == ("p1/t0-0/down-0", "p1/t0-0/t1-1")


def test_missing_my_usid_is_no_route(fabric):
    trace = _walk(fabric, "p1-t0-0", lambda es: [e for e in es if e.table != "my_usid"])
    assert (trace.drop, trace.hops[0].da_in, trace.hops[0].da_out) == ("no_route", trace.da, trace.da)


def test_wrong_mac_rewrite_is_caught(fabric):
    def edit(entries):
        return [dataclasses.replace(e, params=e.params | {"dst_mac": 0x020000000001})
                if e.table == "port_config" and e.key == 2 else e for e in entries]

    trace = _walk(fabric, "p1-t1-1", edit)  # port 2 of p1-t1-1 leads to p1-t0-2
    assert (trace.drop, trace.hops[-1].switch) == ("mac_mismatch", "p1-t0-2")


def test_wrong_port_reaches_the_wrong_host(fabric):
    def edit(entries):
        return [dataclasses.replace(e, params={"port": 0}) if e.table == "usid_fib" and e.key & 0xFFFF == 0x1C01
                else e for e in entries]

    trace = _walk(fabric, "p1-t0-2", edit)
    assert (trace.reached, trace.delivered, trace.drop) == ("h2-0", False, None)


def test_a_loop_ends(fabric):
    # p1-t0-2 loses its my_usid entry and sends its own uSID back up to p1-t1-1, which sends it
    # down again: the packet bounces between the two.
    def edit(entries):
        mine = next(e for e in entries if e.table == "my_usid")
        fib = dataclasses.replace(next(e for e in entries if e.table == "usid_fib"), match=mine.match,
                                  params={"port": 3})
        return [e for e in entries if e.table != "my_usid"] + [fib]

    trace = _walk(fabric, "p1-t0-2", edit)
    assert trace.drop == "loop" and len(trace.hops) == MAX_SWITCH_HOPS
    assert [h.switch for h in trace.hops[1:5]] == ["p1-t1-1", "p1-t0-2", "p1-t1-1", "p1-t0-2"]


def test_walk_refuses_unknown_plane_and_same_host(fabric):
    walker = Walker(fabric)
    with pytest.raises(TopologyError, match="names plane 2"):
        walker.walk("h0-0", "h2-1", ev_pack(2, 0, 0))
    with pytest.raises(TopologyError, match="same host"):
        walker.walk("h0-0", "2001:db8:100::1", EV)
