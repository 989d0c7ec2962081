/* SPDX-License-Identifier: Apache-2.0 */
/* The outbox, the u32-keyed hash and the BTH packer shared by the requestor and responder. */
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "mrcep.h"

int64_t mrcep_tuning(const char *name)
{
	static const struct { const char *name; int64_t value; } table[] = {
		{"RTT_MAX_DECAY_SHIFT", MRCEP_RTT_MAX_DECAY_SHIFT},
		{"RTO_MAX_RTT_SHIFT", MRCEP_RTO_MAX_RTT_SHIFT},
		{"RTO_RTT_DECAY_SHIFT", MRCEP_RTO_RTT_DECAY_SHIFT},
		{"INFINITE_RETRIES", MRCEP_INFINITE_RETRIES},
		{"MAX_TIMEOUT_EXP", MRCEP_MAX_TIMEOUT_EXP},
		{"SACK_MIN_PACKET_BYTES", MRCEP_SACK_MIN_PACKET_BYTES},
		{"ALWAYS_SKIP_HISTORY_MASK", MRCEP_ALWAYS_SKIP_HISTORY_MASK},
		{"MAX_MTU", MRCEP_MAX_MTU},
		{"RX_BUDGET", MRCEP_RX_BUDGET},
		{"TX_BUDGET", MRCEP_TX_BUDGET},
		{"RX_BATCH", MRCEP_RX_BATCH},
		{"TX_BATCH", MRCEP_TX_BATCH},
		{"RX_SLOT_BYTES", MRCEP_RX_SLOT_BYTES},
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcmp(table[i].name, name))
			return table[i].value;
	return -1;
}

uint32_t mrcep_out_pkt_size(void)
{
	return sizeof(struct mrc_out_pkt);
}

uint32_t mrcep_out_pkt_data_offset(void)
{
	return offsetof(struct mrc_out_pkt, data);
}

uint32_t mrcep_rtx_count(void)
{
	return MRCEP_RTX_COUNT;
}

struct mrc_outbox *mrcep_outbox_new(void)
{
	return calloc(1, sizeof(struct mrc_outbox));
}

void mrcep_outbox_free(struct mrc_outbox *ob)
{
	if (ob)
		free(ob->pkts);
	free(ob);
}

void mrcep_outbox_clear(struct mrc_outbox *ob)
{
	ob->count = 0;
}

uint32_t mrcep_outbox_count(const struct mrc_outbox *ob)
{
	return ob->count;
}

const struct mrc_out_pkt *mrcep_outbox_get(const struct mrc_outbox *ob, uint32_t i)
{
	return i < ob->count ? &ob->pkts[i] : NULL;
}

struct mrc_out_pkt *mrcep_outbox_push(struct mrc_outbox *ob)
{
	if (ob->count == ob->cap) {
		uint32_t cap = ob->cap ? ob->cap * 2 : 64;
		struct mrc_out_pkt *p = realloc(ob->pkts, (size_t)cap * sizeof(*p));
		if (!p)
			return NULL;
		ob->pkts = p;
		ob->cap = cap;
	}
	return &ob->pkts[ob->count++];
}

static uint32_t slot_of(const struct mrc_map *m, uint32_t key)
{
	uint32_t h = key * 2654435761u;
	uint32_t i = h & (m->cap - 1);
	while (m->used[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	return i;
}

int mrc_map_get(const struct mrc_map *m, uint32_t key, uint64_t *val)
{
	uint32_t i;
	if (!m->cap)
		return 0;
	i = slot_of(m, key);
	if (!m->used[i])
		return 0;
	*val = m->vals[i];
	return 1;
}

static int grow(struct mrc_map *m)
{
	struct mrc_map n = {0};
	n.cap = m->cap ? m->cap * 2 : 16;
	n.keys = calloc(n.cap, sizeof(*n.keys));
	n.vals = calloc(n.cap, sizeof(*n.vals));
	n.used = calloc(n.cap, 1);
	if (!n.keys || !n.vals || !n.used) {
		mrc_map_free(&n);
		return -1;
	}
	for (uint32_t i = 0; i < m->cap; i++)
		if (m->used[i])
			mrc_map_put(&n, m->keys[i], m->vals[i]);
	mrc_map_free(m);
	*m = n;
	return 0;
}

int mrc_map_put(struct mrc_map *m, uint32_t key, uint64_t val)
{
	uint32_t i;
	if ((m->count + 1) * 2 > m->cap && grow(m))
		return -1;
	i = slot_of(m, key);
	if (!m->used[i]) {
		m->used[i] = 1;
		m->keys[i] = key;
		m->count++;
	}
	m->vals[i] = val;
	return 0;
}

int mrc_map_del(struct mrc_map *m, uint32_t key)
{
	uint32_t i, j;
	if (!m->cap)
		return -1;
	i = slot_of(m, key);
	if (!m->used[i])
		return -1;
	m->used[i] = 0;
	m->count--;
	/* Re-insert the rest of the probe run so later look-ups still find them. */
	for (j = (i + 1) & (m->cap - 1); m->used[j]; j = (j + 1) & (m->cap - 1)) {
		uint32_t k = m->keys[j];
		uint64_t v = m->vals[j];
		m->used[j] = 0;
		m->count--;
		mrc_map_put(m, k, v);
	}
	return 0;
}

void mrc_map_free(struct mrc_map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	memset(m, 0, sizeof(*m));
}

void mrcep_pack_bth(uint8_t *buf, uint8_t opcode, uint8_t flags, uint32_t dqpn, uint32_t psn)
{
	struct mrc_bth *b = (struct mrc_bth *)buf;
	b->opcode = opcode;
	b->se_m_pad_tver = 0;
	b->pkey = htons(MRC_BTH_DEFAULT_PKEY);
	b->resv8 = 0;
	mrcep_put24(b->dqpn, dqpn & 0xffffff);
	b->flags = flags;
	mrcep_put24(b->psn, psn % MRC_PSN_MOD);
}
