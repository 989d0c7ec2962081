/* SPDX-License-Identifier: Apache-2.0 */
/* The responder of controller/mrckit/endpoint/responder.py in C (design 6; reference 2.5, 2.6
 * and 4): placement by RETH in any order, a PSN ring of MPR slots, SACK coalescing, NACKs,
 * and the WRITE_WITH_IMM barrier. The prescribed response to each kind of input is the table
 * in responder.py's docstring; this file follows it branch for branch.
 *
 * An RC baseline QP (mrcep_resp_set_rc) answers as a RoCEv2 RC responder instead: it places
 * only the expected PSN, acknowledges with coalesced AETH ACKs (cumulative, no SACK), sends
 * one NAK sequence error per gap and discards what follows the gap until the expected PSN
 * arrives (docs/endpoint.md "The RC baseline"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <endian.h>

#include "mrcep.h"

struct pending_imm {
	int64_t psn;
	uint32_t imm, rqmsn;
};

struct rqp {
	uint32_t qpn, remote_qpn, mpr, mtu;
	int has_peer;
	uint8_t peer[16];  /* the requestor's address, or any when !has_peer */
	uint8_t dpeer[16]; /* where the owed coalesced SACK goes */
	char error[MRCEP_ERROR_LEN];
	int failed, dirty, has_trigger, trig_ce;
	int64_t epsn, high, trig_psn;
	uint32_t trig_ev, trig_ts;
	uint8_t *ring;
	struct pending_imm *imm;
	uint32_t nimm, capimm;
	uint64_t sack_bytes, rcvd_bytes;
	uint32_t ooo_count;
	struct mrc_map ev_ce;
	int rc, naked;  /* RC baseline; a NAK sequence error is owed no more until the gap fills */
	uint32_t msn;   /* RC: messages completed, the AETH MSN */
};

struct mr {
	uint64_t base_va, len, placed;
	uint8_t *mem;
};

struct mrc_resp {
	uint8_t local[16];
	uint32_t coalesce;
	struct mrc_outbox *out;
	struct mrc_map qps, mrs;
	struct rqp **dirty;
	uint32_t ndirty, capdirty;
	struct mrc_resp_stats stats;
	struct mrc_recv_comp *comps;
	uint32_t ncomp, capcomp, compread;
};

struct mrc_resp *mrcep_resp_new(const uint8_t local[16], uint32_t sack_coalesce_bytes, struct mrc_outbox *out)
{
	struct mrc_resp *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	memcpy(r->local, local, 16);
	r->coalesce = sack_coalesce_bytes;
	r->out = out;
	return r;
}

static void map_free_ptrs(struct mrc_map *m, int qps)
{
	for (uint32_t i = 0; i < m->cap; i++) {
		if (!m->used[i])
			continue;
		if (qps) {
			struct rqp *q = (struct rqp *)(uintptr_t)m->vals[i];
			free(q->ring);
			free(q->imm);
			mrc_map_free(&q->ev_ce);
		}
		free((void *)(uintptr_t)m->vals[i]);
	}
	mrc_map_free(m);
}

void mrcep_resp_free(struct mrc_resp *r)
{
	if (!r)
		return;
	map_free_ptrs(&r->qps, 1);
	map_free_ptrs(&r->mrs, 0);
	free(r->dirty);
	free(r->comps);
	free(r);
}

static struct rqp *qp_get(const struct mrc_resp *r, uint32_t qpn)
{
	uint64_t v;
	return mrc_map_get(&r->qps, qpn, &v) ? (struct rqp *)(uintptr_t)v : NULL;
}

