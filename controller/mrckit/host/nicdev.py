"""The host's virtual NIC device: where the NIC address lives and tc egress runs (design 5).

This kernel has no dummy interfaces, so the NIC device is one end of a veth pair whose other
end (``<nic>p``) stays up and unused: the endpoint's socket sends from the NIC address, the
route to the NIC prefix ``2001:db8:100::/48`` points out of the NIC device through a gateway
with a permanent neighbour entry (so no ND is ever attempted), and tc egress on the device
encapsulates each packet and redirects it to a plane port before it reaches the veth peer.
The device's MTU is the smallest plane port's MTU minus the 40 bytes of the outer header, so
that every encapsulated packet fits whichever plane its EV picks.
"""

from __future__ import annotations

import ipaddress

from ..errors import MrcError
from ..netns import run
from ..wire.constants import ENCAP_LEN, IPV6_MIN_MTU

NIC_PREFIX = "2001:db8:100::/48"
GATEWAY = "fe80::1"
GATEWAY_MAC = "02:00:00:00:00:01"


def nic_mtu(port_mtus: dict[str, int]) -> int:
    """The NIC device's MTU (bytes) for plane ports ``{ifname: mtu}``: the smallest port MTU
    minus the outer IPv6 header (``ENCAP_LEN``), since tc egress may send any packet on any
    plane.

    Raises:
        MrcError: no ports, or the result is below IPv6's minimum MTU (names the port).
    """
    if not port_mtus:
        raise MrcError("the host has no plane ports: cannot size the NIC device's MTU")
    ifname = min(port_mtus, key=lambda name: port_mtus[name])
    mtu = port_mtus[ifname] - ENCAP_LEN
    if mtu < IPV6_MIN_MTU:
        raise MrcError(f"plane port {ifname} has MTU {port_mtus[ifname]}: the NIC device would get {mtu}, "
                       f"below IPv6's minimum {IPV6_MIN_MTU}; raise that port's MTU to at least "
                       f"{IPV6_MIN_MTU + ENCAP_LEN}")
    return mtu


def create_nic_device(nic_dev: str, nic_address: str | ipaddress.IPv6Address, mtu: int,
                      ns: str | None = None) -> None:
    """Create the veth pair ``nic_dev``/``nic_dev + 'p'`` with MTU ``mtu`` (bytes; see
    :func:`nic_mtu`), give ``nic_dev`` the NIC address (/128), and route the NIC prefix out
    of it.

    Raises:
        MrcError: an iproute2/ethtool step failed (e.g. the device exists already).
    """
    peer = f"{nic_dev}p"
    run(["ip", "link", "add", nic_dev, "mtu", str(mtu), "type", "veth", "peer", "name", peer, "mtu", str(mtu)], ns=ns)
    # Checksums must be final before tc rewrites the packet: no TX offload (design 9).
    run(["ethtool", "-K", nic_dev, "tx", "off"], ns=ns)
    for dev in (nic_dev, peer):
        run(["ip", "link", "set", dev, "up"], ns=ns)
    run(["ip", "-6", "addr", "add", f"{ipaddress.IPv6Address(nic_address)}/128", "dev", nic_dev, "nodad"], ns=ns)
    run(["ip", "-6", "neigh", "replace", GATEWAY, "lladdr", GATEWAY_MAC, "dev", nic_dev, "nud", "permanent"], ns=ns)
    run(["ip", "-6", "route", "replace", NIC_PREFIX, "via", GATEWAY, "dev", nic_dev], ns=ns)
