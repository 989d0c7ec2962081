// SPDX-License-Identifier: GPL-2.0
/*
 * ebpf/host/tc_egress.c: the tc egress program mrc_host_egress (design section 5).
 * Compiled as part of the mrc_host object (ebpf/mrc_host.bpf.c), whose maps it shares.
 */
#include "mrc_parse.h"
#include "encap.h"
#include "evset.h"
#include "loss.h"

SEC("tc")
int mrc_host_egress(struct __sk_buff *skb)
{
	__u32 zero = 0, dst_leaf, dst_down, n;
	struct pick_ctx pc = {};
	struct host_config *cfg;
	struct plane_port *pp;
	struct ev_set *set;
	struct ev_slot *s;
	struct mrc_host_addr dst __attribute__((aligned(8)));
	struct mrc_pkt p;
	struct ipv6hdr *ip;
	struct mrc_bth *bth;
	__u8 tclass, ecn, bth_flags;
	__u16 inner_plen;
	__u32 dqpn = 0, psn = 0, blamed_ev = 0;
	__be32 word0;
	int data_pkt, elicits_ack, pinned;

	if (skb->protocol != bpf_htons(MRC_ETHERTYPE_IPV6))
		goto other;
	if (skb->len < TX_HDRS)
		goto other;
	/* A socket's packet has its headers in the linear area already: pull (a helper call)
	 * only when it does not. The verifier's prologue un-clones the head for our writes. */
	if ((void *)(long)skb->data + TX_HDRS > (void *)(long)skb->data_end &&
	    bpf_skb_pull_data(skb, TX_HDRS))
		goto other;
	mrc_parse(&p, (void *)(long)skb->data, (void *)(long)skb->data_end);
	ip = p.outer;
	if (!ip || ip->version != 6)
		goto other;
	if (ip->nexthdr == MRC_IPPROTO_IPV6) {
		count(STAT_TX_PASS_ENCAPPED);
		return TC_ACT_OK;
	}
	/* Not encapsulated: p.ip is p.outer when UDP follows it. */
	bth = p.bth;
	if (!bth || p.ip != ip || !mrc_is_rocev2(p.udp))
		goto other;
	cfg = bpf_map_lookup_elem(&host_config, &zero);
	if (!cfg || !cfg->configured) {
		count(STAT_TX_DROP_NOT_CONFIGURED);
		return TC_ACT_SHOT;
	}
	if (!addr_eq(&ip->saddr, cfg->nic_addr))
		goto other;
	__builtin_memcpy(&dst, &ip->daddr, sizeof(dst));
	inner_plen = bpf_ntohs(ip->payload_len);
	if (inner_plen + MRC_ETH_LEN + MRC_IPV6_LEN > skb->len) {
		count(STAT_TX_DROP_MALFORMED);
		return TC_ACT_SHOT;
	}
	bth_flags = bth->flags;
	data_pkt = mrc_is_write(bth->opcode);
	elicits_ack = mrc_elicits_ack(bth->opcode);
	dqpn = mrc_get24(bth->dqpn);
	if (data_pkt)
		psn = mrc_get24(bth->psn);
	tclass = tx_dscp(bth->opcode, bth_flags, &ecn);
	tclass = (tclass << MRC_IPV6_DSCP_SHIFT) | ecn;
	if (!parse_nic(&dst, &dst_leaf, &dst_down)) {
		count(STAT_TX_DROP_BAD_DST);
		return TC_ACT_SHOT;
	}
	set = peer_set((const __u8 *)&dst);
	if (!set) {
		count(STAT_TX_DROP_NOT_CONFIGURED);
		return TC_ACT_SHOT;
	}
	n = set->n;
	if (n == 0 || n > HOST_MAX_EVS) {
		count(STAT_TX_DROP_NO_GOOD_EV);
		return TC_ACT_SHOT;
	}
	pc.now = bpf_ktime_get_ns();
	pinned = cfg->flags & MRC_HOST_FLAG_PINNED;
	/* Before the pick, so the retransmission itself avoids the retired EV. Pinned mode
	 * retires nothing. */
	if (data_pkt && !pinned && (bth_flags & MRC_BTH_FLAG_RTX))
		blamed_ev = rtx_verdict(cfg, (const __u8 *)&dst, psn, dqpn, set, dst_leaf, pc.now);
	pc.set = set;
	pc.cfg = cfg;
	pc.peer = (const __u8 *)&dst;
	pc.dst_leaf = dst_leaf;
	pc.dst_down = dst_down;
	if (pinned) {
		if (!pick_pinned(&pc, dqpn, n)) {
			count(STAT_TX_DROP_PINNED_DOWN);
			return TC_ACT_SHOT;
		}
		count(STAT_TX_PINNED);
	} else {
		pick_sprayed(&pc);
	}
	pp = pc.pp;
	if (!pc.found || pc.slot >= HOST_MAX_EVS || !pp) {
		count(STAT_TX_DROP_NO_GOOD_EV);
		return TC_ACT_SHOT;
	}
	if (tx_oversize(skb, pp->ifindex, host_load.mode == HOST_MODE_ECMP ? 0 : MRC_IPV6_LEN)) {
		count(STAT_TX_DROP_OVERSIZE);
		return TC_ACT_SHOT;
	}
	s = &set->slots[SLOT_IDX(pc.slot)];
	word0 = tx_word0(s->ev, tclass);
	if (tx_mark_inner(skb, s->ev, word0)) {
		count(STAT_TX_DROP_ENCAP_FAILED);
		return TC_ACT_SHOT;
	}
	if (host_load.mode == HOST_MODE_ECMP) {
		if (tx_set_eth(skb, pp)) {
			count(STAT_TX_DROP_ENCAP_FAILED);
			return TC_ACT_SHOT;
		}
		count(STAT_TX_PLAIN);
	} else {
		if (tx_push_outer(skb, cfg, pp, s->ev, word0, dst_leaf, dst_down, inner_plen)) {
			count(STAT_TX_DROP_ENCAP_FAILED);
			return TC_ACT_SHOT;
		}
		count(STAT_TX_ENCAP);
	}
	tx_account(s, skb->len, pc.now, elicits_ack);
	/* After the accounting: the agent re-reads it once idle is set. A SACK or NACK sent
	 * gives the sweep nothing to judge, so it lets an idle agent sleep. */
	if (elicits_ack)
		wake_agent(cfg, pc.now);
	if (data_pkt)
		tx_record((const __u8 *)&dst, psn, dqpn, s, pc.slot, blamed_ev, pc.now);
	return bpf_redirect(pp->ifindex, 0);
other:
	count(STAT_TX_PASS_OTHER);
	return TC_ACT_OK;
}
