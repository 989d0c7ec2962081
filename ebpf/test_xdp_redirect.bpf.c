// SPDX-License-Identifier: GPL-2.0
/* Baseline for benchmarks: swap nothing, redirect every packet through a DEVMAP slot 0.
 * Its ns/packet under BPF_PROG_TEST_RUN is the denominator of the switch's forwarding cost. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u32);
} tx_port SEC(".maps");

SEC("xdp")
int xdp_redirect_baseline(struct xdp_md *ctx)
{
	return bpf_redirect_map(&tx_port, 0, XDP_DROP);
}

char LICENSE[] SEC("license") = "GPL";
