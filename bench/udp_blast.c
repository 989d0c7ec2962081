/* SPDX-License-Identifier: Apache-2.0 */
/* The limit of the endpoint's socket path, for bench/endpoint.py: a sendmmsg blast of
 * RoCEv2-sized datagrams (the endpoint's WRITE_MIDDLE: BTH, METH, TSETH, RETH, payload, ICRC)
 * from a UDP socket bound to [NIC]:4791 to [DST]:4791, and a recvmmsg receiver counting what
 * arrives. The socket is set up as the native endpoint's (native/src/endpoint.c): UDP
 * checksums off, never fragment, 32 MiB buffers, the traffic class in a cmsg per message, the
 * same batch size; so the host dataplane's tc egress (which matches UDP to 4791 from the NIC
 * address) sprays the blast exactly as it sprays the endpoint. No reliability, no ICRC, no
 * window: what it moves is what the socket path can move.
 *
 *   udp_blast tx SRC DST PACKETS PAYLOAD   -> {"sent": n, "errors": n, "seconds": s}
 *   udp_blast rx ADDR PAYLOAD EXPECT IDLE_MS -> prints "ready", then
 *                                              {"packets": n, "bytes": payload bytes, "seconds": s}
 * The receiver counts only datagrams of the blast's size, from its first to its last one, and
 * stops once EXPECT arrived, or after IDLE_MS without any (30 s before the first).
 * Built by bench/endpoint.py: cc -O2 -I native/include -I ebpf/include. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mrcep.h"

#ifndef UDP_NO_CHECK6_TX
#define UDP_NO_CHECK6_TX 101
#define UDP_NO_CHECK6_RX 102
#endif

#define HDRS (MRC_BTH_LEN + MRC_METH_LEN + MRC_TSETH_LEN + MRC_RETH_LEN)
#define BLAST_QPN 0x3ff  /* a QP no endpoint of the bench uses */
#define FIRST_WAIT_MS 30000

static double mono(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "udp_blast: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int opt(int fd, int level, int name, int val)
{
	return setsockopt(fd, level, name, &val, sizeof(val));
}

static int open_bound(const char *addr)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(MRC_UDP_PORT_ROCEV2)};
	int fd = socket(AF_INET6, SOCK_DGRAM, 0);
	if (fd < 0)
		die("socket");
	if (inet_pton(AF_INET6, addr, &sa.sin6_addr) != 1) {
		fprintf(stderr, "udp_blast: %s is not an IPv6 address\n", addr);
		exit(2);
	}
	if (opt(fd, IPPROTO_UDP, UDP_NO_CHECK6_TX, 1) || opt(fd, IPPROTO_UDP, UDP_NO_CHECK6_RX, 1) ||
	    opt(fd, IPPROTO_IPV6, IPV6_DONTFRAG, 1))
		die("setsockopt");
	if (opt(fd, SOL_SOCKET, SO_RCVBUFFORCE, MRCEP_SOCKET_BUFFER_BYTES))
		opt(fd, SOL_SOCKET, SO_RCVBUF, MRCEP_SOCKET_BUFFER_BYTES);
	if (opt(fd, SOL_SOCKET, SO_SNDBUFFORCE, MRCEP_SOCKET_BUFFER_BYTES))
		opt(fd, SOL_SOCKET, SO_SNDBUF, MRCEP_SOCKET_BUFFER_BYTES);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		die("bind");
	return fd;
}

