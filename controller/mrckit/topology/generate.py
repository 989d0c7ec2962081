"""Generator of multi-plane two-tier Clos fabrics (design section 7).

Naming and port numbering follow ``plan.py``: switch ids run plane by plane, T0s then T1s;
host ids run leaf by leaf, then downlink. Links are built as arrays, so the 131,072-host
fabric (8 planes, 512 T0 and 256 T1 per plane, 256 hosts per T0) takes well under a second.
"""

from __future__ import annotations

import numpy as np

from ..wire.constants import MAX_DOWNLINKS_PER_T0, MAX_PLANES, MAX_T0_PER_PLANE, MAX_T1_PER_PLANE
from ..wire.usid import DEFAULT_LOCATOR
from .model import (
    DEFAULT_ECN_THRESHOLD, DEFAULT_MTU, DEFAULT_TRIM_THRESHOLD, FabricLinks, Host, HostLinks, Switch, Topology,
    TopologyError,
)
from .plan import MAX_PORT, Role, host_name, switch_name, t0_down_port, t0_up_port, t1_port

DEFAULT_PLANES = 2
DEFAULT_SPINES = 2
DEFAULT_LEAVES = 3
DEFAULT_HOSTS_PER_LEAF = 2


def _check_sizes(planes: int, spines: int, leaves: int, hosts_per_leaf: int) -> None:
    limits = (("planes", planes, MAX_PLANES, "the EV plane field is 4 bits"),
              ("spines", spines, MAX_T1_PER_PLANE, "the EV T1 field is 8 bits"),
              ("leaves", leaves, MAX_T0_PER_PLANE, "the uSID index is 10 bits"),
              ("hosts_per_leaf", hosts_per_leaf, MAX_DOWNLINKS_PER_T0 - 1,
               "NIC addresses use H = D + 1 <= 1023"))
    for name, value, hi, why in limits:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= hi:
            raise TopologyError(f"{name}={value!r} is out of range 1..{hi} ({why})", ("field", name))
    if hosts_per_leaf + spines > MAX_PORT + 1:
        raise TopologyError(f"a T0 would need {hosts_per_leaf} + {spines} = {hosts_per_leaf + spines} ports; "
                            f"switch ports are 9 bits (0..{MAX_PORT})", ("field", "hosts_per_leaf"))
    if leaves > MAX_PORT + 1:
        raise TopologyError(f"a T1 would need {leaves} ports, one per leaf; switch ports are 9 bits "
                            f"(0..{MAX_PORT})", ("field", "leaves"))


def generate_clos(planes: int = DEFAULT_PLANES, spines: int = DEFAULT_SPINES, leaves: int = DEFAULT_LEAVES,
                  hosts_per_leaf: int = DEFAULT_HOSTS_PER_LEAF, *, locator: int = DEFAULT_LOCATOR,
                  mtu: int = DEFAULT_MTU, trim_threshold: int = DEFAULT_TRIM_THRESHOLD,
                  ecn_threshold: int = DEFAULT_ECN_THRESHOLD) -> Topology:
    """Build a rail-aligned multi-plane two-tier Clos.

    Each plane has ``leaves`` T0 and ``spines`` T1 switches, every T0 linked to every T1;
    each leaf index carries ``hosts_per_leaf`` hosts, each with one port per plane to the T0
    of that leaf index (design section 3.3). The default is the small lab fabric: 2 planes,
    2 spines and 3 leaves per plane, 2 hosts per leaf.

    Args:
        planes: 1..16. spines: T1 per plane, 1..256. leaves: T0 per plane, 1..1024.
        hosts_per_leaf: 1..1023, and hosts_per_leaf + spines <= 512 (9-bit ports).
        locator: 32-bit uSID locator. mtu: fabric link MTU in bytes.
        trim_threshold, ecn_threshold: port queue thresholds in packets.

    Raises:
        TopologyError: a size out of range, or a switch needing more than 512 ports.
    """
    _check_sizes(planes, spines, leaves, hosts_per_leaf)
    per_plane = leaves + spines
    switches = []
    for plane in range(planes):
        switches += [Switch(switch_name(Role.T0, plane, i), Role.T0, plane, i) for i in range(leaves)]
        switches += [Switch(switch_name(Role.T1, plane, t), Role.T1, plane, t) for t in range(spines)]
    hosts = [Host(host_name(leaf, d), leaf, d) for leaf in range(leaves) for d in range(hosts_per_leaf)]

    # T0-T1 links: grid over (plane, leaf, spine).
    p, leaf, t = (a.ravel() for a in np.meshgrid(np.arange(planes), np.arange(leaves), np.arange(spines),
                                                  indexing="ij"))
    fabric = FabricLinks(t0=p * per_plane + leaf, t0_port=t0_up_port(hosts_per_leaf, t),
                         t1=p * per_plane + leaves + t, t1_port=t1_port(leaf))
    # Host links: grid over (host, plane); host id = leaf * hosts_per_leaf + downlink.
    h, p = (a.ravel() for a in np.meshgrid(np.arange(len(hosts)), np.arange(planes), indexing="ij"))
    host_leaf, downlink = np.divmod(h, hosts_per_leaf)
    host_links = HostLinks(host=h, plane=p, t0=p * per_plane + host_leaf, t0_port=t0_down_port(downlink))
    return Topology(planes=planes, switches=tuple(switches), hosts=tuple(hosts), fabric_links=fabric,
                    host_links=host_links, locator=locator, mtu=mtu, trim_threshold=trim_threshold,
                    ecn_threshold=ecn_threshold)
