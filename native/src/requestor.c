/* SPDX-License-Identifier: Apache-2.0 */
/* The requestor of controller/mrckit/endpoint/requestor.py in C (design 6; reference 3.2, 3.4,
 * 3.5): segmentation into FIRST/MIDDLE/LAST or ONLY with METH, TSETH and RETH in every packet,
 * the MPR window, the NSCC-style window, and loss recovery by NACK, by time (RACK-style: a
 * packet sent REORDER_PACKETS transmissions later was acknowledged and the slowest recent
 * RTT passed) and by RTO (1.024 us x 2^timeout; linear, then exponential retries, then error;
 * a timeout resends the oldest packet only and restarts the timer, and once that resend is
 * acknowledged one later acknowledged transmission loses an old packet sent before it).
 *
 * Outstanding packets live in a ring indexed by PSN % MPR (the MPR window bounds them); the
 * unacknowledged, not-lost ones also form a list in send order (the "order" of the Python
 * model); lost PSNs wait in a min-heap.
 *
 * With cfg.rc the QP is the RC baseline instead (RoCEv2 RC, docs/endpoint.md): the responder
 * answers with cumulative AETH ACKs and one NAK sequence error per gap, and the requestor goes
 * back N: a NAK, or an RTO, marks every outstanding packet from the first unacknowledged one
 * lost, so they are resent in PSN order (the lost heap). No SACK, no RACK-style detection, no
 * PROBE, and no congestion control: the window stays at cc.initial_cwnd. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <endian.h>

#include "mrcep.h"

struct msg {
	uint64_t wr_id;
	const uint8_t *data;
	uint64_t len, va;
	uint32_t rkey, imm;
	int has_imm, finished;
	uint16_t msn, rqmsn;
	uint32_t npkts, next_idx;
	int64_t first_psn, last_psn;
	struct msg *qnext, *anext;
};

struct slot {
	int64_t psn, sent_at;
	uint64_t tx_seq;
	struct msg *msg;
	uint32_t off, size;
	int32_t prev, next;  /* send-order list, slot indices, -1 = none */
	uint8_t opcode, last, lost, in_order, used, reason;
};

struct mrc_req {
	struct mrc_req_cfg cfg;
	struct mrc_outbox *out;
	struct mrc_cc cc;
	struct mrc_req_stats stats;
	char error[MRCEP_ERROR_LEN];
	int failed;
	int64_t next_psn, una;
	struct slot *ring;
	int32_t ohead, otail;  /* send-order list */
	int64_t *heap;
	uint32_t nheap, capheap;
	int64_t inflight;
	uint64_t tx_seq;
	int64_t max_rtt_ns;  /* slowest recent RTT, for the SACK-gap rule (fast decay) */
	int64_t rto_rtt_ns;  /* slowest RTT over a longer past, for the RTO floor (slow decay) */
	int64_t last_timeout_ns;  /* the timer restarts here (requestor.py on_timer) */
	uint64_t rto_acked_tx;    /* the latest timeout resend acknowledged (its tx_seq) */
	uint64_t window_acked_tx; /* the latest acked that the window let out (no RTO resend) */
	uint32_t retries;
	int rto_credit;  /* a timeout's resend goes out whatever the window (requestor.py) */
	uint16_t msn, rqmsn, probe_id;
	uint64_t next_wr;
	struct msg *qhead, *qtail, *ahead, *atail;
	struct mrc_completion *comps;
	uint32_t ncomp, capcomp, compread;
};

/* The timeout now: the profile's timer after r->retries timeouts, but never below
 * 2^MRCEP_RTO_MAX_RTT_SHIFT x the slowest RTT of the slow tracker (requestor.py,
 * RTO_MAX_RTT_SHIFT, RTO_RTT_DECAY_SHIFT). */
