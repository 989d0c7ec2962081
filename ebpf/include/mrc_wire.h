/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mrc_wire.h: the C view of the mrckit MRC wire profile (design section 3,
 * docs/wire-format.md).
 *
 * Constants come from mrc_wire_gen.h, generated from controller/mrckit/wire by
 * `python -m mrckit.wire.gen`. The structs below are hand-written; the test
 * tests/unit/wire/test_wire_c_layout.py compiles this header with the host gcc and
 * checks every sizeof and offsetof against the Python scapy layers, and the
 * _Static_asserts at the end tie each size to its generated length constant.
 *
 * Every multi-byte field is big-endian (__be16/__be32/__be64); 24-bit fields
 * are __u8[3], read and written with mrc_get24()/mrc_put24(). Fields that pack
 * several bit fields are named after all of them, with the layout in a comment
 * and the masks/shifts in mrc_wire_gen.h. The ICRC is the one little-endian
 * field (least significant byte first) and is not a struct member: it is the
 * last 4 bytes of an untrimmed packet.
 *
 * Usable from BPF programs (clang -target bpf) and from host C (gcc).
 */
#ifndef MRC_WIRE_H
#define MRC_WIRE_H

#include <linux/types.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

#include "mrc_wire_gen.h"

#define MRC_PACKED __attribute__((packed))

/* Outer and inner IPv6 headers are struct ipv6hdr (<linux/ipv6.h>); UDP is
 * struct udphdr (<linux/udp.h>); Ethernet is struct ethhdr. */

/* BTH, 12 B: RoCE layout with MRC opcodes and byte-8 flags. */
struct mrc_bth {
	__u8 opcode;            /* MRC_OP_* */
	__u8 se_m_pad_tver;     /* SE(7) M(6) PadCnt(5..4) TVer(3..0) */
	__be16 pkey;
	__u8 resv8;             /* reserved; masked to 0xff in the ICRC */
	__u8 dqpn[3];           /* destination QP; MRC_QP_ENDPOINT_OPS for EP ops */
	__u8 flags;             /* AckReq(7) r(6) rtx(5) ts(4) reserved(3..0) */
	__u8 psn[3];
} MRC_PACKED;

/* METH, 4 B, in every data packet. */
struct mrc_meth {
	__be16 rqmsn;
	__be16 msn;
} MRC_PACKED;

/* TSETH, 4 B, after the METH when BTH ts = 1. */
struct mrc_tseth {
	__be16 tx_timestamp;    /* units of 1.024 us, wrapping */
	__be16 tsr_format;      /* TSR(15) reserved(14..4) format(3..0) = MRC_TSETH_FORMAT */
} MRC_PACKED;

/* RETH, 16 B, in every data packet. */
struct mrc_reth {
	__be64 va;
	__be32 rkey;
	__be32 dma_len;
} MRC_PACKED;

/* ImmDt, 4 B, for WRITE_LAST_IMM and WRITE_ONLY_IMM. */
struct mrc_immdt {
	__be32 imm;
} MRC_PACKED;

/* AETH, 4 B, for ACK. */
struct mrc_aeth {
	__u8 syndrome;
	__u8 msn[3];
} MRC_PACKED;

/* SETH, 28 B, for SACK; followed by CC_STATE. */
struct mrc_seth {
	__be16 type_next_m_pr;  /* type(15..12) next(11..7) M(6..5) PR(4) reserved(3..0) */
	__be16 ack_psn_offset;  /* signed, relative to cack_psn */
	__be32 ev;              /* the echoed EV (the spec's "entropy") */
	__be16 spdcid;
	__be16 dpdcid;
	__u8 resv12;
	__u8 cack_psn[3];
	__u8 cc_type_flags;     /* cc_type(7..4) cc_flags(3..0) */
	__u8 mpr;               /* units of MRC_MPR_UNIT_PSNS */
	__be16 sack_offset;     /* signed, relative to cack_psn */
	__be64 sack_bitmap;     /* bit 63 = cack_psn + sack_offset + 0 */
} MRC_PACKED;

/* CC_STATE, 8 B, after the SETH. */
struct mrc_cc_state {
	__be16 tx_timestamp;    /* reflected from the TSETH */
	__be16 ooo_count;       /* reserved(15) ooo_count(14..0) */
	__u8 restore_pen;       /* restore_cwnd(7) rcv_cwnd_pen(6..0) */
	__u8 rcvd_bytes[3];     /* units of MRC_RCVD_BYTES_UNIT */
} MRC_PACKED;

