#!/usr/bin/env python3
"""Benchmark of the eBPF switch (``ebpf/mrc_switch.bpf.c``), ratios measured in one run:

1. ns/packet of the switch under BPF_PROG_TEST_RUN divided by that of a bare XDP_REDIRECT
   program, and by that of a minimal uN switch (goal <= 1.3x the minimal uN): the cost of the
   FIB, MAC rewrite, queue model and counters beyond the uN work itself.
2. packets/s through a 2-switch veth chain with our XDP switches, divided by the same chain
   with kernel ``seg6local End flavors next-csid`` routers (goal >= 4x, moonshot 5x; measured
   when the kernel accepts seg6local), with minimal uN switches (goal >= 0.9x) and with bare
   XDP_REDIRECT programs (the ceiling of the chain). The generator is
   BPF_F_TEST_XDP_LIVE_FRAMES (an XDP_TX program in the generator namespace); the sink is an
   XDP program that counts and drops, the same in every chain. The chains are built side by
   side and take turns, CHAIN_ROUNDS rounds of LIVE_FRAMES / CHAIN_ROUNDS frames each (median).
3. the switch program's own cost per packet in each XDP chain, from the kernel's run-time
   stats (BPF_ENABLE_STATS, as ``sysctl kernel.bpf_stats_enabled=1``): run_time_ns / run_cnt
   of the programs on the two switches' ingress ports, over a live run made after the
   packets/s ones (the stats cost two clock reads a run, so they stay off while pps is taken).

The minimal uN switch does the uN work and nothing else: compare the active uSID with its
own (one array entry), shift the container when they match, look the 48-bit prefix up in a
hash FIB and redirect through a DEVMAP. No counters, no MAC rewrite, no hop limit, no queue.

Needs root and clang (the baseline, generator and sink programs are compiled here).
Prints a table and exits 0. Takes about 30-60 s.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mrckit import netns
from mrckit.bpf.attach import ifindex_of, xdp_attach, xdp_query
from mrckit.bpf.objects import BpfObject, Program, XdpMd, run_stats_enabled
from mrckit.bpf._libbpf import BPF_F_TEST_XDP_LIVE_FRAMES
from mrckit.errors import PrerequisiteError
from mrckit.switch import kernel_ref
from mrckit.switch.ebpf_target import EbpfSwitch, SwitchTables
from mrckit.topology.entries import TableEntry
from bench_result import result  # noqa: E402  (bench/: the common BENCH line)

HELPERS_C = r"""
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
struct { __uint(type, BPF_MAP_TYPE_DEVMAP); __uint(max_entries, 512);
         __type(key, __u32); __type(value, __u32); } tx_ports SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1);
         __type(key, __u32); __type(value, __u64); } seen SEC(".maps");
/* Baseline: the least an XDP switch must do, one DEVMAP redirect. */
SEC("xdp") int bare_redirect(struct xdp_md *ctx) { return bpf_redirect_map(&tx_ports, 1, 0); }
struct hdr { __u8 b[56]; };
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1);
         __type(key, __u32); __type(value, struct hdr); } template SEC(".maps");
/* Generator: with live frames, XDP_TX sends each frame out of the generator's veth. Frames
 * come back to the run's page pool as the chain left them (DA shifted, hop limit lower), so
 * the Ethernet and outer IPv6 headers are rewritten from the template first. */
SEC("xdp") int gen_tx(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    __u32 k = 0; struct hdr *t = bpf_map_lookup_elem(&template, &k);
    if (!t || data + sizeof(*t) > end) return XDP_DROP;
    __builtin_memcpy(data, t->b, sizeof(*t));
    return XDP_TX;
}
/* Sink: count and drop. */
SEC("xdp") int sink_count(struct xdp_md *ctx) {
    __u32 k = 0; __u64 *v = bpf_map_lookup_elem(&seen, &k);
    if (v) *v += 1;
    return XDP_DROP;
}
/* Baseline: a minimal uN switch (module docstring). my_sid[0] holds the switch's own 48-bit
 * prefix (locator and uSID, host order); un_fib maps a 48-bit prefix to a tx_ports key. */
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1);
         __type(key, __u32); __type(value, __u64); } my_sid SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 1024);
         __type(key, __u64); __type(value, __u32); } un_fib SEC(".maps");