int mrcep_resp_add_qp(struct mrc_resp *r, uint32_t qpn, uint32_t remote_qpn, uint32_t mpr, uint32_t mtu,
		      uint32_t initial_psn, const uint8_t *peer)
{
	struct rqp *q;
	if (!qpn || qpn >= 1u << 24 || qp_get(r, qpn) || mpr < MRC_MPR_UNIT_PSNS || mpr % MRC_MPR_UNIT_PSNS)
		return -1;
	if (!(q = calloc(1, sizeof(*q))) || !(q->ring = calloc(mpr, 1))) {
		free(q);
		return -1;
	}
	q->qpn = qpn;
	q->remote_qpn = remote_qpn;
	q->mpr = mpr;
	q->mtu = mtu;
	q->has_peer = peer != NULL;
	if (peer)
		memcpy(q->peer, peer, 16);
	q->epsn = initial_psn;
	q->high = (int64_t)initial_psn - 1;
	if (mrc_map_put(&r->qps, qpn, (uint64_t)(uintptr_t)q)) {
		free(q->ring);
		free(q);
		return -1;
	}
	return 0;
}

int mrcep_resp_set_remote_qpn(struct mrc_resp *r, uint32_t qpn, uint32_t remote_qpn)
{
	struct rqp *q = qp_get(r, qpn);
	if (!q)
		return -1;
	q->remote_qpn = remote_qpn;
	return 0;
}

int mrcep_resp_set_rc(struct mrc_resp *r, uint32_t qpn, int rc)
{
	struct rqp *q = qp_get(r, qpn);
	if (!q)
		return -1;
	q->rc = rc != 0;
	return 0;
}

int mrcep_resp_mr_add(struct mrc_resp *r, uint32_t rkey, uint64_t base_va, uint8_t *mem, uint64_t len)
{
	uint64_t v;
	struct mr *m;
	if (mrc_map_get(&r->mrs, rkey, &v) || !(m = calloc(1, sizeof(*m))))
		return -1;
	m->base_va = base_va;
	m->len = len;
	m->mem = mem;
	return mrc_map_put(&r->mrs, rkey, (uint64_t)(uintptr_t)m);
}

int mrcep_resp_mr_del(struct mrc_resp *r, uint32_t rkey)
{
	uint64_t v;
	if (!mrc_map_get(&r->mrs, rkey, &v))
		return -1;
	free((void *)(uintptr_t)v);
	return mrc_map_del(&r->mrs, rkey);
}

uint64_t mrcep_resp_mr_placed(const struct mrc_resp *r, uint32_t rkey)
{
	uint64_t v;
	return mrc_map_get(&r->mrs, rkey, &v) ? ((struct mr *)(uintptr_t)v)->placed : 0;
}

/* --- replies ------------------------------------------------------------------------ */
static void emit(struct mrc_resp *r, struct mrc_out_pkt *o, const uint8_t peer[16])
{
	const uint8_t *parts[1] = {o->data};
	uint32_t lens[1] = {o->len};
	uint32_t crc = mrcep_icrc(r->local, peer, o->len + MRC_ICRC_LEN, parts, lens, 1);
	for (int i = 0; i < 4; i++)
		o->data[o->len++] = (uint8_t)(crc >> (8 * i));
	o->tclass = MRCEP_TCLASS(MRC_DSCP_CONTROL, 0);
	o->qpn = 0;
	memcpy(o->peer, peer, 16);
}

static void nack(struct mrc_resp *r, struct rqp *q, const uint8_t peer[16], uint8_t reason,
		 int64_t psn, uint32_t ev, uint32_t ts)
{
	struct mrc_out_pkt *o = mrcep_outbox_push(r->out);
	struct mrc_neth *n;
	if (!o)
		return;
	mrcep_pack_bth(o->data, MRC_OP_NACK, 0, q->remote_qpn, 0);
	n = (struct mrc_neth *)(o->data + MRC_BTH_LEN);
	memset(n, 0, sizeof(*n));
	n->nack_reason = reason;
	n->ev = htonl(ev);
	mrcep_put24(n->nack_psn, (uint32_t)(((psn % MRC_PSN_MOD) + MRC_PSN_MOD) % MRC_PSN_MOD));
	n->tx_timestamp = htons((uint16_t)ts);
	o->len = MRC_BTH_LEN + MRC_NETH_LEN;
	r->stats.nacks[reason]++;
	emit(r, o, peer);
}

