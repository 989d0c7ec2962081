/* SPDX-License-Identifier: Apache-2.0 */
/* The native endpoint's socket loop (design 6), the C twin of endpoint.py + transport.py:
 * one UDP socket bound to [NIC]:4791 with UDP checksums off (the ICRC protects), the traffic
 * class set per packet and read back with the flow label (DSCP/ECN and EV bits 15..0), and
 * one thread that receives, runs the responder, the requestors' timers (CLOCK_MONOTONIC, ns)
 * and their pumps, then sends what they produced. API calls take the endpoint's mutex; the
 * thread holds it while it works and drops it while it sleeps in ppoll (or, busy-polling,
 * between turns). Datagrams come in by recvmmsg, MRCEP_RX_BATCH per call, each slot with its
 * own cmsg buffer; the turn's outbox leaves by sendmmsg, MRCEP_TX_BATCH per call, each message
 * with its own IPV6_TCLASS cmsg. One syscall then moves a batch, which is what a socket path
 * costs per packet otherwise. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/ip6.h>
#include <sys/socket.h>

#include "mrcep.h"

#ifndef UDP_NO_CHECK6_TX
#define UDP_NO_CHECK6_TX 101  /* <linux/udp.h> */
#define UDP_NO_CHECK6_RX 102
#endif
#ifndef IPV6_FLOWINFO
#define IPV6_FLOWINFO 11      /* <linux/in6.h>: enables, and names, the received flowinfo cmsg */
#endif

/* Per-slot control buffer: IPV6_TCLASS and IPV6_FLOWINFO (an int each), with room to spare. */
#define RX_CMSG_BYTES (CMSG_SPACE(sizeof(int)) * 4)
#define TX_CMSG_BYTES CMSG_SPACE(sizeof(int))

struct rx_batch {
	struct mmsghdr msg[MRCEP_RX_BATCH];
	struct iovec iov[MRCEP_RX_BATCH];
	struct sockaddr_in6 sa[MRCEP_RX_BATCH];
	char cbuf[MRCEP_RX_BATCH][RX_CMSG_BYTES];
	uint8_t buf[MRCEP_RX_BATCH][MRCEP_RX_SLOT_BYTES];
};

struct tx_batch {
	struct mmsghdr msg[MRCEP_TX_BATCH];
	struct iovec iov[MRCEP_TX_BATCH];
	struct sockaddr_in6 sa[MRCEP_TX_BATCH];
	union { char buf[TX_CMSG_BYTES]; struct cmsghdr align; } cmsg[MRCEP_TX_BATCH];
};

/* The low bit of a requestor's value in ep->reqs: it is on ep->active. Requestors are
 * malloc'ed, so that bit of their address is always 0. */
#define REQ_ACTIVE 1ULL

struct mrc_ep {
	int fd, wake_r, wake_w, started, stop, busy_poll;
	int waiters;              /* API callers blocked on mu (atomic): the loop yields to them */
	uint8_t local[16];
	uint16_t peer_port;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_mutex_t evmu;     /* the event queue's own lock, so that waiting for a completion
				   * never competes with the loop for mu */
	pthread_cond_t cv;        /* with evmu: an event was queued, or the endpoint stopped */
	struct mrc_outbox *out;
	struct mrc_resp *resp;
	struct mrc_map reqs;      /* qpn -> struct mrc_req * */
	struct mrc_req **active;  /* QPs with work, in the order they got it */
	uint32_t nactive, capactive;
	struct mrc_ep_event *events;
	uint32_t nevents, capevents, evread;
	uint64_t send_errors;
	char error[MRCEP_ERROR_LEN];
	struct rx_batch rx;
	struct tx_batch tx;
	int log_on;               /* the arrival log (mrcep_ep_log_arrivals) */
	struct mrc_arrival *log;
	uint32_t nlog, caplog, logread;
	uint64_t log_lost;        /* entries not kept: the log could not grow */
};

static int64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int setopt(int fd, int level, int name, int val)
{
	return setsockopt(fd, level, name, &val, sizeof(val));
}

