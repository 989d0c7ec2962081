// SPDX-License-Identifier: GPL-2.0
/*
 * mrc_switch: the eBPF (XDP) target of the MRC switch, design section 4.
 *
 * One program is attached to every port of a switch. For each frame it:
 *   1. drops non-IPv6 (not_ipv6), short frames (malformed) and hop limit <= 1 (hop_limit);
 *   1b. EV-hash mode (docs/ecmp-mode.md): looks up ipv6_fib (LPM, full DA of the first
 *      IPv6 header); on a hit its member, or the member of its group that the EV hashes to
 *      (CRC-32 of flow label and UDP source port, as bmv2's action selector), gives the egress
 *      port or drops (no_route), and steps 2-3 are skipped;
 *   2. applies the uN step once: when the first 48 bits of the outer DA are (locator, my uSID)
 *      it shifts the 96 bits after the 32-bit locator left by 16, zero-filled
 *      (RFC 9800 NEXT-C-SID, lblen 32, nflen 16);
 *   3. looks up the egress port exactly on the first 48 bits of the (shifted) DA (no_route);
 *   4. decrements the hop limit and rewrites the MACs from `port_config`;
 *   5. runs the virtual queue of the egress port: trims congested TRIMMABLE/TRIMMABLE_RETX
 *      writes to their headers (encapsulated, or EV-hash mode's UDP right after the IPv6),
 *      drops other congested traffic (congestion), never touches CONTROL or already-trimmed
 *      packets;
 *   6. marks CE on ECT packets above the ECN threshold on ports that do not face a host;
 *   7. drops frames larger than the egress device's MTU (oversize, bpf_check_mtu), and
 *      redirects the others through the `tx_ports` DEVMAP.
 * Map names and layouts are the P4Runtime contract: docs/ebpf-switch.md.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "mrc_wire.h"
#include "mrc_parse.h"
#include "mrc_crc32.h"
/* Sizes, action ids, default slots and cache sizes: the pipeline contract, generated from
 * controller/mrckit/wire/pipeline.py (the P4 program and the P4Runtime server use the same). */
#include "mrc_pipeline_gen.h"

struct usid_key {
	__u8 prefix[6]; /* first 48 bits of the outer DA, network order */
	__u8 pad[2];
} __attribute__((aligned(4)));

struct table_action {
	__u32 action;
	__u32 port;
};

struct port_config {
	__u8 src_mac[6];
	__u8 dst_mac[6];
	__u8 faces_host;
	__u8 valid;
	__u8 pad[2];
	__u32 trim_threshold; /* packets, depth including this packet */
	__u32 ecn_threshold;  /* packets */
};

struct counter {
	__u64 packets;
	__u64 bytes;
};

/* A virtual queue kept as a virtual finish time, so that no lock is needed: the queue holds
 * (busy_until_ns - now) / service_ns packets, service_ns = 1e9 / drain rate. A rate of 0 never
 * drains: the queue then just counts its packets in `backlog`. */
struct vqueue {
	__u64 busy_until_ns; /* bpf_ktime_get_ns() time at which the queue empties */
	__u64 backlog;       /* packets, for a rate of 0 */
};

/* The drain rate and capacity of a port's virtual queue; the manager writes every field. */
struct queue_rate {
	__u64 rate_pps;   /* packets/s; 0 = never drains */
	__u64 service_ns; /* 1e9 / rate_pps, at least 1; 0 when rate_pps is 0 */
	__u64 capacity;   /* packets the data queue holds; 0 = unbounded */
};

/* Everything the program reads about a port, one ARRAY value per port so that a packet costs
 * one lookup for its egress port (and one for its ingress port's admin state). Each part has
 * one writer: `config` the P4 table port_config (the P4Runtime server or the manager), `rate`
 * the queue manager, `queue` this program, `down` the port's admin state. The map is mmapable
 * and userspace writes its own part in place (mrckit.switch.port_state), never the whole value,
 * so that no writer undoes another's part: a table write leaves a live queue as it is. */
struct port_state {
	struct port_config config;
	struct vqueue queue;
	struct queue_rate rate;
	__u32 down; /* 0 = up, 1 = down */
	__u32 pad;
};

