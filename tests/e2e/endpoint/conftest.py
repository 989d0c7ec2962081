"""A netns pair joined by one veth, with NIC addresses A and B, for endpoint tests."""

from dataclasses import dataclass

import pytest

from mrckit import netns

ADDR_A = "2001:db8:100:1::1"
ADDR_B = "2001:db8:100:1::2"
LINK_MTU = 3500
"""Fits a 2048 B payload with every header (design 3.1), under the 3506 B XDP limit."""


@dataclass
class Pair:
    ns_a: str
    ns_b: str
    if_a: str = "mrca"
    if_b: str = "mrcb"
    addr_a: str = ADDR_A
    addr_b: str = ADDR_B


@pytest.fixture
def netns_pair(make_netns) -> Pair:
    pair = Pair(make_netns(), make_netns())
    netns.veth(pair.ns_a, pair.if_a, pair.ns_b, pair.if_b, mtu=LINK_MTU)
    for ns, ifname, addr in ((pair.ns_a, pair.if_a, ADDR_A), (pair.ns_b, pair.if_b, ADDR_B)):
        netns.run(["ip", "-6", "addr", "add", f"{addr}/64", "dev", ifname, "nodad"], ns=ns)
    return pair