static int open_socket(struct mrc_ep *ep, uint16_t port, char *err, int errlen)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	if (setopt(fd, IPPROTO_UDP, UDP_NO_CHECK6_TX, 1) || setopt(fd, IPPROTO_UDP, UDP_NO_CHECK6_RX, 1) ||
	    setopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1) || setopt(fd, IPPROTO_IPV6, IPV6_FLOWINFO, 1) ||
	    /* Never fragment: the host dataplane cannot encapsulate fragments (design 3.1). */
	    setopt(fd, IPPROTO_IPV6, IPV6_DONTFRAG, 1))
		goto fail;
	if (setopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, MRCEP_SOCKET_BUFFER_BYTES))
		setopt(fd, SOL_SOCKET, SO_RCVBUF, MRCEP_SOCKET_BUFFER_BYTES);
	if (setopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, MRCEP_SOCKET_BUFFER_BYTES))
		setopt(fd, SOL_SOCKET, SO_SNDBUF, MRCEP_SOCKET_BUFFER_BYTES);
	memcpy(&sa.sin6_addr, ep->local, 16);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		goto fail;
	ep->fd = fd;
	return 0;
fail:
	snprintf(err, errlen, "%d:%s", errno, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

static void init_batches(struct mrc_ep *ep)
{
	for (int i = 0; i < MRCEP_RX_BATCH; i++) {
		ep->rx.iov[i] = (struct iovec){ep->rx.buf[i], MRCEP_RX_SLOT_BYTES};
		ep->rx.msg[i].msg_hdr = (struct msghdr){.msg_iov = &ep->rx.iov[i], .msg_iovlen = 1};
	}
	for (int i = 0; i < MRCEP_TX_BATCH; i++) {
		struct msghdr *mh = &ep->tx.msg[i].msg_hdr;
		struct cmsghdr *c;
		ep->tx.sa[i] = (struct sockaddr_in6){.sin6_family = AF_INET6, .sin6_port = htons(ep->peer_port)};
		*mh = (struct msghdr){.msg_name = &ep->tx.sa[i], .msg_namelen = sizeof(ep->tx.sa[i]),
				      .msg_iov = &ep->tx.iov[i], .msg_iovlen = 1,
				      .msg_control = ep->tx.cmsg[i].buf, .msg_controllen = TX_CMSG_BYTES};
		c = CMSG_FIRSTHDR(mh);
		c->cmsg_level = IPPROTO_IPV6;
		c->cmsg_type = IPV6_TCLASS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
	}
}

struct mrc_ep *mrcep_ep_new(const uint8_t local[16], uint16_t port, uint16_t peer_port,
			    uint32_t sack_coalesce_bytes, int busy_poll, char *err, int errlen)
{
	struct mrc_ep *ep = calloc(1, sizeof(*ep));
	int pipefd[2];
	if (!ep) {
		snprintf(err, errlen, "%d:%s", ENOMEM, strerror(ENOMEM));
		return NULL;
	}
	memcpy(ep->local, local, 16);
	ep->peer_port = peer_port;
	ep->busy_poll = !!busy_poll;
	ep->fd = -1;
	init_batches(ep);
	if (open_socket(ep, port, err, errlen)) {
		free(ep);
		return NULL;
	}
	if (pipe2(pipefd, O_NONBLOCK | O_CLOEXEC)) {
		snprintf(err, errlen, "%d:%s", errno, strerror(errno));
		close(ep->fd);
		free(ep);
		return NULL;
	}
	ep->wake_r = pipefd[0];
	ep->wake_w = pipefd[1];
	pthread_mutex_init(&ep->mu, NULL);
	pthread_mutex_init(&ep->evmu, NULL);
	pthread_cond_init(&ep->cv, NULL);
	ep->out = mrcep_outbox_new();
	ep->resp = mrcep_resp_new(local, sack_coalesce_bytes, ep->out);
	return ep;
}

void mrcep_ep_lock(struct mrc_ep *ep)
{
	__atomic_add_fetch(&ep->waiters, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&ep->mu);
	__atomic_sub_fetch(&ep->waiters, 1, __ATOMIC_SEQ_CST);
}

void mrcep_ep_unlock(struct mrc_ep *ep) { pthread_mutex_unlock(&ep->mu); }
struct mrc_resp *mrcep_ep_resp(struct mrc_ep *ep) { return ep->resp; }
struct mrc_outbox *mrcep_ep_outbox(struct mrc_ep *ep) { return ep->out; }
const char *mrcep_ep_error(struct mrc_ep *ep) { return ep->error[0] ? ep->error : NULL; }
uint64_t mrcep_ep_send_errors(struct mrc_ep *ep) { return ep->send_errors; }

static struct mrc_req *req_of(struct mrc_ep *ep, uint32_t qpn)
{
	uint64_t v;
	return mrc_map_get(&ep->reqs, qpn, &v) ? (struct mrc_req *)(uintptr_t)(v & ~REQ_ACTIVE) : NULL;
}

int mrcep_ep_add_req(struct mrc_ep *ep, uint32_t qpn, struct mrc_req *req)
{
	return req_of(ep, qpn) ? -1 : mrc_map_put(&ep->reqs, qpn, (uint64_t)(uintptr_t)req);
}

static void wake(struct mrc_ep *ep)
{
	char c = 'x';
	if (write(ep->wake_w, &c, 1) < 0 && errno != EAGAIN)
		ep->send_errors++;
}

/* Caller holds the lock. The active bit in ep->reqs says whether the QP is already listed,
 * so a kick costs one hash lookup whatever the number of busy QPs. */
void mrcep_ep_kick(struct mrc_ep *ep, uint32_t qpn)
{
	uint64_t v;
	struct mrc_req *r;
	if (!mrc_map_get(&ep->reqs, qpn, &v))
		return;
	r = (struct mrc_req *)(uintptr_t)(v & ~REQ_ACTIVE);
	if (!(v & REQ_ACTIVE)) {
		if (ep->nactive == ep->capactive) {
			uint32_t cap = ep->capactive ? ep->capactive * 2 : 16;
			struct mrc_req **a = realloc(ep->active, cap * sizeof(*a));
			if (!a)
				return;
			ep->active = a;
			ep->capactive = cap;
		}
		ep->active[ep->nactive++] = r;
		mrc_map_put(&ep->reqs, qpn, v | REQ_ACTIVE);
	}
	if (!ep->busy_poll)
		wake(ep);
}

static void push_event(struct mrc_ep *ep, const struct mrc_ep_event *ev)
{
	pthread_mutex_lock(&ep->evmu);
	if (ep->nevents == ep->capevents) {
		uint32_t cap = ep->capevents ? ep->capevents * 2 : 64;
		struct mrc_ep_event *e = realloc(ep->events, cap * sizeof(*e));
		if (!e) {
			pthread_mutex_unlock(&ep->evmu);
			return;
		}
		ep->events = e;
		ep->capevents = cap;
	}
	ep->events[ep->nevents++] = *ev;
	pthread_cond_broadcast(&ep->cv);
	pthread_mutex_unlock(&ep->evmu);
}

int mrcep_ep_wait(struct mrc_ep *ep, struct mrc_ep_event *ev, int64_t timeout_ns)
{
	struct timespec dl;
	int got = 0;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += timeout_ns / 1000000000LL;
	dl.tv_nsec += timeout_ns % 1000000000LL;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&ep->evmu);
	while (ep->evread == ep->nevents && !__atomic_load_n(&ep->stop, __ATOMIC_SEQ_CST))
		if (pthread_cond_timedwait(&ep->cv, &ep->evmu, &dl) == ETIMEDOUT)
			break;
	if (ep->evread < ep->nevents) {
		*ev = ep->events[ep->evread++];
		if (ep->evread == ep->nevents)
			ep->evread = ep->nevents = 0;
		got = 1;
	} else if (__atomic_load_n(&ep->stop, __ATOMIC_SEQ_CST)) {
		got = -1;
	}
	pthread_mutex_unlock(&ep->evmu);
	return got;
}