struct ifindex_slot {
	__u32 ifindex; /* 0: free slot */
	__u32 port;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MRC_MY_USID_SIZE);
	__type(key, struct usid_key);
	__type(value, struct table_action);
} my_usid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MRC_USID_FIB_SIZE);
	__type(key, struct usid_key);
	__type(value, struct table_action);
} usid_fib SEC(".maps");

/* Direct-mapped caches of my_usid and usid_fib, indexed by the low 12 bits of the uSID (role
 * and index, unique within a plane): they spare the hash lookups on the hot path. The manager
 * (mrckit.switch.ebpf_target.SwitchTables) keeps them in step with the hashes: `count` is the
 * number of hash entries on the slot; with 1 (and hash_only 0) the slot holds that entry, with
 * 2 or more, or hash_only set, the program asks the hash. A delete that leaves one entry sets
 * hash_only rather than searching the hash for the survivor, so every write stays O(1). */
struct usid_slot {
	__u8 prefix[6];
	__u8 hash_only; /* 1: the one entry left is not copied here; ask the hash */
	__u8 pad;
	__u32 count;
	struct table_action act;
};

#define USID_SLOT_MAP(name)                               \
	struct {                                          \
		__uint(type, BPF_MAP_TYPE_ARRAY);         \
		__uint(max_entries, MRC_USID_SLOTS);      \
		__type(key, __u32);                       \
		__type(value, struct usid_slot);          \
	} name SEC(".maps")

USID_SLOT_MAP(my_usid_slots);
USID_SLOT_MAP(usid_fib_slots);

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MRC_DEFAULT_SLOTS);
	__type(key, __u32);
	__type(value, struct table_action);
} table_defaults SEC(".maps");

/* EV-hash (ECMP) mode, docs/ecmp-mode.md: table ipv6_fib (LPM on the full DA of the
 * first IPv6 header), implemented by the action selector ecmp_selector, whose members are
 * ecmp_member and whose groups are ecmp_group. */
struct ipv6_lpm_key {
	__u32 prefixlen; /* bits, 0..128 */
	__u8 addr[16];   /* network order */
};

struct fib_ref {
	__u32 kind; /* MRC_FIB_REF_MEMBER or MRC_FIB_REF_GROUP */
	__u32 id;   /* member id or group id */
};

struct ecmp_group {
	__u32 count;                     /* members in use, 0..MRC_ECMP_SELECTOR_MAX_GROUP_SIZE */
	__u32 member[MRC_ECMP_SELECTOR_MAX_GROUP_SIZE]; /* member ids, ascending */
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MRC_IPV6_FIB_SIZE);
	__type(key, struct ipv6_lpm_key);
	__type(value, struct fib_ref);
} ipv6_fib SEC(".maps");

/* Whether ipv6_fib may hold an entry; while it is 0 the switch skips the LPM lookup (most
 * switches run in uN mode with the table empty). The manager sets it before and after every
 * insert and clears it when a delete leaves the table empty (SwitchTables.write_route,
 * delete_route), so the program never skips a route that is present. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} ipv6_fib_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MRC_ECMP_SELECTOR_SIZE);
	__type(key, __u32);                 /* member id */
	__type(value, struct table_action); /* MRC_ACTION_SET_EGRESS + port, or MRC_ACTION_DROP */
} ecmp_member SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MRC_ECMP_SELECTOR_MAX_GROUPS);
	__type(key, __u32); /* group id */
	__type(value, struct ecmp_group);
} ecmp_group SEC(".maps");

/* The P4 table port_config is `config` of each entry: its size is the port count. */
_Static_assert(MRC_PORT_CONFIG_SIZE == MRC_PORT_COUNT, "port_config is indexed by port");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MRC_PORT_COUNT);
	__type(key, __u32);
	__type(value, struct port_state);
} port_state SEC(".maps");

#define COUNTER_MAP(name, n)                              \
	struct {                                          \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);  \
		__uint(max_entries, n);                   \
		__type(key, __u32);                       \
		__type(value, struct counter);            \
	} name SEC(".maps")

