"""Golden BPF_PROG_TEST_RUN tests of the switch's MTU check (drop reason oversize).

A veth drops a frame larger than its MTU in its transmit path, after the switch has counted it
in tx_port; the switch checks the egress device's MTU with bpf_check_mtu() first, and drops and
counts what does not fit (docs/ebpf-switch.md). The egress port here is a real veth in the test
namespace, so this also shows that the XDP helper resolves a veth's ifindex on this kernel."""

import socket

from support.switch_frames import container, mrc_frame
from support.switch_harness import FABRIC_PORT, HOST_PORT, T0_0, T1_5, XDP_DROP, XDP_REDIRECT, expect_counters, leaf

from mrckit import netns
from mrckit.wire.constants import DropReason

MTU = 1500
HDRS = 40 + 40 + 8 + 12 + 4 + 16 + 4  # outer and inner IPv6, UDP, BTH, METH, RETH, ICRC


def frame(l3_len: int) -> bytes:
    """A write to T1_5 (egress FABRIC_PORT) whose outer IPv6 packet is ``l3_len`` bytes."""
    out = mrc_frame(container(T0_0, T1_5), payload=l3_len - HDRS)
    assert len(out) == 14 + l3_len
    return out


def veth_port(switch) -> None:
    """Point FABRIC_PORT's DEVMAP entry at a veth with a 1500-byte MTU (both ends in the test
    namespace, which removes them with itself)."""
    netns.veth(switch.ns, "mtu0", switch.ns, "mtu1", mtu=MTU)
    with netns.enter(switch.ns):
        switch.tables.maps["tx_ports"].update(FABRIC_PORT, socket.if_nametoindex("mtu0"))


def test_a_frame_that_fits_passes_one_byte_more_is_dropped_as_oversize(switch):
    leaf(switch)
    veth_port(switch)
    fits, too_big = frame(MTU), frame(MTU + 1)
    rc, out = switch.run(fits)
    assert rc == XDP_REDIRECT and len(out) == 14 + MTU
    rc, _ = switch.run(too_big)
    assert rc == XDP_DROP
    expect_counters(switch, rx_port={HOST_PORT: (2, len(fits) + len(too_big))},
                    tx_port={FABRIC_PORT: (1, len(fits))},
                    drop_port={FABRIC_PORT: (1, len(too_big))},
                    drop_reason={DropReason.OVERSIZE: (1, len(too_big))})


def test_a_trim_that_makes_the_frame_fit_is_not_oversize(switch):
    leaf(switch, trim=0)  # always congested: every write is trimmed to its headers
    veth_port(switch)
    big = frame(MTU + 500)
    rc, out = switch.run(big)
    assert rc == XDP_REDIRECT and len(out) == 14 + HDRS - 4  # headers only, no ICRC
    expect_counters(switch, rx_port={HOST_PORT: (1, len(big))}, tx_port={FABRIC_PORT: (1, len(out))},
                    trim_port={FABRIC_PORT: (1, len(out))})


def test_the_mtu_is_read_when_the_frame_goes(switch):
    """Raising the veth's MTU lets the same frame through: nothing is cached at load."""
    leaf(switch)
    veth_port(switch)
    big = frame(MTU + 100)
    assert switch.run(big)[0] == XDP_DROP
    netns.run(["ip", "link", "set", "mtu0", "mtu", str(MTU + 100)], ns=switch.ns)
    assert switch.run(big)[0] == XDP_REDIRECT
    assert switch.tables.counters.nonzero("drop_reason") == {DropReason.OVERSIZE: (1, len(big))}