static int64_t rto_ns(const struct mrc_req *r)
{
	uint32_t retries = r->retries;
	uint32_t n = r->cfg.timeout_exp + (retries > r->cfg.linear_retries ? retries - r->cfg.linear_retries : 0);
	int64_t floor = r->rto_rtt_ns << MRCEP_RTO_MAX_RTT_SHIFT;
	int64_t timer;
	if (n > MRCEP_MAX_TIMEOUT_EXP)
		n = MRCEP_MAX_TIMEOUT_EXP;
	timer = (int64_t)MRC_TIME_UNIT_NS << n;
	return timer > floor ? timer : floor;
}

static int exhausted(const struct mrc_req *r)
{
	return r->cfg.exp_retries != MRCEP_INFINITE_RETRIES &&
	       r->retries > r->cfg.linear_retries + r->cfg.exp_retries;
}

struct mrc_req *mrcep_req_new(const struct mrc_req_cfg *cfg, struct mrc_outbox *out, char *err, int errlen)
{
	struct mrc_req *r;
	if (cfg->mtu == 0 || cfg->mtu > MRCEP_MAX_MTU) {
		snprintf(err, errlen, "path MTU payload must be within 1..%d B, got %u", MRCEP_MAX_MTU, cfg->mtu);
		return NULL;
	}
	if (cfg->mpr < MRC_MPR_UNIT_PSNS || cfg->mpr % MRC_MPR_UNIT_PSNS) {
		snprintf(err, errlen, "MPR %u is not a positive multiple of %d PSNs", cfg->mpr, MRC_MPR_UNIT_PSNS);
		return NULL;
	}
	if (cfg->timeout_exp > MRCEP_MAX_TIMEOUT_EXP || cfg->linear_retries > 7 ||
	    cfg->exp_retries > MRCEP_INFINITE_RETRIES) {
		snprintf(err, errlen, "timeout_exp 0..24, linear_retries 0..7, exp_retries 0..25");
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r || !(r->ring = calloc(cfg->mpr, sizeof(struct slot)))) {
		free(r);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	r->cfg = *cfg;
	r->out = out;
	mrc_cc_init(&r->cc, &cfg->cc);
	r->next_psn = r->una = cfg->initial_psn;
	r->ohead = r->otail = -1;
	r->next_wr = 1;
	return r;
}

static void free_msgs(struct mrc_req *r)
{
	struct msg *m, *n;
	/* A message being segmented is on both lists: free it from the queue only. */
	for (m = r->ahead; m; m = n) {
		n = m->anext;
		if (m->next_idx == m->npkts)
			free(m);
	}
	for (m = r->qhead; m; m = n) {
		n = m->qnext;
		free(m);
	}
	r->ahead = r->atail = r->qhead = r->qtail = NULL;
}

void mrcep_req_free(struct mrc_req *r)
{
	if (!r)
		return;
	free_msgs(r);
	free(r->ring);
	free(r->heap);
	free(r->comps);
	free(r);
}

static void push_completion(struct mrc_req *r, struct msg *m, int status)
{
	if (m->finished)
		return;
	m->finished = 1;
	if (r->ncomp == r->capcomp) {
		uint32_t cap = r->capcomp ? r->capcomp * 2 : 64;
		struct mrc_completion *c = realloc(r->comps, cap * sizeof(*c));
		if (!c)
			return;
		r->comps = c;
		r->capcomp = cap;
	}
	r->comps[r->ncomp].wr_id = m->wr_id;
	r->comps[r->ncomp].status = status;
	r->ncomp++;
}

int mrcep_req_poll(struct mrc_req *r, struct mrc_completion *c)
{
	if (r->compread == r->ncomp) {
		r->compread = r->ncomp = 0;
		return 0;
	}
	*c = r->comps[r->compread++];
	return 1;
}

int64_t mrcep_req_post(struct mrc_req *r, const uint8_t *data, uint64_t len, uint64_t va,
		       uint32_t rkey, int has_imm, uint32_t imm)
{
	struct msg *m;
	if (r->failed || !(m = calloc(1, sizeof(*m))))
		return -1;
	m->wr_id = r->next_wr++;
	m->data = data;
	m->len = len;
	m->va = va;
	m->rkey = rkey;
	m->has_imm = has_imm;
	m->imm = imm;
	m->msn = ++r->msn;
	if (has_imm)
		r->rqmsn++;
	m->rqmsn = r->rqmsn;
	m->npkts = len ? (uint32_t)((len + r->cfg.mtu - 1) / r->cfg.mtu) : 1;
	m->first_psn = m->last_psn = -1;
	if (r->qtail)
		r->qtail->qnext = m;
	else
		r->qhead = m;
	r->qtail = m;
	return (int64_t)m->wr_id;
}

int mrcep_req_busy(const struct mrc_req *r)
{
	return r->qhead || r->ahead;
}

static struct slot *slot_at(const struct mrc_req *r, int64_t psn)
{
	struct slot *s = &r->ring[psn % r->cfg.mpr];
	return s->used && s->psn == psn ? s : NULL;
}

int64_t mrcep_req_una(struct mrc_req *r)
{
	while (r->una < r->next_psn && !slot_at(r, r->una))
		r->una++;
	return r->una;
}

static int mpr_full(struct mrc_req *r)
{
	return r->next_psn >= mrcep_req_una(r) + r->cfg.mpr;
}

/* --- send-order list and the lost heap ------------------------------------------------ */
static void order_remove(struct mrc_req *r, struct slot *s)
{
	if (!s->in_order)
		return;
	if (s->prev >= 0)
		r->ring[s->prev].next = s->next;
	else
		r->ohead = s->next;
	if (s->next >= 0)
		r->ring[s->next].prev = s->prev;
	else
		r->otail = s->prev;
	s->in_order = 0;
}

static void order_append(struct mrc_req *r, struct slot *s)
{
	int32_t i = (int32_t)(s - r->ring);
	s->prev = r->otail;
	s->next = -1;
	if (r->otail >= 0)
		r->ring[r->otail].next = i;
	else
		r->ohead = i;
	r->otail = i;
	s->in_order = 1;
}

static void heap_push(struct mrc_req *r, int64_t psn)
{
	uint32_t i;
	if (r->nheap == r->capheap) {
		uint32_t cap = r->capheap ? r->capheap * 2 : 64;
		int64_t *h = realloc(r->heap, cap * sizeof(*h));
		if (!h)
			return;
		r->heap = h;
		r->capheap = cap;
	}
	for (i = r->nheap++; i && r->heap[(i - 1) / 2] > psn; i = (i - 1) / 2)
		r->heap[i] = r->heap[(i - 1) / 2];
	r->heap[i] = psn;
}

static void heap_pop(struct mrc_req *r)
{
	int64_t last = r->heap[--r->nheap];
	uint32_t i = 0, c;
	while ((c = 2 * i + 1) < r->nheap) {
		if (c + 1 < r->nheap && r->heap[c + 1] < r->heap[c])
			c++;
		if (r->heap[c] >= last)
			break;
		r->heap[i] = r->heap[c];
		i = c;
	}
	if (r->nheap)
		r->heap[i] = last;
}

static void mark_lost(struct mrc_req *r, struct slot *s, int reason)
{
	if (s->lost)
		return;
	s->lost = 1;
	s->reason = (uint8_t)reason;
	r->inflight -= s->size;
	order_remove(r, s);
	heap_push(r, s->psn);
}

/* --- sending ------------------------------------------------------------------------ */
static int window_allows(const struct mrc_req *r, uint32_t size)
{
	return r->inflight == 0 || (double)(r->inflight + size) <= r->cc.cwnd;
}

static uint8_t opcode_of(uint32_t idx, uint32_t npkts, int imm)
{
	if (npkts == 1)
		return imm ? MRC_OP_WRITE_ONLY_IMM : MRC_OP_WRITE_ONLY;
	if (idx == 0)
		return MRC_OP_WRITE_FIRST;
	if (idx == npkts - 1)
		return imm ? MRC_OP_WRITE_LAST_IMM : MRC_OP_WRITE_LAST;
	return MRC_OP_WRITE_MIDDLE;
}

static struct slot *segment(struct mrc_req *r, struct msg *m, uint32_t size)
{
	uint32_t idx = m->next_idx;
	struct slot *s = &r->ring[r->next_psn % r->cfg.mpr];
	if (idx == 0) {
		m->first_psn = r->next_psn;
		m->last_psn = r->next_psn + m->npkts - 1;
		if (r->atail)
			r->atail->anext = m;
		else
			r->ahead = m;
		r->atail = m;
	}
	m->next_idx++;
	if (m->next_idx == m->npkts) {
		r->qhead = m->qnext;
		if (!r->qhead)
			r->qtail = NULL;
	}
	memset(s, 0, sizeof(*s));
	s->psn = r->next_psn++;
	s->msg = m;
	s->off = idx * r->cfg.mtu;
	s->size = size;
	s->opcode = opcode_of(idx, m->npkts, m->has_imm);
	s->last = idx == m->npkts - 1;
	s->used = 1;
	s->prev = s->next = -1;
	return s;
}

static struct slot *next_packet(struct mrc_req *r, int *rtx)
{
	struct msg *m;
	uint32_t size;
	*rtx = 1;
	while (r->nheap) {
		struct slot *s = slot_at(r, r->heap[0]);
		if (!s || !s->lost) {
			heap_pop(r);
			continue;
		}
		if (!window_allows(r, s->size) && !r->rto_credit)
			return NULL;
		r->rto_credit = 0;
		heap_pop(r);
		return s;
	}
	*rtx = 0;
	if (!r->qhead || mpr_full(r))
		return NULL;
	m = r->qhead;
	size = (uint32_t)(m->len - (uint64_t)m->next_idx * r->cfg.mtu < r->cfg.mtu ?
			  m->len - (uint64_t)m->next_idx * r->cfg.mtu : r->cfg.mtu);
	if (!window_allows(r, size))
		return NULL;
	return segment(r, m, size);
}

static void put_icrc(struct mrc_req *r, struct mrc_out_pkt *o)
{
	const uint8_t *parts[1] = {o->data};
	uint32_t lens[1] = {o->len};
	uint32_t crc = mrcep_icrc(r->cfg.local, r->cfg.peer, o->len + MRC_ICRC_LEN, parts, lens, 1);
	for (int i = 0; i < 4; i++)
		o->data[o->len++] = (uint8_t)(crc >> (8 * i));
}

static uint32_t pack_data(uint8_t *buf, const struct mrc_req *r, const struct slot *s, uint8_t flags, int64_t now)
{
	const struct msg *m = s->msg;
	struct mrc_meth *meth = (struct mrc_meth *)(buf + MRC_BTH_LEN);
	struct mrc_tseth *ts = (struct mrc_tseth *)(meth + 1);
	struct mrc_reth *reth = (struct mrc_reth *)(ts + 1);
	uint32_t n = MRC_BTH_LEN + MRC_METH_LEN + MRC_TSETH_LEN + MRC_RETH_LEN;

	mrcep_pack_bth(buf, s->opcode, flags, r->cfg.remote_qpn, (uint32_t)(s->psn % MRC_PSN_MOD));
	meth->rqmsn = htons(m->rqmsn);
	meth->msn = htons(m->msn);
	ts->tx_timestamp = htons((uint16_t)(now / MRC_TIME_UNIT_NS));
	ts->tsr_format = htons(MRC_TSETH_FORMAT);
	reth->va = htobe64(m->va + s->off);
	reth->rkey = htonl(m->rkey);
	reth->dma_len = htonl(s->size);
	if (s->last && m->has_imm) {
		struct mrc_immdt *im = (struct mrc_immdt *)(reth + 1);
		im->imm = htonl(m->imm);
		n += MRC_IMMDT_LEN;
	}
	return n;
}

static void transmit(struct mrc_req *r, struct slot *s, int rtx, int64_t now)
{
	uint8_t flags = MRC_BTH_FLAG_TS;
	struct mrc_out_pkt *o;

	s->tx_seq = ++r->tx_seq;
	s->sent_at = now;
	s->lost = 0;
	order_remove(r, s);
	order_append(r, s);
	r->inflight += s->size;
	if (rtx) {
		flags |= MRC_BTH_FLAG_RTX;
		r->stats.retransmits[s->reason]++;
	}
	if (s->last || (double)(r->inflight + r->cfg.mtu) > r->cc.cwnd || mpr_full(r))
		flags |= MRC_BTH_FLAG_ACKREQ;
	if (!(o = mrcep_outbox_push(r->out))) {
		mrcep_req_fail(r, "cannot send: out of memory");
		return;
	}
	o->qpn = r->cfg.qpn;
	o->len = pack_data(o->data, r, s, flags, now);
	memcpy(o->data + o->len, s->msg->data + s->off, s->size);
	o->len += s->size;
	put_icrc(r, o);
	if (r->cfg.rc)  /* a RoCE NIC's packets are not trimmable: a full queue drops them */
		o->tclass = MRCEP_TCLASS(MRC_DSCP_NO_TRIM, MRC_ECN_ECT0);
	else
		o->tclass = rtx ? MRCEP_TCLASS(MRC_DSCP_TRIMMABLE_RETX, MRC_ECN_ECT0) :
			    MRCEP_TCLASS(MRC_DSCP_TRIMMABLE, MRC_ECN_ECT0);
	memcpy(o->peer, r->cfg.peer, 16);
	r->stats.packets++;
	r->stats.payload_bytes += s->size;
}

int mrcep_req_pump(struct mrc_req *r, int64_t now, int budget)
{
	int sent = 0, rtx;
	struct slot *s;
	while (sent < budget && !r->failed && (s = next_packet(r, &rtx))) {
		transmit(r, s, rtx, now);
		sent++;
	}
	return sent;
}

void mrcep_req_send_probe(struct mrc_req *r, int64_t now)
{
	struct mrc_out_pkt *o = mrcep_outbox_push(r->out);
	struct mrc_peth *p;
	if (!o)
		return;
	r->probe_id++;
	o->qpn = r->cfg.qpn;
	mrcep_pack_bth(o->data, MRC_OP_PROBE, 0, r->cfg.remote_qpn, 0);
	p = (struct mrc_peth *)(o->data + MRC_BTH_LEN);
	memset(p, 0, sizeof(*p));
	p->probe_id = htons(r->probe_id);
	p->tx_timestamp = htons((uint16_t)(now / MRC_TIME_UNIT_NS));
	p->tsr_format = htons(MRC_TSETH_FORMAT);
	o->len = MRC_BTH_LEN + MRC_PETH_LEN;
	put_icrc(r, o);
	o->tclass = MRCEP_TCLASS(MRC_DSCP_CONTROL, 0);
	memcpy(o->peer, r->cfg.peer, 16);
	r->stats.probes++;
}

/* --- feedback ----------------------------------------------------------------------- */
/* A slowest-RTT tracker after one RTT sample (ns): the sample, or the tracker less
 * 1/2^shift of itself, whichever is larger (requestor.py, _slowest). */
static inline int64_t slowest(int64_t tracker, int64_t sample, unsigned shift)
{
	int64_t decayed = tracker - (tracker >> shift);
	return sample > decayed ? sample : decayed;
}

static int64_t ack(struct mrc_req *r, struct slot *s, int64_t now)
{
	int64_t size = s->size;
	if (s->reason == MRCEP_RTX_NONE) {  /* Karn: only a first transmission gives an RTT sample */
		int64_t sample = now - s->sent_at;
		r->max_rtt_ns = slowest(r->max_rtt_ns, sample, MRCEP_RTT_MAX_DECAY_SHIFT);
		r->rto_rtt_ns = slowest(r->rto_rtt_ns, sample, MRCEP_RTO_RTT_DECAY_SHIFT);
	}
	order_remove(r, s);
	if (!s->lost)
		r->inflight -= s->size;
	r->stats.acked_bytes += s->size;
	if (s->reason == MRCEP_RTX_RTO) {
		if (s->tx_seq > r->rto_acked_tx)
			r->rto_acked_tx = s->tx_seq;
	} else if (s->tx_seq > r->window_acked_tx) {
		r->window_acked_tx = s->tx_seq;
	}
	s->used = 0;
	return size ? size : 1;
}

/* Mark lost, oldest first, the packets last sent as transmission last_tx or earlier, once
 * older than 5/4 of the slowest recent RTT (requestor.py _detect_losses). */
static void detect_losses(struct mrc_req *r, int64_t now, int64_t last_tx)
{
	int64_t sent_before = now - r->max_rtt_ns - (r->max_rtt_ns >> 2);
	while (r->ohead >= 0) {
		struct slot *s = &r->ring[r->ohead];
		if ((int64_t)s->tx_seq > last_tx || s->sent_at > sent_before)
			break;
		mark_lost(r, s, MRCEP_RTX_SACK_GAP);
	}
}

static void complete(struct mrc_req *r)
{
	int64_t una = mrcep_req_una(r);
	while (r->ahead && r->ahead->last_psn < una) {
		struct msg *m = r->ahead;
		r->ahead = m->anext;
		if (!r->ahead)
			r->atail = NULL;
		r->stats.completions++;
		push_completion(r, m, 0);
		free(m);
	}
}

static int16_t be16s(const void *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return (int16_t)ntohs(v);
}

void mrcep_req_on_sack(struct mrc_req *r, const uint8_t *buf, int64_t now)
{
	const struct mrc_seth *s = (const struct mrc_seth *)(buf + MRC_BTH_LEN);
	const struct mrc_cc_state *c = (const struct mrc_cc_state *)(s + 1);
	uint32_t cack24, m;
	uint64_t bm;
	int64_t ref, cack, base, psn, acked = 0, rtt;
	struct slot *sl;
	int ecn;

	if (r->failed)
		return;
	r->stats.sacks++;
	m = (ntohs(s->type_next_m_pr) >> MRC_SETH_M_SHIFT) & MRC_SETH_M_MASK;
	ecn = m != MRC_M_NONE;
	if (ecn)
		r->stats.ecn_sacks++;
	ref = mrcep_req_una(r);
	cack24 = mrcep_get24(s->cack_psn);
	cack = mrcep_unwrap(cack24, ref);
	while (r->una < r->next_psn) {
		if (!(sl = slot_at(r, r->una))) {
			r->una++;
			continue;
		}
		if (sl->psn > cack)
			break;
		acked += ack(r, sl, now);
	}
	memcpy(&bm, &s->sack_bitmap, 8);
	bm = be64toh(bm);
	base = mrcep_unwrap((uint32_t)((cack24 + be16s(&s->sack_offset)) & (MRC_PSN_MOD - 1)), ref);
	for (int b = 63; b >= 0; b--) {
		if (!(bm >> b & 1))
			continue;
		psn = base + 63 - b;
		if ((sl = slot_at(r, psn)))
			acked += ack(r, sl, now);
	}
	psn = mrcep_unwrap((uint32_t)((cack24 + be16s(&s->ack_psn_offset)) & (MRC_PSN_MOD - 1)), ref);
	if ((sl = slot_at(r, psn)))
		acked += ack(r, sl, now);
	rtt = (int64_t)(((uint64_t)(now / MRC_TIME_UNIT_NS) - ntohs(c->tx_timestamp)) & 0xffff) * MRC_TIME_UNIT_NS;
	if (acked)
		r->retries = 0;
	if (!r->cfg.rc) {
		mrc_cc_on_ack(&r->cc, acked, rtt, ecn, now);
		detect_losses(r, now, (int64_t)r->window_acked_tx - r->cfg.reorder_packets);
	}
	complete(r);
}

static int resend_reason(uint8_t reason)
{
	switch (reason) {
	case MRC_NACK_TRIMMED: return MRCEP_RTX_NACK_TRIMMED;
	case MRC_NACK_TRIMMED_LASTHOP: return MRCEP_RTX_NACK_TRIMMED_LASTHOP;
	case MRC_NACK_NO_BITMAP: case MRC_NACK_NO_PKT_BUFFER: case MRC_NACK_NO_RESOURCE:
		return MRCEP_RTX_NACK_RESOURCE;
	case MRC_NACK_PSN_OOR_WINDOW: return MRCEP_RTX_NACK_PSN_OOR_WINDOW;
	case MRC_NACK_UNEXP_EVENT: return -2;
	default: return -1;
	}
}

void mrcep_req_on_nack(struct mrc_req *r, const uint8_t *buf, int64_t now)
{
	const struct mrc_neth *n = (const struct mrc_neth *)(buf + MRC_BTH_LEN);
	uint32_t psn24 = mrcep_get24(n->nack_psn);
	int why;
	struct slot *s;

	if (r->failed)
		return;
	r->stats.nacks[n->nack_reason]++;
	why = resend_reason(n->nack_reason);
	if (why == -1)
		return;
	if (why == -2) {
		char msg[96];
		snprintf(msg, sizeof(msg), "responder answered PSN %u with NACK UNEXP_EVENT", psn24);
		mrcep_req_fail(r, msg);
		return;
	}
	if (!r->cfg.rc && (why == MRCEP_RTX_NACK_TRIMMED || why == MRCEP_RTX_NACK_TRIMMED_LASTHOP))
		mrc_cc_on_trim(&r->cc, now);
	if ((s = slot_at(r, mrcep_unwrap(psn24, mrcep_req_una(r)))))
		mark_lost(r, s, why);
}

/* Go back N: every outstanding packet not yet declared lost is, oldest first. */
static void go_back(struct mrc_req *r, int reason)
{
	while (r->ohead >= 0)
		mark_lost(r, &r->ring[r->ohead], reason);
}

/* An RC ACK or NAK (AETH, IBTA 9.7.5.1): an ACK acknowledges every PSN up to its BTH PSN; a
 * NAK sequence error every PSN before it, and the requestor resends from it (go-back-N). */
void mrcep_req_on_ack(struct mrc_req *r, const uint8_t *buf, int64_t now)
{
	const struct mrc_bth *b = (const struct mrc_bth *)buf;
	const struct mrc_aeth *a = (const struct mrc_aeth *)(buf + MRC_BTH_LEN);
	int nak = a->syndrome == MRC_AETH_NAK_PSN_SEQ_ERROR;
	int64_t psn, acked = 0;
	struct slot *sl;

	if (r->failed)
		return;
	psn = mrcep_unwrap(mrcep_get24(b->psn), mrcep_req_una(r));
	if (nak) {
		r->stats.seq_naks++;
		/* A NAK overtaken by a later ACK (replies reordered or duplicated) names a PSN
		 * acknowledged already: going back for it would resend acknowledged data. */
		if (psn < r->una || psn > r->next_psn)
			return;
		psn--;
	} else {
		r->stats.acks++;
	}
	while (r->una < r->next_psn) {
		if (!(sl = slot_at(r, r->una))) {
			r->una++;
			continue;
		}
		if (sl->psn > psn)
			break;
		acked += ack(r, sl, now);
	}
	if (acked)
		r->retries = 0;
	if (nak)
		go_back(r, MRCEP_RTX_NAK_SEQ);
	complete(r);
}

void mrcep_req_on_reply(struct mrc_req *r, const uint8_t *buf, uint32_t n, int64_t now)
{
	r->stats.icrc_checked++;
	if (!mrcep_icrc_ok(r->cfg.peer, r->cfg.local, buf, n)) {
		r->stats.bad_icrc++;
		return;
	}
	if (buf[0] == MRC_OP_SACK && n >= MRC_BTH_LEN + MRC_SETH_LEN + MRC_CC_STATE_LEN + MRC_ICRC_LEN)
		mrcep_req_on_sack(r, buf, now);
	else if (buf[0] == MRC_OP_NACK && n >= MRC_BTH_LEN + MRC_NETH_LEN + MRC_ICRC_LEN)
		mrcep_req_on_nack(r, buf, now);
	else if (buf[0] == MRC_OP_ACK && r->cfg.rc && n >= MRC_BTH_LEN + MRC_AETH_LEN + MRC_ICRC_LEN)
		mrcep_req_on_ack(r, buf, now);
	else
		r->stats.malformed++;
}

int64_t mrcep_req_on_timer(struct mrc_req *r, int64_t now)
{
	int64_t rto, due;
	struct slot *s;
	if (r->failed || r->ohead < 0)
		return -1;
	/* A timeout's resend came back: before it, one later transmission that the window let
	 * out, acknowledged, is enough to lose an old packet (requestor.py on_timer). A SACK-gap
	 * rule like the one in on_sack: the RC baseline has neither, it goes back N. */
	if (!r->cfg.rc && r->rto_acked_tx) {
		uint64_t last = r->rto_acked_tx < r->window_acked_tx ? r->rto_acked_tx : r->window_acked_tx;
		detect_losses(r, now, (int64_t)last - 1);
		if (r->ohead < 0)
			return -1;
	}
	rto = rto_ns(r);
	s = &r->ring[r->ohead];
	due = (s->sent_at > r->last_timeout_ns ? s->sent_at : r->last_timeout_ns) + rto;
	if (now < due)
		return due;
	r->retries++;
	r->stats.timeouts++;
	r->last_timeout_ns = now;
	if (exhausted(r)) {
		char msg[96];
		snprintf(msg, sizeof(msg), "retry counter exceeded: %u timeouts without progress", r->retries - 1);
		mrcep_req_fail(r, msg);
		return -1;
	}
	if (r->cfg.rc) {
		go_back(r, MRCEP_RTX_RTO);
		return now + rto_ns(r);
	}
	mrc_cc_on_timeout(&r->cc);
	/* Only the oldest packet is resent (RFC 6298 section 5.4); see requestor.py on_timer. */
	mark_lost(r, s, MRCEP_RTX_RTO);
	r->rto_credit = 1;
	mrcep_req_send_probe(r, now);
	return now + rto_ns(r);
}

void mrcep_req_fail(struct mrc_req *r, const char *why)
{
	struct msg *m;
	r->failed = 1;
	snprintf(r->error, sizeof(r->error), "%s", why);
	for (m = r->ahead; m; m = m->anext)
		push_completion(r, m, -1);
	for (m = r->qhead; m; m = m->qnext)
		push_completion(r, m, -1);
	free_msgs(r);
	for (uint32_t i = 0; i < r->cfg.mpr; i++)
		r->ring[i].used = 0;
	r->ohead = r->otail = -1;
	r->nheap = 0;
	r->inflight = 0;
	r->una = r->next_psn;
}

const char *mrcep_req_error(const struct mrc_req *r) { return r->failed ? r->error : NULL; }
const struct mrc_req_stats *mrcep_req_stats(const struct mrc_req *r) { return &r->stats; }
double mrcep_req_cwnd(const struct mrc_req *r) { return r->cc.cwnd; }
int64_t mrcep_req_inflight(const struct mrc_req *r) { return r->inflight; }
int64_t mrcep_req_next_psn(const struct mrc_req *r) { return r->next_psn; }
uint32_t mrcep_req_remote_qpn(const struct mrc_req *r) { return r->cfg.remote_qpn; }
uint32_t mrcep_req_qpn(const struct mrc_req *r) { return r->cfg.qpn; }

int mrcep_req_outstanding(const struct mrc_req *r, int64_t psn)
{
	return psn >= 0 && slot_at(r, psn) != NULL;
}

/* For tests that open the window wide, as they set the Python window's cwnd. */
void mrcep_req_set_cwnd(struct mrc_req *r, double cwnd)
{
	r->cc.cwnd = cwnd;
}