COUNTER_MAP(rx_port, MRC_PORT_COUNT);
COUNTER_MAP(tx_port, MRC_PORT_COUNT);
COUNTER_MAP(trim_port, MRC_PORT_COUNT);
COUNTER_MAP(ecn_port, MRC_PORT_COUNT);
COUNTER_MAP(drop_port, MRC_PORT_COUNT);
COUNTER_MAP(drop_reason, MRC_DROP_REASON_COUNT);

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, MRC_PORT_COUNT);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MRC_PORT_COUNT);
	__type(key, __u32);   /* ifindex in the switch's namespace */
	__type(value, __u32); /* switch port */
} ifindex_port SEC(".maps");

/* A direct-mapped cache of ifindex_port (slot = ifindex % MRC_IFINDEX_SLOTS) that spares the hash
 * lookup on the hot path; the manager fills it, and a collision falls back to the hash. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MRC_IFINDEX_SLOTS);
	__type(key, __u32);
	__type(value, struct ifindex_slot);
} ifindex_slots SEC(".maps");

static __always_inline void count(void *map, __u32 index, __u32 bytes)
{
	struct counter *c = bpf_map_lookup_elem(map, &index);

	if (c) {
		c->packets += 1;
		c->bytes += bytes;
	}
}

static __always_inline int drop(__u32 port, __u32 reason, __u32 bytes)
{
	count(&drop_port, port, bytes);
	count(&drop_reason, reason, bytes);
	return XDP_DROP;
}

/* Shift the 96 bits after the 32-bit locator left by one 16-bit uSID, zero-filled. */
static __always_inline void usid_shift(struct mrc_usid_container *da)
{
#pragma unroll
	for (int i = 0; i < MRC_MAX_USIDS_IN_CONTAINER - 1; i++)
		da->usid[i] = da->usid[i + 1];
	da->usid[MRC_MAX_USIDS_IN_CONTAINER - 1] = 0;
}

static __always_inline void copy_prefix(struct usid_key *key, const struct mrc_usid_container *da)
{
	__builtin_memset(key, 0, sizeof(*key));
	__builtin_memcpy(key->prefix, da, sizeof(key->prefix));
}

/* Whether the queue, counting this packet, holds at least `threshold` packets (design section
 * 4). The depth is ceil((busy_until - now) / service), so depth + 1 >= threshold reads, without
 * a division, busy_until - now > (threshold - 2) * service. */
static __always_inline int vqueue_reaches(struct vqueue *q, __u64 service_ns, __u64 now, __u32 threshold)
{
	__u64 until = q->busy_until_ns;

	if (threshold <= 1)
		return 1;
	if (!service_ns)
		return q->backlog + 1 >= threshold;
	return until > now && until - now > (__u64)(threshold - 2) * service_ns;
}

/* Add one packet. Two CPUs that find the queue idle at once may both restart it, losing one
 * packet of depth; that is the price of staying lock-free. */
static __always_inline void vqueue_enqueue(struct vqueue *q, __u64 service_ns, __u64 now)
{
	if (!service_ns)
		__sync_fetch_and_add(&q->backlog, 1);
	else if (q->busy_until_ns <= now)
		q->busy_until_ns = now + service_ns;
	else
		__sync_fetch_and_add(&q->busy_until_ns, service_ns);
}

/* Step 5's congestion of the egress port: sets *trim, *ecn and *full (the data queue holds
 * its capacity: a whole data packet is tail-dropped, as a switch without trimming does), and
 * returns the queue to enqueue into, or NULL for a port that is never congested (both
 * thresholds MRC_THRESHOLD_NONE and no capacity), which skips the queue and its clock.
 * The clock is read only for a draining queue (rate > 0): a rate of 0 counts packets, and
 * the queue then needs no time at all. bpf_ktime_get_coarse_ns() would be cheaper, but it
 * lags by up to a tick (4 ms at HZ=250): an idle queue restarted at that time would look up
 * to tick/service packets shorter than it is, so thresholds would no longer mean packets. */
