/* SPDX-License-Identifier: Apache-2.0 */
/* The native endpoint's socket loop (design 6), the C twin of endpoint.py + transport.py:
 * one UDP socket bound to [NIC]:4791 with UDP checksums off (the ICRC protects), the traffic
 * class set per packet and read back with the flow label (DSCP/ECN and EV bits 15..0), and
 * one thread that receives, runs the responder, the requestors' timers (CLOCK_MONOTONIC, ns)
 * and their pumps, then sends what they produced. API calls take the endpoint's mutex; the
 * thread holds it while it works and drops it while it sleeps in ppoll. One packet per
 * sendmsg/recvmsg for now; the outbox is the seam for batching (sendmmsg/recvmmsg). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
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

struct mrc_ep {
	int fd, wake_r, wake_w, started, stop;
	uint8_t local[16];
	uint16_t peer_port;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct mrc_outbox *out;
	struct mrc_resp *resp;
	struct mrc_map reqs;      /* qpn -> struct mrc_req * */
	struct mrc_req **active;  /* QPs with work, in the order they got it */
	uint32_t nactive, capactive;
	struct mrc_ep_event *events;
	uint32_t nevents, capevents, evread;
	uint64_t send_errors;
	char error[MRCEP_ERROR_LEN];
	uint8_t rx[65536];
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

struct mrc_ep *mrcep_ep_new(const uint8_t local[16], uint16_t port, uint16_t peer_port,
			    uint32_t sack_coalesce_bytes, char *err, int errlen)
{
	struct mrc_ep *ep = calloc(1, sizeof(*ep));
	int pipefd[2];
	if (!ep) {
		snprintf(err, errlen, "%d:%s", ENOMEM, strerror(ENOMEM));
		return NULL;
	}
	memcpy(ep->local, local, 16);
	ep->peer_port = peer_port;
	ep->fd = -1;
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
	pthread_cond_init(&ep->cv, NULL);
	ep->out = mrcep_outbox_new();
	ep->resp = mrcep_resp_new(local, sack_coalesce_bytes, ep->out);
	return ep;
}

void mrcep_ep_lock(struct mrc_ep *ep) { pthread_mutex_lock(&ep->mu); }
void mrcep_ep_unlock(struct mrc_ep *ep) { pthread_mutex_unlock(&ep->mu); }
struct mrc_resp *mrcep_ep_resp(struct mrc_ep *ep) { return ep->resp; }
struct mrc_outbox *mrcep_ep_outbox(struct mrc_ep *ep) { return ep->out; }
const char *mrcep_ep_error(struct mrc_ep *ep) { return ep->error[0] ? ep->error : NULL; }
uint64_t mrcep_ep_send_errors(struct mrc_ep *ep) { return ep->send_errors; }

