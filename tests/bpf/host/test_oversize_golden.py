"""BPF_PROG_TEST_RUN golden tests of tc egress on frames too large for the plane port.

A veth drops a frame larger than its MTU in its transmit path, after tc egress has counted the
frame as sent; tc egress checks the MTU with bpf_check_mtu() instead, after the 40-byte outer
header in SRv6 mode, and drops and counts what does not fit (docs/host.md). The test runs in a
namespace whose loopback (PORT_IFINDEX, 1) has a 1500-byte MTU: the helper resolves the
port's ifindex in the namespace of the run."""

from support import host_pkt as pkt
import pytest

from mrckit import netns
from mrckit.wire.ev import ev_pack

TC_ACT_SHOT, TC_ACT_REDIRECT = 2, 7
EV = ev_pack(1, 2, 0x12345)
MTU = 1500
L3_WRITE_HDRS = 40 + 8 + 12 + 4 + 16 + 4  # IPv6, UDP, BTH, METH, RETH, ICRC


def write_frame(l3_len: int) -> bytes:
    """A plain write from the endpoint whose IPv6 packet is ``l3_len`` bytes."""
    frame = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(payload=bytes(l3_len - L3_WRITE_HDRS)))
    assert len(frame) == 14 + l3_len
    return frame


@pytest.fixture
def port_ns(make_netns):
    ns = make_netns()
    netns.run(["ip", "link", "set", "lo", "mtu", str(MTU)], ns=ns)
    assert pkt.PORT_IFINDEX == 1  # the namespace's loopback stands for the plane port
    return ns


@pytest.mark.parametrize("mode, outer", [("srv6", 40), ("ecmp", 0)])
def test_a_frame_that_fits_the_port_passes_one_byte_more_is_dropped_and_counted(
        port_ns, request, mode, outer):
    d = request.getfixturevalue("dp" if mode == "srv6" else "ecmp_dp")
    d.set_template([EV])
    fits, too_big = write_frame(MTU - outer), write_frame(MTU - outer + 1)
    with netns.enter(port_ns):
        res = d.egress.test_run(fits)
        assert res.retval == TC_ACT_REDIRECT and len(res.data) == 14 + MTU
        assert d.egress.test_run(too_big).retval == TC_ACT_SHOT
    st = d.stat_values()
    assert st["TX_DROP_OVERSIZE"] == 1
    assert st["TX_ENCAP" if mode == "srv6" else "TX_PLAIN"] == 1
    slot = d.peer_set(pkt.NIC_B).slots[0]
    assert (slot.tx_packets, slot.tx_bytes) == (1, 14 + MTU)  # the dropped frame is not counted sent
