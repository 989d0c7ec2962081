"""Differential test: the eBPF switch against the Linux kernel's uN (seg6local End flavors
next-csid lblen 32 nflen 16), a reference nobody here wrote.

The same frames go through a kernel router in a namespace (real veths, AF_PACKET in and out)
and through the switch program (BPF_PROG_TEST_RUN). For forwarding cases the outer DA and hop
limit they emit must be identical; where the switch drops (hop limit, no route), the kernel
must not forward either (its ICMP errors and SRH fallback are outside the comparison).
"""

import pytest
from support.switch_afpacket import RawPort, is_mrc
from support.switch_frames import container, mrc_frame, outer
from support.switch_harness import DOWN_2, T0_0, T0_1, T1_5, XDP_DROP, XDP_REDIRECT, leaf

from mrckit import netns
from mrckit.errors import PrerequisiteError
from mrckit.switch import kernel_ref
from mrckit.wire.usid import usid_pack
from mrckit.topology.entries import TableEntry

R0_MAC, K0_MAC = "02:00:00:00:0e:00", "02:00:00:00:0e:01"
LOCATOR48 = 0xFCBBBB00 << 16

# (outer DA, hop limit): uN shifts with 1..6 uSIDs, plain FIB hits, edge hop limits.
FORWARD_CASES = [
    (container(T0_0, T1_5), 64),
    (container(T0_0, T1_5, T0_1, DOWN_2), 64),
    (container(T0_0, T1_5, 0x1111, 0x2222, 0x3333, 0x4444), 64),
    (container(T0_0, T0_1, DOWN_2), 2),
    (container(T0_0, DOWN_2, 0x0001), 255),
    (container(T1_5, T0_1, DOWN_2), 64),
    (container(DOWN_2), 3),
    (container(T0_1, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF), 17),
    (container(usid_pack(15, 1, 1023), 1, 2), 64),
]
DROP_CASES = [
    (container(T0_0, T1_5), 1),           # hop limit
    (container(T0_0, T1_5), 0),
    (container(0x0777, T1_5), 64),        # no route
    (container(T0_0, 0x0999, DOWN_2), 64),  # no route after the shift
]


@pytest.fixture
def kernel_router(make_netns):
    """gen --veth-- router (End next-csid for T0_0; FIB for T1_5, T0_1, DOWN_2, 0xfc01) --veth-- sink."""
    gen, router, sink = make_netns(), make_netns(), make_netns()
    netns.veth(gen, "g0", router, "r0")
    netns.veth(router, "r1", sink, "k0")
    netns.run(["ip", "link", "set", "r0", "address", R0_MAC], ns=router)
    netns.run(["ip", "link", "set", "k0", "address", K0_MAC], ns=sink)
    kernel_ref.enable_forwarding(router)
    try:
        kernel_ref.add_un(router, LOCATOR48 | T0_0, "r0")
    except PrerequisiteError as exc:
        pytest.skip(str(exc))
    for usid in (T1_5, T0_1, DOWN_2, usid_pack(15, 1, 1023)):
        kernel_ref.add_fib(router, LOCATOR48 | usid, "r1", K0_MAC)
    return gen, sink


def our_switch(switch):
    leaf(switch, T0_0)
    switch.tables.direct.write(TableEntry.exact("usid_fib", LOCATOR48 | usid_pack(15, 1, 1023), "set_egress", {"port": 1}))


def test_outer_da_and_hop_limit_match_the_kernel(switch, kernel_router):
    gen, sink = kernel_router
    our_switch(switch)
    cases = FORWARD_CASES + DROP_CASES
    frames = [mrc_frame(da, hlim=hlim, sport=0xC000 + i, dst=R0_MAC) for i, (da, hlim) in enumerate(cases)]
    with RawPort(sink, "k0") as rx, RawPort(gen, "g0") as tx:
        for frame in frames:
            tx.send(frame)
        got = rx.recv(is_mrc, count=len(FORWARD_CASES) + len(DROP_CASES), timeout=2.0)
    kernel = {int.from_bytes(f[94:96], "big") - 0xC000: outer(f) for f in got}
    assert set(kernel) == set(range(len(FORWARD_CASES))), "the kernel forwarded another set of cases"
    for i, frame in enumerate(frames):
        rc, out = switch.run(frame)
        if i >= len(FORWARD_CASES):
            assert rc == XDP_DROP, cases[i]
            continue
        assert rc == XDP_REDIRECT, cases[i]
        ours = outer(out)
        assert (ours.dst, ours.hlim) == (kernel[i].dst, kernel[i].hlim), cases[i]
