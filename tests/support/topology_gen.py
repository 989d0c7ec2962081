"""Random fabrics for the topology property tests: hypothesis sizes, scrambled numbering."""

import random

import numpy as np
from hypothesis import strategies as st

from mrckit.topology import FabricLinks, HostLinks, Topology


def scramble(topo: Topology, seed: int) -> Topology:
    """The same fabric with shuffled node ids and random, unique port numbers per switch."""
    rnd = random.Random(seed)
    sw_order = list(range(len(topo.switches)))
    host_order = list(range(len(topo.hosts)))
    rnd.shuffle(sw_order)
    rnd.shuffle(host_order)
    sw_new = np.argsort(sw_order)  # old id -> new id
    host_new = np.argsort(host_order)
    ports = {sid: iter(rnd.sample(range(512), 512)) for sid in range(len(topo.switches))}

    def renumber(switch_ids):
        return [next(ports[int(s)]) for s in switch_ids]

    fl, hl = topo.fabric_links, topo.host_links
    return Topology(
        planes=topo.planes, switches=[topo.switches[i] for i in sw_order], hosts=[topo.hosts[i] for i in host_order],
        fabric_links=FabricLinks(sw_new[fl.t0], renumber(fl.t0), sw_new[fl.t1], renumber(fl.t1)),
        host_links=HostLinks(host_new[hl.host], hl.plane, sw_new[hl.t0], renumber(hl.t0)),
        locator=topo.locator, mtu=topo.mtu)


fabric_sizes = st.fixed_dictionaries({
    "planes": st.integers(1, 3), "spines": st.integers(1, 3), "leaves": st.integers(2, 4),
    "hosts_per_leaf": st.integers(1, 3)})
