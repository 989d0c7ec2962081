/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mrcep.h: the native MRC endpoint's state machines (design sections 3 and 6), the C twin of
 * controller/mrckit/endpoint/{requestor,responder,cc}.py. Every wire constant comes from
 * ebpf/include/mrc_wire.h and mrc_wire_gen.h; this file defines only the endpoint's own
 * tuning (REORDER_PACKETS and the like), each documented in docs/endpoint.md.
 *
 * The state machines never touch a socket or a clock: callers pass `now` (CLOCK_MONOTONIC ns,
 * or a fake clock in tests) and read the packets they produced from a struct mrc_outbox.
 * One thread drives one endpoint; nothing here locks.
 */
#ifndef MRCEP_H
#define MRCEP_H

#include <stdint.h>
#include <stddef.h>

#include "mrc_wire.h"

/* --- tuning of ours, mirrored from the Python reference (requestor.py, responder.py);
 * tests/unit/endpoint/test_endpoint_native_binding.py checks each against it through
 * mrcep_tuning(). REORDER_PACKETS and the SACK coalescing bytes come from the caller. ------- */
#define MRCEP_RTT_MAX_DECAY_SHIFT 6  /* slowest-RTT tracker loses 1/2^6 per sample */
#define MRCEP_RTO_MAX_RTT_SHIFT 1     /* the RTO never fires before 2^1 x the slowest recent RTT */
#define MRCEP_RTO_RTT_DECAY_SHIFT 12  /* ... of a second tracker, which loses 1/2^12 per sample */
#define MRCEP_INFINITE_RETRIES 25     /* exp_retries value meaning "no limit" (reference 3.5) */
#define MRCEP_MAX_TIMEOUT_EXP 24
#define MRCEP_SACK_MIN_PACKET_BYTES 1024
#define MRCEP_ALWAYS_SKIP_HISTORY_MASK ((1u << MRC_ALWAYS_SKIP_WINDOW) - 1)
#define MRCEP_MAX_MTU 4096
#define MRCEP_MAX_PACKET (MRC_BTH_LEN + MRC_METH_LEN + MRC_TSETH_LEN + MRC_RETH_LEN + \
			  MRC_IMMDT_LEN + MRCEP_MAX_MTU + MRC_ICRC_LEN)
#define MRCEP_ERROR_LEN 160

#define MRCEP_TCLASS(dscp, ecn) ((uint8_t)((dscp) << MRC_IPV6_DSCP_SHIFT | (ecn)))

/* --- ICRC (design 3.1) ----------------------------------------------------------------- */
/* CRC-32 of one packet whose UDP payload (ICRC included) is `total` bytes, from `src` to
 * `dst` (16-byte IPv6 addresses); the bytes before the ICRC are parts[0..n) (parts[0] holds
 * the whole BTH). */
uint32_t mrcep_icrc(const uint8_t src[16], const uint8_t dst[16], uint32_t total,
		    const uint8_t *const *parts, const uint32_t *lens, int n);
int mrcep_icrc_ok(const uint8_t src[16], const uint8_t dst[16], const uint8_t *buf, uint32_t n);
const char *mrcep_crc_impl(void);
uint32_t mrcep_crc32(uint32_t crc, const uint8_t *buf, uint64_t len);

/* --- outbox: packets the state machines produced, in order ------------------------------ */
struct mrc_out_pkt {
	uint32_t len;
	uint32_t qpn;     /* the requestor QP that sent it; 0 for the responder's replies */
	uint8_t tclass;
	uint8_t peer[16];
	uint8_t data[MRCEP_MAX_PACKET];
};

struct mrc_outbox {
	struct mrc_out_pkt *pkts;
	uint32_t count, cap;
};

/* The value of tuning constant MRCEP_<name>, or -1 for an unknown name (for the tests). */
int64_t mrcep_tuning(const char *name);

/* For the binding: the sizes it lays its ctypes structures out with. */
uint32_t mrcep_out_pkt_size(void);
uint32_t mrcep_out_pkt_data_offset(void);
uint32_t mrcep_rtx_count(void);

struct mrc_outbox *mrcep_outbox_new(void);
void mrcep_outbox_free(struct mrc_outbox *ob);
void mrcep_outbox_clear(struct mrc_outbox *ob);
uint32_t mrcep_outbox_count(const struct mrc_outbox *ob);
const struct mrc_out_pkt *mrcep_outbox_get(const struct mrc_outbox *ob, uint32_t i);
struct mrc_out_pkt *mrcep_outbox_push(struct mrc_outbox *ob);