/* --- the arrival log ------------------------------------------------------------------ */
int mrcep_ep_log_arrivals(struct mrc_ep *ep, int on)
{
	ep->log_on = !!on;
	return 0;
}

static int log_room(struct mrc_ep *ep)
{
	struct mrc_arrival *grown;
	uint32_t cap;
	if (ep->nlog < ep->caplog)
		return 1;
	if (ep->logread) {  /* drained entries first: slide the rest down */
		memmove(ep->log, ep->log + ep->logread, (size_t)(ep->nlog - ep->logread) * sizeof(*ep->log));
		ep->nlog -= ep->logread;
		ep->logread = 0;
		if (ep->nlog < ep->caplog)
			return 1;
	}
	cap = ep->caplog ? ep->caplog * 2 : 4096;
	grown = cap > ep->caplog ? realloc(ep->log, (size_t)cap * sizeof(*ep->log)) : NULL;
	if (!grown)
		return 0;
	ep->log = grown;
	ep->caplog = cap;
	return 1;
}

/* Note one datagram for the responder: its EV and, for a data packet with BTH ts = 1 and room
 * for a TSETH, the sender's tx_timestamp (design 3.2). */
static void log_arrival(struct mrc_ep *ep, const uint8_t *buf, uint32_t n, uint32_t flow, uint16_t sport,
			int64_t now)
{
	const struct mrc_bth *b = (const struct mrc_bth *)buf;
	struct mrc_arrival *a;
	if (!log_room(ep)) {
		ep->log_lost++;
		return;
	}
	a = &ep->log[ep->nlog++];
	a->arrival_ns = now;
	a->ev = MRC_EV_FROM_WIRE(sport, flow);
	a->has_ts = n >= MRC_BTH_LEN + MRC_METH_LEN + MRC_TSETH_LEN && mrcep_is_write(b->opcode) &&
		    (b->flags & MRC_BTH_FLAG_TS);
	a->tx_timestamp = 0;
	if (a->has_ts) {
		const struct mrc_tseth *t = (const struct mrc_tseth *)(buf + MRC_BTH_LEN + MRC_METH_LEN);
		a->tx_timestamp = ntohs(t->tx_timestamp);
	}
}

