// SPDX-License-Identifier: GPL-2.0
/* A program the verifier must reject: it reads the packet without a bounds check.
 * mrckit.bpf's tests use it to prove that a load failure carries the verifier log. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_unchecked_read(struct xdp_md *ctx)
{
	__u8 *data = (__u8 *)(long)ctx->data;

	return data[20] == 0x86 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
