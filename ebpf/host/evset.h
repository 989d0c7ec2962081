/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ebpf/host/evset.h: the per-peer EV set and the EV pick (equal planes, scan
 *   rotations, pinned-EV mode, denied links).
 * Part of the mrc_host object (ebpf/mrc_host.bpf.c includes every file of ebpf/host/).
 */
#ifndef MRC_HOST_EVSET_H
#define MRC_HOST_EVSET_H

#include "stats.h"

static __always_inline int link_denied(__u32 plane, __u32 leaf, __u8 kind, __u32 index)
{
	struct link_key k = { .plane = plane, .kind = kind, .leaf = leaf, .index = index };

	return bpf_map_lookup_elem(&denied_links, &k) != NULL;
}

/* Whether the path of EV (plane, t1) toward NIC (dst_leaf, dst_down) crosses a denied link. */
static __always_inline int path_denied(struct host_config *cfg, __u32 plane, __u32 t1,
				       __u32 dst_leaf, __u32 dst_down)
{
	if (!cfg->n_denied)
		return 0;
	if (link_denied(plane, cfg->leaf, LINK_DOWN, cfg->downlink) ||
	    link_denied(plane, dst_leaf, LINK_DOWN, dst_down))
		return 1;
	if (cfg->leaf == dst_leaf)
		return 0;
	return link_denied(plane, cfg->leaf, LINK_T1, t1) ||
	       link_denied(plane, dst_leaf, LINK_T1, t1);
}