struct un_da { __be32 loc; __be16 u[6]; };
SEC("xdp") int minimal_un(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);
    struct un_da *da = (void *)&ip6->daddr;
    __u32 k = 0, *port; __u64 *my, key;
    if ((void *)(ip6 + 1) > end) return XDP_DROP;
    key = ((__u64)bpf_ntohl(da->loc) << 16) | bpf_ntohs(da->u[0]);
    my = bpf_map_lookup_elem(&my_sid, &k);
    if (my && *my == key) {
        for (int i = 0; i < 5; i++) da->u[i] = da->u[i + 1];
        da->u[5] = 0;
        key = ((__u64)bpf_ntohl(da->loc) << 16) | bpf_ntohs(da->u[0]);
    }
    port = bpf_map_lookup_elem(&un_fib, &key);
    if (!port) return XDP_DROP;
    return bpf_redirect_map(&tx_ports, *port, 0);
}
char LICENSE[] SEC("license") = "GPL";
"""

LOC48 = 0xFCBBBB00 << 16
U1, U2, DST = 0x0400, 0x0805, 0x0C01
MAC = {name: f"02:00:00:00:bb:{i:02x}" for i, name in enumerate(
    ["g0", "a0", "a1", "b0", "b1", "k0"])}
TEST_RUN_REPEAT = 250
TEST_RUN_CALLS = 300
LIVE_FRAMES = 2_400_000  # per chain, over CHAIN_ROUNDS rounds
CHAIN_ROUNDS = 8
PROFILE_FRAMES = 200_000


def frame() -> bytes:
    """A 256-byte MRC write addressed through U1, U2 to DST (design section 3)."""
    da = f"fcbb:bb00:{U1:x}:{U2:x}:{DST:x}::"
    pkt = (Ether(src=MAC["g0"], dst=MAC["a0"]) / IPv6(src="2001:db8:200::1", dst=da, nh=41, tc=10 << 2) /
           IPv6(src="2001:db8:100::1", dst="2001:db8:100:1::2", nh=17) / UDP(sport=0xC000, dport=4791, chksum=0) /
           Raw(bytes([0xCA]) + bytes(11) + bytes(20) + bytes(256 - 148)))
    return bytes(pkt)


def build_helpers(tmp: str) -> str:
    src, obj = os.path.join(tmp, "bench.bpf.c"), os.path.join(tmp, "bench.bpf.o")
    with open(src, "w") as f:
        f.write(HELPERS_C)
    arch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip() or "x86_64-linux-gnu"
    subprocess.run(["clang", "-O2", "-g", "-target", "bpf", f"-I/usr/include/{arch}", "-c", src, "-o", obj], check=True)
    return obj


def mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def ns_per_packet(progs: list, data: bytes, ns: str) -> list[float]:
    """Median kernel-measured ns/run of each program over TEST_RUN_CALLS calls of
    TEST_RUN_REPEAT runs each. The programs take turns call by call, so that the load of the
    other jobs on this shared machine weighs on each alike (one program after the other, a
    ratio moved with the load between them). A test run does not restore the frame between
    repeats, so the hop limit starts at 255 and each call stays on the forwarding path (the
    first run shifts, the others hit the FIB)."""
    times: list[list[int]] = [[] for _ in progs]
    with netns.enter(ns):
        for _ in range(TEST_RUN_CALLS):
            for prog, t in zip(progs, times):
                t.append(prog.test_run(data, repeat=TEST_RUN_REPEAT).duration_ns)
    return [statistics.median(t) for t in times]


def setup_minimal_un(h: BpfObject, my: int, nxt: int) -> None:
    """Program the minimal uN switch of object ``h``: its own prefix LOC48 | ``my``, and a FIB
    entry LOC48 | ``nxt`` -> tx_ports key 1 (which the caller points at the egress device)."""
    h.map("my_sid", value_type=ctypes.c_uint64).update(0, LOC48 | my)
    h.map("un_fib", key_type=ctypes.c_uint64, value_type=ctypes.c_uint32).update(LOC48 | nxt, 1)


def test_run_ratio(helpers: str, ns: str, threshold: int) -> tuple[float, float, float]:
    """(switch, bare redirect, minimal uN) ns/packet under BPF_PROG_TEST_RUN, with the egress
    port's trim and ECN thresholds at ``threshold`` packets (0xFFFFFFFF: queue model off).
    The minimal uN switch takes the same path as ours: the first run shifts, the others hit
    the FIB."""
    data = bytearray(frame())
    data[21] = 255  # outer hop limit
    data = bytes(data)
    with BpfObject.open(helpers) as h, BpfObject.open("mrc_switch") as sw:
        h.load()
        sw.load()
        t = SwitchTables.from_object(sw)
        t.init_defaults()
        t.direct.write(TableEntry.exact("my_usid", LOC48 | U1, "usid_un"))
        t.direct.write(TableEntry.exact("usid_fib", LOC48 | U2, "set_egress", {"port": 1}))
        t.direct.write(TableEntry.exact("port_config", 1, "set_port", {"src_mac": 1, "dst_mac": 2, "faces_host": 0,
                                                     "trim_threshold": threshold, "ecn_threshold": threshold}))
        t.queues.set_rate(1, 1_000_000_000)  # never congested: measure the forwarding path
        setup_minimal_un(h, U1, U2)
        with netns.enter(ns):
            h.map("tx_ports").update(1, 1)
            t.ports.bind(1, 1)  # lo: the ingress port of test runs, and a DEVMAP target
        ours, bare, un = ns_per_packet([sw.program("mrc_switch"), h.program("bare_redirect"),
                                        h.program("minimal_un")], data, ns)
        assert t.counters.read("drop_port", 0) == (0, 0), "the bench frame must stay on the forwarding path"
        return ours, bare, un


def switch_ns_per_run(ingress: list[tuple[str, str]], run: Callable[[], None]) -> float:
    """Mean ns per run of the XDP programs attached to ``ingress`` ((namespace, interface)
    pairs) while ``run()`` sends frames through them, from the kernel's run-time stats."""
    progs = []
    try:
        for ns, ifname in ingress:
            with netns.enter(ns):
                progs.append(Program.from_id(xdp_query(ifname).prog_id))
        with run_stats_enabled():
            before = [p.run_stats() for p in progs]
            run()
            after = [p.run_stats() for p in progs]
    finally:
        for p in progs:
            p.close()
    ns = sum(a[0] - b[0] for a, b in zip(after, before))
    runs = sum(a[1] - b[1] for a, b in zip(after, before))
    return ns / runs if runs else float("nan")


