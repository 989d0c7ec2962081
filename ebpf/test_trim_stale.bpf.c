// SPDX-License-Identifier: GPL-2.0
/*
 * test_trim_stale: a switch that trims as SONiC and Cumulus do, for the host e2e test of
 * trims with stale lengths (tests/e2e/host/test_host_stale_trim.py; docs/host.md).
 *
 * Placed in front of the host's XDP program on a plane port, which it tail-calls through
 * `next` (one XDP program per interface, as mrc_fault does), it plays the last switch of the
 * path: every encapsulated MRC write whose PSN is a multiple of `every` (retransmissions
 * excepted, so the write can finish) is cut to `size` bytes and its outer DSCP set to `dscp`,
 * and the IPv6 payload lengths and the UDP length are left as they were: larger than the frame,
 * as those switches leave them (sonic-mgmt's packet-trimming test plan, section 5). Our own
 * switch corrects them (design 4, step 5). XDP, because tc cannot cut the tail of a frame the
 * host's tc egress encapsulated (bpf_skb_change_tail refuses skb->encapsulation).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "mrc_parse.h"

struct trim_cfg {
	__u32 size;  /* frame bytes kept, from Ethernet; 0 = off */
	__u32 every; /* trim PSNs that are multiples of this; 0 = off */
	__u32 dscp;  /* the remark: TRIMMED or TRIMMED_LASTHOP */
	__u32 pad;
};

struct trim_stats {
	__u64 seen;    /* encapsulated MRC writes */
	__u64 trimmed;
	__u64 failed;  /* bpf_xdp_adjust_tail() refused: the frame was dropped */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct trim_cfg);
} trim_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct trim_stats);
} trim_stats SEC(".maps");

/* The program that was attached before us (slot 0): the host's XDP ingress. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} next SEC(".maps");

static __always_inline void trim(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct trim_stats *st;
	struct trim_cfg *cfg;
	struct mrc_pkt p;
	__u32 zero = 0, len = data_end - data;
	__u8 tclass;

	cfg = bpf_map_lookup_elem(&trim_cfg, &zero);
	st = bpf_map_lookup_elem(&trim_stats, &zero);
	if (!cfg || !st || !cfg->size || !cfg->every)
		return;
	mrc_parse(&p, data, data_end);
	if (!p.inner || p.ip != p.inner || !p.bth || !mrc_is_rocev2(p.udp) ||
	    !mrc_is_write(p.bth->opcode))
		return;
	__sync_fetch_and_add(&st->seen, 1);
	if ((p.bth->flags & MRC_BTH_FLAG_RTX) || mrc_get24(p.bth->psn) % cfg->every ||
	    len <= cfg->size)
		return;
	tclass = mrc_ipv6_tclass(p.outer);
	mrc_ipv6_set_tclass(p.outer, (__u8)(cfg->dscp << MRC_IPV6_DSCP_SHIFT) |
				     (tclass & MRC_IPV6_ECN_MASK));
	if (bpf_xdp_adjust_tail(ctx, (int)cfg->size - (int)len))
		__sync_fetch_and_add(&st->failed, 1);
	else
		__sync_fetch_and_add(&st->trimmed, 1);
}

SEC("xdp")
int trim_stale(struct xdp_md *ctx)
{
	trim(ctx);
	bpf_tail_call(ctx, &next, 0);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
