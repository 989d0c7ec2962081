"""Hosts of a running fabric by name, for tools that run on a host (``mrc write``/``mrc listen``):
which fabric has host ``h1-0``, its NIC address and its network namespace.

Only the fabrics' state files are read (``state.py``): no process of the fabric is contacted.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from ..errors import MrcError
from ..netns import NETNS_DIR
from .state import FabricState, list_fabrics


@dataclass(frozen=True)
class FabricHost:
    """A host of a running fabric: ``fabric`` name, host ``name``, ``nic_address`` (text) and
    ``ns``, the network namespace its NIC device is in."""

    fabric: str
    name: str
    nic_address: str
    ns: str


def is_address(text: str) -> bool:
    """Whether ``text`` is an IPv6 address (rather than a host name)."""
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _host_in(state: FabricState, ref: str) -> FabricHost:
    """Host ``ref`` (name or NIC address) of fabric ``state``.

    Raises:
        MrcError: the fabric has no such host, or its namespace is gone.
    """
    from ..topology import TopologyError, loads_topology

    try:
        host = loads_topology(state.topology, f"{state.dir}/fabric.json").host(ref)
    except TopologyError:
        names = ", ".join(sorted(state.hosts)) or "none"
        raise MrcError(f"fabric {state.name!r} has no host {ref!r} (its hosts: {names})") from None
    ns = state.nodes.get(host.name, "")
    if not ns or not Path(NETNS_DIR, ns).exists():
        raise MrcError(f"host {host.name} of fabric {state.name!r} has no namespace {ns or '(none)'}: "
                       f"the fabric is broken; see `mrc fabric status {state.name}`")
    return FabricHost(state.name, host.name, str(host.nic_address), ns)


def find_host(ref: str, fabric: str | None = None) -> FabricHost | None:
    """Look up ``ref``, a host name (``h1-0``) or a NIC address, among running fabrics.

    Args:
        ref: a host name, or a NIC address.
        fabric: the fabric to look in; None: the one fabric that has a host of that name.

    Returns:
        the host; None when ``ref`` is an address and no ``fabric`` is given (an address is
        used as it is, in the caller's own namespace).

    Raises:
        MrcError: no fabric up; no (or no such) fabric has the host; several have it and
            ``fabric`` is None (the message lists them and says to pick one with --fabric).
    """
    if fabric is not None:
        return _host_in(FabricState.load(fabric), ref)
    if is_address(ref):
        return None
    names = list_fabrics()
    if not names:
        raise MrcError("no fabric is up to look the host name up in "
                       "(start one with `mrc fabric up`, or give a NIC address such as 2001:db8:100::1)")
    states = [FabricState.load(n) for n in names]
    having = [st for st in states if ref in st.hosts]
    if not having:
        raise MrcError(f"no running fabric has a host named {ref!r} (fabrics up: {', '.join(names)}; "
                       "hosts are named like h0-0, see `mrc topo show`)")
    if len(having) > 1:
        raise MrcError(f"host {ref!r} is in {len(having)} running fabrics ({', '.join(st.name for st in having)}): "
                       "choose one with --fabric NAME")
    return _host_in(having[0], ref)