static __always_inline struct vqueue *queue_check(struct port_state *st, __u64 *service_ns, __u64 *now,
						  int *trim, int *ecn, int *full)
{
	const struct port_config *pc = &st->config;
	const struct queue_rate *rate = &st->rate;
	struct vqueue *q = &st->queue;

	if (pc->trim_threshold == MRC_THRESHOLD_NONE && pc->ecn_threshold == MRC_THRESHOLD_NONE && !rate->capacity)
		return 0;
	*service_ns = rate->service_ns;
	if (*service_ns)
		*now = bpf_ktime_get_ns();
	*trim = vqueue_reaches(q, *service_ns, *now, pc->trim_threshold);
	*ecn = vqueue_reaches(q, *service_ns, *now, pc->ecn_threshold);
	/* The capacity is at most MRC_THRESHOLD_NONE - 1 (the manager checks): counting this
	 * packet, a full queue reaches capacity + 1. */
	*full = rate->capacity && vqueue_reaches(q, *service_ns, *now, (__u32)rate->capacity + 1);
	return q;
}

/* Frame length after trimming an MRC write to its last header (design section 4, step 5),
 * or 0 when the frame is not an MRC write with complete headers. The write is either
 * encapsulated (outer next header 41, inner 17) or, in EV-hash mode, a UDP header follows the
 * only IPv6 header (docs/ecmp-mode.md): mrc_parse() found its BTH either way. */
static __always_inline __u32 trim_length(const struct mrc_pkt *p)
{
	struct mrc_bth *bth = p->bth;
	__u32 ext;
	__u8 op;

	if (!bth || !mrc_is_rocev2(p->udp))
		return 0;
	op = bth->opcode;
	if (!mrc_is_write(op))
		return 0;
	ext = MRC_METH_LEN + MRC_RETH_LEN;
	if (bth->flags & MRC_BTH_FLAG_TS)
		ext += MRC_TSETH_LEN;
	if (op == MRC_OP_WRITE_LAST_IMM || op == MRC_OP_WRITE_ONLY_IMM)
		ext += MRC_IMMDT_LEN;
	if (!mrc_ext(p, ext))
		return 0;
	return (void *)(bth + 1) - p->data + ext;
}

/* Cut the frame to `len` bytes (at least up to the BTH, as trim_length() gives) and fix the
 * IPv6 payload length(s) and the UDP length. Returns 0 on success. */
static __always_inline int trim_to(struct xdp_md *ctx, __u32 len)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 cur = data_end - data;
	struct mrc_pkt p;

	if (cur > len && bpf_xdp_adjust_tail(ctx, (int)len - (int)cur))
		return -1;
	/* The tail moved: the view of the frame must be taken again. */
	mrc_parse(&p, (void *)(long)ctx->data, (void *)(long)ctx->data_end);
	if (!p.udp)
		return -1;
	p.outer->payload_len = bpf_htons(len - ((void *)(p.outer + 1) - p.data));
	if (p.inner)
		p.inner->payload_len = bpf_htons(len - ((void *)(p.inner + 1) - p.data));
	p.udp->len = bpf_htons(len - ((void *)p.udp - p.data));
	return 0;
}

/* Whether a frame of `len` bytes (from Ethernet) exceeds the MTU of the device behind `port`
 * (design 3.1: every interface MTU must fit the packet it carries). A veth drops an oversize
 * frame in its transmit path, unseen by tx_port, so the switch drops and counts it instead.
 * The DEVMAP entry holds the port's ifindex; bpf_check_mtu() resolves it in the namespace of
 * the receiving device, the switch's own, and compares len with the MTU plus the Ethernet
 * header. A helper error (no such device) is left to the redirect. */
static __always_inline int oversize(struct xdp_md *ctx, __u32 port, __u32 len)
{
	__u32 mtu_len = len - ETH_HLEN; /* the L3 length: the helper adds the header itself */
	__u32 *ifindex;

	/* Every IPv6 link carries 1280 bytes (RFC 8200, 5): SACKs, NACKs, trims and small
	 * writes skip the helper, which costs about 25 ns a packet under BPF_PROG_TEST_RUN. */
	if (mtu_len <= MRC_IPV6_MIN_MTU)
		return 0;
	ifindex = bpf_map_lookup_elem(&tx_ports, &port);
	if (!ifindex)
		return 0;
	return bpf_check_mtu(ctx, *ifindex, &mtu_len, 0, 0) == BPF_MTU_CHK_RET_FRAG_NEEDED;
}

