/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ebpf/host/stats.h: host_stats counters, EV state-change events to the agent,
 *   and the per-EV transmit accounting.
 * Part of the mrc_host object (ebpf/mrc_host.bpf.c includes every file of ebpf/host/).
 */
#ifndef MRC_HOST_STATS_H
#define MRC_HOST_STATS_H

#include "maps.h"

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&host_stats, &idx);

	if (v)
		*v += 1;
}

/* One more endpoint operation from the host at src, through the plane and T1 of the sender's
 * EV (the UDP source port holds EV bits 31..16): the rx_paths key (maps.h). A sender that is
 * no mrckit host counts nowhere. */
static __always_inline void count_rx_path(const struct udphdr *udp, const struct mrc_host_addr *src)
{
	__u32 key = ((__u32)bpf_ntohs(udp->source) << MRC_EV_SPORT_SHIFT) & ~(__u32)MRC_EV_SALT_MASK;
	__u32 leaf, down;
	__u64 one = 1, *n;

	if (!parse_nic(src, &leaf, &down))
		return;
	key |= leaf * MRC_MAX_DOWNLINKS_PER_T0 + down;
	n = bpf_map_lookup_elem(&rx_paths, &key);
	if (n)
		*n += 1;
	else
		bpf_map_update_elem(&rx_paths, &key, &one, BPF_NOEXIST);
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

/* The agent blocks while no EV needs its sweep (docs/host.md, "An idle agent"): it sets
 * host_config.agent_idle first, and the first send that elicits an ack (a write or a PROBE),
 * or the first ack, after that pushes one WAKE record to ev_events, whose ring wakes it. A
 * plain store, no atomics: two CPUs racing may both push a record, and a spare record costs
 * one extra sweep. */
static __always_inline void wake_agent(struct host_config *cfg, __u64 now)
{
	struct ev_event *e;

	if (!cfg || !cfg->agent_idle)
		return;
	cfg->agent_idle = 0;
	e = bpf_ringbuf_reserve(&ev_events, sizeof(*e), 0);
	if (!e) {
		count(STAT_EVENTS_LOST);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->reason = REASON_WAKE;
	e->ts_ns = now;
	bpf_ringbuf_submit(e, 0);
}

/* Count a send on slot s. Only a packet that elicits an ack (mrc_elicits_ack) starts the
 * EV's RTO clock (pending_ns, unacked_tx): the agent's sweep judges an EV by the acks its
 * packets should have brought back, and none comes for a SACK or a NACK. */
static __always_inline void tx_account(struct ev_slot *s, __u32 len, __u64 now, int elicits_ack)
{
	__sync_fetch_and_add(&s->tx_packets, 1);
	__sync_fetch_and_add(&s->tx_bytes, len);
	s->last_tx_ns = now;
	if (!elicits_ack)
		return;
	__sync_fetch_and_add(&s->unacked_tx, 1);
	if (!s->pending_ns)
		s->pending_ns = now;
}

#endif /* MRC_HOST_STATS_H */