class Chain:
    """gen -> S1 -> S2 -> sink in four fresh namespaces, with ``kind`` "xdp" (mrc_switch),
    "kernel" (seg6local), "minimal" (minimal uN switches) or "bare" (XDP_REDIRECT only) as S1
    and S2. Use as a context manager: everything it made is removed on exit, even on error.

    Raises:
        PrerequisiteError: kind "kernel" on a kernel without seg6local.
    """

    def __init__(self, kind: str, helpers: str):
        self.kind, self.helpers = kind, helpers
        self.names = [netns.unique_name("mrcbench") for _ in range(4)]
        self.switches: list[EbpfSwitch] = []
        self.objects: list[BpfObject] = []

    def __enter__(self) -> "Chain":
        try:
            self._build()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for sw in self.switches:
            sw.teardown()
        for n in self.names:
            netns.delete(n)
        for b in self.objects:
            b.close()

    def _build(self) -> None:
        gen, s1, s2, sink = self.names
        for n in self.names:
            netns.add(n)
        netns.veth(gen, "g0", s1, "a0")
        netns.veth(s1, "a1", s2, "b0")
        netns.veth(s2, "b1", sink, "k0")
        for ns, ifs in ((gen, ["g0"]), (s1, ["a0", "a1"]), (s2, ["b0", "b1"]), (sink, ["k0"])):
            for ifname in ifs:
                netns.run(["ip", "link", "set", ifname, "address", MAC[ifname]], ns=ns)
        if self.kind == "xdp":
            self._xdp_switches(s1, s2)
        elif self.kind in ("minimal", "bare"):
            # One object per switch: each has its own tx_ports and FIB, in its own namespace.
            for ns, inp, out, my, nxt in ((s1, "a0", "a1", U1, U2), (s2, "b0", "b1", U2, DST)):
                b = self._object()
                setup_minimal_un(b, my, nxt)
                with netns.enter(ns):
                    b.map("tx_ports").update(1, ifindex_of(out))
                    xdp_attach(inp, b.program("minimal_un" if self.kind == "minimal" else "bare_redirect"))
        else:
            for ns, inp, out, my, nxt, peer in ((s1, "a0", "a1", U1, U2, "b0"), (s2, "b0", "b1", U2, DST, "k0")):
                kernel_ref.enable_forwarding(ns)
                netns.run(["ethtool", "-K", inp, "gro", "on"], ns=ns)  # NAPI for XDP_TX into it
                kernel_ref.add_un(ns, LOC48 | my, inp)
                kernel_ref.add_fib(ns, LOC48 | nxt, out, MAC[peer])
        self.h = self._object()
        with netns.enter(sink):
            xdp_attach("k0", self.h.program("sink_count"))
        with netns.enter(gen):
            # XDP_TX on a veth needs an XDP program on the sending side's own veth too.
            xdp_attach("g0", self.h.program("sink_count"))
            self.data = frame()
            self.h.map("template").update(0, self.data[:56])
            self.ctx = XdpMd(data_end=len(self.data), ingress_ifindex=ifindex_of("g0"))
        self.send(10_000)  # warm-up: neighbour entries, page pools, caches
        time.sleep(0.2)

    def _xdp_switches(self, s1: str, s2: str) -> None:
        for ns, ports, my, nxt in ((s1, ("a0", "a1"), U1, U2), (s2, ("b0", "b1"), U2, DST)):
            sw = EbpfSwitch(ns, ns, {0: ports[0], 1: ports[1]}).setup()
            self.switches.append(sw)
            sw.tables.direct.write(TableEntry.exact("my_usid", LOC48 | my, "usid_un"))
            sw.tables.direct.write(TableEntry.exact("usid_fib", LOC48 | nxt, "set_egress", {"port": 1}))
            peer = {"a1": "b0", "b1": "k0"}[ports[1]]
            sw.tables.direct.write(TableEntry.exact("port_config", 1, "set_port", {
                "src_mac": mac_int(MAC[ports[1]]), "dst_mac": mac_int(MAC[peer]), "faces_host": 0,
                "trim_threshold": 0xFFFFFFFF, "ecn_threshold": 0xFFFFFFFF}))
            sw.tables.queues.set_rate(1, 1_000_000_000)

    def _object(self) -> BpfObject:
        b = BpfObject.open(self.helpers)
        self.objects.append(b)
        return b.load()

    def send(self, frames: int) -> None:
        """Send ``frames`` frames into the chain from the generator (live frames, XDP_TX)."""
        with netns.enter(self.names[0]):
            self.h.program("gen_tx").test_run(self.data, repeat=frames, ctx=self.ctx,
                                              flags=BPF_F_TEST_XDP_LIVE_FRAMES)

    def pps(self, frames: int) -> float:
        """Packets/s that reach the sink while ``frames`` frames are sent."""
        seen = self.h.map("seen", value_type=ctypes.c_uint64)
        before = sum(seen.lookup(0))
        start = time.perf_counter()
        self.send(frames)
        elapsed = time.perf_counter() - start
        time.sleep(0.05)  # frames still in the veth queues
        return (sum(seen.lookup(0)) - before) / elapsed

    def ns_per_run(self, frames: int) -> float:
        """Mean ns per run of the two switches' XDP programs (kinds other than "kernel")."""
        return switch_ns_per_run([(self.names[1], "a0"), (self.names[2], "b0")],
                                 lambda: self.send(frames))


