// SPDX-License-Identifier: GPL-2.0
/*
 * mrckit host dataplane (design section 5): the NIC half of MRC on Linux.
 *
 * - SEC("tc") mrc_host_egress: tc egress on the host's virtual NIC device (one end of a veth
 *   pair that carries the NIC address). For every RoCEv2 packet from the local NIC address it
 *   picks a GOOD EV of the destination's EV set, writes the EV into the UDP source port and the
 *   flow label, pushes the outer IPv6 header (uSID DA = path derived from the EV and the
 *   destination NIC address, design 3.3), rewrites the MACs and redirects to the plane's port.
 * - SEC("xdp") mrc_host_ingress: XDP on every plane port. Decapsulates packets for the local
 *   NIC address (copying DSCP, CE and flow label inward, design 3.1 / RFC 6040), redirects QP 0x2
 *   traffic to the agent's UDP port and applies SACK/NACK feedback to the EV state.
 *
 * EV-hash mode (host_config.mode == HOST_MODE_ECMP, issue 11, docs/host.md): the switches
 * hash the EV instead of following a uSID path. tc egress picks the EV exactly as above, writes
 * it into the flow label and UDP source port of the packet as is, pushes no outer header, sets
 * the MACs and redirects to the EV's plane port; XDP ingress applies the same SACK/NACK and
 * QP 0x2 handling to the plain packets and decapsulates nothing. Denied links do not apply.
 *
 * The per-peer EV set lives in an LRU map seeded from the template on the first packet to a
 * peer; the agent (controller/mrckit/host) owns the maps and mirrors these structs with ctypes.
 *
 * Loss retirement (MRC path health, mrc-facts section 1; docs/host.md): tc egress records the
 * EV of every data packet by (peer, PSN) in tx_records (direct-mapped); XDP ingress marks a record when a NACK
 * echoes that PSN and EV (the packet reached the receiver, trimmed or refused); a retransmission
 * of a PSN whose record is unmarked means its EV lost the packet outright, so tc egress makes
 * that EV ASSUMED_BAD before it picks one for the retransmission.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "mrc_wire.h"
#include "mrc_parse.h"

#define HOST_MAX_EVS 256
/* Slot index bounded for the verifier: clang drops a plain mask after a range check, so the
 * empty asm hides the value from the optimiser first. */
#define SLOT_IDX(x) ({ __u32 __v = (x); asm volatile("" : "+r"(__v)); __v & (HOST_MAX_EVS - 1); })
#define GROUP_IDX(x) ({ __u32 __v = (x); asm volatile("" : "+r"(__v)); __v & (MRC_MAX_PLANES - 1); })
#define HOST_MAX_PEERS 256
#define HOST_MAX_DENIED 1024

/* Why an EV changed state; mirrored by mrckit.host.maps.Reason. */
enum ev_reason {
	REASON_NONE = 0,
	REASON_SACK_SKIP_ONCE = 1,
	REASON_NACK_TRIMMED = 2,
	REASON_SACK_ALWAYS_SKIP = 3,
	REASON_SKIP_EXPIRED = 4,
	REASON_LOSS = 5,
	REASON_LOSS_UNDONE = 6,
	REASON_PATH_LOSS = 7,    /* a sibling on the same path was retired for LOSS */
	REASON_FLOOR = 8,        /* brought back: the set fell below host_config.min_active */
};

/* Counter indexes of host_stats; mirrored by mrckit.host.maps.Stat. Every XDP_DROP and
 * TC_ACT_SHOT is counted under exactly one DROP_* index. */