static void fail(struct mrc_resp *r, struct rqp *q, const uint8_t peer[16], const char *why,
		 uint32_t psn24, uint32_t ev)
{
	q->failed = 1;
	snprintf(q->error, sizeof(q->error), "%s", why);
	nack(r, q, peer, MRC_NACK_UNEXP_EVENT, mrcep_unwrap(psn24, q->epsn), ev, 0);
}

static uint64_t bitmap(const struct rqp *q, int64_t base)
{
	int64_t limit = q->high - base + 1;  /* ring slots past the highest PSN belong to no PSN yet */
	uint64_t bm = 0;
	for (int i = 0; i < 64; i++) {
		bm <<= 1;
		if (i < limit && q->ring[(base + i) % q->mpr])
			bm |= 1;
	}
	return bm;
}

static int16_t soff(int64_t psn, int64_t base)
{
	int64_t d = ((psn - base) % MRC_PSN_MOD + MRC_PSN_MOD) % MRC_PSN_MOD;
	return (int16_t)(d >= MRC_PSN_MOD / 2 ? d - MRC_PSN_MOD : d);
}

static void undirty(struct mrc_resp *r, struct rqp *q)
{
	if (!q->dirty)
		return;
	q->dirty = 0;
	for (uint32_t i = 0; i < r->ndirty; i++) {
		if (r->dirty[i] == q) {
			memmove(&r->dirty[i], &r->dirty[i + 1], (r->ndirty - i - 1) * sizeof(*r->dirty));
			r->ndirty--;
			return;
		}
	}
}

static void send_sack(struct mrc_resp *r, struct rqp *q, const uint8_t peer[16], int64_t psn, uint32_t ev,
		      uint32_t ts, int ce, int pr)
{
	struct mrc_out_pkt *o = mrcep_outbox_push(r->out);
	struct mrc_seth *s;
	struct mrc_cc_state *c;
	uint64_t hist = 0, bm;
	int64_t base = q->epsn > q->high - 63 ? q->epsn : q->high - 63, cack = q->epsn - 1;
	uint32_t m;

	if (!o)
		return;
	mrc_map_get(&q->ev_ce, ev, &hist);
	if (__builtin_popcountll(hist) >= MRC_ALWAYS_SKIP_CE_MIN)
		m = MRC_M_ALWAYS_SKIP;
	else
		m = ce ? MRC_M_SKIP_ONCE : MRC_M_NONE;
	if (psn - cack < -MRC_SETH_OFFSET_MAX - 1 || psn - cack > MRC_SETH_OFFSET_MAX)
		psn = cack;  /* a duplicate too far behind for the 16-bit offset: acknowledge nothing new */
	mrcep_pack_bth(o->data, MRC_OP_SACK, 0, q->remote_qpn, 0);
	s = (struct mrc_seth *)(o->data + MRC_BTH_LEN);
	c = (struct mrc_cc_state *)(s + 1);
	memset(s, 0, MRC_SETH_LEN + MRC_CC_STATE_LEN);
	s->type_next_m_pr = htons((uint16_t)((m & MRC_SETH_M_MASK) << MRC_SETH_M_SHIFT | (pr ? MRC_SETH_PR : 0)));
	s->ack_psn_offset = htons((uint16_t)soff(psn, cack));
	s->ev = htonl(ev);
	mrcep_put24(s->cack_psn, (uint32_t)(((cack % MRC_PSN_MOD) + MRC_PSN_MOD) % MRC_PSN_MOD));
	s->mpr = (uint8_t)(q->mpr / MRC_MPR_UNIT_PSNS);
	s->sack_offset = htons((uint16_t)soff(base, cack));
	bm = htobe64(bitmap(q, base));
	memcpy(&s->sack_bitmap, &bm, 8);
	c->tx_timestamp = htons((uint16_t)ts);
	c->ooo_count = htons((uint16_t)(q->ooo_count & MRC_CC_OOO_COUNT_MASK));
	mrcep_put24(c->rcvd_bytes, (uint32_t)((q->rcvd_bytes / MRC_RCVD_BYTES_UNIT) & 0xffffff));
	o->len = MRC_BTH_LEN + MRC_SETH_LEN + MRC_CC_STATE_LEN;
	q->sack_bytes = 0;
	undirty(r, q);
	r->stats.sacks++;
	emit(r, o, peer);
}