uint32_t mrcep_ep_arrivals(struct mrc_ep *ep, struct mrc_arrival *out, uint32_t max)
{
	uint32_t n = ep->nlog - ep->logread;
	if (n > max)
		n = max;
	memcpy(out, ep->log + ep->logread, (size_t)n * sizeof(*out));
	ep->logread += n;
	if (ep->logread == ep->nlog)
		ep->logread = ep->nlog = 0;
	return n;
}

uint64_t mrcep_ep_arrivals_lost(const struct mrc_ep *ep)
{
	return ep->log_lost;
}

/* --- receive -------------------------------------------------------------------------- */
void mrcep_ep_dispatch(struct mrc_ep *ep, const uint8_t *buf, uint32_t n, uint8_t tclass, uint32_t flow,
		       uint16_t sport, const uint8_t peer[16], int64_t now)
{
	struct mrc_req *r;
	if (n < MRC_BTH_LEN + MRC_ICRC_LEN ||
	    (buf[0] != MRC_OP_SACK && buf[0] != MRC_OP_NACK && buf[0] != MRC_OP_ACK)) {
		if (ep->log_on)
			log_arrival(ep, buf, n, flow, sport, now);
		mrcep_resp_handle(ep->resp, buf, n, tclass, flow, sport, peer);
		return;
	}
	r = req_of(ep, mrcep_get24(buf + offsetof(struct mrc_bth, dqpn)));
	if (r)
		mrcep_req_on_reply(r, buf, n, now);
}

static void slot_meta(struct msghdr *mh, uint32_t *tclass, uint32_t *flow)
{
	*tclass = *flow = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != IPPROTO_IPV6 || c->cmsg_len < CMSG_LEN(4))
			continue;
		if (c->cmsg_type == IPV6_TCLASS) {
			int v;
			memcpy(&v, CMSG_DATA(c), 4);
			*tclass = (uint32_t)v;
		} else if (c->cmsg_type == IPV6_FLOWINFO) {
			uint32_t v;
			memcpy(&v, CMSG_DATA(c), 4);
			*flow = ntohl(v) & MRC_IPV6_FLOW_LABEL_MASK;
		}
	}
}

/* One recvmmsg of up to `max` datagrams (<= MRCEP_RX_BATCH), each dispatched in arrival
 * order. A datagram longer than a slot arrives truncated to it (no MRC packet is: see
 * MRCEP_RX_SLOT_BYTES), and the responder rejects it as it would any malformed packet.
 * Returns the number received (0: none waiting, or an error). */
static int receive_batch(struct mrc_ep *ep, int max, int64_t now)
{
	struct rx_batch *b = &ep->rx;
	int n;
	for (int i = 0; i < max; i++) {
		struct msghdr *mh = &b->msg[i].msg_hdr;
		mh->msg_name = &b->sa[i];
		mh->msg_namelen = sizeof(b->sa[i]);
		mh->msg_control = b->cbuf[i];
		mh->msg_controllen = RX_CMSG_BYTES;
		mh->msg_flags = 0;
	}
	n = recvmmsg(ep->fd, b->msg, (unsigned)max, MSG_DONTWAIT, NULL);
	if (n <= 0)
		return 0;
	for (int i = 0; i < n; i++) {
		uint32_t tclass, flow;
		slot_meta(&b->msg[i].msg_hdr, &tclass, &flow);
		mrcep_ep_dispatch(ep, b->buf[i], b->msg[i].msg_len, (uint8_t)tclass, flow, ntohs(b->sa[i].sin6_port),
				  (const uint8_t *)&b->sa[i].sin6_addr, now);
	}
	return n;
}

