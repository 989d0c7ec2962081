"""Host dataplane cost per packet, as ratios against baselines measured in the same run.

- tc egress (pick a GOOD EV, write it, push the outer IPv6 header, redirect) divided by a bare
  tc program that only calls bpf_redirect (goal: <= 2x), and by a minimal encap program that
  pushes an outer IPv6 header with bpf_skb_adjust_room, writes it and redirects (goal: <= 1.5x):
  the cost of the EV pick and state beyond the encapsulation itself;
- XDP ingress decap (copy DSCP/CE/flow label, strip the outer header) divided by XDP_PASS;
- the same two programs in EV-hash (ecmp) mode: tc egress writes the EV and the MACs
  with no outer header; XDP ingress checks a plain packet and passes it up as is.

Each program runs once per BPF_PROG_TEST_RUN call on a fresh copy of the packet (a repeated
run would see its own output: encapsulated or decapsulated), and the kernel's own measure of
the run is averaged over many calls. The baselines are compiled here with clang, so the
packaged object holds only the real programs. Needs root. Prints a table; exits 0.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support
from bench_result import result  # noqa: E402  (bench/: the common BENCH line)

CALLS = 20_000
BASELINES = r"""
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
SEC("tc") int bare_redirect(struct __sk_buff *skb) { return bpf_redirect(1, 0); }
SEC("xdp") int bare_pass(struct xdp_md *ctx) { return XDP_PASS; }
/* Baseline: the least an SRv6 encapsulating NIC does: room for an outer IPv6 header, the
 * Ethernet and outer IPv6 headers written (fixed addresses, payload length from the frame),
 * redirect. No EV, no maps, no counters. */