/* --- u32-keyed hash (QPs, rkeys, per-EV CE history) ------------------------------------- */
struct mrc_map {
	uint32_t *keys;
	uint64_t *vals;
	uint8_t *used;
	uint32_t cap, count;
};
int mrc_map_get(const struct mrc_map *m, uint32_t key, uint64_t *val);
int mrc_map_put(struct mrc_map *m, uint32_t key, uint64_t val);
int mrc_map_del(struct mrc_map *m, uint32_t key);
void mrc_map_free(struct mrc_map *m);

/* --- congestion window (cc.py) ---------------------------------------------------------- */
struct mrc_cc_cfg {
	int64_t mtu, initial_cwnd, max_cwnd, target_qdelay_ns;
	double eta, fi, gamma, max_md;
};

struct mrc_cc {
	struct mrc_cc_cfg cfg;
	double cwnd;
	int64_t base_rtt;   /* 0 = none yet (a sample is always > 0) */
	int64_t last_md;
	uint64_t decreases;
};

void mrc_cc_init(struct mrc_cc *cc, const struct mrc_cc_cfg *cfg);
void mrc_cc_on_ack(struct mrc_cc *cc, int64_t acked, int64_t rtt, int ecn, int64_t now);
void mrc_cc_on_trim(struct mrc_cc *cc, int64_t now);
void mrc_cc_on_timeout(struct mrc_cc *cc);

/* --- requestor (requestor.py) ---------------------------------------------------------- */
enum mrc_rtx_reason {
	MRCEP_RTX_NONE, MRCEP_RTX_NACK_TRIMMED, MRCEP_RTX_NACK_TRIMMED_LASTHOP, MRCEP_RTX_NACK_RESOURCE,
	MRCEP_RTX_NACK_PSN_OOR_WINDOW, MRCEP_RTX_SACK_GAP, MRCEP_RTX_RTO, MRCEP_RTX_NAK_SEQ, MRCEP_RTX_COUNT
};

struct mrc_req_cfg {
	uint32_t qpn, remote_qpn;
	uint8_t local[16], peer[16];
	uint32_t mtu, mpr, initial_psn;
	uint32_t timeout_exp, linear_retries, exp_retries, reorder_packets;
	struct mrc_cc_cfg cc;
	/* 1: the RC baseline (RoCEv2 RC): cumulative ACK/NAK (AETH) instead of SACK/NACK,
	 * go-back-N on a NAK sequence error or an RTO, a fixed window of cc.initial_cwnd (no
	 * DCQCN), no PROBE, data in the NO_TRIM class. docs/endpoint.md "The RC baseline". */
	uint32_t rc;
};

struct mrc_req_stats {
	uint64_t packets, payload_bytes, acked_bytes, sacks, ecn_sacks, timeouts, probes;
	uint64_t icrc_checked, bad_icrc, completions;
	uint64_t malformed;  /* replies with a good ICRC too short for their opcode, or no SACK/NACK */
	uint64_t retransmits[MRCEP_RTX_COUNT];
	uint64_t nacks[256];
	uint64_t acks, seq_naks;  /* RC: AETH ACKs and NAK sequence errors received */
};

struct mrc_completion {
	uint64_t wr_id;
	int32_t status;  /* 0 ok, -1 the QP went to error (mrcep_req_error says why) */
};

struct mrc_req;
struct mrc_req *mrcep_req_new(const struct mrc_req_cfg *cfg, struct mrc_outbox *out, char *err, int errlen);
void mrcep_req_free(struct mrc_req *r);
int64_t mrcep_req_post(struct mrc_req *r, const uint8_t *data, uint64_t len, uint64_t va,
		       uint32_t rkey, int has_imm, uint32_t imm);