/* NETH, 20 B, for NACK. */
struct mrc_neth {
	__be16 type_next;       /* type(15..12) next(11..7) reserved(6..0) */
	__u8 nack_reason;       /* MRC_NACK_* */
	__u8 vendor_info;
	__be32 ev;              /* the echoed EV (the spec's "entropy") */
	__be16 spdcid;
	__be16 dpdcid;
	__u8 resv12;
	__u8 nack_psn[3];
	__u8 cc_type_flags;     /* cc_type(7..4) cc_flags(3..0) */
	__u8 resv17;
	__be16 tx_timestamp;
} MRC_PACKED;

/* PETH, 16 B, for PROBE (answered by a SACK with PR = 1). */
struct mrc_peth {
	__u8 resv0;
	__u8 vendor_info;
	__be16 probe_id;
	__be16 resv4;
	__be16 spdcid;
	__be16 dpdcid;
	__be16 tx_timestamp;
	__be16 tsr_format;      /* TSR(15) reserved(14..4) format(3..0) */
	__be16 resv14;
} MRC_PACKED;

/* ERTH, 16 B, for EP_REQ to QP 0x2. */
struct mrc_erth {
	__u8 op;                /* op(7..6) reserved(5..0); MRC_EP_OP_* */
	__u8 vendor_info;
	__be16 probe_id;
	__be32 port_status_mask; /* one bit per plane port of the sender, 1 = up */
	__be32 resp_ev;         /* the EV the answer must use */
	__be16 tx_timestamp;
	__be16 resv14;
} MRC_PACKED;

/* EETH, 16 B, for EP_RESP. */
struct mrc_eeth {
	__u8 op_status;         /* op(7..6) status(5..4) reserved(3..0) */
	__u8 vendor_info;
	__be16 probe_id;
	__be32 req_ev;          /* the request's EV, echoed */
	__be16 req_tx_timestamp; /* the request's tx_timestamp, echoed */
	__be16 service_time;    /* units of 1.024 us */
	__be32 resv12;
} MRC_PACKED;

/* The uSID container of design 3.3: an IPv6 DA read as a 32-bit locator and six 16-bit
 * uSIDs, active one first. Overlays a struct in6_addr. */
struct mrc_usid_container {
	__be32 locator;
	__be16 usid[MRC_MAX_USIDS_IN_CONTAINER];
};

/* The outer headers that SRv6 mode pushes (design section 3.1): Ethernet and IPv6. */
struct mrc_outer_hdr {
	struct ethhdr eth;
	struct ipv6hdr ip6;
} MRC_PACKED;

/* An mrckit host address (design 3.3): 2001:db8:K:L::H, K = MRC_NIC_HEXTET for a NIC,
 * MRC_PORT_HEXTET_BASE + plane for a port; H = downlink + 1. Overlays a struct in6_addr. */
struct mrc_host_addr {
	__be32 prefix;          /* MRC_ADDR_PREFIX */
	__be16 kind;            /* K */
	__be16 leaf;            /* L */
	__be32 zero_hi;
	__be16 zero_lo;
	__be16 host;            /* H */
};

/* Offsets in an encapsulated frame: Ethernet | outer IPv6 | inner IPv6 | UDP | BTH
 * (design section 3.1). Without the outer header, subtract MRC_ENCAP_LEN. */
#define MRC_OFF_OUTER MRC_ETH_LEN
#define MRC_OFF_INNER (MRC_OFF_OUTER + MRC_IPV6_LEN)
#define MRC_OFF_UDP (MRC_OFF_INNER + MRC_IPV6_LEN)
#define MRC_OFF_BTH (MRC_OFF_UDP + MRC_UDP_LEN)
#define MRC_OFF_AFTER_BTH (MRC_OFF_BTH + MRC_BTH_LEN)

/* The echoed EV of a SACK or a NACK sits 4 bytes after the BTH. */
#define MRC_ECHO_EV_OFFSET 4

static inline __attribute__((always_inline)) __u32 mrc_get24(const __u8 b[3])
{
	return ((__u32)b[0] << 16) | ((__u32)b[1] << 8) | b[2];
}

static inline __attribute__((always_inline)) void mrc_put24(__u8 b[3], __u32 v)
{
	b[0] = (v >> 16) & 0xff;
	b[1] = (v >> 8) & 0xff;
	b[2] = v & 0xff;
}

/* Traffic class helpers for struct ipv6hdr (priority:4 | flow_lbl[0] high nibble). */
static inline __attribute__((always_inline)) __u8 mrc_ipv6_tclass(const struct ipv6hdr *ip6)
{
	return (ip6->priority << 4) | (ip6->flow_lbl[0] >> 4);
}

