/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ebpf/host/loss.h: loss retirement (tx_records by peer and PSN, the retransmission
 *   verdict, path-aware retirement, the ev_min_active floor, and its undo on a late SACK).
 * Part of the mrc_host object (ebpf/mrc_host.bpf.c includes every file of ebpf/host/).
 */
#ifndef MRC_HOST_LOSS_H
#define MRC_HOST_LOSS_H

#include "stats.h"

/* The tx_records index of (peer, PSN); mirrored by mrckit.host.dataplane.tx_index. A QP's
 * consecutive PSNs land in consecutive entries. */
static __always_inline __u32 tx_index(const __u8 *peer, __u32 psn)
{
	__u32 h = addr_fold(peer);

	h = (h ^ (h >> 16)) * 0x9e3779b1u;
	return (psn ^ h) & (HOST_TX_RECORDS - 1);
}

/* The record of (peer, PSN), or NULL when the entry holds another one. */
static __always_inline struct tx_rec *tx_find(const __u8 *peer, __u32 psn)
{
	__u32 idx = tx_index(peer, psn);
	struct tx_rec *r = bpf_map_lookup_elem(&tx_records, &idx);

	if (!r || r->psn != psn || !addr_eq(r->peer, peer))
		return NULL;
	return r;
}

static __always_inline void tx_record(const __u8 *peer, __u32 psn, __u32 dqpn,
				      struct ev_slot *s, __u32 slot, __u32 blamed_ev, __u64 now)
{
	__u32 idx = tx_index(peer, psn);
	struct tx_rec *r = bpf_map_lookup_elem(&tx_records, &idx);

	if (!r)
		return;
	__builtin_memcpy(r->peer, peer, 16);
	r->psn = psn;
	r->ev = s->ev;
	r->slot = slot;
	r->flags = 0;
	r->dqpn = dqpn;
	r->blamed_ev = blamed_ev;
	r->sent_ns = now;
}

static __always_inline int slot_active(const struct ev_slot *s)
{
	return s->state == MRC_EV_STATE_GOOD || s->state == MRC_EV_STATE_SKIP;
}

static __always_inline void retire(const __u8 *peer, struct ev_slot *s, __u8 reason, __u64 now)
{
	s->bad_ns = now;
	emit(peer, s, MRC_EV_STATE_ASSUMED_BAD, reason, now);
}

struct path_ctx {
	struct ev_set *set;
	const __u8 *peer;
	__u64 now;
	__u32 plane;
	__u32 t1;
	__u32 same_leaf;  /* the peer is under this host's T0: the path is the plane alone */
	__u32 retired;
};

/* Whether slot i's EV takes the same path as (plane, t1) toward this set's peer (design 3.3:
 * plane, T1 and the peer's leaf name the path; toward a peer on the same leaf, no T1). */
static long path_one(__u32 i, void *data)
{
	struct path_ctx *c = data;
	struct ev_slot *s;
	__u32 ev;

	if (i >= HOST_MAX_EVS || i >= c->set->n)
		return 1;
	s = &c->set->slots[SLOT_IDX(i)];
	ev = s->ev;
	if (!slot_active(s) || ((ev >> MRC_EV_PLANE_SHIFT) & MRC_EV_PLANE_MASK) != c->plane)
		return 0;
	if (!c->same_leaf && ((ev >> MRC_EV_T1_SHIFT) & MRC_EV_T1_MASK) != c->t1)
		return 0;
	retire(c->peer, s, REASON_PATH_LOSS, c->now);
	c->retired++;
	return 0;
}

/* Path-aware retirement (SRv6 mode): the EV of lost is retired for LOSS, so every other GOOD
 * or SKIP EV of the set on the same path goes with it, at once. */
static __always_inline void retire_path(struct host_config *cfg, const __u8 *peer,
					struct ev_set *set, struct ev_slot *lost, __u32 dst_leaf,
					__u64 now)
{
	struct path_ctx pc = {
		.set = set, .peer = peer, .now = now,
		.plane = (lost->ev >> MRC_EV_PLANE_SHIFT) & MRC_EV_PLANE_MASK,
		.t1 = (lost->ev >> MRC_EV_T1_SHIFT) & MRC_EV_T1_MASK,
		.same_leaf = dst_leaf == cfg->leaf,
	};
	__u32 n = set->n;

	if (n > HOST_MAX_EVS)
		return;
	bpf_loop(n, path_one, &pc, 0);
	if (pc.retired) {
		__u32 idx = STAT_PATH_RETIRED;
		__u64 *v = bpf_map_lookup_elem(&host_stats, &idx);

		if (v)
			*v += pc.retired;
	}
}

