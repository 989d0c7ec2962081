/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ebpf/host/feedback.h: SACK and NACK feedback applied to the sender's EV state.
 * Part of the mrc_host object (ebpf/mrc_host.bpf.c includes every file of ebpf/host/).
 */
#ifndef MRC_HOST_FEEDBACK_H
#define MRC_HOST_FEEDBACK_H

#include "loss.h"
#include "mrc_parse.h"

struct find_ctx {
	struct ev_set *set;
	__u32 ev;
	__u32 n;
	__u32 slot;
	__u32 found;
};

static long find_one(__u32 i, void *data)
{
	struct find_ctx *c = data;

	if (i >= HOST_MAX_EVS || i >= c->n)
		return 1;
	if (c->set->slots[SLOT_IDX(i)].ev == c->ev) {
		c->slot = i;
		c->found = 1;
		return 1;
	}
	return 0;
}

static __always_inline struct ev_slot *find_slot(struct ev_set *set, __u32 ev)
{
	struct find_ctx fc = { .set = set, .ev = ev, .n = set->n };

	if (fc.n > HOST_MAX_EVS)
		return NULL;
	bpf_loop(fc.n, find_one, &fc, 0);
	if (!fc.found || fc.slot >= HOST_MAX_EVS)
		return NULL;
	return &set->slots[SLOT_IDX(fc.slot)];
}

static __always_inline void skip_slot(const __u8 *peer, struct ev_set *set, struct ev_slot *s,
				      __u8 reason, __u64 now)
{
	__sync_fetch_and_add(&s->skips, 1);
	if (s->state != MRC_EV_STATE_GOOD && s->state != MRC_EV_STATE_SKIP)
		return;
	/* Skipped for the rest of its plane group's rotation and the whole next one. */
	if (s->group < MRC_MAX_PLANES)
		s->skip_until_rot = set->groups[GROUP_IDX(s->group)].rot + 1;
	emit(peer, s, MRC_EV_STATE_SKIP, reason, now);
}

/* Apply a SACK or NACK's echoed EV to the sender's EV state (design 5). p->ip is the IPv6
 * header that carries the UDP header; cfg: host_config, to wake an idle agent. */
static __always_inline void feedback(const struct mrc_pkt *p, __u8 opcode,
				     struct host_config *cfg)
{
	const __u8 *peer = (const __u8 *)&p->ip->saddr;
	struct mrc_seth *seth = 0;
	struct mrc_neth *neth = 0;
	struct ev_set *set;
	struct ev_slot *s;
	__u64 now;
	__u32 ev;

	if (opcode == MRC_OP_SACK) {
		seth = mrc_ext(p, sizeof(*seth));
		if (!seth) {
			count(STAT_FB_SHORT);
			return;
		}
		ev = bpf_ntohl(seth->ev);
	} else {
		neth = mrc_ext(p, sizeof(*neth));
		if (!neth) {
			count(STAT_FB_SHORT);
			return;
		}
		ev = bpf_ntohl(neth->ev);
		mark_nacked(peer, neth, ev);
	}
	set = bpf_map_lookup_elem(&peer_evs, peer);
	if (!set) {
		count(STAT_FB_UNKNOWN_PEER);
		return;
	}
	s = find_slot(set, ev);
	if (!s) {
		count(STAT_FB_UNKNOWN_EV);
		return;
	}
	now = bpf_ktime_get_ns();
	wake_agent(cfg, now); /* an ack may make a sibling's silence count: the sweep must run */
	if (seth) {
		__u8 m = (bpf_ntohs(seth->type_next_m_pr) >> MRC_SETH_M_SHIFT) & MRC_SETH_M_MASK;

		count(STAT_FB_SACK);
		__sync_fetch_and_add(&s->acked, 1);
		s->last_ack_ns = now;
		if (s->pending_ns)
			s->acked_sent_ns = s->pending_ns;
		s->pending_ns = 0;
		s->unacked_tx = 0;
		sack_answers(peer, seth, set, s, now);
		if (m == MRC_M_SKIP_ONCE) {
			count(STAT_FB_SKIP_ONCE);
			skip_slot(peer, set, s, REASON_SACK_SKIP_ONCE, now);
		} else if (m == MRC_M_ALWAYS_SKIP) {
			count(STAT_FB_ALWAYS_SKIP);
			if (s->state == MRC_EV_STATE_GOOD || s->state == MRC_EV_STATE_SKIP)
				retire(peer, s, REASON_SACK_ALWAYS_SKIP, now);
		}
		return;
	}
	__sync_fetch_and_add(&s->nacks, 1);
	/* A NACK came back along the path, so the path carries packets: nothing is lost on it. */
	s->pending_ns = 0;
	s->unacked_tx = 0;
	if (!neth)
		return;
	if (neth->nack_reason == MRC_NACK_TRIMMED) {
		count(STAT_FB_NACK_TRIMMED);
		skip_slot(peer, set, s, REASON_NACK_TRIMMED, now);
	} else if (neth->nack_reason == MRC_NACK_TRIMMED_LASTHOP) {
		/* Trimmed at the last hop: the receiver's link, not the path, was congested. */
		count(STAT_FB_NACK_LASTHOP);
	} else {
		count(STAT_FB_NACK_OTHER);
	}
}

#endif /* MRC_HOST_FEEDBACK_H */