static inline __attribute__((always_inline)) void mrc_ipv6_set_tclass(struct ipv6hdr *ip6, __u8 tc)
{
	ip6->priority = tc >> 4;
	ip6->flow_lbl[0] = (__u8)((tc << 4) | (ip6->flow_lbl[0] & 0x0f));
}

static inline __attribute__((always_inline)) __u32 mrc_ipv6_flow_label(const struct ipv6hdr *ip6)
{
	return ((__u32)(ip6->flow_lbl[0] & 0x0f) << 16) | ((__u32)ip6->flow_lbl[1] << 8) | ip6->flow_lbl[2];
}

static inline __attribute__((always_inline)) void mrc_ipv6_set_flow_label(struct ipv6hdr *ip6, __u32 fl)
{
	ip6->flow_lbl[0] = (__u8)((ip6->flow_lbl[0] & 0xf0) | ((fl >> 16) & 0x0f));
	ip6->flow_lbl[1] = (fl >> 8) & 0xff;
	ip6->flow_lbl[2] = fl & 0xff;
}

/* EV codecs (design section 3.3): plane(31..28) T1(27..20) salt(19..0). */
#define MRC_EV_PLANE(ev) (((ev) >> MRC_EV_PLANE_SHIFT) & MRC_EV_PLANE_MASK)
#define MRC_EV_T1(ev) (((ev) >> MRC_EV_T1_SHIFT) & MRC_EV_T1_MASK)
#define MRC_EV_SALT(ev) ((ev) & MRC_EV_SALT_MASK)
#define MRC_EV_SPORT(ev) ((__u16)((ev) >> MRC_EV_SPORT_SHIFT))
#define MRC_EV_FLOW_LABEL(ev) ((ev) & MRC_EV_FLOW_LABEL_MASK)
#define MRC_EV_FROM_WIRE(sport, fl) ((((__u32)(sport)) << MRC_EV_SPORT_SHIFT) | ((fl) & MRC_EV_FLOW_LABEL_MASK))

/* uSID codec: plane(15..12) role(11..10) index(9..0). */
#define MRC_USID(plane, role, index) \
	((__u16)(((plane) << MRC_USID_PLANE_SHIFT) | ((role) << MRC_USID_ROLE_SHIFT) | ((index) & MRC_USID_INDEX_MASK)))

_Static_assert(sizeof(struct mrc_bth) == MRC_BTH_LEN, "BTH size");
_Static_assert(sizeof(struct mrc_meth) == MRC_METH_LEN, "METH size");
_Static_assert(sizeof(struct mrc_tseth) == MRC_TSETH_LEN, "TSETH size");
_Static_assert(sizeof(struct mrc_reth) == MRC_RETH_LEN, "RETH size");
_Static_assert(sizeof(struct mrc_immdt) == MRC_IMMDT_LEN, "ImmDt size");
_Static_assert(sizeof(struct mrc_aeth) == MRC_AETH_LEN, "AETH size");
_Static_assert(sizeof(struct mrc_seth) == MRC_SETH_LEN, "SETH size");
_Static_assert(sizeof(struct mrc_cc_state) == MRC_CC_STATE_LEN, "CC_STATE size");
_Static_assert(sizeof(struct mrc_neth) == MRC_NETH_LEN, "NETH size");
_Static_assert(sizeof(struct mrc_peth) == MRC_PETH_LEN, "PETH size");
_Static_assert(sizeof(struct mrc_erth) == MRC_ERTH_LEN, "ERTH size");
_Static_assert(sizeof(struct mrc_eeth) == MRC_EETH_LEN, "EETH size");
_Static_assert(sizeof(struct ipv6hdr) == MRC_IPV6_LEN, "IPv6 size");
_Static_assert(sizeof(struct mrc_usid_container) == 16, "uSID container size");
_Static_assert(sizeof(struct mrc_host_addr) == 16, "host address size");
_Static_assert(sizeof(struct mrc_outer_hdr) == MRC_ETH_LEN + MRC_IPV6_LEN, "outer headers size");
_Static_assert(sizeof(struct udphdr) == MRC_UDP_LEN, "UDP size");
_Static_assert(sizeof(struct ethhdr) == MRC_ETH_LEN, "Ethernet size");
_Static_assert(__builtin_offsetof(struct mrc_seth, ev) == MRC_ECHO_EV_OFFSET, "SETH EV offset");
_Static_assert(__builtin_offsetof(struct mrc_neth, ev) == MRC_ECHO_EV_OFFSET, "NETH EV offset");

#endif /* MRC_WIRE_H */
