/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ebpf/host/maps.h: the host dataplane's limits, state structs and maps, mirrored by
 *   mrckit.host.maps with ctypes (the agent owns the maps).
 * Part of the mrc_host object (ebpf/mrc_host.bpf.c includes every file of ebpf/host/).
 */
#ifndef MRC_HOST_MAPS_H
#define MRC_HOST_MAPS_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "mrc_wire.h"
#include "consts_gen.h" /* HOST_MAX_EVS, the flags and the enums, from mrckit.host.maps */

/* Slot index bounded for the verifier: clang drops a plain mask after a range check, so the
 * empty asm hides the value from the optimiser first. */
#define SLOT_IDX(x) ({ __u32 __v = (x); asm volatile("" : "+r"(__v)); __v & (HOST_MAX_EVS - 1); })
#define GROUP_IDX(x) ({ __u32 __v = (x); asm volatile("" : "+r"(__v)); __v & (MRC_MAX_PLANES - 1); })
#define HOST_MAX_PEERS 256
#define HOST_MAX_DENIED 1024

/* Host-wide settings, written by the agent. Index 0 of host_config. */
struct host_config {
	__u8 nic_addr[16];   /* local NIC address, network order */
	__u32 locator;       /* copy of host_load.locator for readers */
	__u16 leaf;          /* T0 index of this host (same in every plane) */
	__u16 downlink;      /* downlink index D on that T0 */
	__u32 n_planes;
	__u16 agent_port;    /* UDP port that QP 0x2 traffic is rewritten to, host order */
	__u16 configured;    /* 0 until the agent has written every map */
	__u32 n_denied;      /* entries in denied_links; 0 skips the lookups */
	__u32 mode;          /* copy of host_load.mode for readers; the programs read host_load */
	__u32 flags;         /* MRC_HOST_FLAG_*: path-aware retirement, pinned-EV mode */
	__u32 min_active;    /* ev_min_active: GOOD/SKIP EVs a peer set keeps; 0 = no floor */
	__u32 agent_idle;    /* set by the agent before it blocks; the next send or ack wakes it */
};

/* Load-time settings, mirrored by mrckit.host.maps.HostLoad. The loader writes them into the
 * .rodata.host map before load (bpf_map__set_initial_value); the map is frozen read-only, so the
 * verifier reads them as constants and drops the other mode's code from the program. Changing
 * one means loading the object again (docs/host.md). The defaults are for tools that load the
 * object as is. */
struct host_load {
	__u32 mode;          /* HOST_MODE_SRV6 or HOST_MODE_ECMP */
	__u32 locator;       /* uSID block, host order (e.g. 0xfcbbbb00) */
};
const volatile struct host_load host_load SEC(".rodata.host") = {
	.mode = HOST_MODE_SRV6,
	.locator = MRC_LOCATOR_DEFAULT,
};

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
	__u32 unacked_tx;    /* writes and PROBEs sent since the last SACK or NACK on this EV */
	__u64 tx_packets;
	__u64 tx_bytes;      /* encapsulated frame bytes */
	__u64 last_tx_ns;
	__u64 pending_ns;    /* first write or PROBE after the last ack; 0 = nothing outstanding */
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
	__u64 delivered_ns;  /* latest send time of a packet a SACK showed delivered (RACK) */
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
	__u64 sent_ns;       /* when tc egress sent it (bpf_ktime_get_ns) */
};

/* One field-wise change of one slot of a peer's EV set, applied in the kernel by the syscall
 * program mrc_host_slot_write (ebpf/host/slot_write.c). The agent reads a set, decides, and
 * writes back only the fields it decided, so the dataplane's counters, which keep moving
 * meanwhile, are never overwritten with an older copy. */
struct slot_write {
	__u8 peer[16];       /* in: key of peer_evs (peer NIC address, network order) */
	__u32 index;         /* in: slot, below the set's n */
	__u32 expect_ev;     /* in: the EV the agent's read saw in the slot */
	__u32 ev;            /* in: the EV to hold; != expect_ev replaces it (fresh counters) */
	__u8 state;          /* in: MRC_EV_STATE_* */
	__u8 reason;         /* in: enum ev_reason */
	__u16 flags;         /* in: SLOT_WRITE_* */
	__u32 skip_until_rot;/* in */
	__u32 pad;
	__u64 bad_ns;        /* in */
	__u64 tx_packets;    /* in: a new EV's resumed counts; out: the replaced EV's last counts */
	__u64 tx_bytes;
	__u64 last_tx_ns;    /* out: the replaced EV's */
	__u64 acked;         /* out: the replaced EV's */
};

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

/* Endpoint operations (QP 0x2: probes and their answers) that XDP ingress accepted from the
 * fabric, by the path they came on (docs/host.md, "Arrivals"). Key = the sender's EV path bits
 * (plane and T1: EV bits 31..20, read from the UDP source port) | the sender's leaf *
 * MRC_MAX_DOWNLINKS_PER_T0 + its downlink (from its NIC address); value = packets, per CPU.
 * A count that grows proves that path good toward this host, whatever the agent above made of
 * the packets: a slow host's timeouts are not a failed link's. Every path that failed is
 * probed, so probes are what cross it afterwards. Counted after any fault program in front of
 * the port, so a fault's drops are not arrivals. LRU: an evicted key starts again from 0. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, HOST_RX_PATHS);
	__type(key, __u32);
	__type(value, __u64);
} rx_paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} ev_events SEC(".maps");

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

/* Is a an mrckit NIC address 2001:db8:100:L::H (design 3.3)? Fills leaf and downlink. Tc egress
 * reads the destination's, XDP ingress the sender's (rx_paths). */
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

#endif /* MRC_HOST_MAPS_H */