enum host_stat {
	STAT_TX_ENCAP = 0,
	STAT_TX_PASS_ENCAPPED,
	STAT_TX_PASS_OTHER,
	STAT_TX_DROP_NO_GOOD_EV,
	STAT_TX_DROP_BAD_DST,
	STAT_TX_DROP_NOT_CONFIGURED,
	STAT_TX_DROP_ENCAP_FAILED,
	STAT_TX_DROP_MALFORMED,
	STAT_RX_DECAP,
	STAT_RX_PASS_OTHER,
	STAT_RX_DROP_MALFORMED,
	STAT_RX_DROP_NOT_LOCAL,
	STAT_RX_DROP_CE_NOT_ECT,
	STAT_RX_DROP_NOT_CONFIGURED,
	STAT_RX_DROP_DECAP_FAILED,
	STAT_RX_AGENT,
	STAT_FB_SACK,
	STAT_FB_SKIP_ONCE,
	STAT_FB_ALWAYS_SKIP,
	STAT_FB_NACK_TRIMMED,
	STAT_FB_NACK_LASTHOP,
	STAT_FB_NACK_OTHER,
	STAT_FB_UNKNOWN_PEER,
	STAT_FB_UNKNOWN_EV,
	STAT_FB_SHORT,
	STAT_EVENTS_LOST,
	STAT_RTX_SEEN,          /* data retransmissions that tc egress looked up */
	STAT_RTX_UNKNOWN_PSN,   /* ... with no record (evicted, or another QP's PSN) */
	STAT_RTX_AFTER_NACK,    /* ... whose original was NACKed: reached the receiver, no penalty */
	STAT_LOSS_RETIRED,      /* ... whose original EV became ASSUMED_BAD (reason LOSS) */
	STAT_LOSS_EV_GONE,      /* ... whose original EV was already replaced, not GOOD/SKIP */
	STAT_NACK_MARKED,       /* NACKs that matched a tx record (PSN and echoed EV) */
	STAT_LOSS_UNDONE,       /* LOSS retirements undone: a SACK showed the original arrived */
	STAT_RTX_AFTER_ACK,     /* rtx whose original a SACK had already acked: spurious, no penalty */
	STAT_TX_PLAIN,          /* EV-hash mode: sent with the EV written in, no outer header */
	STAT_RX_PLAIN,          /* EV-hash mode: MRC packets for the NIC address, passed up as is */
	STAT_PATH_RETIRED,      /* siblings retired with a LOSS EV (path-aware retirement) */
	STAT_FLOOR_RESTORED,    /* retired EVs made GOOD again to keep min_active GOOD */
	STAT_TX_PINNED,         /* pinned-EV mode: packets sent on their QP's fixed EV */
	STAT_TX_DROP_PINNED_DOWN, /* pinned-EV mode: the QP's EV is on a down port or denied path */
	STAT_MAX,
};

/* Host-wide settings, written by the agent. Index 0 of host_config. */
struct host_config {
	__u8 nic_addr[16];   /* local NIC address, network order */
	__u32 locator;       /* uSID block, host order (e.g. 0xfcbbbb00) */
	__u16 leaf;          /* T0 index of this host (same in every plane) */
	__u16 downlink;      /* downlink index D on that T0 */
	__u32 n_planes;
	__u16 agent_port;    /* UDP port that QP 0x2 traffic is rewritten to, host order */
	__u16 configured;    /* 0 until the agent has written every map */
	__u32 n_denied;      /* entries in denied_links; 0 skips the lookups */
	__u32 mode;          /* HOST_MODE_SRV6 or HOST_MODE_ECMP */
	__u32 flags;         /* MRC_HOST_FLAG_*: path-aware retirement, pinned-EV mode */
	__u32 min_active;    /* ev_min_active: GOOD/SKIP EVs a peer set keeps; 0 = no floor */
};

/* host_config.mode; mirrored by mrckit.host.maps.HOST_MODES. */
#define HOST_MODE_SRV6 0
#define HOST_MODE_ECMP 1

/* One plane port, index = plane. */
struct plane_port {
	__u32 ifindex;
	__u8 up;
	__u8 pad;
	__u8 mac[6];         /* the port's own MAC */
	__u8 neigh_mac[6];   /* the T0 port it faces */
	__u8 pad2[2];
	__u8 port_addr[16];  /* outer SA on this plane, network order */
};

