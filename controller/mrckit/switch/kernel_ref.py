"""The Linux kernel as a reference uN switch: ``seg6local End flavors next-csid lblen 32 nflen 16``
(RFC 9800 NEXT-C-SID) in a network namespace, with static routes and neighbours.

Design section 8 names the kernel as the reference for uN: the conformance suite, the switch's
differential test and ``bench/switch_forwarding.py`` drive the same inputs through this router
and through the eBPF switch. The kernel also sends ICMP errors and falls back to SRH processing
when the next uSID is 0; those behaviours are outside any comparison. ``mrc doctor`` checks
that this kernel and iproute2 accept the route (``mrckit.cli.doctor_checks.check_seg6local``).
"""

from __future__ import annotations

import ipaddress

from .. import netns
from ..errors import MrcError, PrerequisiteError

NEXT_CSID = ["flavors", "next-csid", "lblen", "32", "nflen", "16"]


def prefix_text(prefix48: int) -> str:
    """The 48-bit DA prefix (locator << 16 | uSID) as ``fcbb:bb00:400::/48``."""
    if not 0 <= prefix48 < 1 << 48:
        raise MrcError(f"DA prefix 0x{prefix48:x} does not fit 48 bits")
    return f"{ipaddress.IPv6Address(prefix48 << 80)}/48"


def enable_forwarding(ns: str) -> None:
    """Turn IPv6 forwarding on in ``ns`` (netns.add turns it off)."""
    netns.run(["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"], ns=ns)


def add_un(ns: str, prefix48: int, dev: str) -> None:
    """Install the uN behaviour for (locator, my uSID) = ``prefix48``: End with NEXT-C-SID.

    Raises:
        PrerequisiteError: the kernel or iproute2 refuses ``flavors next-csid`` (message says so).
        MrcError: another iproute2 failure.
    """
    cmd = ["ip", "-6", "route", "add", prefix_text(prefix48), "encap", "seg6local", "action", "End",
           *NEXT_CSID, "dev", dev]
    try:
        netns.run(cmd, ns=ns)
    except MrcError as exc:
        if "csid" in str(exc).lower() or "flavor" in str(exc).lower() or "unknown" in str(exc).lower():
            # iproute2's own words, without the command and its scratch namespace's name, so
            # that every skip for this reason reads the same
            said = str(exc).rsplit(f" {dev}: ", 1)[-1]
            raise PrerequisiteError(f"the kernel or iproute2 refuses seg6local End flavors next-csid: {said}") from None
        raise


def add_fib(ns: str, prefix48: int, dev: str, neighbour_mac: str, *, index: int = 1) -> None:
    """Route ``prefix48``/48 out of ``dev`` to a static neighbour ``neighbour_mac`` (no ND, like
    the fabric of design section 4). ``index`` numbers the link-local next hop ``fe80::index``."""
    hop = f"fe80::{index:x}"
    netns.run(["ip", "-6", "neigh", "replace", hop, "lladdr", neighbour_mac, "dev", dev, "nud", "permanent"], ns=ns)
    netns.run(["ip", "-6", "route", "add", prefix_text(prefix48), "via", hop, "dev", dev], ns=ns)


def next_csid_support() -> tuple[bool, str]:
    """Whether this kernel and iproute2 accept a NEXT-C-SID End route: (ok, reason), for skip
    reasons. Needs root; builds and removes a scratch namespace."""
    name = netns.unique_name("mrcchk")
    try:
        netns.add(name)
        add_un(name, 0xFCBBBB000001, "lo")
        return True, "seg6local End flavors next-csid lblen 32 nflen 16 accepted"
    except MrcError as exc:
        return False, str(exc)
    finally:
        netns.delete(name)
