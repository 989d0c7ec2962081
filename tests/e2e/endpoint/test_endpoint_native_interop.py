"""The C endpoint against the Python one over a real veth between two namespaces: 64 MiB each
way, SHA-256 verified, the ICRC checked on every packet (design 6)."""

import hashlib
import os

import pytest

from mrckit.endpoint.native import available

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(available() is not None, reason=str(available()))]

PAIRS = [("native", "python"), ("python", "native"), ("native", "native")]


@pytest.mark.parametrize("impl_a,impl_b", PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
def test_64mib_write_between_implementations(endpoints, impl_a, impl_b):
    size = 64 << 20
    ep_a, ep_b, qp, mr = endpoints(size, impl_a=impl_a, impl_b=impl_b)
    data = os.urandom(size)
    comp = ep_a.write(qp, data, 0, 0x1000, imm=0x64).wait(300)
    assert hashlib.sha256(mr.buf).hexdigest() == hashlib.sha256(data).hexdigest()
    rs, qs = ep_b.responder.stats, qp.requestor.stats
    assert rs.icrc_checked == rs.packets and rs.bad_icrc == 0
    assert rs.placed_bytes == size and mr.placed_bytes == size
    assert qs.bad_icrc == 0 and qs.completions == 1
    got = ep_b.poll_recv(10)
    assert got is not None and got.imm == 0x64 and comp.nbytes == size


@pytest.mark.parametrize("impl_a,impl_b", PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
def test_many_qps_and_writes_in_flight(endpoints, impl_a, impl_b):
    """Several writes in flight on one QP, ending with a WRITE_WITH_IMM each, byte-exact."""
    size = 8 << 20
    ep_a, ep_b, qp, mr = endpoints(size, impl_a=impl_a, impl_b=impl_b)
    chunks = [os.urandom(size // 8) for _ in range(8)]
    comps = [ep_a.write(qp, c, i * (size // 8), 0x1000, imm=i) for i, c in enumerate(chunks)]
    for c in comps:
        c.wait(120)
    assert bytes(mr.buf) == b"".join(chunks)
    imms = [ep_b.poll_recv(10).imm for _ in chunks]
    assert imms == list(range(8))


@pytest.mark.parametrize("impl_a,impl_b", PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
def test_four_qps_on_one_endpoint_pair(endpoints, impl_a, impl_b):
    """QPs 0x101..0x104 besides the fixture's 0x100, each writing its own region slice."""
    from mrckit.endpoint import QpConfig, RetryConfig
    from mrckit.endpoint.native import NATIVE_TIMEOUT_EXP

    size = 4 << 20
    ep_a, ep_b, _qp, mr = endpoints(size, impl_a=impl_a, impl_b=impl_b)
    # As the fixture's QP: a native requestor gets no retry limit, or its 262 µs RTO fails
    # the QP after ~70 ms without a SACK, which a loaded machine's descheduled peer exceeds.
    a_cfg = QpConfig(retry=RetryConfig(timeout_exp=NATIVE_TIMEOUT_EXP, exp_retries=25)) if impl_a == "native" else None
    qps = []
    for i in range(1, 5):
        ep_b.create_qp(ep_a.nic_addr, qpn=0x200 + i, remote_qpn=0x100 + i, config=QpConfig())
        qps.append(ep_a.create_qp(ep_b.nic_addr, qpn=0x100 + i, remote_qpn=0x200 + i, config=a_cfg))
    data = os.urandom(size)
    part = size // 4
    comps = [ep_a.write(q, data[i * part:(i + 1) * part], i * part, 0x1000, imm=0x10 + i) for i, q in enumerate(qps)]
    for c in comps:
        c.wait(120)
    assert bytes(mr.buf) == data
    got = sorted((c.qpn, c.imm) for c in (ep_b.poll_recv(10) for _ in qps))
    assert got == [(0x200 + i, 0x10 + i - 1) for i in range(1, 5)]