/* --- send ----------------------------------------------------------------------------- */
/* The packet the socket refused with errno `e`: counted as lost, and EMSGSIZE also fails the
 * QP that sent it, since every retransmission would be refused the same way. */
static void send_failed(struct mrc_ep *ep, const struct mrc_out_pkt *o, int e)
{
	if (e == EMSGSIZE && o->qpn) {
		struct mrc_req *r = req_of(ep, o->qpn);
		char why[MRCEP_ERROR_LEN];
		snprintf(why, sizeof(why), "cannot send: a %u B packet (IPv6 + UDP + MRC) does not fit the MTU "
			 "of the interface toward the peer: raise that MTU or lower the payload per packet",
			 o->len + MRC_IPV6_LEN + MRC_UDP_LEN);
		if (r)
			mrcep_req_fail(r, why);
	}
	/* ENOBUFS, an unreachable peer...: the packet counts as lost; the sender recovers. */
	ep->send_errors++;
}

/* The outbox by sendmmsg, MRCEP_TX_BATCH at a time, in order. sendmmsg stops at the first
 * message the socket refuses: it returns the count sent before it, or -1 with that message's
 * errno when it is the first. So a short count resends from the refused message, whose error
 * then comes back alone, and each packet meets the fate one sendmsg would have given it. */