int mrcep_req_pump(struct mrc_req *r, int64_t now, int budget);
void mrcep_req_on_reply(struct mrc_req *r, const uint8_t *buf, uint32_t n, int64_t now);
void mrcep_req_on_sack(struct mrc_req *r, const uint8_t *buf, int64_t now);
void mrcep_req_on_nack(struct mrc_req *r, const uint8_t *buf, int64_t now);
void mrcep_req_on_ack(struct mrc_req *r, const uint8_t *buf, int64_t now);
int64_t mrcep_req_on_timer(struct mrc_req *r, int64_t now);
void mrcep_req_send_probe(struct mrc_req *r, int64_t now);
int mrcep_req_busy(const struct mrc_req *r);
int mrcep_req_poll(struct mrc_req *r, struct mrc_completion *c);
void mrcep_req_fail(struct mrc_req *r, const char *why);
const char *mrcep_req_error(const struct mrc_req *r);
const struct mrc_req_stats *mrcep_req_stats(const struct mrc_req *r);
double mrcep_req_cwnd(const struct mrc_req *r);
int64_t mrcep_req_inflight(const struct mrc_req *r);
int64_t mrcep_req_next_psn(const struct mrc_req *r);
int64_t mrcep_req_una(struct mrc_req *r);
int mrcep_req_outstanding(const struct mrc_req *r, int64_t psn);
void mrcep_req_set_cwnd(struct mrc_req *r, double cwnd);
uint32_t mrcep_req_remote_qpn(const struct mrc_req *r);
uint32_t mrcep_req_qpn(const struct mrc_req *r);

/* --- responder (responder.py) ---------------------------------------------------------- */
struct mrc_resp_stats {
	uint64_t packets, icrc_checked, bad_icrc, malformed, unknown_qp, duplicates;
	uint64_t placed_packets, placed_bytes, ce_marked, trimmed, probes, sacks, imm_completions;
	uint64_t nacks[256];
	uint64_t acks, seq_naks;  /* RC: AETH ACKs and NAK sequence errors sent */
	uint64_t out_of_sequence; /* RC: data past the expected PSN, discarded */
};

struct mrc_recv_comp {
	uint32_t qpn, imm, rqmsn, psn;
};

struct mrc_resp;
struct mrc_resp *mrcep_resp_new(const uint8_t local[16], uint32_t sack_coalesce_bytes, struct mrc_outbox *out);
void mrcep_resp_free(struct mrc_resp *r);
int mrcep_resp_add_qp(struct mrc_resp *r, uint32_t qpn, uint32_t remote_qpn, uint32_t mpr, uint32_t mtu,
		      uint32_t initial_psn, const uint8_t *peer);
int mrcep_resp_set_remote_qpn(struct mrc_resp *r, uint32_t qpn, uint32_t remote_qpn);
/* Make QP `qpn` an RC baseline QP (rc = 1): in-order placement only, an AETH ACK instead of
 * a SACK, one NAK sequence error per gap, trimmed arrivals discarded as losses. */
int mrcep_resp_set_rc(struct mrc_resp *r, uint32_t qpn, int rc);
int mrcep_resp_mr_add(struct mrc_resp *r, uint32_t rkey, uint64_t base_va, uint8_t *mem, uint64_t len);
int mrcep_resp_mr_del(struct mrc_resp *r, uint32_t rkey);
uint64_t mrcep_resp_mr_placed(const struct mrc_resp *r, uint32_t rkey);
void mrcep_resp_handle(struct mrc_resp *r, const uint8_t *buf, uint32_t n, uint8_t tclass,
		       uint32_t flowinfo, uint16_t sport, const uint8_t peer[16]);
void mrcep_resp_flush(struct mrc_resp *r);
int mrcep_resp_poll(struct mrc_resp *r, struct mrc_recv_comp *c);
const struct mrc_resp_stats *mrcep_resp_stats(const struct mrc_resp *r);
const char *mrcep_resp_qp_error(const struct mrc_resp *r, uint32_t qpn);
int64_t mrcep_resp_qp_epsn(const struct mrc_resp *r, uint32_t qpn);
int64_t mrcep_resp_qp_high(const struct mrc_resp *r, uint32_t qpn);
int64_t mrcep_resp_qp_ooo(const struct mrc_resp *r, uint32_t qpn);

/* --- helpers shared by the C files ----------------------------------------------------- */
static inline int64_t mrcep_unwrap(uint32_t psn, int64_t ref)
{
	int64_t d = ((int64_t)psn - ref) % MRC_PSN_MOD;
	if (d < 0)
		d += MRC_PSN_MOD;
	return ref + (d >= MRC_PSN_MOD / 2 ? d - MRC_PSN_MOD : d);
}

static inline int mrcep_is_write(uint8_t op)
{
	switch (op) {
	case MRC_OP_WRITE_FIRST: case MRC_OP_WRITE_MIDDLE: case MRC_OP_WRITE_LAST:
	case MRC_OP_WRITE_LAST_IMM: case MRC_OP_WRITE_ONLY: case MRC_OP_WRITE_ONLY_IMM:
		return 1;
	}
	return 0;
}