static struct mrc_req *req_of(struct mrc_ep *ep, uint32_t qpn)
{
	uint64_t v;
	return mrc_map_get(&ep->reqs, qpn, &v) ? (struct mrc_req *)(uintptr_t)v : NULL;
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

/* Caller holds the lock. */
void mrcep_ep_kick(struct mrc_ep *ep, uint32_t qpn)
{
	struct mrc_req *r = req_of(ep, qpn);
	uint32_t i;
	if (!r)
		return;
	for (i = 0; i < ep->nactive; i++)
		if (ep->active[i] == r)
			break;
	if (i == ep->nactive) {
		if (ep->nactive == ep->capactive) {
			uint32_t cap = ep->capactive ? ep->capactive * 2 : 16;
			struct mrc_req **a = realloc(ep->active, cap * sizeof(*a));
			if (!a)
				return;
			ep->active = a;
			ep->capactive = cap;
		}
		ep->active[ep->nactive++] = r;
	}
	wake(ep);
}

static void push_event(struct mrc_ep *ep, const struct mrc_ep_event *ev)
{
	if (ep->nevents == ep->capevents) {
		uint32_t cap = ep->capevents ? ep->capevents * 2 : 64;
		struct mrc_ep_event *e = realloc(ep->events, cap * sizeof(*e));
		if (!e)
			return;
		ep->events = e;
		ep->capevents = cap;
	}
	ep->events[ep->nevents++] = *ev;
	pthread_cond_broadcast(&ep->cv);
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
	pthread_mutex_lock(&ep->mu);
	while (ep->evread == ep->nevents && !ep->stop)
		if (pthread_cond_timedwait(&ep->cv, &ep->mu, &dl) == ETIMEDOUT)
			break;
	if (ep->evread < ep->nevents) {
		*ev = ep->events[ep->evread++];
		if (ep->evread == ep->nevents)
			ep->evread = ep->nevents = 0;
		got = 1;
	} else if (ep->stop) {
		got = -1;
	}
	pthread_mutex_unlock(&ep->mu);
	return got;
}

/* --- receive -------------------------------------------------------------------------- */
void mrcep_ep_dispatch(struct mrc_ep *ep, const uint8_t *buf, uint32_t n, uint8_t tclass, uint32_t flow,
		       uint16_t sport, const uint8_t peer[16], int64_t now)
{
	struct mrc_req *r;
	if (n < MRC_BTH_LEN + MRC_ICRC_LEN ||
	    (buf[0] != MRC_OP_SACK && buf[0] != MRC_OP_NACK && buf[0] != MRC_OP_ACK)) {
		mrcep_resp_handle(ep->resp, buf, n, tclass, flow, sport, peer);
		return;
	}
	r = req_of(ep, mrcep_get24(buf + offsetof(struct mrc_bth, dqpn)));
	if (r && buf[0] != MRC_OP_ACK)
		mrcep_req_on_reply(r, buf, n, now);
}

static int receive_one(struct mrc_ep *ep, int64_t now)
{
	struct sockaddr_in6 sa;
	struct iovec iov = {ep->rx, sizeof(ep->rx)};
	char cbuf[CMSG_SPACE(sizeof(int)) * 4];
	struct msghdr mh = {.msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	uint32_t tclass = 0, flow = 0;
	ssize_t n = recvmsg(ep->fd, &mh, MSG_DONTWAIT);
	if (n < 0)
		return 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != IPPROTO_IPV6 || c->cmsg_len < CMSG_LEN(4))
			continue;
		if (c->cmsg_type == IPV6_TCLASS) {
			int v;
			memcpy(&v, CMSG_DATA(c), 4);
			tclass = (uint32_t)v;
		} else if (c->cmsg_type == IPV6_FLOWINFO) {
			uint32_t v;
			memcpy(&v, CMSG_DATA(c), 4);
			flow = ntohl(v) & MRC_IPV6_FLOW_LABEL_MASK;
		}
	}
	mrcep_ep_dispatch(ep, ep->rx, (uint32_t)n, (uint8_t)tclass, flow, ntohs(sa.sin6_port),
			  (const uint8_t *)&sa.sin6_addr, now);
	return 1;
}

/* --- send ----------------------------------------------------------------------------- */
static void send_all(struct mrc_ep *ep)
{
	for (uint32_t i = 0; i < ep->out->count; i++) {
		struct mrc_out_pkt *o = &ep->out->pkts[i];
		struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(ep->peer_port)};
		struct iovec iov = {o->data, o->len};
		char cbuf[CMSG_SPACE(sizeof(int))] = {0};
		struct msghdr mh = {.msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		int tc = o->tclass;
		memcpy(&sa.sin6_addr, o->peer, 16);
		c->cmsg_level = IPPROTO_IPV6;
		c->cmsg_type = IPV6_TCLASS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &tc, sizeof(int));
		if (sendmsg(ep->fd, &mh, 0) >= 0)
			continue;
		if (errno == EMSGSIZE && o->qpn) {
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
	int got = 0, sent = 0;
	uint32_t i, j;
	while (got < MRCEP_RX_BUDGET && receive_one(ep, now))
		got++;
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
	for (i = j = 0; i < ep->nactive; i++)
		if (mrcep_req_busy(ep->active[i]))
			ep->active[j++] = ep->active[i];
	ep->nactive = j;
	return got + sent;
}

int mrcep_ep_turn(struct mrc_ep *ep, int64_t now)
{
	int64_t deadline = -1;
	return turn(ep, now, &deadline);
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
		if (turn(ep, now, &deadline))
			continue;
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
	pthread_cond_broadcast(&ep->cv);
	pthread_mutex_unlock(&ep->mu);
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
	pthread_mutex_lock(&ep->mu);
	ep->stop = 1;
	pthread_cond_broadcast(&ep->cv);
	pthread_mutex_unlock(&ep->mu);
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
	pthread_mutex_destroy(&ep->mu);
	pthread_cond_destroy(&ep->cv);
	free(ep);
}
