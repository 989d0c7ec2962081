#!/usr/bin/env python3
"""Packet rate through one MRC switch: bmv2 (``p4src/mrc_switch.p4``) next to the eBPF switch
(``ebpf/mrc_switch.bpf.c``), measured in the same run with the same generator and sink.

Topology: gen (g0) -- switch (a0 = port 0, a1 = port 1) -- sink (k0). Both switches get the
same tables: my_usid for the first uSID (uN shift), usid_fib for the next one -> port 1,
port_config for port 1 with thresholds out of reach. The generator is an XDP_TX program run
with BPF_F_TEST_XDP_LIVE_FRAMES in the gen namespace, offering far more than either switch
forwards; the sink is an XDP program that counts and drops. The rate is the sink's count over
the generation window (steady state), so a backlog draining afterwards does not count.

The eBPF baseline is the reference: the table prints bmv2's rate as a ratio of it.
Needs root, clang, and simple_switch_grpc (else bmv2's row says why). About 20-30 s.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from switch_forwarding import LOC48, MAC, U1, U2, frame, mac_int  # noqa: E402

from bench_result import result  # noqa: E402
from mrckit import netns  # noqa: E402
from mrckit.bpf._libbpf import BPF_F_TEST_XDP_LIVE_FRAMES  # noqa: E402
from mrckit.bpf.attach import ifindex_of, xdp_attach  # noqa: E402
from mrckit.bpf.objects import BpfObject, XdpMd  # noqa: E402
from mrckit.switch.bmv2 import DEFAULT_JSON, DEFAULT_P4INFO, Bmv2Switch, find_tool  # noqa: E402
from mrckit.bpf.fs import ensure_bpffs  # noqa: E402
from mrckit.switch.ebpf_target import EbpfSwitch, switch_pin_dir  # noqa: E402
from mrckit.wire.pipeline import THRESHOLD_NONE  # noqa: E402
from mrckit.topology.entries import TableEntry  # noqa: E402

GEN_C = r"""
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1);
         __type(key, __u32); __type(value, __u64); } seen SEC(".maps");
/* Generator. Live frames recycle their pages, and the eBPF switch edits frames in place
 * (hop limit, uN shift), so restore the outer hop limit and DA before every XDP_TX. */
SEC("xdp") int gen_tx(struct xdp_md *ctx) {
    unsigned char *d = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    if (d + 54 > end) return XDP_DROP;
    d[21] = 64;                                   /* outer hop limit */
    d[42] = DA4; d[43] = DA5; d[44] = DA6; d[45] = DA7; d[46] = DA8; d[47] = DA9;
    return XDP_TX;
}
SEC("xdp") int sink_count(struct xdp_md *ctx) {
    __u32 k = 0; __u64 *v = bpf_map_lookup_elem(&seen, &k);
    if (v) *v += 1;
    return XDP_DROP;
}
char LICENSE[] SEC("license") = "GPL";
"""
WINDOW_S = 3.0
BATCH = 20_000
"""Frames per live-frames test run; runs repeat until the window ends."""
PORT1 = {"src_mac": mac_int(MAC["a1"]), "dst_mac": mac_int(MAC["k0"]), "faces_host": 0,
         "trim_threshold": THRESHOLD_NONE, "ecn_threshold": THRESHOLD_NONE}


class Fabric:
    """The three namespaces and two veth pairs; removed on exit."""

    def __init__(self):
        self.gen, self.sw, self.sink = (netns.unique_name("mrcbench") for _ in range(3))

    def __enter__(self) -> "Fabric":
        try:
            for ns in (self.gen, self.sw, self.sink):
                netns.add(ns)
            netns.veth(self.gen, "g0", self.sw, "a0")
            netns.veth(self.sw, "a1", self.sink, "k0")
            for ns, ifname in ((self.gen, "g0"), (self.sw, "a0"), (self.sw, "a1"), (self.sink, "k0")):
                netns.run(["ip", "link", "set", ifname, "address", MAC[ifname]], ns=ns)
                netns.run(["sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1"], ns=ns)
            # XDP_TX from g0 needs NAPI on a0; bmv2 leaves a0 without an XDP program.
            netns.run(["ethtool", "-K", "a0", "gro", "on"], ns=self.sw)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for ns in (self.gen, self.sw, self.sink):
            netns.delete(ns)


def build_helpers(tmp: str) -> str:
    """Compile the generator and sink, with the frame's outer DA bytes 4..9 built in."""
    da = frame()[38:54]
    src, obj = os.path.join(tmp, "gen.bpf.c"), os.path.join(tmp, "gen.bpf.o")
    with open(src, "w") as f:
        f.write(GEN_C)
    arch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    defs = [f"-DDA{i}={da[i]}" for i in range(4, 10)]
    subprocess.run(["clang", "-O2", "-g", "-target", "bpf", f"-I/usr/include/{arch or 'x86_64-linux-gnu'}",
                    *defs, "-c", src, "-o", obj], check=True)
    return obj