/* One EV of a set, with its path state and counters. Times are bpf_ktime_get_ns(). */
struct ev_slot {
	__u32 ev;
	__u8 state;          /* MRC_EV_STATE_* */
	__u8 reason;         /* enum ev_reason of the last dataplane transition */
	__u16 group;         /* index of the set's plane group that holds this slot */
	__u32 skip_until_rot;/* SKIP ends once the set's rotation exceeds this */
	__u32 unacked_tx;    /* packets sent since the last SACK or NACK on this EV */
	__u64 tx_packets;
	__u64 tx_bytes;      /* encapsulated frame bytes */
	__u64 last_tx_ns;
	__u64 pending_ns;    /* first send after the last ack; 0 = nothing outstanding */
	__u64 last_ack_ns;
	__u64 acked_sent_ns; /* pending_ns when the last SACK came: a send time that got acked */
	__u64 acked;         /* SACKs that echoed this EV */
	__u64 skips;         /* SKIP_ONCE and NACK TRIMMED feedback */
	__u64 nacks;
	__u64 bad_ns;        /* when the EV last became ASSUMED_BAD: the floor restores oldest first */
};

/* One plane's run of slots in a set, with its own scan order (equal planes, docs/host.md):
 * slots base..base+n-1 hold the plane's EVs. */
struct plane_group {
	__u64 seq;           /* scan positions consumed; rotation = seq / n */
	__u32 rot;           /* rotation that stride/offset belong to */
	__u32 stride;        /* scan order of this rotation: slot = base + (pos*stride + offset) % n */
	__u32 offset;
	__u16 base;
	__u16 n;
	__u32 plane;
	__u32 pad;
};

/* An EV set: the template (ev_template[0]) or one peer's copy (peer_evs). */
struct ev_set {
	__u32 n;             /* active slots, 1..HOST_MAX_EVS */
	__u32 n_groups;      /* plane groups, 1..MRC_MAX_PLANES */
	__u64 plane_seq;     /* plane draws consumed: group = plane_seq % n_groups */
	struct plane_group groups[MRC_MAX_PLANES];
	struct ev_slot slots[HOST_MAX_EVS];
};

/* Key of denied_links: the fields of a link name (design 3.3). kind 1 = t1, 2 = down. */
struct link_key {
	__u8 plane;
	__u8 kind;
	__u16 leaf;
	__u16 index;
	__u16 pad;
};
#define LINK_T1 1
#define LINK_DOWN 2

/* One entry of tx_records: which EV carried the last transmission of one data PSN to one
 * peer. The table is direct-mapped (index = PSN mixed with a hash of the peer), so recording
 * costs an inlined array lookup and a few stores, no allocation; an entry that another
 * (peer, PSN) overwrote simply does not match. The QP cannot be part of the key: the data
 * packet's BTH names the responder's QP, the NACK's and SACK's BTH the requestor's own. */
struct tx_rec {
	__u8 peer[16];       /* peer NIC address, network order */
	__u32 psn;           /* BTH PSN (24 bits), host order */
	__u32 ev;
	__u16 slot;          /* slot of the peer's EV set that held ev */
	__u8 flags;          /* TXR_*: a NACK or SACK answered this PSN on this EV */
	__u8 pad;
	__u32 dqpn;          /* the data packet's destination QP: guards against another QP's PSN */
	__u32 blamed_ev;     /* the EV this PSN's retransmission retired (LOSS); 0 = none */
	__u32 pad2;
};
#define HOST_TX_RECORDS 65536 /* a power of two */
#define TXR_NACKED 1         /* a NACK echoed this PSN and EV: reached the receiver */
#define TXR_ACKED 2          /* a SACK triggered by this PSN echoed this EV: delivered */