struct floor_ctx {
	struct ev_set *set;
	__u32 active;     /* GOOD or SKIP slots counted so far */
	__u32 best;       /* the least recently failed ASSUMED_BAD slot */
	__u64 best_ns;
	__u32 found;
};

static long floor_count(__u32 i, void *data)
{
	struct floor_ctx *c = data;
	struct ev_slot *s;

	if (i >= HOST_MAX_EVS || i >= c->set->n)
		return 1;
	s = &c->set->slots[SLOT_IDX(i)];
	if (slot_active(s))
		c->active++;
	else if (s->state == MRC_EV_STATE_ASSUMED_BAD && (!c->found || s->bad_ns < c->best_ns)) {
		c->best = i;
		c->best_ns = s->bad_ns;
		c->found = 1;
	}
	return 0;
}

struct floor_round_ctx {
	struct ev_set *set;
	const __u8 *peer;
	__u64 now;
	__u32 want;
};

/* One round of the floor: count the active slots and, if short, bring back the ASSUMED_BAD
 * slot that failed least recently. Returns 1 (stop) once the floor holds or none is left. */
static long floor_round(__u32 i, void *data)
{
	struct floor_round_ctx *c = data;
	struct floor_ctx fc = { .set = c->set };
	struct ev_slot *s;
	__u32 n = c->set->n;

	if (n > HOST_MAX_EVS)
		return 1;
	bpf_loop(n, floor_count, &fc, 0);
	if (fc.active >= c->want || !fc.found || fc.best >= HOST_MAX_EVS)
		return 1;
	s = &c->set->slots[SLOT_IDX(fc.best)];
	s->pending_ns = 0;
	s->unacked_tx = 0;
	emit(c->peer, s, MRC_EV_STATE_GOOD, REASON_FLOOR, c->now);
	count(STAT_FLOOR_RESTORED);
	return 0;
}

/* The ev_min_active floor (MRC; docs/host.md): while fewer than min_active EVs of the set are
 * GOOD or SKIP, the ASSUMED_BAD EV that failed least recently comes back GOOD (REASON_FLOOR).
 * DENIED EVs stay denied: an operator's word is not overridden. */
static __always_inline void keep_floor(struct host_config *cfg, const __u8 *peer,
				       struct ev_set *set, __u64 now)
{
	struct floor_round_ctx fc = { .set = set, .peer = peer, .now = now,
				      .want = cfg->min_active };

	if (!fc.want || fc.want > HOST_MAX_EVS)
		return;
	/* Each round restores one EV, so want + 1 rounds always reach the floor. */
	bpf_loop(fc.want + 1, floor_round, &fc, 0);
}

/* A retransmission of PSN psn: if the EV that carried the previous transmission was not
 * answered by a NACK, that packet was lost outright and the EV is retired (mrc-facts 1), with
 * its path's siblings when path-aware retirement is on; the floor then holds.
 * Lost, not late: only once a packet sent after it toward the same peer was delivered (the
 * RACK rule, RFC 8985 section 6.2). A timeout with nothing delivered since says the peer, or
 * every path at once, stalled (a descheduled receiver): no one path explains it, and blaming
 * each EV in turn would retire the whole set. */
