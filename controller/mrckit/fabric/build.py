"""Namespaces and links of an emulated fabric (design sections 8 and 9).

One namespace per node, one veth pair per link, created straight into their namespaces with
their final names, MACs and MTU by one ``ip -batch`` run. The rules of design section 9:

- the IPv6 sysctls are set in every namespace BEFORE any link comes up: no DAD, no router
  solicitations, no autoconfigured addresses, so no ND/MLD packet ever enters a switch (there
  is no ND on the fabric; MACs come from the tables). Switches have IPv6 off on their ports:
  their XDP program forwards, the kernel has nothing to say;
- every veth end gets ``tx off`` (checksums final before XDP forwards them) and ``gro on``
  (NAPI on the peer, so XDP_REDIRECT into it works even before or without an XDP program);
- link MTU is the topology MTU, which already includes the 40 bytes of the outer header; the
  host agent gives the NIC device ``MTU - 40``;
- hosts get static neighbours for their T0 on every plane (nud permanent).
"""

from __future__ import annotations

import ctypes
import fcntl
import ipaddress
import os
import socket
import struct
from collections.abc import Iterable, Sequence

from pyroute2 import IPRoute

from .. import netns
from ..errors import MrcError
from .parallel import Progress, each

XDP_MAX_MTU = 3506
"""Largest L3 MTU that a non-frags XDP program allows on a veth (design section 9)."""
_HOST_SYSCTLS = {
    "net/ipv6/conf/all/accept_ra": "0", "net/ipv6/conf/default/accept_ra": "0",
    "net/ipv6/conf/all/router_solicitations": "0", "net/ipv6/conf/default/router_solicitations": "0",
    "net/ipv6/conf/all/accept_dad": "0", "net/ipv6/conf/default/accept_dad": "0",
    "net/ipv6/conf/default/addr_gen_mode": "1",
    "net/ipv6/conf/all/keep_addr_on_down": "1", "net/ipv6/conf/default/keep_addr_on_down": "1",
}
_SWITCH_SYSCTLS = {**_HOST_SYSCTLS, "net/ipv6/conf/default/disable_ipv6": "1"}


def check_mtu(mtu: int) -> None:
    """Refuse link MTUs the XDP programs cannot carry.

    Raises:
        MrcError: ``mtu`` above 3506 B: jumbo frames need ``SEC("xdp.frags")`` programs, and
            the switch and host programs are not built that way.
    """
    if mtu > XDP_MAX_MTU:
        raise MrcError(f"topology mtu {mtu} B: above {XDP_MAX_MTU} B, which needs xdp.frags "
                       "programs; mrc_switch and mrc_host are plain XDP, so use mtu <= 3506")


def add_namespaces(names: dict[str, str], switches: Iterable[str], progress: Progress | None = None) -> None:
    """Create namespace ``names[node]`` for every node: all in one ``ip -batch`` run, then
    loopback up and the sysctls in each, on several threads (the caller removes them on
    failure, by name). ``progress``: see :func:`mrckit.fabric.parallel.each`.

    Raises:
        MrcError: a namespace exists already (another fabric of that name?) or iproute2 failed.
    """
    switches = set(switches)
    taken = [ns for ns in names.values() if netns.exists(ns)]
    if taken:
        raise MrcError(f"network namespace {taken[0]} exists already "
                       f"({len(taken)} of this fabric's names are taken): is this fabric up? "
                       "see `mrc fabric status`, or remove it with `mrc fabric down`")
    lines = [f"netns add {ns}" for ns in names.values()]
    if lines:
        netns.run(["ip", "-batch", "-"], input="\n".join(lines).encode() + b"\n")
    each("namespaces", lambda node: init_namespace(names[node], _SWITCH_SYSCTLS if node in switches
                                                   else _HOST_SYSCTLS), names, progress)


def init_namespace(ns: str, sysctls: dict[str, str]) -> None:
    """In ``ns``: ``sysctls`` written and loopback up, from this thread (no child process)."""
    write_sysctls(ns, {**sysctls, "net/ipv6/conf/all/forwarding": "0"})
    with netns.enter(ns), IPRoute() as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")


def write_sysctls(ns: str, values: dict[str, str]) -> None:
    """Write /proc/sys keys (``net/ipv6/...``) inside ``ns``: /proc/sys/net belongs to the
    namespace of the thread that opens it."""
    with netns.enter(ns):
        for key, value in values.items():
            with open(os.path.join("/proc/sys", key), "w") as f:
                f.write(value)


def add_links(links: list[tuple], mtu: int) -> None:
    """Create every veth pair, in its namespaces, down, named, with MACs and ``mtu``.

    Args:
        links: ``(ns_a, if_a, mac_a, ns_b, if_b, mac_b)`` per link; MACs as ``aa:bb:..`` text.

    Raises:
        MrcError: iproute2 refused a line (the message names it).
    """
    lines = [f"link add {if_a} address {mac_a} mtu {mtu} netns {ns_a} type veth "
             f"peer name {if_b} address {mac_b} mtu {mtu} netns {ns_b}"
             for ns_a, if_a, mac_a, ns_b, if_b, mac_b in links]
    if lines:
        netns.run(["ip", "-batch", "-"], input="\n".join(lines).encode() + b"\n")


def prepare_ports(ns: str, ifnames: list[str], neighbours: Sequence[tuple[str, str]] = ()) -> None:
    """In ``ns``: TX checksum offload off and GRO on for every interface, static neighbours
    ``(ifname, mac)`` (the peer's EUI-64 link-local address), then every interface up.

    Raises:
        MrcError: the kernel refused a setting, or iproute2 refused.
    """
    with netns.enter(ns), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for ifname in ifnames:
            # what `ethtool -K IF tx off gro on` does, without a process per interface
            _ethtool_set(sock, ifname, ETHTOOL_STXCSUM, 0)
            _ethtool_set(sock, ifname, ETHTOOL_SGRO, 1)
    lines = [f"neigh replace {link_local(mac)} lladdr {mac} dev {ifname} nud permanent"
             for ifname, mac in neighbours]
    lines += [f"link set {ifname} up" for ifname in ifnames]
    if lines:
        netns.run(["ip", "-n", ns, "-batch", "-"], input="\n".join(lines).encode() + b"\n")


SIOCETHTOOL, ETHTOOL_STXCSUM, ETHTOOL_SGRO = 0x8946, 0x17, 0x2C
"""linux/sockios.h and linux/ethtool.h: the legacy ethtool ioctl, TX checksumming (every
checksum feature) and GRO."""


def _ethtool_set(sock: socket.socket, ifname: str, cmd: int, value: int) -> None:
    data = ctypes.create_string_buffer(struct.pack("II", cmd, value))  # struct ethtool_value
    ifreq = struct.pack("16sP", ifname.encode(), ctypes.addressof(data)).ljust(40, b"\0")
    try:
        fcntl.ioctl(sock, SIOCETHTOOL, ifreq)
    except OSError as exc:
        raise MrcError(f"ethtool {cmd:#x} on {ifname}: {exc.strerror}") from None


def link_local(mac: str) -> str:
    """The EUI-64 link-local address of ``mac`` (RFC 4291 appendix A)."""
    b = bytearray(int(x, 16) for x in mac.split(":"))
    b[0] ^= 0x02
    iid = bytes(b[:3]) + b"\xff\xfe" + bytes(b[3:])
    return str(ipaddress.IPv6Address(b"\xfe\x80" + bytes(6) + iid))
