"""The namespaces of a local target: the switch's ports in one, their veth peers in a tester
namespace where packets are sent and captured (design section 9).

A remote target (a P4Runtime server such as a hardware switch) has no switch namespace: the
user names the tester's interfaces wired to its ports, in a namespace or the root one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import netns

PORTS = (0, 1, 2, 3)
"""The switch ports of a local target unless a test asks for others."""


@dataclass
class Wiring:
    """The two namespaces and the interface names.

    Attributes:
        sw: the switch's namespace (None for a remote target).
        tester: the tester's namespace (None: the root namespace).
        ports: the switch ports under test.
        tester_ifs: switch port -> the tester's interface wired to it (default ``tp<N>``).
    """

    sw: str | None
    tester: str | None
    ports: tuple[int, ...] = PORTS
    tester_ifs: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for port in self.ports:
            self.tester_ifs.setdefault(port, f"tp{port}")

    @staticmethod
    def sw_if(port: int) -> str:
        """The switch's interface of ``port`` in a local target: ``sp<N>``."""
        return f"sp{port}"

    def tester_if(self, port: int) -> str:
        """The tester's interface wired to switch ``port``."""
        return self.tester_ifs[port]


def build_wiring(prefix: str, *, kernel_switch: bool, ports: tuple[int, ...] = PORTS) -> Wiring:
    """Create both namespaces (names start with ``prefix``) and one veth per port.

    IPv6 is off on the tester (no ND/MLD chatter into the switch). A kernel switch keeps IPv6
    for forwarding but makes no link-local address, so it sends no ND/MLD either; any that a
    target still sends is filtered by the tester (:func:`mrckit.testing.tester.is_noise`).

    Raises:
        MrcError: a namespace or veth could not be made (everything made so far is removed).
    """
    sw = netns.add(netns.unique_name(prefix))
    try:
        tester = netns.add(netns.unique_name(prefix))
    except BaseException:
        netns.delete(sw)
        raise
    wiring = Wiring(sw, tester, tuple(ports))
    try:
        netns.run(["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"], ns=tester)
        if kernel_switch:
            netns.run(["sysctl", "-qw", "net.ipv6.conf.default.addr_gen_mode=1"], ns=sw)
        else:
            netns.run(["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"], ns=sw)
        for port in wiring.ports:
            netns.veth(sw, wiring.sw_if(port), tester, wiring.tester_if(port))
            # XDP_REDIRECT into a veth needs NAPI on its peer (design section 9).
            netns.run(["ethtool", "-K", wiring.tester_if(port), "gro", "on"], ns=tester)
            netns.run(["sysctl", "-qw", f"net.ipv6.conf.{wiring.tester_if(port)}.disable_ipv6=1"], ns=tester)
    except BaseException:
        remove_wiring(wiring)
        raise
    return wiring


def remove_wiring(wiring: Wiring) -> None:
    """Delete the namespaces that :func:`build_wiring` made (their veths go with them)."""
    for ns in (wiring.sw, wiring.tester):
        if ns is not None:
            netns.delete(ns)