static __always_inline __u32 rtx_verdict(struct host_config *cfg, const __u8 *peer, __u32 psn,
					 __u32 dqpn, struct ev_set *set, __u32 dst_leaf, __u64 now)
{
	struct tx_rec *r = tx_find(peer, psn);
	struct ev_slot *s;

	count(STAT_RTX_SEEN);
	if (!r || r->dqpn != dqpn) {
		count(STAT_RTX_UNKNOWN_PSN);
		return 0;
	}
	if (r->flags & TXR_NACKED) {
		count(STAT_RTX_AFTER_NACK);
		return 0;
	}
	if (r->flags & TXR_ACKED) {
		count(STAT_RTX_AFTER_ACK);
		return 0;
	}
	if (set->delivered_ns <= r->sent_ns) {
		count(STAT_RTX_NONE_DELIVERED);
		return 0;
	}
	s = &set->slots[SLOT_IDX(r->slot)];
	if (r->slot >= set->n || s->ev != r->ev || !slot_active(s)) {
		count(STAT_LOSS_EV_GONE);
		return 0;
	}
	count(STAT_LOSS_RETIRED);
	retire(peer, s, REASON_LOSS, now);
	if ((cfg->flags & MRC_HOST_FLAG_PATH_RETIRE) && host_load.mode == HOST_MODE_SRV6)
		retire_path(cfg, peer, set, s, dst_leaf, now);
	keep_floor(cfg, peer, set, now);
	return s->ev;
}

/* A NACK names a PSN that reached the receiver (trimmed or refused): its EV did not lose it,
 * so the coming retransmission must not retire that EV. The echoed EV must match the record,
 * which keeps another QP's NACK for the same PSN from clearing it. */
static __always_inline void mark_nacked(const __u8 *peer, const struct mrc_neth *neth, __u32 ev)
{
	struct tx_rec *r = tx_find(peer, mrc_get24(neth->nack_psn));

	if (r && r->ev == ev) {
		r->flags |= TXR_NACKED;
		count(STAT_NACK_MARKED);
	}
}

struct undo_ctx {
	struct ev_set *set;
	const __u8 *peer;
	__u64 now;
	__u64 step_ns;    /* bad_ns of the undone LOSS: its siblings were retired in that step */
};

static long undo_one(__u32 i, void *data)
{
	struct undo_ctx *c = data;
	struct ev_slot *s;

	if (i >= HOST_MAX_EVS || i >= c->set->n)
		return 1;
	s = &c->set->slots[SLOT_IDX(i)];
	if (s->state == MRC_EV_STATE_ASSUMED_BAD && s->reason == REASON_PATH_LOSS &&
	    s->bad_ns == c->step_ns) {
		count(STAT_LOSS_UNDONE);
		emit(c->peer, s, MRC_EV_STATE_GOOD, REASON_LOSS_UNDONE, c->now);
	}
	return 0;
}

/* The LOSS of s was spurious: the path-aware retirement it caused is too, so the siblings
 * retired in the same step (PATH_LOSS, same bad_ns) come back with it. */
static __always_inline void undo_path(const __u8 *peer, struct ev_set *set, struct ev_slot *s,
				      __u64 now)
{
	struct undo_ctx uc = { .set = set, .peer = peer, .now = now, .step_ns = s->bad_ns };
	__u32 n = set->n;

	if (n > HOST_MAX_EVS || !uc.step_ns)
		return;
	bpf_loop(n, undo_one, &uc, 0);
}

/* A SACK names its trigger (ack_psn, echoed EV): that transmission was delivered. Its record
 * is marked, so a retransmission that the endpoint sends before it has read this SACK does not
 * retire the EV; and if a retransmission already blamed this EV for that PSN, the original
 * arrived after all (reordered, or a spurious RTO) and the LOSS retirement is undone. */
static __always_inline void sack_answers(const __u8 *peer, const struct mrc_seth *seth,
					 struct ev_set *set, struct ev_slot *s, __u64 now)
{
	__s16 off = (__s16)bpf_ntohs(seth->ack_psn_offset);
	__u32 cack = mrc_get24(seth->cack_psn);
	struct tx_rec *r = tx_find(peer, (cack + off) & (MRC_PSN_MOD - 1));

	if (!r)
		return;
	if (r->ev == s->ev) {
		r->flags |= TXR_ACKED;
		if (r->sent_ns > set->delivered_ns)
			set->delivered_ns = r->sent_ns;
	}
	if (r->blamed_ev != s->ev)
		return;
	r->blamed_ev = 0;
	if (s->state != MRC_EV_STATE_ASSUMED_BAD || s->reason != REASON_LOSS)
		return;
	count(STAT_LOSS_UNDONE);
	emit(peer, s, MRC_EV_STATE_GOOD, REASON_LOSS_UNDONE, now);
	undo_path(peer, set, s, now);
}

#endif /* MRC_HOST_LOSS_H */