static __always_inline __u32 gcd(__u32 a, __u32 b)
{
	int i;

	for (i = 0; i < 16 && b; i++) {
		__u32 t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* A new scan order for rotation rot of group g: an affine permutation of 0..n-1 with a random
 * stride coprime to n and a random offset. */
/* A random stride in 1..n-1 coprime to n (1 when n <= 2). A global function: the verifier
 * checks its loops once, not once per state of every caller (the EV pick calls it from inside
 * its bpf_loop callbacks). */
__noinline __u32 mrc_random_stride(__u32 n)
{
	__u32 stride = 1;
	int i;

	if (n > 2) {
		stride = bpf_get_prandom_u32() % (n - 1) + 1;
		for (i = 0; i < 32 && gcd(n, stride) != 1; i++)
			stride = stride % (n - 1) + 1;
		if (gcd(n, stride) != 1)
			stride = 1;
	}
	return stride;
}

static __always_inline void new_rotation(struct plane_group *g, __u32 rot, __u32 n)
{
	g->stride = mrc_random_stride(n);
	g->offset = bpf_get_prandom_u32() % n;
	g->rot = rot;
}

/* x % n, n > 0. Plane counts and per-plane EV counts are usually powers of two, and then a
 * mask gives the same result as the division it spares on every pick. */
static __always_inline __u32 mod_n(__u32 x, __u32 n)
{
	return (n & (n - 1)) ? x % n : x & (n - 1);
}

struct pick_ctx {
	struct ev_set *set;
	struct host_config *cfg;
	const __u8 *peer;
	__u64 now;
	struct plane_group *g; /* the plane group being scanned */
	__u32 dst_leaf;
	__u32 dst_down;
	__u32 slot;
	__u32 found;
	struct plane_port *pp; /* the accepted slot's port, so egress need not look it up again */
};

/* Whether slot s can carry a packet now: GOOD, its plane port up, its path not denied.
 * Fills *ppp with the port. */
static __always_inline int slot_usable(struct pick_ctx *c, struct ev_slot *s,
				       struct plane_port **ppp)
{
	__u32 plane = (s->ev >> MRC_EV_PLANE_SHIFT) & MRC_EV_PLANE_MASK;
	__u32 t1 = (s->ev >> MRC_EV_T1_SHIFT) & MRC_EV_T1_MASK;
	struct plane_port *pp = bpf_map_lookup_elem(&plane_ports, &plane);

	if (!pp || !pp->up || !pp->ifindex)
		return 0;
	if (host_load.mode != HOST_MODE_ECMP && path_denied(c->cfg, plane, t1, c->dst_leaf, c->dst_down))
		return 0;
	*ppp = pp;
	return 1;
}

/* One scan position of the current group: consume it and accept its slot if usable. */
static long pick_one(__u32 i, void *data)
{
	struct pick_ctx *c = data;
	struct plane_group *g = c->g;
	struct ev_slot *s;
	struct plane_port *pp;
	__u64 pos_seq;
	__u32 n, rot, slot, seq32;

	if (!g)
		return 1;
	n = g->n;
	if (n == 0 || n > HOST_MAX_EVS)
		return 1;
	pos_seq = __sync_fetch_and_add(&g->seq, 1);
	/* 32-bit arithmetic: two divisions instead of three 64-bit ones (this is the hot path).
	 * The rotation number wraps after 2^32 packets on one plane to one peer; an EV skipped
	 * across the wrap stays skipped until the agent's SKIP timeout. */
	seq32 = (__u32)pos_seq;
	rot = seq32 / n;
	if (rot != g->rot)
		new_rotation(g, rot, n);
	slot = g->base + mod_n((seq32 - rot * n) * g->stride + g->offset, n);
	if (slot >= HOST_MAX_EVS || slot >= c->set->n)
		return 1;
	s = &c->set->slots[SLOT_IDX(slot)];
	if (s->state == MRC_EV_STATE_SKIP && rot > s->skip_until_rot)
		emit(c->peer, s, MRC_EV_STATE_GOOD, REASON_SKIP_EXPIRED, c->now);
	if (s->state != MRC_EV_STATE_GOOD || !slot_usable(c, s, &pp))
		return 0;
	c->slot = slot;
	c->found = 1;
	c->pp = pp;
	return 1;
}

/* Equal planes (docs/host.md): draw a plane group in turn, then an EV within it. A group with
 * no usable EV costs one scan of its slots and the next draw; since the draws go round the
 * groups in order, every group with a usable EV gets an equal share of the packets whatever
 * the others' states. */
static long pick_group(__u32 i, void *data)
{
	struct pick_ctx *c = data;
	struct ev_set *set = c->set;
	__u32 ng = set->n_groups, gi;
	__u64 draw;

	if (ng == 0 || ng > MRC_MAX_PLANES)
		return 1;
	draw = __sync_fetch_and_add(&set->plane_seq, 1);
	gi = mod_n((__u32)draw, ng);
	c->g = &set->groups[GROUP_IDX(gi)];
	if (c->g->n == 0)
		return 0;
	/* Usually the first position is usable: try it inline, and only then pay for the loop,
	 * whose 2n positions always include one whole rotation, so every slot is tried once. */
	if (!pick_one(0, c) || !c->found)
		bpf_loop(2 * c->g->n, pick_one, c, 0);
	return c->found ? 1 : 0;
}

/* The usual pick: a GOOD EV of the set, planes in equal shares. Returns 1 when found. */
static __always_inline int pick_sprayed(struct pick_ctx *c)
{
	__u32 ng = c->set->n_groups;

	if (ng == 0 || ng > MRC_MAX_PLANES)
		return 0;
	if (!pick_group(0, c) && ng > 1)
		bpf_loop(ng - 1, pick_group, c, 0);
	return c->found;
}

/* The slot of QP (peer, dqpn) in pinned-EV mode: a fixed hash, whatever the EV states. */
static __always_inline __u32 pinned_slot(const __u8 *peer, __u32 dqpn, __u32 n)
{
	__u32 h = addr_fold(peer) ^ (dqpn * 0x9e3779b1u);

	h ^= h >> 15;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	return h % n;
}

/* Pinned-EV mode (the RC baseline): the QP's one EV, used whatever its state; no spraying.
 * Returns 1 when its port and path can carry the packet. */
static __always_inline int pick_pinned(struct pick_ctx *c, __u32 dqpn, __u32 n)
{
	__u32 slot = pinned_slot(c->peer, dqpn, n);
	struct plane_port *pp;

	if (slot >= HOST_MAX_EVS)
		return 0;
	if (!slot_usable(c, &c->set->slots[SLOT_IDX(slot)], &pp))
		return 0;
	c->slot = slot;
	c->found = 1;
	c->pp = pp;
	return 1;
}

/* The per-peer EV set, seeded from the template on the first packet. */
static __always_inline struct ev_set *peer_set(const __u8 *peer)
{
	struct ev_set *set = bpf_map_lookup_elem(&peer_evs, peer);
	__u32 zero = 0;
	struct ev_set *tmpl;

	if (set)
		return set;
	tmpl = bpf_map_lookup_elem(&ev_template, &zero);
	if (!tmpl || tmpl->n == 0)
		return NULL;
	bpf_map_update_elem(&peer_evs, peer, tmpl, BPF_NOEXIST);
	return bpf_map_lookup_elem(&peer_evs, peer);
}

#endif /* MRC_HOST_EVSET_H */