/* An RC ACK (syndrome ACK, BTH PSN = the last PSN in order) or NAK sequence error (BTH
 * PSN = the expected PSN), IBTA 9.7.5.1. */
static void send_aeth(struct mrc_resp *r, struct rqp *q, const uint8_t peer[16], int nak)
{
	struct mrc_out_pkt *o = mrcep_outbox_push(r->out);
	struct mrc_aeth *a;
	int64_t psn = nak ? q->epsn : q->epsn - 1;
	if (!o)
		return;
	mrcep_pack_bth(o->data, MRC_OP_ACK, 0, q->remote_qpn, (uint32_t)(((psn % MRC_PSN_MOD) + MRC_PSN_MOD) % MRC_PSN_MOD));
	a = (struct mrc_aeth *)(o->data + MRC_BTH_LEN);
	a->syndrome = nak ? MRC_AETH_NAK_PSN_SEQ_ERROR : MRC_AETH_ACK;
	mrcep_put24(a->msn, q->msn & 0xffffff);
	o->len = MRC_BTH_LEN + MRC_AETH_LEN;
	if (nak)
		r->stats.seq_naks++;
	else
		r->stats.acks++;
	q->sack_bytes = 0;
	undirty(r, q);
	emit(r, o, peer);
}

void mrcep_resp_flush(struct mrc_resp *r)
{
	uint32_t n = r->ndirty;
	struct rqp **list;
	if (!n)
		return;
	list = malloc(n * sizeof(*list));
	if (!list)
		return;
	memcpy(list, r->dirty, n * sizeof(*list));
	for (uint32_t i = 0; i < n; i++)
		list[i]->dirty = 0;
	r->ndirty = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct rqp *q = list[i];
		if (q->sack_bytes && q->has_trigger && q->rc)
			send_aeth(r, q, q->dpeer, 0);
		else if (q->sack_bytes && q->has_trigger)
			send_sack(r, q, q->dpeer, q->trig_psn, q->trig_ev, q->trig_ts, q->trig_ce, 0);
	}
	free(list);
}

/* --- receive ------------------------------------------------------------------------ */
static int is_imm(uint8_t op)
{
	return op == MRC_OP_WRITE_LAST_IMM || op == MRC_OP_WRITE_ONLY_IMM;
}

static void push_comp(struct mrc_resp *r, const struct rqp *q, const struct pending_imm *p)
{
	if (r->ncomp == r->capcomp) {
		uint32_t cap = r->capcomp ? r->capcomp * 2 : 64;
		struct mrc_recv_comp *c = realloc(r->comps, cap * sizeof(*c));
		if (!c)
			return;
		r->comps = c;
		r->capcomp = cap;
	}
	r->comps[r->ncomp].qpn = q->qpn;
	r->comps[r->ncomp].imm = p->imm;
	r->comps[r->ncomp].rqmsn = p->rqmsn;
	r->comps[r->ncomp].psn = (uint32_t)(p->psn % MRC_PSN_MOD);
	r->ncomp++;
	r->stats.imm_completions++;
}

