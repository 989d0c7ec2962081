// SPDX-License-Identifier: GPL-2.0
/*
 * ebpf/host/xdp_ingress.c: the XDP ingress program mrc_host_ingress (design section 5).
 * Compiled as part of the mrc_host object (ebpf/mrc_host.bpf.c), whose maps it shares.
 */
#include "mrc_parse.h"
#include "decap.h"

SEC("xdp")
int mrc_host_ingress(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ipv6hdr *outer, *inner;
	struct ethhdr eth;
	struct host_config *cfg;
	struct mrc_pkt p;
	__u32 zero = 0;
	__u16 plen, iplen;

	mrc_parse(&p, data, data_end);
	outer = p.outer;
	if (!outer || outer->version != 6)
		goto other;
	cfg = bpf_map_lookup_elem(&host_config, &zero);
	if (!cfg)
		goto other;
	if (host_load.mode == HOST_MODE_ECMP) {
		/* No outer header in this mode: encapsulated frames are not this fabric's. */
		int verdict = outer->nexthdr == MRC_IPPROTO_UDP ? rx_plain(cfg, &p) : -1;

		if (verdict >= 0)
			return verdict;
		goto other;
	}
	if (outer->nexthdr != MRC_IPPROTO_IPV6)
		goto other;
	if (!cfg->configured) {
		count(STAT_RX_DROP_NOT_CONFIGURED);
		return XDP_DROP;
	}
	inner = p.inner;
	if (!inner || inner->version != 6) {
		count(STAT_RX_DROP_MALFORMED);
		return XDP_DROP;
	}
	plen = bpf_ntohs(outer->payload_len);
	iplen = bpf_ntohs(inner->payload_len);
	if (plen != iplen + MRC_IPV6_LEN) {
		count(STAT_RX_DROP_MALFORMED);
		return XDP_DROP;
	}
	if ((void *)(inner + 1) + iplen > data_end) {
		/* Shorter than its lengths say: a trim from a switch that leaves them stale is
		 * repaired and goes on to be NACKed; anything else is malformed. */
		if (p.ip != inner || !stale_trim(&p, outer, iplen)) {
			count(STAT_RX_DROP_MALFORMED);
			return XDP_DROP;
		}
		iplen = repair_trim(&p);
	}
	if (!addr_eq(&inner->daddr, cfg->nic_addr)) {
		count(STAT_RX_DROP_NOT_LOCAL);
		return XDP_DROP;
	}
	if (copy_outer_fields(outer, inner)) {
		count(STAT_RX_DROP_CE_NOT_ECT);
		return XDP_DROP;
	}
	rx_mrc(&p, iplen, cfg);
	__builtin_memcpy(&eth, p.eth, sizeof(eth));
	if (bpf_xdp_adjust_head(ctx, MRC_IPV6_LEN)) {
		count(STAT_RX_DROP_DECAP_FAILED);
		return XDP_DROP;
	}
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + sizeof(eth) > data_end) {
		count(STAT_RX_DROP_DECAP_FAILED);
		return XDP_DROP;
	}
	__builtin_memcpy(data, &eth, sizeof(eth));
	count(STAT_RX_DECAP);
	return XDP_PASS;
other:
	count(STAT_RX_PASS_OTHER);
	return XDP_PASS;
}
