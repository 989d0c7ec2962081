"""mrckit.bpf: BPF_PROG_TEST_RUN, including live frames as a packet generator."""

import ctypes

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from support.bpfcore_helpers import CfgVal, PktStats
from mrckit import bpf, netns

FRAME = bytes(Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01") /
              IPv6(src="2001:db8::1", dst="2001:db8::2") / UDP(sport=1234, dport=4791) / (b"x" * 40))
KIND_IPV6 = 0xDD  # low octet of EtherType 0x86DD: the key xdp_count counts IPv6 under
# Generated frames carry the local experimental EtherType 0x88B5, so the kernel's own IPv6
# chatter (router solicitations, MLD) on the veth cannot be counted with them.
PROBE = bytes(Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01", type=0x88B5) / (b"p" * 60))
KIND_PROBE = 0xB5


def test_xdp_pass_returns_the_packet_unchanged(need_bpf):
    with bpf.BpfObject.open("test_xdp_pass") as obj:
        res = obj.load().program("xdp_pass").test_run(FRAME)
    assert res.retval == bpf.XDP_PASS
    assert res.data == FRAME


def test_run_stats_count_runs_only_while_enabled(need_bpf):
    with bpf.BpfObject.open("test_xdp_pass") as obj:
        prog = obj.load().program("xdp_pass")
        with bpf.run_stats_enabled():
            before = prog.run_stats()
            prog.test_run(FRAME, repeat=100)
            during = prog.run_stats()
        # Another holder (sysctl kernel.bpf_stats_enabled=1) may keep stats on after ours.
        stats_off = open("/proc/sys/kernel/bpf_stats_enabled").read().strip() == "0"
        prog.test_run(FRAME, repeat=100)
        after = prog.run_stats()
    assert during[1] - before[1] == 100
    assert during[0] > before[0]
    if stats_off:
        assert after == during


def test_data_out_and_counters_after_repeat(need_bpf):
    with bpf.BpfObject.open("test_maps") as obj:
        obj.load()
        cfg = obj.map("cfg", key_type=ctypes.c_uint32, value_type=CfgVal)
        cfg.update(0, CfgVal((ctypes.c_uint8 * 6)(0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF), 0, bpf.XDP_TX))
        res = obj.program("xdp_count").test_run(FRAME, repeat=25)
        stats = obj.map("stats", key_type=ctypes.c_uint32, value_type=PktStats)
        per_cpu = stats.lookup(KIND_IPV6)
        total = stats.lookup_sum(KIND_IPV6)
    assert res.retval == bpf.XDP_TX
    assert res.data == bytes.fromhex("aabbccddeeff") + FRAME[6:]
    assert len(per_cpu) == bpf.possible_cpus()
    assert (total.packets, total.bytes, total.last_len, total.kind) == (25, 25 * len(FRAME), len(FRAME), KIND_IPV6)


def test_ctx_in_and_out(need_bpf):
    ctx = bpf.XdpMd(data=0, data_end=len(FRAME), ingress_ifindex=1)  # lo exists in every netns
    with bpf.BpfObject.open("test_xdp_pass") as obj:
        res = obj.load().program("xdp_pass").test_run(FRAME, ctx=ctx)
    out = bpf.XdpMd.from_buffer_copy(res.ctx)
    assert (out.data_end, out.ingress_ifindex) == (len(FRAME), 1)


def test_too_small_output_buffer_is_reported(need_bpf):
    with bpf.BpfObject.open("test_xdp_pass") as obj:
        with pytest.raises(bpf.BpfError) as info:
            obj.load().program("xdp_pass").test_run(FRAME, data_out_size=10)
    assert info.value.errno == 28  # ENOSPC


def test_live_frames_reach_a_real_interface(veth_pair):
    """XDP_REDIRECT from a live-frames run transmits: the peer's XDP program counts them."""
    ns_a, va, ns_b, vb = veth_pair
    sent = 100  # below the veth ring size (256), so no frame can be dropped for space
    with bpf.BpfObject.open("test_xdp_redirect") as gen, bpf.BpfObject.open("test_maps") as rx:
        gen.load(), rx.load()
        with netns.enter(ns_b):
            bpf.xdp_attach(vb, rx.program("xdp_count"), "native")
        try:
            with netns.enter(ns_a):
                gen.map("tx_port").update(0, bpf.ifindex_of(va))
                res = gen.program("xdp_redirect_baseline").test_run(
                    PROBE, repeat=sent, flags=bpf.BPF_F_TEST_XDP_LIVE_FRAMES,
                    ctx=bpf.XdpMd(data_end=len(PROBE), ingress_ifindex=1))
            stats = rx.map("stats", key_type=ctypes.c_uint32, value_type=PktStats)
            got = stats.lookup_sum(KIND_PROBE)
        finally:
            with netns.enter(ns_b):
                bpf.xdp_detach(vb)
    assert res.data == b""
    assert (got.packets, got.bytes) == (sent, sent * len(PROBE))
