/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ebpf/host/encap.h: tc egress rewriting: the NIC address plan, the uSID path of an
 *   EV, the EV written into the inner header, the outer IPv6 header pushed (SRv6 mode) or the
 *   MACs alone (EV-hash mode).
 * Part of the mrc_host object (ebpf/mrc_host.bpf.c includes every file of ebpf/host/).
 */
#ifndef MRC_HOST_ENCAP_H
#define MRC_HOST_ENCAP_H

#include "maps.h"

static __always_inline __u16 usid(__u32 plane, __u32 role, __u32 index)
{
	return (plane << MRC_USID_PLANE_SHIFT) | (role << MRC_USID_ROLE_SHIFT) |
	       (index & MRC_USID_INDEX_MASK);
}

/* The uSID container of design 3.3, written into da (network order): the path's uSIDs in
 * order, zero-filled. */
static __always_inline void path_da(struct mrc_usid_container *da, __u32 locator, __u32 plane,
				    __u32 t1, __u32 src_leaf, __u32 dst_leaf, __u32 dst_down)
{
	__u16 *u = da->usid;

	__builtin_memset(da, 0, sizeof(*da));
	da->locator = bpf_htonl(locator);
	if (src_leaf != dst_leaf) {
		*u++ = bpf_htons(usid(plane, MRC_USID_ROLE_T0, src_leaf));
		*u++ = bpf_htons(usid(plane, MRC_USID_ROLE_T1, t1));
	}
	*u++ = bpf_htons(usid(plane, MRC_USID_ROLE_T0, dst_leaf));
	*u = bpf_htons(usid(plane, MRC_USID_ROLE_DOWN, dst_down));
}

#define TX_HDRS (MRC_ETH_LEN + MRC_IPV6_LEN + MRC_UDP_LEN + MRC_BTH_LEN)

static __always_inline __u8 tx_dscp(__u8 opcode, __u8 bth_flags, __u8 *ecn)
{
	if (opcode >= MRC_OP_WRITE_FIRST && opcode <= MRC_OP_WRITE_ONLY_IMM) {
		*ecn = MRC_ECN_ECT0;
		return (bth_flags & MRC_BTH_FLAG_RTX) ? MRC_DSCP_TRIMMABLE_RETX : MRC_DSCP_TRIMMABLE;
	}
	*ecn = MRC_ECN_NOT_ECT;
	return MRC_DSCP_CONTROL;
}

/* The first IPv6 word (version, traffic class, flow label = low 20 bits of the EV): the
 * inner and the outer header carry the same one (design 3.1). */
static __always_inline __be32 tx_word0(__u32 ev, __u8 tclass)
{
	return bpf_htonl((6u << 28) | ((__u32)tclass << 20) | (ev & MRC_EV_FLOW_LABEL_MASK));
}

/* Write the EV into the inner header (UDP sport, flow label) and set the inner class. The
 * frame is the plain one that mrc_host_egress parsed (Ethernet | IPv6 | UDP | BTH, pulled into
 * the linear area); its view is taken again from skb->data here so that no packet pointer
 * lives across the EV pick, whose loops the verifier would otherwise walk once per view. */
static __always_inline int tx_mark_inner(struct __sk_buff *skb, __u32 ev, __be32 word)
{
	__be16 old_sport, new_sport = bpf_htons(ev >> MRC_EV_SPORT_SHIFT);
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip = data + sizeof(struct ethhdr);
	struct udphdr *udp = (void *)(ip + 1);

	if ((void *)(udp + 1) > data_end)
		return -1;
	old_sport = udp->source;
	__builtin_memcpy(ip, &word, sizeof(word));
	udp->source = new_sport;
	/* RoCEv2 sends a zero UDP checksum; an ordinary socket's checksum must stay valid, and
	 * one that computes to zero goes out as 0xffff (RFC 768; RFC 8200 8.1: zero means none). */
	if (udp->check && bpf_l4_csum_replace(skb, (void *)&udp->check - data, old_sport, new_sport,
					      BPF_F_MARK_MANGLED_0 | sizeof(new_sport)))
		return -1;
	return 0;
}

