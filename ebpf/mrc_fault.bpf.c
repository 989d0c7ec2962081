// SPDX-License-Identifier: GPL-2.0
/*
 * mrc_fault: fault injection on one side of a link, the emulator's netem (this kernel has no
 * netem; design section 9). Configured and read by controller/mrckit/fabric/faults.py.
 *
 * Where it runs, and why:
 * - XDP (mrc_fault_xdp, or mrc_fault_xdp_frags for xdp.frags programs) on the RECEIVING
 *   interface, placed in front of the program already attached there (the eBPF switch or
 *   the host dataplane), which it tail-calls through `next`. This is the only hook that sees
 *   switch-to-switch traffic: an XDP switch forwards with XDP_REDIRECT into a veth, which
 *   hands the frame to the peer's XDP program and bypasses tc on both ends. One XDP program
 *   per interface (no multi-program dispatcher here), hence the tail call.
 *   Actions: random loss, blackhole. XDP cannot copy a frame, so no duplicate or reorder.
 * - tc clsact (mrc_fault_tc_ingress / _egress) for traffic that goes through the kernel
 *   stack (a host's sockets, a host's XDP_PASS): random loss, blackhole, duplicate and
 *   reorder. It returns TC_ACT_UNSPEC for packets it lets through, so later filters run.
 *   - duplicate: bpf_clone_redirect() of the packet to the same hook; the copy carries
 *     FAULT_MARK so that this filter lets it through when it comes back.
 *   - reorder: the packet is copied into `hold` (per CPU, up to HOLD_MAX bytes) and
 *     dropped; the next packet that passes on that CPU releases it just behind itself,
 *     so the two swap places. Egress: clone the successor out first, then turn the skb into
 *     the held packet. Ingress: turn the skb into the held packet and clone it into the
 *     backlog (processed after the current packet), then restore the successor. A held
 *     packet with no successor stays held (userspace reads it as `held_now`).
 *
 * Probabilities are parts per million (0..1000000) drawn with bpf_get_prandom_u32().
 * Every packet is counted once in `fault_stats` under seen, and once under exactly one of
 * passed, dropped_loss, dropped_blackhole, duplicated, reordered (held) or clone_failed.
 * no_next is the part of passed that XDP handed to the stack because `next` was empty;
 * released counts held packets sent on, release_failed those lost on the way.
 *
 * `fault_mark` holds the bpf_ktime_get_ns() of the FIRST packet dropped (loss or blackhole)
 * since it was last zeroed: a fresh attach starts at 0 and faults.configure() zeroes it when a
 * fault is (re)applied. It is the fault's start as the dataplane saw it; a timestamp taken in
 * userspace before applying the fault would count the injection's latency. One entry shared by
 * every CPU (not per CPU): the first drop wins with a compare-and-swap, later ones leave it.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#define PPM_ONE 1000000u
/* skb->mark of a copy we made, so our own filter lets it through when it comes back. */
#define FAULT_MARK 0x4d524346u /* "MRCF" */

struct fault_cfg {
	__u32 loss_ppm;      /* drop with this probability */
	__u32 dup_ppm;       /* tc only: send one extra copy with this probability */
	__u32 reorder_ppm;   /* tc only: swap with the next packet with this probability */
	__u32 blackhole;     /* non-zero: drop everything */
};

struct fault_stats {
	__u64 seen;
	__u64 passed;
	__u64 dropped_loss;
	__u64 dropped_blackhole;
	__u64 duplicated;
	__u64 reordered;
	__u64 clone_failed;
	__u64 no_next;       /* XDP: passed to the stack because `next` was empty */
	__u64 released;      /* held packets sent on behind their successor */
	__u64 release_failed;
};

#define HOLD_MAX 4096        /* bytes; larger packets are never held */
struct held_pkt {
	__u32 len;           /* 0: slot empty */
	__u32 pad;
	__u8 data[HOLD_MAX];
};

/* Per CPU: slot 0 holds the packet being reordered, slot 1 is scratch for its successor. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct held_pkt);
} hold SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fault_cfg);
} fault_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fault_stats);
} fault_stats SEC(".maps");

/* The program that was attached before us (slot 0); empty: pass to the stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} next SEC(".maps");

struct fault_mark {
	__u64 first_drop_ns; /* 0: nothing dropped since the fault was (re)applied */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fault_mark);
} fault_mark SEC(".maps");

enum verdict { V_PASS, V_LOSS, V_BLACKHOLE, V_DUP, V_REORDER };

static __always_inline int chance(__u32 ppm)
{
	/* Scale a 32-bit random number to [0, 1e6) without a division. */
	return ppm && (((__u64)bpf_get_prandom_u32() * PPM_ONE) >> 32) < ppm;
}

static __always_inline enum verdict decide(const struct fault_cfg *c, int can_copy, int can_defer)
{
	if (!c)
		return V_PASS;
	if (c->blackhole)
		return V_BLACKHOLE;
	if (chance(c->loss_ppm))
		return V_LOSS;
	if (can_copy && chance(c->dup_ppm))
		return V_DUP;
	if (can_defer && chance(c->reorder_ppm))
		return V_REORDER;
	return V_PASS;
}

static __always_inline struct fault_stats *stats(void)
{
	__u32 key = 0;

	return bpf_map_lookup_elem(&fault_stats, &key);
}

static __always_inline struct fault_cfg *cfg(void)
{
	__u32 key = 0;

	return bpf_map_lookup_elem(&fault_cfg, &key);
}

/* Stamp the first drop; the read first keeps later drops from contending on the line. */
static __always_inline void mark_drop(void)
{
	__u32 key = 0;
	struct fault_mark *m = bpf_map_lookup_elem(&fault_mark, &key);

	if (m && !m->first_drop_ns)
		__sync_val_compare_and_swap(&m->first_drop_ns, 0, bpf_ktime_get_ns());
}