static __always_inline __u32 ingress_port(struct xdp_md *ctx, int *known)
{
	__u32 ifindex = ctx->ingress_ifindex;
	__u32 slot = ifindex & (MRC_IFINDEX_SLOTS - 1);
	struct ifindex_slot *cached = bpf_map_lookup_elem(&ifindex_slots, &slot);
	__u32 *port;

	if (cached && cached->ifindex == ifindex) {
		*known = 1;
		return cached->port;
	}
	port = bpf_map_lookup_elem(&ifindex_port, &ifindex);

	*known = port != 0;
	return port ? *port : 0;
}

/* Whether port `port` is admin-down; a port outside the map counts as up (the caller's route
 * or redirect fails on it instead). */
static __always_inline int port_down(__u32 port)
{
	struct port_state *st = bpf_map_lookup_elem(&port_state, &port);

	return st && st->down;
}

/* Exact match of the 48-bit prefix in `key` against a table: slot cache first, hash on a
 * shared slot, then the table's default action. */
static __always_inline struct table_action *match(void *hash, void *slots, struct usid_key *key,
						  __u32 default_index)
{
	__u32 idx = ((key->prefix[4] << 8) | key->prefix[5]) & (MRC_USID_SLOTS - 1);
	struct usid_slot *slot = bpf_map_lookup_elem(slots, &idx);
	struct table_action *act = 0;

	if (slot && slot->count == 1 && !slot->hash_only) {
		if (*(__u32 *)slot->prefix == *(__u32 *)key->prefix &&
		    *(__u16 *)(slot->prefix + 4) == *(__u16 *)(key->prefix + 4))
			act = &slot->act;
	} else if (slot && slot->count) {
		act = bpf_map_lookup_elem(hash, key);
	}
	if (!act)
		act = bpf_map_lookup_elem(&table_defaults, &default_index);
	return act;
}

/* Steps 2 and 3: the uN shift and the FIB. Returns the egress port or -1 for no route. */
static __always_inline int route(struct mrc_usid_container *da)
{
	struct table_action *act;
	struct usid_key key;

	copy_prefix(&key, da);
	act = match(&my_usid, &my_usid_slots, &key, MRC_DEFAULT_MY_USID);
	if (act && act->action == MRC_ACTION_USID_UN) {
		usid_shift(da);
		copy_prefix(&key, da);
	}
	act = match(&usid_fib, &usid_fib_slots, &key, MRC_DEFAULT_USID_FIB);
	if (!act || act->action != MRC_ACTION_SET_EGRESS || act->port >= MRC_PORT_COUNT)
		return -1;
	return (int)act->port;
}

/* The EV hash of docs/ecmp-mode.md (mrckit.wire.ecmp): CRC-32 of the selector fields
 * packed MSB first, zero-padded: flow label (20 bits) | UDP source port (16 bits) | 0000, or
 * flow label | 0000 when the P4 parser would not have extracted a UDP header (the one after
 * the first IPv6, or after the inner one of an encapsulated frame, all 8 bytes in the frame). */
static __always_inline __u32 ecmp_hash(const struct mrc_pkt *p)
{
	__u32 fl = mrc_ipv6_flow_label(p->outer);
	__u32 crc = MRC_CRC32_INIT;
	__u32 sport;

	crc = mrc_crc32_byte(crc, (__u8)(fl >> 12));
	crc = mrc_crc32_byte(crc, (__u8)(fl >> 4));
	if (p->udp) {
		sport = bpf_ntohs(p->udp->source);
		crc = mrc_crc32_byte(crc, (__u8)((fl << 4) | (sport >> 12)));
		crc = mrc_crc32_byte(crc, (__u8)(sport >> 4));
		crc = mrc_crc32_byte(crc, (__u8)(sport << 4));
	} else {
		crc = mrc_crc32_byte(crc, (__u8)(fl << 4));
	}
	return crc ^ MRC_CRC32_XOROUT;
}