static inline void mrcep_put24(uint8_t *p, uint32_t v)
{
	p[0] = v >> 16; p[1] = v >> 8; p[2] = v;
}

static inline uint32_t mrcep_get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

/* --- the endpoint: one UDP socket, one thread (endpoint.c) ------------------------------ */
struct mrc_ep_event {
	uint32_t kind;  /* MRCEP_EV_SEND: a write completed; MRCEP_EV_RECV: a WRITE_WITH_IMM arrived */
	uint32_t qpn;
	uint64_t wr_id;
	int32_t status;
	struct mrc_recv_comp recv;
};
#define MRCEP_EV_SEND 1
#define MRCEP_EV_RECV 2
#define MRCEP_RX_BUDGET 256   /* datagrams read per loop turn before sending again */
#define MRCEP_TX_BUDGET 32    /* packets each QP may send per loop turn */
#define MRCEP_RX_BATCH 64     /* datagrams per recvmmsg */
#define MRCEP_TX_BATCH 64     /* datagrams per sendmmsg */
/* One receive slot: more than any MRC packet (MRCEP_MAX_PACKET) and a 9000 B jumbo frame. */
#define MRCEP_RX_SLOT_BYTES 9216
#define MRCEP_IDLE_POLL_NS 50000000LL
#define MRCEP_SOCKET_BUFFER_BYTES (32 << 20)

struct mrc_ep;
/* busy_poll: the thread spins on recvmmsg(MSG_DONTWAIT) between turns instead of sleeping
 * in ppoll (lower latency, one core kept busy). */
struct mrc_ep *mrcep_ep_new(const uint8_t local[16], uint16_t port, uint16_t peer_port,
			    uint32_t sack_coalesce_bytes, int busy_poll, char *err, int errlen);
int mrcep_ep_start(struct mrc_ep *ep);
void mrcep_ep_stop(struct mrc_ep *ep);
void mrcep_ep_free(struct mrc_ep *ep);
void mrcep_ep_lock(struct mrc_ep *ep);
void mrcep_ep_unlock(struct mrc_ep *ep);
struct mrc_resp *mrcep_ep_resp(struct mrc_ep *ep);
struct mrc_outbox *mrcep_ep_outbox(struct mrc_ep *ep);
int mrcep_ep_add_req(struct mrc_ep *ep, uint32_t qpn, struct mrc_req *req);
void mrcep_ep_kick(struct mrc_ep *ep, uint32_t qpn);
int mrcep_ep_wait(struct mrc_ep *ep, struct mrc_ep_event *ev, int64_t timeout_ns);
const char *mrcep_ep_error(struct mrc_ep *ep);
uint64_t mrcep_ep_send_errors(struct mrc_ep *ep);
int mrcep_ep_turn(struct mrc_ep *ep, int64_t now);
void mrcep_ep_dispatch(struct mrc_ep *ep, const uint8_t *buf, uint32_t n, uint8_t tclass, uint32_t flow,
		       uint16_t sport, const uint8_t peer[16], int64_t now);

/* The arrival log: when on, every datagram handed to the responder (data, PROBEs) is noted
 * with the EV it came on and, for a data packet with BTH ts = 1, its TSETH tx_timestamp, so a
 * caller can count per EV what arrived and when it was sent (the demo's loss accounting). Off
 * by default; the log grows until drained. mrcep_ep_arrivals() moves up to `max` of the oldest
 * entries to `out` and returns how many; both are called with the endpoint locked. */
struct mrc_arrival {
	int64_t arrival_ns;    /* CLOCK_MONOTONIC */
	uint32_t ev;           /* MRC_EV_FROM_WIRE(UDP sport, flow label) */
	uint16_t tx_timestamp; /* TSETH, units of MRC_TIME_UNIT_NS; valid when has_ts */
	uint16_t has_ts;
};
int mrcep_ep_log_arrivals(struct mrc_ep *ep, int on);
uint32_t mrcep_ep_arrivals(struct mrc_ep *ep, struct mrc_arrival *out, uint32_t max);
uint64_t mrcep_ep_arrivals_lost(const struct mrc_ep *ep);

void mrcep_pack_bth(uint8_t *buf, uint8_t opcode, uint8_t flags, uint32_t dqpn, uint32_t psn);

#endif /* MRCEP_H */
