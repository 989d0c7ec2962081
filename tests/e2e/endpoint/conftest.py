"""A netns pair joined by one veth, with NIC addresses A and B, for endpoint tests."""

from dataclasses import dataclass

import pytest

from mrckit import netns
from mrckit.endpoint.native import available

from support.endpoint_pair import ADDR_A, ADDR_B, LINK_MTU


@dataclass
class Pair:
    ns_a: str
    ns_b: str
    if_a: str = "mrca"
    if_b: str = "mrcb"
    addr_a: str = ADDR_A
    addr_b: str = ADDR_B


@pytest.fixture(params=["python", pytest.param("native", marks=pytest.mark.skipif(
    available() is not None, reason=str(available())))])
def impl(request) -> str:
    """Each test that takes it runs with both endpoints Python, then both native (C)."""
    return request.param


@pytest.fixture
def netns_pair(make_netns) -> Pair:
    pair = Pair(make_netns(), make_netns())
    netns.veth(pair.ns_a, pair.if_a, pair.ns_b, pair.if_b, mtu=LINK_MTU)
    for ns, ifname, addr in ((pair.ns_a, pair.if_a, ADDR_A), (pair.ns_b, pair.if_b, ADDR_B)):
        netns.run(["ip", "-6", "addr", "add", f"{addr}/64", "dev", ifname, "nodad"], ns=ns)
    return pair


@pytest.fixture
def endpoints(netns_pair):
    """Endpoint A (requestor QP 0x100) and endpoint B (QP 0x200) in the pair, connected, with a
    region at B of ``size`` bytes (rkey 0x1000). Returns a factory(size, impl_a="python",
    impl_b="python", **qp_config); an impl is "python" (the reference) or "native" (C)."""
    from mrckit.endpoint import Endpoint, QpConfig
    from mrckit.endpoint.native import NativeEndpoint

    from mrckit.endpoint import RetryConfig
    from mrckit.endpoint.native import NATIVE_TIMEOUT_EXP

    made = []
    classes = {"python": Endpoint, "native": NativeEndpoint}
    # Across the network on a loaded machine: the native 262 µs RTO, but no retry limit, so a
    # peer descheduled for tens of ms costs retransmissions, never the QP; the write's own
    # timeout bounds each test.
    load_safe = RetryConfig(timeout_exp=NATIVE_TIMEOUT_EXP, exp_retries=25)

    def factory(size: int, impl_a: str = "python", impl_b: str = "python", **cfg):
        with netns.enter(netns_pair.ns_a):
            ep_a = classes[impl_a](ADDR_A)
        made.append(ep_a)
        with netns.enter(netns_pair.ns_b):
            ep_b = classes[impl_b](ADDR_B)
        made.append(ep_b)
        mr = ep_b.register_mr(size, rkey=0x1000)
        ep_b.create_qp(ADDR_A, qpn=0x200, remote_qpn=0x100, config=QpConfig(**cfg))
        a_cfg = dict(cfg)
        # Python keeps its own 67 ms timer, also without a retry limit: 20 % loss both ways
        # on a busy machine once gave 14 timeouts without progress in a row.
        a_cfg.setdefault("retry", load_safe if impl_a == "native" else RetryConfig(exp_retries=25))
        qp = ep_a.create_qp(ADDR_B, qpn=0x100, remote_qpn=0x200, config=QpConfig(**a_cfg))
        return ep_a, ep_b, qp, mr

    yield factory
    for ep in made:
        ep.close()