/* A dataplane EV state change, pushed to the agent through ev_events. */
struct ev_event {
	__u8 peer[16];
	__u32 ev;
	__u8 old_state;
	__u8 new_state;
	__u8 reason;
	__u8 pad;
	__u64 ts_ns;
};
/* Only a pointer to it reaches BTF, so its layout is pinned here and in test_layout.py. */
_Static_assert(sizeof(struct ev_event) == 32 && __builtin_offsetof(struct ev_event, ts_ns) == 24,
	       "struct ev_event layout");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct host_config);
} host_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MRC_MAX_PLANES);
	__type(key, __u32);
	__type(value, struct plane_port);
} plane_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ev_set);
} ev_template SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HOST_MAX_PEERS);
	__type(key, __u8[16]);
	__type(value, struct ev_set);
} peer_evs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HOST_MAX_DENIED);
	__type(key, struct link_key);
	__type(value, __u8);
} denied_links SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} host_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HOST_TX_RECORDS);
	__type(key, __u32);
	__type(value, struct tx_rec);
} tx_records SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} ev_events SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&host_stats, &idx);

	if (v)
		*v += 1;
}

static __always_inline void emit(const __u8 *peer, struct ev_slot *s, __u8 new_state,
				 __u8 reason, __u64 now)
{
	struct ev_event *e;

	if (s->state == new_state)
		return;
	e = bpf_ringbuf_reserve(&ev_events, sizeof(*e), 0);
	if (e) {
		__builtin_memcpy(e->peer, peer, 16);
		e->ev = s->ev;
		e->old_state = s->state;
		e->new_state = new_state;
		e->reason = reason;
		e->pad = 0;
		e->ts_ns = now;
		bpf_ringbuf_submit(e, 0);
	} else {
		count(STAT_EVENTS_LOST);
	}
	s->state = new_state;
	s->reason = reason;
}

/* An IPv6 address as words, for comparing and hashing it without byte loads. */
struct addr_words {
	__u32 w0, w1, w2, w3;
};

struct addr_dwords {
	__u64 hi, lo;
};

/* a and b must be 8-byte aligned when on the stack (the verifier's rule for stack access). */
static __always_inline int addr_eq(const void *a, const void *b)
{
	const struct addr_dwords *x = a, *y = b;

	return x->hi == y->hi && x->lo == y->lo;
}

static __always_inline __u32 addr_fold(const void *a)
{
	struct addr_words w;

	__builtin_memcpy(&w, a, sizeof(w));
	return w.w0 ^ w.w1 ^ w.w2 ^ w.w3;
}

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

/* ---------------------------------------------------------------- tc egress ---------- */

static __always_inline __u16 usid(__u32 plane, __u32 role, __u32 index)
{
	return (plane << MRC_USID_PLANE_SHIFT) | (role << MRC_USID_ROLE_SHIFT) |
	       (index & MRC_USID_INDEX_MASK);
}

/* The uSID container of design 3.3, written into da (network order): the path's uSIDs in
 * order, zero-filled. */
static __always_inline void path_da(struct mrc_usid_container *da, __u32 locator, __u32 plane,
				    __u32 t1, __u32 src_leaf, __u32 dst_leaf, __u32 dst_down)
{
	__u16 *u = da->usid;

	__builtin_memset(da, 0, sizeof(*da));
	da->locator = bpf_htonl(locator);
	if (src_leaf != dst_leaf) {
		*u++ = bpf_htons(usid(plane, MRC_USID_ROLE_T0, src_leaf));
		*u++ = bpf_htons(usid(plane, MRC_USID_ROLE_T1, t1));
	}
	*u++ = bpf_htons(usid(plane, MRC_USID_ROLE_T0, dst_leaf));
	*u = bpf_htons(usid(plane, MRC_USID_ROLE_DOWN, dst_down));
}

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
	if (c->cfg->mode != HOST_MODE_ECMP && path_denied(c->cfg, plane, t1, c->dst_leaf, c->dst_down))
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
	slot = g->base + ((seq32 - rot * n) * g->stride + g->offset) % n;
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
	gi = (__u32)draw % ng;
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

