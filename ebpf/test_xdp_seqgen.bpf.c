// SPDX-License-Identifier: GPL-2.0
/* Packet generator for tests that need order: with BPF_F_TEST_XDP_LIVE_FRAMES, writes a
 * 32-bit big-endian sequence number right after the Ethernet header of each frame, then
 * redirects it through DEVMAP slot 0. The receiver can check loss, duplicates and order. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} next_seq SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} tx_port SEC(".maps");

SEC("xdp")
int xdp_seqgen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__be32 *seq_out = data + sizeof(struct ethhdr);
	__u32 key = 0, *seq;

	if ((void *)(seq_out + 1) > data_end)
		return XDP_ABORTED;
	seq = bpf_map_lookup_elem(&next_seq, &key);
	if (!seq)
		return XDP_ABORTED;
	/* A test run executes on one CPU, so a plain increment is exact (and -mcpu=v1 has no
	 * fetch-and-add with a result). */
	*seq_out = bpf_htonl(*seq);
	*seq += 1;
	return bpf_redirect_map(&tx_port, 0, XDP_DROP);
}

char LICENSE[] SEC("license") = "GPL";
