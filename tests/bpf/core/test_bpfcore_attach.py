"""mrckit.bpf: XDP and tc attachment on a veth pair in namespaces, proven with real frames."""

import ctypes

import pytest
from scapy.layers.l2 import Ether

from support.bpfcore_helpers import PktStats, mac_of, send_frames
from mrckit import bpf, netns

KIND_PROBE = 0xB5  # both programs count by the EtherType's low octet (probes: 0x88B5)


def probes(ns_a, va, ns_b, vb, n):
    frame = bytes(Ether(dst=mac_of(ns_b, vb), src=mac_of(ns_a, va), type=0x88B5) / (b"q" * 50))
    return [frame] * n


def counted(obj, key):
    return obj.map("stats", key_type=ctypes.c_uint32, value_type=PktStats).lookup_sum(key).packets


def clsact_present(ns, ifname):
    return "clsact" in netns.run(["tc", "qdisc", "show", "dev", ifname], ns=ns).stdout.decode()


@pytest.fixture
def counter(need_bpf):
    with bpf.BpfObject.open("test_maps") as obj:
        yield obj.load()


def test_xdp_native_attach_counts_real_frames_then_detach(veth_pair, counter):
    ns_a, va, ns_b, vb = veth_pair
    prog = counter.program("xdp_count")
    with netns.enter(ns_b):
        assert bpf.xdp_attach(vb, prog, "native") == "native"
        info = bpf.xdp_query(vb)
    try:
        assert (info.mode, info.prog_id, info.drv_prog_id) == ("native", prog.id, prog.id)
        send_frames(ns_a, va, probes(*veth_pair, 5))
        assert counted(counter, KIND_PROBE) == 5
    finally:
        with netns.enter(ns_b):
            assert bpf.xdp_detach(vb) is True
            assert bpf.xdp_query(vb).mode is None
            assert bpf.xdp_detach(vb) is False
    send_frames(ns_a, va, probes(*veth_pair, 3))
    assert counted(counter, KIND_PROBE) == 5  # detached: nothing counts any more


def test_xdp_generic_and_auto_modes(veth_pair, counter):
    ns_a, va, _, _ = veth_pair
    prog = counter.program("xdp_count")
    with netns.enter(ns_a):
        try:
            assert bpf.xdp_attach(va, prog, "generic") == "generic"
            assert bpf.xdp_query(va).skb_prog_id == prog.id
            bpf.xdp_detach(va)
            assert bpf.xdp_attach(va, prog, "auto") == "native"  # veth has native XDP
        finally:
            bpf.xdp_detach(va)


def test_xdp_attach_refuses_to_clobber_unless_asked(veth_pair, counter, need_bpf):
    ns_a, va, _, _ = veth_pair
    with bpf.BpfObject.open("test_xdp_pass") as other:
        other.load()
        with netns.enter(ns_a):
            try:
                bpf.xdp_attach(va, counter.program("xdp_count"))
                with pytest.raises(bpf.BpfError, match="already attached"):
                    bpf.xdp_attach(va, other.program("xdp_pass"))
                assert bpf.xdp_query(va).prog_id == counter.program("xdp_count").id
                bpf.xdp_attach(va, other.program("xdp_pass"), replace=True)
                assert bpf.xdp_query(va).prog_id == other.program("xdp_pass").id
            finally:
                bpf.xdp_detach(va)


def test_bad_arguments_leave_nothing(veth_pair, counter):
    ns_a, va, _, _ = veth_pair
    with netns.enter(ns_a):
        with pytest.raises(bpf.BpfError, match="no interface 'nope0'"):
            bpf.xdp_attach("nope0", counter.program("xdp_count"))
        with pytest.raises(ValueError, match="XDP mode"):
            bpf.xdp_attach(va, counter.program("xdp_count"), "turbo")
        # An XDP program is not a tc classifier: the kernel refuses, and the clsact qdisc
        # that tc_attach created for it is gone again.
        with pytest.raises(bpf.BpfError, match="tc ingress attach"):
            bpf.tc_attach(va, counter.program("xdp_count"), "ingress")
        assert bpf.xdp_query(va).mode is None
    assert not clsact_present(ns_a, va)


@pytest.mark.parametrize("direction", ["ingress", "egress"])
def test_tc_clsact_attach_counts_real_frames_then_detach(veth_pair, counter, direction):
    ns_a, va, ns_b, vb = veth_pair
    # egress: on the sender's side; ingress: on the receiver's side.
    ns, ifname = (ns_a, va) if direction == "egress" else (ns_b, vb)
    prog = counter.program("tc_count")
    with netns.enter(ns):
        assert bpf.tc_attach(ifname, prog, direction) == prog.id
    try:
        assert clsact_present(ns, ifname)
        with netns.enter(ns):
            assert bpf.tc_query(ifname, direction) == prog.id
            with pytest.raises(bpf.BpfError, match="exists"):
                bpf.tc_attach(ifname, prog, direction)
        send_frames(ns_a, va, probes(*veth_pair, 4))
        assert counted(counter, KIND_PROBE) == 4
    finally:
        with netns.enter(ns):
            assert bpf.tc_detach(ifname, direction) is True
            assert bpf.tc_query(ifname, direction) == 0
    assert not clsact_present(ns, ifname)


def test_tc_detach_keeps_clsact_while_the_other_direction_has_a_filter(veth_pair, counter):
    ns_a, va, _, _ = veth_pair
    prog = counter.program("tc_count")
    with netns.enter(ns_a):
        try:
            bpf.tc_attach(va, prog, "ingress")
            bpf.tc_attach(va, prog, "egress")
            bpf.tc_detach(va, "ingress")
            assert clsact_present(ns_a, va) and bpf.tc_query(va, "egress") == prog.id
            bpf.tc_detach(va, "egress")
        finally:
            bpf.tc_hook_destroy(va)
    assert not clsact_present(ns_a, va)


def test_auto_falls_back_to_generic_where_native_is_missing(make_netns, counter):
    ns = make_netns()  # loopback has no native XDP
    prog = counter.program("xdp_count")
    with netns.enter(ns):
        with pytest.raises(bpf.BpfError, match="does not support this XDP mode") as info:
            bpf.xdp_attach("lo", prog, "native")
        assert info.value.errno == 95  # EOPNOTSUPP
        try:
            assert bpf.xdp_attach("lo", prog, "auto") == "generic"
            assert bpf.xdp_query("lo").skb_prog_id == prog.id
        finally:
            bpf.xdp_detach("lo")
        assert bpf.xdp_query("lo").mode is None
