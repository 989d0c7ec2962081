// SPDX-License-Identifier: GPL-2.0
/* xdp_pass for multi-buffer (jumbo) frames: an xdp.frags program. The fault tests use it as
 * the resident program that mrc_fault must chain to with its xdp.frags variant. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp.frags")
int xdp_frags_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