static __always_inline int fault_xdp(struct xdp_md *ctx)
{
	struct fault_stats *s = stats();
	enum verdict v = decide(cfg(), 0, 0);

	if (!s)
		return XDP_ABORTED;
	s->seen++;
	if (v == V_BLACKHOLE) {
		s->dropped_blackhole++;
		mark_drop();
		return XDP_DROP;
	}
	if (v == V_LOSS) {
		s->dropped_loss++;
		mark_drop();
		return XDP_DROP;
	}
	s->passed++;
	bpf_tail_call(ctx, &next, 0);
	s->no_next++;
	return XDP_PASS;
}

SEC("xdp")
int mrc_fault_xdp(struct xdp_md *ctx)
{
	return fault_xdp(ctx);
}

SEC("xdp.frags")
int mrc_fault_xdp_frags(struct xdp_md *ctx)
{
	return fault_xdp(ctx);
}

/* Send a copy of skb to the same hook (egress: out of the device now; ingress: into the
 * backlog, received after the current packet). The copy carries FAULT_MARK. */
static __always_inline long copy_to_same_hook(struct __sk_buff *skb, int ingress)
{
	__u32 mark = skb->mark;
	long err;

	skb->mark = FAULT_MARK;
	err = bpf_clone_redirect(skb, skb->ifindex, ingress ? BPF_F_INGRESS : 0);
	skb->mark = mark;
	return err;
}

static __always_inline struct held_pkt *slot(__u32 key)
{
	return bpf_map_lookup_elem(&hold, &key);
}

/* Copy the whole skb (from the Ethernet header) into p. Returns 0 or -1 if it does not fit. */
static __always_inline int save(struct __sk_buff *skb, struct held_pkt *p)
{
	__u32 len = skb->len;

	if (len < 1 || len > HOLD_MAX)
		return -1;
	if (bpf_skb_load_bytes(skb, 0, p->data, len))
		return -1;
	p->len = len;
	return 0;
}

/* Make the skb's content p's packet. */
static __always_inline int restore(struct __sk_buff *skb, struct held_pkt *p)
{
	__u32 len = p->len;

	if (len < 1 || len > HOLD_MAX)
		return -1;
	if (bpf_skb_change_tail(skb, len, 0))
		return -1;
	return bpf_skb_store_bytes(skb, 0, p->data, len, BPF_F_INVALIDATE_HASH) ? -1 : 0;
}

/* The current packet passes; send the held one just behind it. Returns the tc verdict. */
static __always_inline int release(struct __sk_buff *skb, struct held_pkt *held,
				   struct fault_stats *s, int ingress)
{
	struct held_pkt *cur = slot(1);
	int err;

	if (!ingress) {
		/* The successor goes out now as a copy; the skb itself becomes the held packet. */
		if (copy_to_same_hook(skb, 0)) {
			s->clone_failed++;
			return TC_ACT_UNSPEC; /* keep holding: the skb is still the successor */
		}
		s->passed++;
		err = restore(skb, held);
		held->len = 0;
		if (err) {
			s->release_failed++;
			return TC_ACT_SHOT;
		}
		s->released++;
		return TC_ACT_UNSPEC;
	}
	/* Ingress: a copy goes through the backlog, after the skb, so the copy is the held one. */
	if (!cur || save(skb, cur)) {
		s->passed++; /* cannot save the successor: it passes, the held one waits */
		return TC_ACT_UNSPEC;
	}
	s->passed++;
	err = restore(skb, held) || copy_to_same_hook(skb, 1);
	held->len = 0;
	if (err)
		s->release_failed++;
	else
		s->released++;
	if (restore(skb, cur))
		return TC_ACT_SHOT; /* cannot give the successor back: count as lost */
	return TC_ACT_UNSPEC;
}

static __always_inline int fault_tc(struct __sk_buff *skb, int ingress)
{
	struct held_pkt *held;
	struct fault_stats *s;
	enum verdict v;

	if (skb->mark == FAULT_MARK) {
		skb->mark = 0; /* our own copy, counted when it was made */
		return TC_ACT_UNSPEC;
	}
	s = stats();
	held = slot(0);
	if (!s || !held)
		return TC_ACT_UNSPEC;
	s->seen++;
	v = decide(cfg(), 1, 1);
	if (held->len && (v == V_DUP || v == V_REORDER))
		v = V_PASS; /* one fault at a time: first send the held packet on */
	switch (v) {
	case V_BLACKHOLE:
		s->dropped_blackhole++;
		mark_drop();
		return TC_ACT_SHOT;
	case V_LOSS:
		s->dropped_loss++;
		mark_drop();
		return TC_ACT_SHOT;
	case V_DUP:
		if (copy_to_same_hook(skb, ingress)) {
			s->clone_failed++;
			return TC_ACT_UNSPEC;
		}
		s->duplicated++;
		return TC_ACT_UNSPEC;
	case V_REORDER:
		if (save(skb, held)) {
			s->passed++; /* too big to hold */
			return TC_ACT_UNSPEC;
		}
		s->reordered++;
		return TC_ACT_SHOT;
	default:
		if (held->len)
			return release(skb, held, s, ingress);
		s->passed++;
		return TC_ACT_UNSPEC;
	}
}

SEC("tc")
int mrc_fault_tc_ingress(struct __sk_buff *skb)
{
	return fault_tc(skb, 1);
}

SEC("tc")
int mrc_fault_tc_egress(struct __sk_buff *skb)
{
	return fault_tc(skb, 0);
}

char LICENSE[] SEC("license") = "GPL";