static int tx(const char *src, const char *dst, long packets, int payload)
{
	static uint8_t buf[MRCEP_TX_BATCH][HDRS + MRCEP_MAX_MTU + MRC_ICRC_LEN];
	static union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } cm[MRCEP_TX_BATCH];
	struct mmsghdr msg[MRCEP_TX_BATCH];
	struct iovec iov[MRCEP_TX_BATCH];
	struct sockaddr_in6 to = {.sin6_family = AF_INET6, .sin6_port = htons(MRC_UDP_PORT_ROCEV2)};
	int fd = open_bound(src), len = HDRS + payload + MRC_ICRC_LEN, tc = MRCEP_TCLASS(MRC_DSCP_TRIMMABLE, MRC_ECN_ECT0);
	long sent = 0, errors = 0;
	uint32_t psn = 0;
	double t0;
	if (inet_pton(AF_INET6, dst, &to.sin6_addr) != 1) {
		fprintf(stderr, "udp_blast: %s is not an IPv6 address\n", dst);
		return 2;
	}
	for (int i = 0; i < MRCEP_TX_BATCH; i++) {
		struct cmsghdr *c;
		for (int j = HDRS; j < len; j++)
			buf[i][j] = (uint8_t)(j * 131 + i);
		iov[i] = (struct iovec){buf[i], (size_t)len};
		msg[i].msg_hdr = (struct msghdr){.msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = &iov[i],
						 .msg_iovlen = 1, .msg_control = cm[i].b, .msg_controllen = sizeof(cm[i].b)};
		c = CMSG_FIRSTHDR(&msg[i].msg_hdr);
		c->cmsg_level = IPPROTO_IPV6;
		c->cmsg_type = IPV6_TCLASS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &tc, sizeof(int));
	}
	t0 = mono();
	while (sent + errors < packets) {
		int k = packets - sent - errors < MRCEP_TX_BATCH ? (int)(packets - sent - errors) : MRCEP_TX_BATCH, n;
		for (int i = 0; i < k; i++)  /* a WRITE_MIDDLE header, the PSN counting up as the endpoint's */
			mrcep_pack_bth(buf[i], MRC_OP_WRITE_MIDDLE, 0, BLAST_QPN, psn++ & (MRC_PSN_MOD - 1));
		n = sendmmsg(fd, msg, (unsigned)k, 0);
		if (n > 0) {
			sent += n;
			psn -= (uint32_t)(k - n);
		} else if (errno != EINTR) {
			errors++;  /* as the endpoint: a refused datagram is lost, the next goes on */
			psn -= (uint32_t)(k - 1);
		} else {
			psn -= (uint32_t)k;
		}
	}
	printf("{\"sent\": %ld, \"errors\": %ld, \"seconds\": %.6f}\n", sent, errors, mono() - t0);
	return 0;
}

static int rx(const char *addr, int payload, long expect, int idle_ms)
{
	static uint8_t buf[MRCEP_RX_BATCH][MRCEP_RX_SLOT_BYTES];
	struct mmsghdr msg[MRCEP_RX_BATCH];
	struct iovec iov[MRCEP_RX_BATCH];
	struct pollfd p;
	int fd = open_bound(addr), len = HDRS + payload + MRC_ICRC_LEN;
	long packets = 0;
	double first = 0, last = 0;
	for (int i = 0; i < MRCEP_RX_BATCH; i++) {
		iov[i] = (struct iovec){buf[i], MRCEP_RX_SLOT_BYTES};
		msg[i].msg_hdr = (struct msghdr){.msg_iov = &iov[i], .msg_iovlen = 1};
	}
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	printf("ready\n");
	fflush(stdout);
	while (packets < expect) {
		int n = recvmmsg(fd, msg, MRCEP_RX_BATCH, MSG_DONTWAIT, NULL);
		if (n > 0) {
			int ours = 0;
			for (int i = 0; i < n; i++)
				ours += msg[i].msg_len == (unsigned)len;
			if (ours) {
				last = mono();
				if (!packets)
					first = last;
				packets += ours;
			}
			continue;
		}
		if (poll(&p, 1, packets ? idle_ms : FIRST_WAIT_MS) <= 0)
			break;
	}
	printf("{\"packets\": %ld, \"bytes\": %ld, \"seconds\": %.6f}\n", packets, packets * (long)payload, last - first);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "tx"))
		return tx(argv[2], argv[3], atol(argv[4]), atoi(argv[5]));
	if (argc == 6 && !strcmp(argv[1], "rx"))
		return rx(argv[2], atoi(argv[3]), atol(argv[4]), atoi(argv[5]));
	fprintf(stderr, "usage: udp_blast tx SRC DST PACKETS PAYLOAD | udp_blast rx ADDR PAYLOAD EXPECT IDLE_MS\n");
	return 2;
}