struct outer { struct ethhdr eth; struct ipv6hdr ip6; } __attribute__((packed));
SEC("tc") int minimal_encap(struct __sk_buff *skb) {
    struct outer h = {};
    void *data, *end;
    if (bpf_skb_adjust_room(skb, sizeof(struct ipv6hdr), BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_ENCAP_L3_IPV6))
        return TC_ACT_SHOT;
    h.eth.h_proto = bpf_htons(ETH_P_IPV6);
    h.ip6.version = 6;
    h.ip6.payload_len = bpf_htons(skb->len - sizeof(h));
    h.ip6.nexthdr = IPPROTO_IPV6;
    h.ip6.hop_limit = 64;
    h.ip6.saddr.in6_u.u6_addr32[0] = bpf_htonl(0x20010db8);
    h.ip6.daddr.in6_u.u6_addr32[0] = bpf_htonl(0xfcbbbb00);
    data = (void *)(long)skb->data;
    end = (void *)(long)skb->data_end;
    if (data + sizeof(h) > end) {
        if (bpf_skb_store_bytes(skb, 0, &h, sizeof(h), 0))
            return TC_ACT_SHOT;
    } else {
        __builtin_memcpy(data, &h, sizeof(h));
    }
    return bpf_redirect(1, 0);
}
char LICENSE[] SEC("license") = "GPL";
"""


def build_baselines(tmp: str) -> str:
    src, obj = os.path.join(tmp, "baseline.bpf.c"), os.path.join(tmp, "baseline.bpf.o")
    Path(src).write_text(BASELINES)
    arch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    subprocess.run(["clang", "-O2", "-g", "-target", "bpf", f"-I/usr/include/{arch or 'x86_64-linux-gnu'}",
                    "-c", src, "-o", obj], check=True)
    return obj


def ns_per_packet(runs: list, calls: int = CALLS) -> list[float]:
    """The median of many single runs of each (program, frame) of ``runs``: robust to the
    other jobs on this shared machine. The programs take turns run by run, so that a change
    of load weighs on a program and its baseline alike."""
    times: list[list[int]] = [[] for _ in runs]
    for _ in range(calls):
        for (prog, frame), t in zip(runs, times):
            t.append(prog.test_run(frame).duration_ns)
    return [statistics.median(t) for t in times]


def main() -> int:
    if os.geteuid() != 0:
        print("host_spray: needs root (BPF_PROG_TEST_RUN)")
        return 0
    from support import host_pkt as pkt
    from support.host_pkt import Dscp, Ecn

    from mrckit.bpf.objects import BpfObject
    from mrckit.host.dataplane import HostDataplane
    from mrckit.host.evset import build_template
    from mrckit.wire.ev import ev_pack

    dp, ecmp = HostDataplane(), HostDataplane(mode="ecmp")
    pkt.configure_host_a(dp)
    pkt.configure_host_a(ecmp, mode="ecmp")
    write = pkt.plain(pkt.NIC_A, pkt.NIC_B, pkt.write_payload(payload=bytes(2048)))
    for d, opaque in ((dp, False), (ecmp, True)):
        d.set_template(build_template({0: 4, 1: 4}, count=128, seed=1, opaque=opaque).active)
        d.egress.test_run(write)  # the peer's EV set exists from here on
    plain = pkt.plain(pkt.NIC_B, pkt.NIC_A, pkt.write_payload(payload=bytes(2048)), sport=0x1234, fl=5,
                      tc=pkt.tclass(Dscp.TRIMMABLE, Ecn.CE))
    encapped = pkt.encapped(pkt.NIC_B, pkt.NIC_A, pkt.write_payload(payload=bytes(2048)),
                            ev=ev_pack(0, 1, 5), outer_tc=pkt.tclass(Dscp.TRIMMABLE, Ecn.CE),
                            inner_tc=pkt.tclass(Dscp.TRIMMABLE, Ecn.ECT0))
    with tempfile.TemporaryDirectory() as tmp, BpfObject.open(build_baselines(tmp)) as base:
        base.load()
        egress_ns, minimal_ns, bare_ns, ecmp_ns = ns_per_packet(
            [(dp.egress, write), (base.program("minimal_encap"), write),
             (base.program("bare_redirect"), write), (ecmp.egress, write)])
        decap_ns, pass_ns, plain_ns, plain_pass_ns = ns_per_packet(
            [(dp.ingress, encapped), (base.program("bare_pass"), encapped),
             (ecmp.ingress, plain), (base.program("bare_pass"), plain)])
        rows = [("tc egress: spray + encap + redirect", egress_ns, "bare tc redirect", bare_ns),
                ("XDP ingress: decap", decap_ns, "XDP_PASS", pass_ns),
                ("tc egress, ecmp mode: spray + redirect", ecmp_ns, "bare tc redirect", bare_ns),
                ("XDP ingress, ecmp mode: plain packet", plain_ns, "XDP_PASS", plain_pass_ns)]
    # Mode and locator are load-time rodata: the verifier drops the other mode's code.
    from mrckit.bpf.objects import _prog_info
    sizes = {m: [_prog_info(p.fd).xlated_prog_len // 8 for p in (d.egress, d.ingress)]
             for m, d in (("srv6", dp), ("ecmp", ecmp))}
    dp.close(), ecmp.close()
    for m, (eg, ing) in sizes.items():
        print(f"{m} mode: xlated instructions, tc egress {eg}, XDP ingress {ing}")
    print(f"{'program':42} {'ns/pkt':>8}   {'baseline':22} {'ns/pkt':>8}   {'ratio':>6}")
    for name, ns, bname, bns in rows:
        print(f"{name:42} {ns:8.1f}   {bname:22} {bns:8.1f}   {ns / max(bns, 1):6.2f}x")
        result(name, ns, "ns/pkt", bname, bns, "<= 2x" if name.startswith("tc") else "")
    name = "tc egress: spray + encap + redirect vs minimal encap"
    print(f"{name:42} {egress_ns:8.1f}   {'minimal encap':22} {minimal_ns:8.1f}   "
          f"{egress_ns / max(minimal_ns, 1):6.2f}x")
    result(name, egress_ns, "ns/pkt", "minimal encap", minimal_ns, "<= 1.5x")
    print(f"({CALLS} single runs each, taking turns, median of the kernel's per-run time; goal for tc egress: "
          "<= 2x a bare redirect, <= 1.5x the minimal encap)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