int mrcep_resp_poll(struct mrc_resp *r, struct mrc_recv_comp *c)
{
	if (r->compread == r->ncomp) {
		r->compread = r->ncomp = 0;
		return 0;
	}
	*c = r->comps[r->compread++];
	return 1;
}

static void add_pending(struct rqp *q, int64_t psn, uint32_t imm, uint32_t rqmsn)
{
	uint32_t i;
	if (q->nimm == q->capimm) {
		uint32_t cap = q->capimm ? q->capimm * 2 : 16;
		struct pending_imm *p = realloc(q->imm, cap * sizeof(*p));
		if (!p)
			return;
		q->imm = p;
		q->capimm = cap;
	}
	for (i = q->nimm; i && q->imm[i - 1].psn > psn; i--)  /* kept sorted by PSN */
		q->imm[i] = q->imm[i - 1];
	q->imm[i].psn = psn;
	q->imm[i].imm = imm;
	q->imm[i].rqmsn = rqmsn;
	q->nimm++;
}

static void mark(struct mrc_resp *r, struct rqp *q, int64_t psn, uint32_t size, uint8_t op,
		 uint32_t imm, uint32_t rqmsn)
{
	int64_t e;
	uint32_t done = 0;
	q->ring[psn % q->mpr] = 1;
	q->rcvd_bytes += size;
	if (psn > q->high)
		q->high = psn;
	if (is_imm(op))
		add_pending(q, psn, imm, rqmsn);
	if (psn != q->epsn) {
		q->ooo_count++;
		return;
	}
	for (e = q->epsn; q->ring[e % q->mpr]; e++)
		q->ring[e % q->mpr] = 0;
	q->epsn = e;
	/* The barrier: a WRITE_WITH_IMM completes only once every PSN up to its own has landed. */
	while (done < q->nimm && q->imm[done].psn < e)
		push_comp(r, q, &q->imm[done++]);
	if (done) {
		memmove(q->imm, q->imm + done, (q->nimm - done) * sizeof(*q->imm));
		q->nimm -= done;
	}
}

static void after_arrival(struct mrc_resp *r, struct rqp *q, const uint8_t peer[16], int64_t psn,
			  uint32_t ev, uint32_t ts, int ce, uint32_t size, uint8_t flags)
{
	uint64_t hist = 0;
	mrc_map_get(&q->ev_ce, ev, &hist);
	mrc_map_put(&q->ev_ce, ev, ((hist << 1) | (ce ? 1 : 0)) & MRCEP_ALWAYS_SKIP_HISTORY_MASK);
	q->has_trigger = 1;
	q->trig_psn = psn;
	q->trig_ev = ev;
	q->trig_ts = ts;
	q->trig_ce = ce;
	q->sack_bytes += size > MRCEP_SACK_MIN_PACKET_BYTES ? size : MRCEP_SACK_MIN_PACKET_BYTES;
	if (q->rc && ((flags & MRC_BTH_FLAG_ACKREQ) || q->sack_bytes >= r->coalesce)) {
		send_aeth(r, q, peer, 0);  /* RC: no ECN echo (no DCQCN), a coalesced ACK */
	} else if (!q->rc && (ce || (flags & (MRC_BTH_FLAG_RTX | MRC_BTH_FLAG_ACKREQ)) || q->sack_bytes >= r->coalesce)) {
		send_sack(r, q, peer, psn, ev, ts, ce, 0);
	} else {
		memcpy(q->dpeer, peer, 16);
		if (!q->dirty) {
			if (r->ndirty == r->capdirty) {
				uint32_t cap = r->capdirty ? r->capdirty * 2 : 16;
				struct rqp **d = realloc(r->dirty, cap * sizeof(*d));
				if (!d)
					return;
				r->dirty = d;
				r->capdirty = cap;
			}
			r->dirty[r->ndirty++] = q;
			q->dirty = 1;
		}
	}
}

static int mr_contains(const struct mr *m, uint64_t va, uint64_t len)
{
	return va >= m->base_va && va - m->base_va <= m->len && len <= m->len - (va - m->base_va);
}