/* dst is an mrckit NIC address 2001:db8:100:L::H (design 3.3)? Fills leaf and downlink. */
static __always_inline int parse_nic(const struct mrc_host_addr *a, __u32 *leaf, __u32 *down)
{
	__u32 h;

	if (a->prefix != bpf_htonl(MRC_ADDR_PREFIX) || a->kind != bpf_htons(MRC_NIC_HEXTET))
		return 0;
	if (a->zero_hi | a->zero_lo)
		return 0;
	*leaf = bpf_ntohs(a->leaf);
	h = bpf_ntohs(a->host);
	if (*leaf >= MRC_MAX_T0_PER_PLANE || h == 0 || h > MRC_MAX_DOWNLINKS_PER_T0 - 1)
		return 0;
	*down = h - 1;
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

#define TX_HDRS (MRC_ETH_LEN + MRC_IPV6_LEN + MRC_UDP_LEN + MRC_BTH_LEN)

static __always_inline __u8 tx_dscp(__u8 opcode, __u8 bth_flags, __u8 *ecn)
{
	if (opcode >= MRC_OP_WRITE_FIRST && opcode <= MRC_OP_WRITE_ONLY_IMM) {
		*ecn = MRC_ECN_ECT0;
		return (bth_flags & MRC_BTH_FLAG_RTX) ? MRC_DSCP_TRIMMABLE_RETX : MRC_DSCP_TRIMMABLE;
	}
	*ecn = MRC_ECN_NOT_ECT;
	return MRC_DSCP_CONTROL;
}

/* The first IPv6 word (version, traffic class, flow label = low 20 bits of the EV): the
 * inner and the outer header carry the same one (design 3.1). */
static __always_inline __be32 tx_word0(__u32 ev, __u8 tclass)
{
	return bpf_htonl((6u << 28) | ((__u32)tclass << 20) | (ev & MRC_EV_FLOW_LABEL_MASK));
}

/* Write the EV into the inner header (UDP sport, flow label) and set the inner class. The
 * frame is the plain one that mrc_host_egress parsed (Ethernet | IPv6 | UDP | BTH, pulled into
 * the linear area); its view is taken again from skb->data here so that no packet pointer
 * lives across the EV pick, whose loops the verifier would otherwise walk once per view. */
static __always_inline int tx_mark_inner(struct __sk_buff *skb, __u32 ev, __be32 word)
{
	__be16 old_sport, new_sport = bpf_htons(ev >> MRC_EV_SPORT_SHIFT);
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip = data + sizeof(struct ethhdr);
	struct udphdr *udp = (void *)(ip + 1);

	if ((void *)(udp + 1) > data_end)
		return -1;
	old_sport = udp->source;
	__builtin_memcpy(ip, &word, sizeof(word));
	udp->source = new_sport;
	/* RoCEv2 sends a zero UDP checksum; an ordinary socket's checksum must stay valid. */
	if (udp->check && bpf_l4_csum_replace(skb, (void *)&udp->check - data, old_sport,
					      new_sport, sizeof(new_sport)))
		return -1;
	return 0;
}

static __always_inline int tx_push_outer(struct __sk_buff *skb, struct host_config *cfg,
					 struct plane_port *pp, __u32 ev, __be32 w0,
					 __u32 dst_leaf, __u32 dst_down, __u16 inner_plen)
{
	struct mrc_outer_hdr hdr;
	struct mrc_usid_container da;
	__u32 plane = (ev >> MRC_EV_PLANE_SHIFT) & MRC_EV_PLANE_MASK;
	__u32 t1 = (ev >> MRC_EV_T1_SHIFT) & MRC_EV_T1_MASK;
	__be16 plen = bpf_htons(inner_plen + MRC_IPV6_LEN);
	void *data, *data_end;

	if (bpf_skb_adjust_room(skb, MRC_IPV6_LEN, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_ENCAP_L3_IPV6))
		return -1;
	__builtin_memcpy(hdr.eth.h_dest, pp->neigh_mac, ETH_ALEN);
	__builtin_memcpy(hdr.eth.h_source, pp->mac, ETH_ALEN);
	hdr.eth.h_proto = bpf_htons(MRC_ETHERTYPE_IPV6);
	__builtin_memcpy(&hdr.ip6, &w0, sizeof(w0));
	hdr.ip6.payload_len = plen;
	hdr.ip6.nexthdr = MRC_IPPROTO_IPV6;
	hdr.ip6.hop_limit = MRC_OUTER_HOP_LIMIT;
	__builtin_memcpy(&hdr.ip6.saddr, pp->port_addr, sizeof(hdr.ip6.saddr));
	path_da(&da, cfg->locator, plane, t1, cfg->leaf, dst_leaf, dst_down);
	__builtin_memcpy(&hdr.ip6.daddr, &da, sizeof(da));
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	if (data + sizeof(hdr) > data_end)
		return bpf_skb_store_bytes(skb, 0, &hdr, sizeof(hdr), 0);
	__builtin_memcpy(data, &hdr, sizeof(hdr));
	return 0;
}

/* EV-hash mode: the packet goes out as is, so only its Ethernet header changes: to the T0
 * port that the plane port faces, from the plane port. */
static __always_inline int tx_set_eth(struct __sk_buff *skb, struct plane_port *pp)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return -1;
	__builtin_memcpy(eth->h_dest, pp->neigh_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, pp->mac, ETH_ALEN);
	return 0;
}

