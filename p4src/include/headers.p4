/* SPDX-License-Identifier: Apache-2.0 */
/*
 * headers.p4: P4_16 header types of the mrckit MRC wire profile (design section 3,
 * docs/wire-format.md). Constants are in mrc_constants.p4, generated from
 * controller/mrckit/wire by `python -m mrckit.wire.gen`.
 *
 * Field names equal the scapy layers' (controller/mrckit/wire/layers.py); the
 * tests test_p4_header_* of tests/unit/wire/test_wire_gen.py check every header's
 * field list, widths and sizes against them. All fields are big-endian, as P4 extracts them.
 */
#ifndef _MRC_HEADERS_P4_
#define _MRC_HEADERS_P4_

#include "mrc_constants.p4"

header ethernet_h {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

/* Outer (uSID DA) and inner (NIC DA) IPv6, 40 B. Traffic class = dscp ++ ecn. */
header ipv6_h {
    bit<4>   version;
    bit<6>   dscp;
    bit<2>   ecn;
    bit<20>  flow_label;
    bit<16>  payload_len;
    bit<8>   next_hdr;
    bit<8>   hop_limit;
    bit<128> src_addr;
    bit<128> dst_addr;
}

/* UDP, 8 B: src_port = EV bits 31..16, dst_port = MRC_UDP_PORT_ROCEV2, checksum 0. */
header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* BTH, 12 B. */
header bth_h {
    bit<8>  opcode;
    bit<1>  solicited;
    bit<1>  migreq;
    bit<2>  padcount;
    bit<4>  version;
    bit<16> pkey;
    bit<8>  resv8;
    bit<24> dqpn;
    bit<1>  ackreq;
    bit<1>  resv1;
    bit<1>  rtx;
    bit<1>  ts;
    bit<4>  resv4;
    bit<24> psn;
}

/* METH, 4 B. */
header meth_h {
    bit<16> rqmsn;
    bit<16> msn;
}

/* TSETH, 4 B, present when bth.ts == 1. */
header tseth_h {
    bit<16> tx_timestamp;
    bit<1>  tsr;
    bit<11> resv11;
    bit<4>  ts_format;
}

/* RETH, 16 B. */
header reth_h {
    bit<64> va;
    bit<32> rkey;
    bit<32> dma_len;
}

/* ImmDt, 4 B. */
header immdt_h {
    bit<32> imm;
}

/* AETH, 4 B (ACK). */
header aeth_h {
    bit<8>  syndrome;
    bit<24> msn;
}

/* SETH, 28 B (SACK). */
header seth_h {
    bit<4>  hdr_type;
    bit<5>  next_hdr;
    bit<2>  m;
    bit<1>  pr;
    bit<4>  resv4;
    bit<16> ack_psn_offset;
    bit<32> ev;
    bit<16> spdcid;
    bit<16> dpdcid;
    bit<8>  resv12;
    bit<24> cack_psn;
    bit<4>  cc_type;
    bit<4>  cc_flags;
    bit<8>  mpr;
    bit<16> sack_offset;
    bit<64> sack_bitmap;
}

/* CC_STATE, 8 B, after the SETH. */
header cc_state_h {
    bit<16> tx_timestamp;
    bit<1>  resv1;
    bit<15> ooo_count;
    bit<1>  restore_cwnd;
    bit<7>  rcv_cwnd_pen;
    bit<24> rcvd_bytes;
}

/* NETH, 20 B (NACK). */
header neth_h {
    bit<4>  hdr_type;
    bit<5>  next_hdr;
    bit<7>  resv7;
    bit<8>  nack_reason;
    bit<8>  vendor_info;
    bit<32> ev;
    bit<16> spdcid;
    bit<16> dpdcid;
    bit<8>  resv12;
    bit<24> nack_psn;
    bit<4>  cc_type;
    bit<4>  cc_flags;
    bit<8>  resv17;
    bit<16> tx_timestamp;
}

/* PETH, 16 B (PROBE). */
header peth_h {
    bit<8>  resv0;
    bit<8>  vendor_info;
    bit<16> probe_id;
    bit<16> resv4;
    bit<16> spdcid;
    bit<16> dpdcid;
    bit<16> tx_timestamp;
    bit<1>  tsr;
    bit<11> resv11;
    bit<4>  ts_format;
    bit<16> resv14;
}

/* ERTH, 16 B (EP_REQ to QP 0x2). */
header erth_h {
    bit<2>  op;
    bit<6>  resv6;
    bit<8>  vendor_info;
    bit<16> probe_id;
    bit<32> port_status_mask;
    bit<32> resp_ev;
    bit<16> tx_timestamp;
    bit<16> resv14;
}

/* EETH, 16 B (EP_RESP). */
header eeth_h {
    bit<2>  op;
    bit<2>  status;
    bit<4>  resv4;
    bit<8>  vendor_info;
    bit<16> probe_id;
    bit<32> req_ev;
    bit<16> req_tx_timestamp;
    bit<16> service_time;
    bit<32> resv12;
}

/* Every header an MRC packet can carry, in wire order (design section 3). */
struct mrc_headers_t {
    ethernet_h ethernet;
    ipv6_h     outer_ipv6;
    ipv6_h     inner_ipv6;
    udp_h      udp;
    bth_h      bth;
    meth_h     meth;
    tseth_h    tseth;
    reth_h     reth;
    immdt_h    immdt;
    aeth_h     aeth;
    seth_h     seth;
    cc_state_h cc_state;
    neth_h     neth;
    peth_h     peth;
    erth_h     erth;
    eeth_h     eeth;
}

#endif /* _MRC_HEADERS_P4_ */