static void data(struct mrc_resp *r, struct rqp *q, const uint8_t *buf, uint32_t n, uint8_t op, uint8_t flags,
		 uint32_t psn24, uint32_t ev, int ce, const uint8_t peer[16])
{
	uint32_t end = n - MRC_ICRC_LEN, hlen, size, ts = 0, imm = 0, rkey, dma;
	const struct mrc_meth *meth = (const struct mrc_meth *)(buf + MRC_BTH_LEN);
	const struct mrc_reth *reth;
	uint64_t va, v;
	int64_t psn;
	char why[MRCEP_ERROR_LEN];

	hlen = MRC_BTH_LEN + MRC_METH_LEN + MRC_RETH_LEN + ((flags & MRC_BTH_FLAG_TS) ? MRC_TSETH_LEN : 0) +
	       (is_imm(op) ? MRC_IMMDT_LEN : 0);
	if (end < hlen) {
		snprintf(why, sizeof(why), "headers short for opcode %#04x", op);
		return fail(r, q, peer, why, psn24, ev);
	}
	if (flags & MRC_BTH_FLAG_TS) {
		const struct mrc_tseth *t = (const struct mrc_tseth *)(meth + 1);
		ts = ntohs(t->tx_timestamp);
		reth = (const struct mrc_reth *)(t + 1);
	} else {
		reth = (const struct mrc_reth *)(meth + 1);
	}
	if (is_imm(op))
		imm = ntohl(((const struct mrc_immdt *)(reth + 1))->imm);
	memcpy(&va, &reth->va, 8);
	va = be64toh(va);
	rkey = ntohl(reth->rkey);
	dma = ntohl(reth->dma_len);
	size = end - hlen;
	if (size != dma || size > q->mtu) {
		snprintf(why, sizeof(why), "payload %u B vs DMA length %u B, MTU %u B", size, dma, q->mtu);
		return fail(r, q, peer, why, psn24, ev);
	}
	psn = mrcep_unwrap(psn24, q->epsn);
	if (q->rc && psn > q->epsn) {
		/* RC: a gap. One NAK sequence error, then silence until the expected PSN comes. */
		r->stats.out_of_sequence++;
		if (!q->naked) {
			q->naked = 1;
			send_aeth(r, q, peer, 1);
		}
		return;
	}
	if (psn >= q->epsn + q->mpr)
		return nack(r, q, peer, MRC_NACK_PSN_OOR_WINDOW, psn, ev, ts);
	if (ce)
		r->stats.ce_marked++;
	if (psn < q->epsn || q->ring[psn % q->mpr]) {
		r->stats.duplicates++;
	} else {
		/* IBTA C9-88: a zero-length WRITE need not carry a valid R_Key or VA, and touches no
		 * memory; it still takes its PSN (and delivers its immediate). */
		if (size) {
			struct mr *m = mrc_map_get(&r->mrs, rkey, &v) ? (struct mr *)(uintptr_t)v : NULL;
			if (!m || !mr_contains(m, va, size)) {
				snprintf(why, sizeof(why), "%s: rkey %#x VA %#llx +%u",
					 m ? "VA range outside the region" : "unknown rkey", rkey,
					 (unsigned long long)va, size);
				return fail(r, q, peer, why, psn24, ev);
			}
			memcpy(m->mem + (va - m->base_va), buf + hlen, size);
			m->placed += size;
		}
		r->stats.placed_packets++;
		r->stats.placed_bytes += size;
		if (q->rc) {
			q->naked = 0;
			if (op == MRC_OP_WRITE_LAST || op == MRC_OP_WRITE_LAST_IMM || op == MRC_OP_WRITE_ONLY ||
			    op == MRC_OP_WRITE_ONLY_IMM)
				q->msn++;
		}
		mark(r, q, psn, size, op, imm, ntohs(meth->rqmsn));
	}
	after_arrival(r, q, peer, psn, ev, ts, ce, size, flags);
}

