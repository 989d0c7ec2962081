/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ebpf/host/decap.h: XDP ingress handling of MRC packets for the local NIC address:
 *   QP 0x2 traffic to the agent, feedback, the RFC 6040 copy of the outer fields on decap.
 * Part of the mrc_host object (ebpf/mrc_host.bpf.c includes every file of ebpf/host/).
 */
#ifndef MRC_HOST_DECAP_H
#define MRC_HOST_DECAP_H

#include "feedback.h"

/* Rewrite the inner UDP destination port of QP 0x2 traffic to the agent's port. */
static __always_inline void to_agent(struct udphdr *udp, __u16 agent_port)
{
	__u16 old = bpf_ntohs(udp->dest);
	__u16 csum = bpf_ntohs(udp->check);

	udp->dest = bpf_htons(agent_port);
	if (csum) {
		/* RFC 1624 incremental update: HC' = ~(~HC + ~m + m'). */
		__u32 sum = (__u16)~csum + (__u16)~old + agent_port;

		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		csum = ~sum & 0xffff;
		if (!csum)
			csum = 0xffff;
		udp->check = bpf_htons(csum);
	}
}

/* Copy the outer DSCP, flow label and CE mark into the inner header (design 3.1, RFC 6040).
 * Returns -1 when the packet must be dropped (CE on a not-ECT inner packet). */
static __always_inline int copy_outer_fields(struct ipv6hdr *outer, struct ipv6hdr *inner)
{
	__u8 otc = mrc_ipv6_tclass(outer);
	__u8 itc = mrc_ipv6_tclass(inner);
	__u8 ecn = itc & MRC_IPV6_ECN_MASK;

	if ((otc & MRC_IPV6_ECN_MASK) == MRC_ECN_CE) {
		if (ecn == MRC_ECN_NOT_ECT)
			return -1;
		ecn = MRC_ECN_CE;
	}
	itc = (otc & ~MRC_IPV6_ECN_MASK) | ecn;
	inner->version = 6;
	mrc_ipv6_set_tclass(inner, itc);
	mrc_ipv6_set_flow_label(inner, mrc_ipv6_flow_label(outer));
	return 0;
}

/* Whether p is a trim whose length fields were left stale: switches that trim to a fixed size
 * (SONiC, Cumulus; sonic-mgmt's packet-trimming test plan, section 5) cut the frame and
 * remark the DSCP but keep the IPv6 payload length and the UDP length of the whole packet,
 * where ours correct them (design 4, step 5). The kernel drops such a frame as truncated, so
 * the responder would never NACK it and the sender would wait for its RTO.
 * marked: the header that carries the class (the outer one in SRv6 mode); iplen: the payload
 * length of p->ip. It must be an MRC write, the one thing a switch trims, with its BTH in the
 * frame (the responder needs the PSN to NACK), a UDP length equal to iplen (the fields are
 * the untouched ones of one packet) and checksum 0 as RoCEv2 sends: a checksum over the cut
 * payload could not be valid. */
static __always_inline int stale_trim(const struct mrc_pkt *p, const struct ipv6hdr *marked,
				      __u16 iplen)
{
	__u8 dscp = mrc_ipv6_tclass(marked) >> MRC_IPV6_DSCP_SHIFT;

	if (dscp != MRC_DSCP_TRIMMED && dscp != MRC_DSCP_TRIMMED_LASTHOP)
		return 0;
	if (!p->bth || !mrc_is_rocev2(p->udp) || !mrc_is_write(p->bth->opcode))
		return 0;
	if (p->udp->check || bpf_ntohs(p->udp->len) != iplen)
		return 0;
	return (void *)(p->ip + 1) + iplen > p->data_end;
}

/* Set the lengths of a stale_trim() frame from the frame itself, as our switch's trim does:
 * p->ip's payload length and the UDP length, and the outer payload length when p->ip is the
 * inner header. Returns the new payload length of p->ip. */
static __always_inline __u16 repair_trim(const struct mrc_pkt *p)
{
	__u16 len = p->data_end - (void *)(p->ip + 1);

	p->ip->payload_len = bpf_htons(len);
	p->udp->len = bpf_htons(len);
	if (p->inner && p->ip == p->inner)
		p->outer->payload_len = bpf_htons(len + MRC_IPV6_LEN);
	count(STAT_RX_TRIM_REPAIRED);
	return len;
}

/* What both modes do with an MRC packet for the local NIC address (ip6: the IPv6 header that
 * carries UDP, iplen its payload length, already checked against the frame): QP 0x2 traffic
 * (probes and their answers) counted in rx_paths and sent to the agent's port, SACK/NACK
 * feedback to the EV state. Only QP 0x2 traffic is counted: every failing path is probed, so
 * its probes are what cross it after it failed, and data packets pay no map lookup. */
static __always_inline void rx_mrc(const struct mrc_pkt *p, __u16 iplen, struct host_config *cfg)
{
	struct mrc_bth *bth = p->bth;

	if (!bth || iplen < MRC_UDP_LEN + MRC_BTH_LEN || !mrc_is_rocev2(p->udp))
		return;
	if (mrc_get24(bth->dqpn) == MRC_QP_ENDPOINT_OPS) {
		count_rx_path(p->udp, (const struct mrc_host_addr *)&p->ip->saddr);
		to_agent(p->udp, cfg->agent_port);
		count(STAT_RX_AGENT);
	} else if (bth->opcode == MRC_OP_SACK || bth->opcode == MRC_OP_NACK) {
		feedback(p, bth->opcode, cfg);
	}
}

/* EV-hash mode: an IPv6 packet with no outer header (next header 17). RoCEv2 packets for the
 * local NIC address get rx_mrc and go up as they are; anything else is not ours. Returns an
 * XDP verdict, or -1 for "pass as other". */
static __always_inline int rx_plain(struct host_config *cfg, const struct mrc_pkt *p)
{
	struct ipv6hdr *ip = p->outer;
	struct udphdr *udp = p->udp;
	__u16 plen;

	if (!udp || !addr_eq(&ip->daddr, cfg->nic_addr) || !mrc_is_rocev2(udp))
		return -1;
	if (!cfg->configured) {
		count(STAT_RX_DROP_NOT_CONFIGURED);
		return XDP_DROP;
	}
	plen = bpf_ntohs(ip->payload_len);
	if (plen < MRC_UDP_LEN || (void *)udp + plen > p->data_end) {
		if (!stale_trim(p, ip, plen)) {
			count(STAT_RX_DROP_MALFORMED);
			return XDP_DROP;
		}
		plen = repair_trim(p);
	}
	rx_mrc(p, plen, cfg);
	count(STAT_RX_PLAIN);
	return XDP_PASS;
}

#endif /* MRC_HOST_DECAP_H */