/* Push the outer Ethernet and IPv6 headers (design 3.1). They are written in place, not
 * built on the stack and copied: after bpf_skb_adjust_room() they are in the linear area,
 * and the rare frame whose are not is pulled first. */
static __always_inline int tx_push_outer(struct __sk_buff *skb, struct host_config *cfg,
					 struct plane_port *pp, __u32 ev, __be32 w0,
					 __u32 dst_leaf, __u32 dst_down, __u16 inner_plen)
{
	__u32 plane = (ev >> MRC_EV_PLANE_SHIFT) & MRC_EV_PLANE_MASK;
	__u32 t1 = (ev >> MRC_EV_T1_SHIFT) & MRC_EV_T1_MASK;
	struct mrc_outer_hdr *hdr;

	if (bpf_skb_adjust_room(skb, MRC_IPV6_LEN, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_ENCAP_L3_IPV6))
		return -1;
	hdr = (void *)(long)skb->data;
	if ((void *)(hdr + 1) > (void *)(long)skb->data_end) {
		if (bpf_skb_pull_data(skb, sizeof(*hdr)))
			return -1;
		hdr = (void *)(long)skb->data;
		if ((void *)(hdr + 1) > (void *)(long)skb->data_end)
			return -1;
	}
	__builtin_memcpy(hdr->eth.h_dest, pp->neigh_mac, ETH_ALEN);
	__builtin_memcpy(hdr->eth.h_source, pp->mac, ETH_ALEN);
	hdr->eth.h_proto = bpf_htons(MRC_ETHERTYPE_IPV6);
	__builtin_memcpy(&hdr->ip6, &w0, sizeof(w0));
	hdr->ip6.payload_len = bpf_htons(inner_plen + MRC_IPV6_LEN);
	hdr->ip6.nexthdr = MRC_IPPROTO_IPV6;
	hdr->ip6.hop_limit = MRC_OUTER_HOP_LIMIT;
	__builtin_memcpy(&hdr->ip6.saddr, pp->port_addr, sizeof(hdr->ip6.saddr));
	path_da((void *)hdr + offsetof(struct mrc_outer_hdr, ip6.daddr), host_load.locator, plane, t1,
		cfg->leaf, dst_leaf, dst_down);
	return 0;
}

/* Whether the frame, grown by `grow` bytes (the outer header in SRv6 mode, 0 in EV-hash
 * mode), exceeds the MTU of the plane port it is redirected to. A veth drops such a frame in
 * its transmit path, after this program has counted it as sent, so it is dropped and counted
 * here instead. bpf_check_mtu() compares skb->len + grow with the port's MTU plus its
 * Ethernet header, in the port's namespace; a GSO skb passes, its segments are checked when
 * it is segmented. A helper error (no such device) is left to the redirect. */
static __always_inline int tx_oversize(struct __sk_buff *skb, __u32 ifindex, __s32 grow)
{
	__u32 mtu_len = 0;

	/* Every IPv6 link carries 1280 bytes (RFC 8200, 5), as the switch also assumes: SACKs,
	 * NACKs, probes and small writes skip the helper call. */
	if (skb->len - MRC_ETH_LEN + grow <= MRC_IPV6_MIN_MTU)
		return 0;
	return bpf_check_mtu(skb, ifindex, &mtu_len, grow, 0) == BPF_MTU_CHK_RET_FRAG_NEEDED;
}

/* EV-hash mode: the packet goes out as is, so only its Ethernet header changes: to the T0
 * port that the plane port faces, from the plane port. */
static __always_inline int tx_set_eth(struct __sk_buff *skb, struct plane_port *pp)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return -1;
	__builtin_memcpy(eth->h_dest, pp->neigh_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, pp->mac, ETH_ALEN);
	return 0;
}

#endif /* MRC_HOST_ENCAP_H */