enum fib_result {
	FIB_MISS = 0, /* no ipv6_fib entry: the uN path decides */
	FIB_HIT = 1,  /* *port is the egress port */
	FIB_DROP = 2, /* a drop() member, an empty group, or an id with no entry: no_route */
};

/* ipv6_fib and its action selector (docs/ecmp-mode.md): LPM on the full DA of the
 * first IPv6 header, then the member named, or the member at hash % count of the group named
 * (members ascending by id). */
static __always_inline int fib_route(struct mrc_pkt *p, __u32 *port)
{
	struct ipv6_lpm_key key = { .prefixlen = 128 };
	struct table_action *act;
	struct ecmp_group *group;
	struct fib_ref *ref;
	__u32 member, idx, zero = 0, *routes = bpf_map_lookup_elem(&ipv6_fib_state, &zero);

	if (!routes || !*routes)
		return FIB_MISS;
	__builtin_memcpy(key.addr, &p->outer->daddr, sizeof(key.addr));
	ref = bpf_map_lookup_elem(&ipv6_fib, &key);
	if (!ref)
		return FIB_MISS;
	member = ref->id;
	if (ref->kind == MRC_FIB_REF_GROUP) {
		group = bpf_map_lookup_elem(&ecmp_group, &member);
		if (!group || group->count == 0 || group->count > MRC_ECMP_SELECTOR_MAX_GROUP_SIZE)
			return FIB_DROP;
		mrc_parse_l4(p); /* the hash reads the UDP source port */
		idx = ecmp_hash(p) % group->count;
		/* idx < count <= 256 already; the barrier keeps clang from dropping the mask the
		 * verifier needs to bound the index. */
		asm volatile("" : "+r"(idx));
		member = group->member[idx & (MRC_ECMP_SELECTOR_MAX_GROUP_SIZE - 1)];
	} else if (ref->kind != MRC_FIB_REF_MEMBER) {
		return FIB_DROP;
	}
	act = bpf_map_lookup_elem(&ecmp_member, &member);
	if (!act || act->action != MRC_ACTION_SET_EGRESS || act->port >= MRC_PORT_COUNT)
		return FIB_DROP;
	*port = act->port;
	return FIB_HIT;
}

