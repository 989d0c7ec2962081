// SPDX-License-Identifier: GPL-2.0
/* The smallest XDP program: passes every packet. Used by `mrc doctor` and the mrckit.bpf tests. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