void mrcep_resp_handle(struct mrc_resp *r, const uint8_t *buf, uint32_t n, uint8_t tclass,
		       uint32_t flowinfo, uint16_t sport, const uint8_t peer[16])
{
	const struct mrc_bth *b = (const struct mrc_bth *)buf;
	uint32_t ev, psn24, dscp;
	struct rqp *q;
	char why[64];

	r->stats.packets++;
	if (n < MRC_BTH_LEN) {
		r->stats.malformed++;
		return;
	}
	q = qp_get(r, mrcep_get24(b->dqpn));
	if (!q || (q->has_peer && memcmp(q->peer, peer, 16))) {
		r->stats.unknown_qp++;
		return;
	}
	ev = MRC_EV_FROM_WIRE(sport, flowinfo);
	psn24 = mrcep_get24(b->psn);
	dscp = tclass >> MRC_IPV6_DSCP_SHIFT;
	if (dscp == MRC_DSCP_TRIMMED || dscp == MRC_DSCP_TRIMMED_LASTHOP) {
		/* A trimmed packet keeps its headers but loses payload and ICRC (design 3.1, 4). */
		r->stats.trimmed++;
		if (q->rc)  /* a RoCE NIC knows no trimming: the packet is lost, the gap shows it */
			return;
		nack(r, q, peer, dscp == MRC_DSCP_TRIMMED ? MRC_NACK_TRIMMED : MRC_NACK_TRIMMED_LASTHOP,
		     mrcep_unwrap(psn24, q->epsn), ev, 0);
		return;
	}
	if (n < MRC_BTH_LEN + MRC_ICRC_LEN) {
		r->stats.malformed++;
		return;
	}
	r->stats.icrc_checked++;
	if (!mrcep_icrc_ok(peer, r->local, buf, n)) {
		r->stats.bad_icrc++;
		return;
	}
	if (q->failed)
		return nack(r, q, peer, MRC_NACK_UNEXP_EVENT, mrcep_unwrap(psn24, q->epsn), ev, 0);
	if (mrcep_is_write(b->opcode)) {
		data(r, q, buf, n, b->opcode, b->flags, psn24, ev,
		     (tclass & MRC_IPV6_ECN_MASK) == MRC_ECN_CE, peer);
	} else if (b->opcode == MRC_OP_PROBE && n >= MRC_BTH_LEN + MRC_PETH_LEN + MRC_ICRC_LEN) {
		const struct mrc_peth *p = (const struct mrc_peth *)(buf + MRC_BTH_LEN);
		r->stats.probes++;
		send_sack(r, q, peer, q->epsn - 1, ev, ntohs(p->tx_timestamp), 0, 1);
	} else {
		snprintf(why, sizeof(why), "unexpected opcode %#04x", b->opcode);
		fail(r, q, peer, why, psn24, ev);
	}
}

const struct mrc_resp_stats *mrcep_resp_stats(const struct mrc_resp *r) { return &r->stats; }

const char *mrcep_resp_qp_error(const struct mrc_resp *r, uint32_t qpn)
{
	struct rqp *q = qp_get(r, qpn);
	return q && q->failed ? q->error : NULL;
}

int64_t mrcep_resp_qp_epsn(const struct mrc_resp *r, uint32_t qpn)
{
	struct rqp *q = qp_get(r, qpn);
	return q ? q->epsn : -1;
}

int64_t mrcep_resp_qp_high(const struct mrc_resp *r, uint32_t qpn)
{
	struct rqp *q = qp_get(r, qpn);
	return q ? q->high : -1;
}

int64_t mrcep_resp_qp_ooo(const struct mrc_resp *r, uint32_t qpn)
{
	struct rqp *q = qp_get(r, qpn);
	return q ? q->ooo_count : -1;
}
