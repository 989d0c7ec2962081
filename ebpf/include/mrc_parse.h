/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mrc_parse.h: the one parse path of the BPF programs (design section 3.1).
 *
 * mrc_parse() walks a frame once and fills a typed view of it, struct mrc_pkt, made of
 * pointers to the mrc_wire.h structs. Every pointer it sets has passed its bounds check
 * against data_end, so the programs read fields through the structs and never index bytes.
 * A pointer is NULL when the frame does not carry that header, or carries it truncated:
 *
 *   eth    Ethernet                    the frame holds 14 bytes
 *   outer  the first IPv6 header       eth->h_proto is IPv6 and 40 bytes follow
 *   inner  the inner IPv6 header       outer next header 41 and 40 bytes follow
 *   ip     the IPv6 header carrying UDP: inner when encapsulated (SRv6 mode), outer when
 *          the outer next header is UDP (EV-hash mode, docs/ecmp-mode.md); NULL otherwise
 *   udp    the UDP header after ip     ip next header 17 and 8 bytes follow
 *   bth    the BTH after udp           12 bytes follow (the UDP port is not checked: the
 *                                      callers decide what a RoCEv2 packet is)
 *
 * The extension header after the BTH (SETH, NETH, METH...) depends on the opcode; mrc_ext()
 * returns it bounds-checked for the length the caller needs. The version nibble is not
 * checked here: the switch forwards what the P4 parser accepts, the host checks it itself.
 * Usable from XDP and tc programs alike (the caller passes data and data_end).
 */
#ifndef MRC_PARSE_H
#define MRC_PARSE_H

#include <bpf/bpf_endian.h>

#include "mrc_wire.h"

struct mrc_pkt {
	void *data;
	void *data_end;
	struct ethhdr *eth;
	struct ipv6hdr *outer;
	struct ipv6hdr *inner;
	struct ipv6hdr *ip;
	struct udphdr *udp;
	struct mrc_bth *bth;
};

/* Fill p->eth and p->outer from the frame [data, data_end), and clear the rest of *p: the
 * part every program needs. A forwarding switch stops here (its uN work reads only these two);
 * mrc_parse_l4() completes the view when a packet needs it. */
static __always_inline void mrc_parse_l3(struct mrc_pkt *p, void *data, void *data_end)
{
	struct ethhdr *eth = data;
	struct ipv6hdr *outer;

	p->data = data;
	p->data_end = data_end;
	p->eth = 0;
	p->outer = 0;
	p->inner = 0;
	p->ip = 0;
	p->udp = 0;
	p->bth = 0;
	if ((void *)(eth + 1) > data_end)
		return;
	p->eth = eth;
	if (eth->h_proto != bpf_htons(MRC_ETHERTYPE_IPV6))
		return;
	outer = (void *)(eth + 1);
	if ((void *)(outer + 1) > data_end)
		return;
	p->outer = outer;
}

/* Complete a view that mrc_parse_l3() filled: inner IPv6, ip, UDP and BTH. */
static __always_inline void mrc_parse_l4(struct mrc_pkt *p)
{
	struct ipv6hdr *outer = p->outer, *ip = 0;
	void *data_end = p->data_end;
	struct udphdr *udp;
	struct mrc_bth *bth;

	if (!outer)
		return;
	if (outer->nexthdr == MRC_IPPROTO_IPV6) {
		struct ipv6hdr *inner = (void *)(outer + 1);

		if ((void *)(inner + 1) > data_end)
			return;
		p->inner = inner;
		if (inner->nexthdr == MRC_IPPROTO_UDP)
			ip = inner;
	} else if (outer->nexthdr == MRC_IPPROTO_UDP) {
		ip = outer;
	}
	if (!ip)
		return;
	p->ip = ip;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > data_end)
		return;
	p->udp = udp;
	bth = (void *)(udp + 1);
	if ((void *)(bth + 1) > data_end)
		return;
	p->bth = bth;
}

/* Fill *p from the frame [data, data_end). Always returns; see the header comment for what
 * each NULL means. */
static __always_inline void mrc_parse(struct mrc_pkt *p, void *data, void *data_end)
{
	mrc_parse_l3(p, data, data_end);
	mrc_parse_l4(p);
}

/* The extension header right after the BTH when `len` bytes of it are in the frame, else
 * NULL. */
static __always_inline void *mrc_ext(const struct mrc_pkt *p, __u32 len)
{
	void *ext;

	if (!p->bth)
		return 0;
	ext = (void *)(p->bth + 1);
	if (ext + len > p->data_end)
		return 0;
	return ext;
}

/* Whether the UDP header is RoCEv2's (destination port 4791). */
static __always_inline int mrc_is_rocev2(const struct udphdr *udp)
{
	return udp->dest == bpf_htons(MRC_UDP_PORT_ROCEV2);
}

/* Whether an opcode is an MRC RDMA write (the data packets). */
static __always_inline int mrc_is_write(__u8 opcode)
{
	return opcode >= MRC_OP_WRITE_FIRST && opcode <= MRC_OP_WRITE_ONLY_IMM;
}

/* Whether the responder answers an opcode with a SACK or NACK that echoes its EV: a write or
 * a PROBE (design 6). Nothing acknowledges a SACK, a NACK or an ACK, so the loss of one is
 * invisible to its sender, as TCP arms no retransmission timer for a pure ACK. */
static __always_inline int mrc_elicits_ack(__u8 opcode)
{
	return mrc_is_write(opcode) || opcode == MRC_OP_PROBE;
}

#endif /* MRC_PARSE_H */