static __always_inline void tx_account(struct ev_slot *s, __u32 len, __u64 now)
{
	__sync_fetch_and_add(&s->tx_packets, 1);
	__sync_fetch_and_add(&s->tx_bytes, len);
	s->last_tx_ns = now;
	__sync_fetch_and_add(&s->unacked_tx, 1);
	if (!s->pending_ns)
		s->pending_ns = now;
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
 * its path's siblings when path-aware retirement is on; the floor then holds. */
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
	s = &set->slots[SLOT_IDX(r->slot)];
	if (r->slot >= set->n || s->ev != r->ev || !slot_active(s)) {
		count(STAT_LOSS_EV_GONE);
		return 0;
	}
	count(STAT_LOSS_RETIRED);
	retire(peer, s, REASON_LOSS, now);
	if ((cfg->flags & MRC_HOST_FLAG_PATH_RETIRE) && cfg->mode == HOST_MODE_SRV6)
		retire_path(cfg, peer, set, s, dst_leaf, now);
	keep_floor(cfg, peer, set, now);
	return s->ev;
}

static __always_inline void tx_record(const __u8 *peer, __u32 psn, __u32 dqpn,
				      struct ev_slot *s, __u32 slot, __u32 blamed_ev)
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
}

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
	int data_pkt, pinned;

	if (skb->protocol != bpf_htons(MRC_ETHERTYPE_IPV6))
		goto other;
	if (skb->len < TX_HDRS)
		goto other;
	if (bpf_skb_pull_data(skb, TX_HDRS))
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
	s = &set->slots[SLOT_IDX(pc.slot)];
	word0 = tx_word0(s->ev, tclass);
	if (tx_mark_inner(skb, s->ev, word0)) {
		count(STAT_TX_DROP_ENCAP_FAILED);
		return TC_ACT_SHOT;
	}
	if (cfg->mode == HOST_MODE_ECMP) {
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
	tx_account(s, skb->len, pc.now);
	if (data_pkt)
		tx_record((const __u8 *)&dst, psn, dqpn, s, pc.slot, blamed_ev);
	return bpf_redirect(pp->ifindex, 0);
other:
	count(STAT_TX_PASS_OTHER);
	return TC_ACT_OK;
}

/* ---------------------------------------------------------------- XDP ingress -------- */


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
	if (r->ev == s->ev)
		r->flags |= TXR_ACKED;
	if (r->blamed_ev != s->ev)
		return;
	r->blamed_ev = 0;
	if (s->state != MRC_EV_STATE_ASSUMED_BAD || s->reason != REASON_LOSS)
		return;
	count(STAT_LOSS_UNDONE);
	emit(peer, s, MRC_EV_STATE_GOOD, REASON_LOSS_UNDONE, now);
	undo_path(peer, set, s, now);
}

/* Apply a SACK or NACK's echoed EV to the sender's EV state (design 5). p->ip is the IPv6
 * header that carries the UDP header. */
static __always_inline void feedback(const struct mrc_pkt *p, __u8 opcode)
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

