// SPDX-License-Identifier: GPL-2.0
/* Exercises mrckit.bpf: typed hash and per-CPU maps, BTF layouts, test_run data out, tc.
 *
 * xdp_count: counts every packet and its bytes per "kind" (first byte of the EtherType's low
 * octet) in a per-CPU array, records the last packet length per kind in a hash map, and
 * rewrites the destination MAC to the value in `cfg` (if set) so tests can check data out.
 * tc_count: the same counting for tc (ingress or egress), keyed by the same EtherType octet,
 * returning TC_ACT_OK. xdp_shared_bump: a program's own update of an mmapable array.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct pkt_stats {
	__u64 packets;
	__u64 bytes;
	__u32 last_len;
	__u8 kind;
	__u8 pad[3];
};

struct cfg_val {
	__u8 dmac[6];
	__u16 flags;
	__u32 verdict;
};

/* Only here for the BTF layout tests: an anonymous union and bit fields. */
struct layout_probe {
	__u16 a;
	union {
		__u32 b;
		__u8 c[4];
	};
	__u8 flags : 3, kind : 5;
	__u64 d;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct layout_probe);
} layout_probe SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct pkt_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct cfg_val);
} cfg SEC(".maps");

/* An mmapable array (mrckit.bpf.mmapped): userspace writes `config` and `limit` in place;
 * xdp_shared_bump adds one to `hits` of entry 1, as a program updates its own field. */
struct shared_val {
	__u64 hits;
	struct cfg_val config;
	__u32 limit;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct shared_val);
} shared SEC(".maps");

static __always_inline void count(__u32 kind, __u32 len)
{
	struct pkt_stats *s = bpf_map_lookup_elem(&stats, &kind);

	if (s) {
		s->packets++;
		s->bytes += len;
		s->last_len = len;
		s->kind = kind;
	}
}

SEC("xdp")
int xdp_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct cfg_val *c;
	__u32 key = 0, kind;

	if ((void *)(eth + 1) > data_end)
		return XDP_ABORTED;
	kind = bpf_ntohs(eth->h_proto) & 0xff; /* the EtherType's low octet */
	count(kind, data_end - data);
	c = bpf_map_lookup_elem(&cfg, &key);
	if (!c)
		return XDP_PASS;
	__builtin_memcpy(eth->h_dest, c->dmac, ETH_ALEN);
	return c->verdict;
}

SEC("xdp")
int xdp_shared_bump(struct xdp_md *ctx)
{
	__u32 key = 1;
	struct shared_val *v = bpf_map_lookup_elem(&shared, &key);

	if (v)
		__sync_fetch_and_add(&v->hits, 1);
	return XDP_PASS;
}

SEC("tc")
int tc_count(struct __sk_buff *skb)
{
	count(bpf_ntohs(skb->protocol) & 0xff, skb->len);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