def chain_rates(chains: list[Chain]) -> list[float]:
    """The median packets/s of each chain over CHAIN_ROUNDS rounds in which the chains take
    turns (as the test runs do), so that a change of the machine's load weighs on all alike."""
    rates: list[list[float]] = [[] for _ in chains]
    for _ in range(CHAIN_ROUNDS):
        for c, r in zip(chains, rates):
            r.append(c.pps(LIVE_FRAMES // CHAIN_ROUNDS))
    return [statistics.median(r) for r in rates]


def main() -> int:
    if os.geteuid() != 0 or not shutil.which("clang"):
        print("switch_forwarding: needs root and clang; skipped")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        helpers = build_helpers(tmp)
        ns = netns.unique_name("mrcbench")
        with netns.Netns(ns):
            ours_ns, bare_ns, un_ns = test_run_ratio(helpers, ns, 64)
            plain_ns, plain_bare_ns, plain_un_ns = test_run_ratio(helpers, ns, 0xFFFFFFFF)
        with contextlib.ExitStack() as stack:
            chains = {kind: stack.enter_context(Chain(kind, helpers)) for kind in ("xdp", "minimal", "bare")}
            try:
                chains["kernel"] = stack.enter_context(Chain("kernel", helpers))
            except PrerequisiteError as exc:  # a kernel built without seg6local: no kernel row
                print(f"switch_forwarding: no kernel seg6local baseline: {exc}", file=sys.stderr)
            rates = dict(zip(chains, chain_rates(list(chains.values()))))
            # Run-time stats cost every run two clock reads: taken after the rates, alone.
            runs = {kind: chains[kind].ns_per_run(PROFILE_FRAMES) for kind in ("xdp", "minimal", "bare")}
        xdp_pps, minimal_pps, bare_pps = rates["xdp"], rates["minimal"], rates["bare"]
        kernel_pps = rates.get("kernel")
        xdp_run, minimal_run, bare_run = runs["xdp"], runs["minimal"], runs["bare"]
    rows = [
        ("test_run ns/pkt, queue model on", f"{ours_ns:.1f}", f"bare XDP_REDIRECT {bare_ns:.1f}",
         f"{ours_ns / bare_ns:.2f}x", "<= 1.3x"),
        ("test_run ns/pkt, thresholds off", f"{plain_ns:.1f}", f"bare XDP_REDIRECT {plain_bare_ns:.1f}",
         f"{plain_ns / plain_bare_ns:.2f}x", "<= 1.3x"),
        ("test_run ns/pkt, queue model on", f"{ours_ns:.1f}", f"minimal uN {un_ns:.1f}",
         f"{ours_ns / un_ns:.2f}x", "<= 1.3x"),
        ("test_run ns/pkt, thresholds off", f"{plain_ns:.1f}", f"minimal uN {plain_un_ns:.1f}",
         f"{plain_ns / plain_un_ns:.2f}x", "<= 1.15x"),
        ("2-switch veth chain pps", f"{xdp_pps / 1e6:.3f} M", f"kernel seg6local {kernel_pps / 1e6:.3f} M",
         f"{xdp_pps / kernel_pps:.2f}x", ">= 4x") if kernel_pps else
        ("2-switch veth chain pps", f"{xdp_pps / 1e6:.3f} M", "kernel seg6local: refused", "-", ">= 4x"),
        ("2-switch veth chain pps", f"{xdp_pps / 1e6:.3f} M", f"minimal uN {minimal_pps / 1e6:.3f} M",
         f"{xdp_pps / minimal_pps:.2f}x", ">= 0.9x"),
        ("2-switch veth chain pps", f"{xdp_pps / 1e6:.3f} M", f"bare redirect {bare_pps / 1e6:.3f} M",
         f"{xdp_pps / bare_pps:.2f}x", ""),
        ("chain: XDP ns/pkt (run stats)", f"{xdp_run:.1f}", f"minimal uN {minimal_run:.1f}",
         f"{xdp_run / minimal_run:.2f}x", ""),
        ("chain: XDP ns/pkt (run stats)", f"{xdp_run:.1f}", f"bare redirect {bare_run:.1f}",
         f"{xdp_run / bare_run:.2f}x", ""),
    ]
    print(f"{'measure':32} {'mrc_switch':>12} {'baseline':>28} {'ratio':>7} {'goal':>8}")
    for row in rows:
        print(f"{row[0]:32} {row[1]:>12} {row[2]:>28} {row[3]:>7} {row[4]:>8}")
    result("switch BPF_PROG_TEST_RUN", ours_ns, "ns/pkt", "bare XDP_REDIRECT", bare_ns, "<= 1.3x")
    result("switch BPF_PROG_TEST_RUN, thresholds off", plain_ns, "ns/pkt", "bare XDP_REDIRECT", plain_bare_ns,
           "<= 1.3x")
    if kernel_pps:
        result("2-switch veth chain", xdp_pps, "pkt/s", "kernel seg6local next-csid", kernel_pps, ">= 4x")
    result("switch BPF_PROG_TEST_RUN vs minimal uN", ours_ns, "ns/pkt", "minimal uN switch", un_ns, "<= 1.3x")
    result("2-switch veth chain vs minimal uN", xdp_pps, "pkt/s", "minimal uN switch chain", minimal_pps,
           ">= 0.9x")
    result("2-switch veth chain vs bare redirect", xdp_pps, "pkt/s", "bare XDP_REDIRECT chain", bare_pps)
    result("switch BPF_PROG_TEST_RUN, thresholds off vs minimal uN", plain_ns, "ns/pkt", "minimal uN switch",
           plain_un_ns, "<= 1.15x")
    result("2-switch veth chain, switch run time vs minimal uN", xdp_run, "ns/pkt", "minimal uN switch",
           minimal_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