/* Rewrite the inner UDP destination port of QP 0x2 traffic to the agent's port. */
static __always_inline void to_agent(struct udphdr *udp, __u16 agent_port)
{
	__u16 old = bpf_ntohs(udp->dest);
	__u16 csum = bpf_ntohs(udp->check);

	udp->dest = bpf_htons(agent_port);
	if (csum) {
		/* RFC 1624 incremental update: HC' = ~(~HC + ~m + m'). */
		__u32 sum = (__u16)~csum + (__u16)~old + agent_port;

		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		csum = ~sum & 0xffff;
		if (!csum)
			csum = 0xffff;
		udp->check = bpf_htons(csum);
	}
}

/* Copy the outer DSCP, flow label and CE mark into the inner header (design 3.1, RFC 6040).
 * Returns -1 when the packet must be dropped (CE on a not-ECT inner packet). */
static __always_inline int copy_outer_fields(struct ipv6hdr *outer, struct ipv6hdr *inner)
{
	__u8 otc = mrc_ipv6_tclass(outer);
	__u8 itc = mrc_ipv6_tclass(inner);
	__u8 ecn = itc & MRC_IPV6_ECN_MASK;

	if ((otc & MRC_IPV6_ECN_MASK) == MRC_ECN_CE) {
		if (ecn == MRC_ECN_NOT_ECT)
			return -1;
		ecn = MRC_ECN_CE;
	}
	itc = (otc & ~MRC_IPV6_ECN_MASK) | ecn;
	inner->version = 6;
	mrc_ipv6_set_tclass(inner, itc);
	mrc_ipv6_set_flow_label(inner, mrc_ipv6_flow_label(outer));
	return 0;
}

/* What both modes do with an MRC packet for the local NIC address (ip6: the IPv6 header that
 * carries UDP, iplen its payload length, already checked against the frame): QP 0x2 traffic
 * to the agent's port, SACK/NACK feedback to the EV state. */
static __always_inline void rx_mrc(const struct mrc_pkt *p, __u16 iplen, struct host_config *cfg)
{
	struct mrc_bth *bth = p->bth;

	if (!bth || iplen < MRC_UDP_LEN + MRC_BTH_LEN || !mrc_is_rocev2(p->udp))
		return;
	if (mrc_get24(bth->dqpn) == MRC_QP_ENDPOINT_OPS) {
		to_agent(p->udp, cfg->agent_port);
		count(STAT_RX_AGENT);
	} else if (bth->opcode == MRC_OP_SACK || bth->opcode == MRC_OP_NACK) {
		feedback(p, bth->opcode);
	}
}

/* EV-hash mode: an IPv6 packet with no outer header (next header 17). RoCEv2 packets for the
 * local NIC address get rx_mrc and go up as they are; anything else is not ours. Returns an
 * XDP verdict, or -1 for "pass as other". */
static __always_inline int rx_plain(struct host_config *cfg, const struct mrc_pkt *p)
{
	struct ipv6hdr *ip = p->outer;
	struct udphdr *udp = p->udp;
	__u16 plen;

	if (!udp || !addr_eq(&ip->daddr, cfg->nic_addr) || !mrc_is_rocev2(udp))
		return -1;
	if (!cfg->configured) {
		count(STAT_RX_DROP_NOT_CONFIGURED);
		return XDP_DROP;
	}
	plen = bpf_ntohs(ip->payload_len);
	if (plen < MRC_UDP_LEN || (void *)udp + plen > p->data_end) {
		count(STAT_RX_DROP_MALFORMED);
		return XDP_DROP;
	}
	rx_mrc(p, plen, cfg);
	count(STAT_RX_PLAIN);
	return XDP_PASS;
}

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
	if (cfg->mode == HOST_MODE_ECMP) {
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
	if (plen != iplen + MRC_IPV6_LEN || (void *)(inner + 1) + iplen > data_end) {
		count(STAT_RX_DROP_MALFORMED);
		return XDP_DROP;
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

char LICENSE[] SEC("license") = "GPL";
