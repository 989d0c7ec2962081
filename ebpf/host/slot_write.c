// SPDX-License-Identifier: GPL-2.0
/*
 * ebpf/host/slot_write.c: the syscall program mrc_host_slot_write, the agent's one way to
 * change a slot of a live peer set. Compiled as part of the mrc_host object.
 *
 * A map update from user space replaces the whole set, so every counter tc egress and XDP
 * ingress advanced between the agent's read and its write would be lost (a per-path count
 * that goes short, an ack forgotten). Run with BPF_PROG_RUN, this program writes only the
 * fields the agent decided, in place. When it replaces the slot's EV it hands the old EV's
 * last counts back in the command, so the agent's record of a retired EV is the dataplane's.
 */
#include "maps.h"

SEC("syscall")
int mrc_host_slot_write(struct slot_write *cmd)
{
	__u8 peer[16];       /* a map key must not point into the context */
	struct ev_set *set;
	struct ev_slot *s;
	__u64 old_tx, old_bytes;
	__u32 i;

	__builtin_memcpy(peer, cmd->peer, sizeof(peer));
	set = bpf_map_lookup_elem(&peer_evs, peer);
	if (!set)
		return SLOT_WRITE_NO_PEER;
	i = cmd->index;
	if (i >= set->n || i >= HOST_MAX_EVS)
		return SLOT_WRITE_BAD_INDEX;
	s = &set->slots[SLOT_IDX(i)];
	if (s->ev != cmd->expect_ev)
		return SLOT_WRITE_STALE;
	if (cmd->ev != cmd->expect_ev) {
		/* Sends still counting on other CPUs land on the new EV, and are neither lost
		 * nor counted twice: the counts move by an atomic add of the difference. */
		old_tx = s->tx_packets;
		old_bytes = s->tx_bytes;
		__sync_fetch_and_add(&s->tx_packets, cmd->tx_packets - old_tx);
		__sync_fetch_and_add(&s->tx_bytes, cmd->tx_bytes - old_bytes);
		cmd->tx_packets = old_tx;
		cmd->tx_bytes = old_bytes;
		cmd->last_tx_ns = s->last_tx_ns;
		cmd->acked = s->acked;
		s->ev = cmd->ev;
		s->unacked_tx = 0;
		s->last_tx_ns = s->pending_ns = s->last_ack_ns = s->acked_sent_ns = 0;
		s->acked = s->skips = s->nacks = 0;
	}
	s->state = cmd->state;
	s->reason = cmd->reason;
	s->skip_until_rot = cmd->skip_until_rot;
	s->bad_ns = cmd->bad_ns;
	if (cmd->flags & SLOT_WRITE_CLEAR_PENDING)
		s->pending_ns = 0;
	return SLOT_WRITE_OK;
}
