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
 * - tc clsact (mrc_fault_tc), ingress or egress, for traffic that goes through the kernel
 *   stack (a host's sockets, a host's XDP_PASS): random loss, blackhole, duplicate
 *   (bpf_clone_redirect of the packet to the same hook) and reorder (the packet is cloned
 *   to ingress through the per-CPU backlog and the original dropped, so the rest of the
 *   current receive batch overtakes it; reordering distance is bounded by the batch size;
 *   ingress only, since at egress a copy cannot be held back).
 *   It returns TC_ACT_UNSPEC for packets it lets through, so later tc filters still run.
 *
 * Probabilities are parts per million (0..1000000) drawn with bpf_get_prandom_u32().
 * Every packet is counted once in `fault_stats` under seen, and once under exactly one of
 * passed, dropped_loss, dropped_blackhole, duplicated, reordered or clone_failed (no_next
 * is the part of passed that XDP handed to the stack because `next` was empty).
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
	__u32 reorder_ppm;   /* tc only: delay behind the current batch with this probability */
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
};

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

static __always_inline int fault_xdp(struct xdp_md *ctx)
{
	struct fault_stats *s = stats();
	enum verdict v = decide(cfg(), 0, 0);

	if (!s)
		return XDP_ABORTED;
	s->seen++;
	if (v == V_BLACKHOLE) {
		s->dropped_blackhole++;
		return XDP_DROP;
	}
	if (v == V_LOSS) {
		s->dropped_loss++;
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

/* Send a copy of skb to the same hook (egress: out of the device; ingress: back into its
 * receive path through the backlog). The copy carries FAULT_MARK so we pass it next time. */
static __always_inline long copy_to_same_hook(struct __sk_buff *skb, int ingress)
{
	__u32 mark = skb->mark;
	long err;

	skb->mark = FAULT_MARK;
	err = bpf_clone_redirect(skb, skb->ifindex, ingress ? BPF_F_INGRESS : 0);
	skb->mark = mark;
	return err;
}

static __always_inline int fault_tc(struct __sk_buff *skb, int ingress)
{
	struct fault_stats *s;
	enum verdict v;

	if (skb->mark == FAULT_MARK) {
		skb->mark = 0; /* our own copy, counted when it was made */
		return TC_ACT_UNSPEC;
	}
	s = stats();
	if (!s)
		return TC_ACT_UNSPEC;
	s->seen++;
	v = decide(cfg(), 1, ingress);
	switch (v) {
	case V_BLACKHOLE:
		s->dropped_blackhole++;
		return TC_ACT_SHOT;
	case V_LOSS:
		s->dropped_loss++;
		return TC_ACT_SHOT;
	case V_DUP:
		if (copy_to_same_hook(skb, ingress)) {
			s->clone_failed++;
			return TC_ACT_UNSPEC;
		}
		s->duplicated++;
		return TC_ACT_UNSPEC;
	case V_REORDER:
		if (copy_to_same_hook(skb, 1)) { /* ingress only (decide() checked) */
			s->clone_failed++;
			return TC_ACT_UNSPEC;
		}
		s->reordered++;
		return TC_ACT_SHOT;
	default:
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