static void send_all(struct mrc_ep *ep)
{
	struct tx_batch *b = &ep->tx;
	uint32_t i = 0, count = ep->out->count;
	while (i < count) {
		uint32_t k = count - i < MRCEP_TX_BATCH ? count - i : MRCEP_TX_BATCH;
		int n;
		for (uint32_t j = 0; j < k; j++) {
			struct mrc_out_pkt *o = &ep->out->pkts[i + j];
			int tc = o->tclass;
			memcpy(&b->sa[j].sin6_addr, o->peer, 16);
			b->iov[j] = (struct iovec){o->data, o->len};
			memcpy(CMSG_DATA((struct cmsghdr *)b->cmsg[j].buf), &tc, sizeof(int));
		}
		n = sendmmsg(ep->fd, b->msg, k, 0);
		if (n > 0) {
			i += (uint32_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		send_failed(ep, &ep->out->pkts[i], n < 0 ? errno : EIO);
		i++;
	}
	mrcep_outbox_clear(ep->out);
}

static void collect_events(struct mrc_ep *ep)
{
	struct mrc_ep_event ev;
	struct mrc_completion c;
	for (uint32_t i = 0; i < ep->nactive; i++) {
		while (mrcep_req_poll(ep->active[i], &c)) {
			memset(&ev, 0, sizeof(ev));
			ev.kind = MRCEP_EV_SEND;
			ev.wr_id = c.wr_id;
			ev.status = c.status;
			ev.qpn = mrcep_req_qpn(ep->active[i]);
			push_event(ep, &ev);
		}
	}
	memset(&ev, 0, sizeof(ev));
	ev.kind = MRCEP_EV_RECV;
	while (mrcep_resp_poll(ep->resp, &ev.recv)) {
		ev.qpn = ev.recv.qpn;
		push_event(ep, &ev);
	}
}

/* One turn of the loop with the lock held: receive, flush SACKs, timers, pumps, send.
 * Returns packets received + sent; *deadline is left at the earliest timer. */
static int turn(struct mrc_ep *ep, int64_t now, int64_t *deadline)
{
	int got = 0, sent = 0, n;
	uint32_t i, j;
	do {
		int want = MRCEP_RX_BUDGET - got < MRCEP_RX_BATCH ? MRCEP_RX_BUDGET - got : MRCEP_RX_BATCH;
		n = receive_batch(ep, want, now);
		got += n;
	} while (n == MRCEP_RX_BATCH && got < MRCEP_RX_BUDGET);
	mrcep_resp_flush(ep->resp);
	now = mono_ns();
	for (i = 0; i < ep->nactive; i++) {
		struct mrc_req *r = ep->active[i];
		/* Timers run only once the socket is drained: acks queued while this thread was
		 * descheduled must count before a timeout is declared. */
		int64_t d = got < MRCEP_RX_BUDGET ? mrcep_req_on_timer(r, now) : -1;
		sent += mrcep_req_pump(r, now, MRCEP_TX_BUDGET);
		if (d >= 0 && (*deadline < 0 || d < *deadline))
			*deadline = d;
	}
	send_all(ep);
	collect_events(ep);
	for (i = j = 0; i < ep->nactive; i++) {
		struct mrc_req *r = ep->active[i];
		if (mrcep_req_busy(r))
			ep->active[j++] = r;
		else
			mrc_map_put(&ep->reqs, mrcep_req_qpn(r), (uint64_t)(uintptr_t)r);
	}
	ep->nactive = j;
	return got + sent;
}

int mrcep_ep_turn(struct mrc_ep *ep, int64_t now)
{
	int64_t deadline = -1;
	return turn(ep, now, &deadline);
}

/* Let API callers blocked on the mutex in: glibc's mutex is not fair, and a loop that
 * unlocks and relocks at once would keep it from them while traffic flows. */
static void yield_to_callers(struct mrc_ep *ep)
{
	if (!__atomic_load_n(&ep->waiters, __ATOMIC_SEQ_CST))
		return;
	pthread_mutex_unlock(&ep->mu);
	while (__atomic_load_n(&ep->waiters, __ATOMIC_SEQ_CST))
		sched_yield();
	pthread_mutex_lock(&ep->mu);
}

static void *run(void *arg)
{
	struct mrc_ep *ep = arg;
	struct pollfd fds[2] = {{.fd = ep->fd, .events = POLLIN}, {.fd = ep->wake_r, .events = POLLIN}};
	char drain[256];
	pthread_mutex_lock(&ep->mu);
	while (!ep->stop) {
		int64_t deadline = -1, now = mono_ns(), wait;
		struct timespec ts;
		int worked = turn(ep, now, &deadline);
		yield_to_callers(ep);
		if (worked)
			continue;
		/* Busy-polling, the next turn's recvmmsg(MSG_DONTWAIT) is the wait: no ppoll, no
		 * wake-up pipe, timers checked every turn. An idle turn yields the core, which costs
		 * nothing when the core is ours alone, and on a shared one lets the peer and the
		 * softirq that carry our next datagram run instead of this spin. */
		if (ep->busy_poll) {
			pthread_mutex_unlock(&ep->mu);
			sched_yield();
			pthread_mutex_lock(&ep->mu);
			continue;
		}
		now = mono_ns();
		wait = deadline < 0 ? MRCEP_IDLE_POLL_NS : deadline - now;
		if (wait > MRCEP_IDLE_POLL_NS)
			wait = MRCEP_IDLE_POLL_NS;
		if (wait < 0)
			wait = 0;
		ts.tv_sec = wait / 1000000000LL;
		ts.tv_nsec = wait % 1000000000LL;
		pthread_mutex_unlock(&ep->mu);
		if (ppoll(fds, 2, &ts, NULL) > 0 && (fds[1].revents & POLLIN))
			while (read(ep->wake_r, drain, sizeof(drain)) > 0)
				;
		pthread_mutex_lock(&ep->mu);
	}
	pthread_mutex_unlock(&ep->mu);
	pthread_mutex_lock(&ep->evmu);
	pthread_cond_broadcast(&ep->cv);
	pthread_mutex_unlock(&ep->evmu);
	return NULL;
}

int mrcep_ep_start(struct mrc_ep *ep)
{
	if (ep->started)
		return 0;
	if (pthread_create(&ep->thread, NULL, run, ep))
		return -1;
	ep->started = 1;
	return 0;
}

void mrcep_ep_stop(struct mrc_ep *ep)
{
	mrcep_ep_lock(ep);
	__atomic_store_n(&ep->stop, 1, __ATOMIC_SEQ_CST);
	mrcep_ep_unlock(ep);
	pthread_mutex_lock(&ep->evmu);
	pthread_cond_broadcast(&ep->cv);
	pthread_mutex_unlock(&ep->evmu);
	wake(ep);
	if (ep->started) {
		pthread_join(ep->thread, NULL);
		ep->started = 0;
	}
}

void mrcep_ep_free(struct mrc_ep *ep)
{
	if (!ep)
		return;
	mrcep_ep_stop(ep);
	close(ep->fd);
	close(ep->wake_r);
	close(ep->wake_w);
	mrcep_resp_free(ep->resp);
	mrcep_outbox_free(ep->out);
	mrc_map_free(&ep->reqs);  /* the requestors belong to the binding, which frees them */
	free(ep->active);
	free(ep->events);
	free(ep->log);
	pthread_mutex_destroy(&ep->mu);
	pthread_mutex_destroy(&ep->evmu);
	pthread_cond_destroy(&ep->cv);
	free(ep);
}