def measure(fab: Fabric, helpers: BpfObject) -> tuple[float, float]:
    """(offered, delivered) packets/s while the generator runs for WINDOW_S."""
    seen = helpers.map("seen", value_type=ctypes.c_uint64)
    data = frame()
    with netns.enter(fab.gen):
        ctx = XdpMd(data_end=len(data), ingress_ifindex=ifindex_of("g0"))
        gen = helpers.program("gen_tx")
        gen.test_run(data, repeat=1000, ctx=ctx, flags=BPF_F_TEST_XDP_LIVE_FRAMES)   # warm-up
        time.sleep(0.3)
        before, start, runs = sum(seen.lookup(0)), time.perf_counter(), 0
        while time.perf_counter() - start < WINDOW_S:
            gen.test_run(data, repeat=BATCH, ctx=ctx, flags=BPF_F_TEST_XDP_LIVE_FRAMES)
            runs += 1
        elapsed = time.perf_counter() - start
        delivered = sum(seen.lookup(0)) - before
    return runs * BATCH / elapsed, delivered / elapsed


def attach_gen_and_sink(fab: Fabric, helpers: BpfObject) -> None:
    with netns.enter(fab.sink):
        xdp_attach("k0", helpers.program("sink_count"))
    with netns.enter(fab.gen):
        xdp_attach("g0", helpers.program("sink_count"))   # XDP_TX on a veth needs XDP here too


def ebpf_rate(helpers_path: str) -> tuple[float, float]:
    with Fabric() as fab, BpfObject.open(helpers_path) as helpers:
        helpers.load()
        ensure_bpffs()
        os.makedirs(os.path.dirname(switch_pin_dir(fab.sw)), exist_ok=True)   # see docs/ebpf-switch.md
        sw = EbpfSwitch(fab.sw, fab.sw, {0: "a0", 1: "a1"}).setup()
        try:
            sw.tables.direct.write(TableEntry.exact("my_usid", LOC48 | U1, "usid_un"))
            sw.tables.direct.write(TableEntry.exact("usid_fib", LOC48 | U2, "set_egress", {"port": 1}))
            sw.tables.direct.write(TableEntry.exact("port_config", 1, "set_port", PORT1))
            sw.tables.queues.set_rate(1, 1_000_000_000)   # the queue model must not trim or drop here
            attach_gen_and_sink(fab, helpers)
            return measure(fab, helpers)
        finally:
            sw.teardown()


async def install_bmv2_tables(address: str) -> None:
    """The same entries, through P4Runtime (finsy), as the controller would write them."""
    import finsy as fy

    key = "hdr.outer_ipv6.dst_addr[127:80]"
    opts = fy.SwitchOptions(p4info=DEFAULT_P4INFO, p4blob=DEFAULT_JSON, device_id=1)
    async with fy.Switch("bench", address, opts) as sw:
        await sw.write([
            +fy.P4TableEntry("my_usid", match=fy.P4TableMatch({key: LOC48 | U1}), action=fy.P4TableAction("usid_un")),
            +fy.P4TableEntry("usid_fib", match=fy.P4TableMatch({key: LOC48 | U2}),
                             action=fy.P4TableAction("set_egress", port=1)),
            +fy.P4TableEntry("port_config", match=fy.P4TableMatch({"standard_metadata.egress_spec": 1}),
                             action=fy.P4TableAction("set_port", **PORT1)),
        ])


def bmv2_rate(helpers_path: str) -> tuple[float, float]:
    with Fabric() as fab, BpfObject.open(helpers_path) as helpers:
        helpers.load()
        with Bmv2Switch(fab.sw, fab.sw, {0: "a0", 1: "a1"}, log_level="off") as sw:
            asyncio.run(install_bmv2_tables(sw.grpc_address))
            attach_gen_and_sink(fab, helpers)
            return measure(fab, helpers)


def main() -> int:
    if os.geteuid() != 0 or not shutil.which("clang"):
        print("bmv2_vs_ebpf: needs root and clang; skipped")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        helpers = build_helpers(tmp)
        ebpf_offered, ebpf_pps = ebpf_rate(helpers)
        why_not = None
        if find_tool("simple_switch_grpc") is None:
            why_not = "simple_switch_grpc not found (PATH or /opt/p4tools/bin)"
        elif not DEFAULT_JSON.is_file():
            why_not = f"{DEFAULT_JSON} missing (make p4)"
        bmv2_offered, bmv2_pps = (None, None) if why_not else bmv2_rate(helpers)
    print(f"{'switch (one; uN + FIB + port_config)':38} {'offered pps':>12} {'forwarded pps':>14} {'vs eBPF':>9}")
    print(f"{'eBPF XDP native (baseline)':38} {ebpf_offered:>12,.0f} {ebpf_pps:>14,.0f} {'1.00x':>9}")
    if bmv2_pps is None:
        print(f"{'bmv2 simple_switch_grpc':38} {'-':>12} {'-':>14} {'-':>9}  ({why_not})")
    else:
        print(f"{'bmv2 simple_switch_grpc':38} {bmv2_offered:>12,.0f} {bmv2_pps:>14,.0f} "
              f"{bmv2_pps / ebpf_pps:>8.4f}x")
        result("bmv2 forwarding rate, one switch", bmv2_pps, "pkt/s", "eBPF XDP switch", ebpf_pps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