SEC("xdp")
int mrc_switch(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 len = data_end - data;
	struct port_state *st;
	struct port_config *pc = 0;
	struct mrc_pkt p;
	struct ethhdr *eth;
	struct ipv6hdr *ip6;
	__u32 in_port, out_port, trim_len = 0;
	__u64 now = 0, service_ns = 0;
	__u8 tclass, dscp, ecn;
	struct vqueue *q = 0;
	int known, egress, fib, trim_congested = 0, ecn_congested = 0, full = 0;

	in_port = ingress_port(ctx, &known);
	if (!known)
		return XDP_PASS; /* not a switch port: leave it to the kernel */
	count(&rx_port, in_port, len);

	if (port_down(in_port))
		return drop(in_port, MRC_DROP_PORT_DOWN, len);
	/* Forwarding reads Ethernet and the first IPv6 header only; the rest of the view is
	 * parsed when a trim or the EV hash needs it. */
	mrc_parse_l3(&p, data, data_end);
	eth = p.eth;
	if (!eth)
		return drop(in_port, MRC_DROP_MALFORMED, len);
	if (eth->h_proto != bpf_htons(MRC_ETHERTYPE_IPV6))
		return drop(in_port, MRC_DROP_NOT_IPV6, len);
	ip6 = p.outer;
	if (!ip6)
		return drop(in_port, MRC_DROP_MALFORMED, len);
	if (ip6->hop_limit <= 1)
		return drop(in_port, MRC_DROP_HOP_LIMIT, len);

	fib = fib_route(&p, &out_port);
	if (fib == FIB_DROP)
		return drop(in_port, MRC_DROP_NO_ROUTE, len);
	if (fib == FIB_MISS) {
		egress = route((struct mrc_usid_container *)&ip6->daddr);
		if (egress < 0)
			return drop(in_port, MRC_DROP_NO_ROUTE, len);
		out_port = (__u32)egress;
	}
	/* No device behind the port: the route leads nowhere. */
	if (bpf_redirect_map(&tx_ports, out_port, 0) != XDP_REDIRECT)
		return drop(in_port, MRC_DROP_NO_ROUTE, len);
	/* One lookup gives the egress port's admin state, its port_config entry and its queue. */
	st = bpf_map_lookup_elem(&port_state, &out_port);
	if (st && st->down)
		return drop(out_port, MRC_DROP_PORT_DOWN, len);

	ip6->hop_limit -= 1;
	if (st && st->config.valid) {
		pc = &st->config;
		__builtin_memcpy(eth->h_source, pc->src_mac, ETH_ALEN);
		__builtin_memcpy(eth->h_dest, pc->dst_mac, ETH_ALEN);
		q = queue_check(st, &service_ns, &now, &trim_congested, &ecn_congested, &full);
	}

	tclass = mrc_ipv6_tclass(ip6);
	dscp = tclass >> 2;
	ecn = tclass & 3;
	if (trim_congested && dscp != MRC_DSCP_CONTROL && dscp != MRC_DSCP_TRIMMED &&
	    dscp != MRC_DSCP_TRIMMED_LASTHOP) {
		if (dscp == MRC_DSCP_TRIMMABLE || dscp == MRC_DSCP_TRIMMABLE_RETX) {
			mrc_parse_l4(&p);
			trim_len = trim_length(&p);
		}
		if (!trim_len)
			return drop(out_port, MRC_DROP_CONGESTION, len);
		dscp = pc->faces_host ? MRC_DSCP_TRIMMED_LASTHOP : MRC_DSCP_TRIMMED;
	}
	/* A whole data packet that finds its queue full is lost, as at a switch without trimming
	 * (trim threshold MRC_THRESHOLD_NONE); priority-class packets do not occupy the queue. */
	if (full && !trim_len && dscp != MRC_DSCP_CONTROL && dscp != MRC_DSCP_TRIMMED &&
	    dscp != MRC_DSCP_TRIMMED_LASTHOP)
		return drop(out_port, MRC_DROP_CONGESTION, len);
	/* Checked on the frame as it would leave: a trim may make it fit. */
	if (oversize(ctx, out_port, trim_len ? trim_len : len))
		return drop(out_port, MRC_DROP_OVERSIZE, len);
	if (ecn_congested && !pc->faces_host && (ecn == MRC_ECN_ECT0 || ecn == MRC_ECN_ECT1)) {
		ecn = MRC_ECN_CE;
		count(&ecn_port, out_port, trim_len ? trim_len : len);
	}
	/* Most packets keep their class: write the header only when it changes. */
	if ((__u8)(dscp << MRC_IPV6_DSCP_SHIFT | ecn) != tclass)
		mrc_ipv6_set_tclass(ip6, (__u8)(dscp << MRC_IPV6_DSCP_SHIFT | ecn));

	if (trim_len) {
		if (trim_to(ctx, trim_len))
			return drop(out_port, MRC_DROP_MALFORMED, len);
		count(&trim_port, out_port, trim_len);
		len = trim_len;
	}
	/* Only whole data packets occupy the data queue. CONTROL and already-trimmed packets ride
	 * the priority queue (design section 4, step 5), and so does a packet trimmed here: its
	 * header is what an MRC switch forwards at high priority. Counted in the data queue, the
	 * headers of an overloaded port would keep it past the threshold for ever, every later
	 * packet trimmed in turn, and no whole packet would cross (a collapse seen at link speeds
	 * below the sender's rate, docs/experiments.md). */
	if (q && !trim_len && dscp != MRC_DSCP_CONTROL && dscp != MRC_DSCP_TRIMMED &&
	    dscp != MRC_DSCP_TRIMMED_LASTHOP)
		vqueue_enqueue(q, service_ns, now);
	count(&tx_port, out_port, len);
	return XDP_REDIRECT;
}

char LICENSE[] SEC("license") = "GPL";
