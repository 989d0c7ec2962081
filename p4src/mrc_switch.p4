/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mrc_switch.p4: the MRC uN switch for bmv2 simple_switch(_grpc), P4_16 v1model.
 *
 * It implements design section 4 exactly as the eBPF target (ebpf/mrc_switch.bpf.c) does, with
 * the same P4Runtime names (tables my_usid, usid_fib, port_config; counters rx_port, tx_port,
 * trim_port, ecn_port, drop_port, drop_reason), so the same table entries give the same bytes
 * out for the same bytes in. tests/conformance/ checks that on both targets.
 *
 * Two forwarding models share the program (docs/ecmp-mode.md):
 * - SRv6 uSID mode: Ethernet | outer IPv6 (uSID DA) | inner IPv6 | UDP | BTH ...;
 * - EV-hash (ECMP) mode: Ethernet | IPv6 (NIC DA) | UDP | BTH ..., no outer header. Table
 *   ipv6_fib (LPM on the full DA) spreads it over an ECMP group with the action selector
 *   ecmp_selector, hashed on the EV (flow label and UDP source port; the hash is
 *   mrckit.wire.ecmp). A fabric in SRv6 mode installs no ipv6_fib entries.
 *
 * Ingress: drop checks (not_ipv6, malformed, hop_limit), ipv6_fib, and on its miss the uN shift
 * (RFC 9800 NEXT-C-SID, lblen 32, nflen 16) and the uSID FIB; then hop limit decrement, MAC
 * rewrite from port_config, and the queue class (CONTROL and already-trimmed packets take
 * priority queue 1).
 * Egress: the queue check on enq_qdepth + 1 (bmv2's depth excludes this packet), trimming
 * with truncate() or a congestion drop, and ECN CE on fabric ports.
 *
 * bmv2 must run with `--priority-queues 2` (mrckit.switch.bmv2 does): with one queue per port
 * bmv2 drops packets whose priority is out of range.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/headers.p4"

const bit<32> PORT_COUNT = 512;           /* 9-bit v1model ports */
const bit<32> DROP_REASON_COUNT = MRC_DROP_REASON_COUNT; /* MRC_DROP_NOT_IPV6 .. MRC_DROP_OVERSIZE */
const bit<32> THRESHOLD_NONE = 0xFFFFFFFF; /* a port with no port_config entry: never congested */
const bit<3>  QUEUE_PRIORITY_HIGH = 1;    /* CONTROL class and trimmed packets */
const bit<3>  QUEUE_PRIORITY_LOW = 0;

/* Frame lengths from the start of Ethernet (design section 3). */
const bit<32> OFF_INNER_IPV6 = 54;         /* Ethernet + outer IPv6 */
const bit<32> OFF_UDP = 94;                /* ... + inner IPv6 */
const bit<32> TRIMMED_WRITE_LEN = 134;     /* up to the RETH: + UDP, BTH, METH, RETH */
/* EV-hash mode has no outer header: UDP follows the first IPv6 header. */
const bit<32> OFF_UDP_NO_ENCAP = 54;
const bit<32> TRIMMED_WRITE_LEN_NO_ENCAP = 94;

const bit<32> ECMP_MEMBERS = 4096;         /* ecmp_selector size: members and groups */
const bit<32> ECMP_HASH_BITS = 32;

struct mrc_meta_t {
    bit<48> usid_prefix;      /* outer DA [127:80]: locator and active uSID, the uN/FIB key */
    bit<32> trim_threshold;   /* packets, depth including this packet */
    bit<32> ecn_threshold;    /* packets */
    bit<1>  faces_host;
    bit<1>  dropped;          /* ingress decided to drop; drop_reason says why */
    bit<32> drop_reason;
}

/* Indirect counters of the P4Runtime contract. They are top-level instances because both
 * ingress (drops before queueing) and egress (congestion drops) count into drop_port and
 * drop_reason. bmv2 counts bytes at the ingress length, also for trimmed packets. */
counter(PORT_COUNT, CounterType.packets_and_bytes) rx_port;
counter(PORT_COUNT, CounterType.packets_and_bytes) tx_port;
counter(PORT_COUNT, CounterType.packets_and_bytes) trim_port;
counter(PORT_COUNT, CounterType.packets_and_bytes) ecn_port;
counter(PORT_COUNT, CounterType.packets_and_bytes) drop_port;
counter(DROP_REASON_COUNT, CounterType.packets_and_bytes) drop_reason;

parser MrcParser(packet_in pkt, out mrc_headers_t hdr, inout mrc_meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    /* A frame that ends inside a header leaves that header invalid (bmv2 records the parser
     * error and goes on to ingress), which is how ingress recognises a malformed frame and
     * egress an MRC write without complete headers. */
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            MRC_ETHERTYPE_IPV6: parse_outer_ipv6;
            default: accept;
        }
    }
    state parse_outer_ipv6 {
        pkt.extract(hdr.outer_ipv6);
        transition select(hdr.outer_ipv6.next_hdr) {
            MRC_IPPROTO_IPV6: parse_inner_ipv6;
            MRC_IPPROTO_UDP: parse_udp;      /* EV-hash mode: no inner header */
            default: accept;
        }
    }
    state parse_inner_ipv6 {
        pkt.extract(hdr.inner_ipv6);
        transition select(hdr.inner_ipv6.next_hdr) {
            MRC_IPPROTO_UDP: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            MRC_UDP_PORT_ROCEV2: parse_bth;
            default: accept;
        }
    }
    state parse_bth {
        pkt.extract(hdr.bth);
        transition select(hdr.bth.opcode) {
            MRC_OP_WRITE_FIRST: parse_meth;
            MRC_OP_WRITE_MIDDLE: parse_meth;
            MRC_OP_WRITE_LAST: parse_meth;
            MRC_OP_WRITE_LAST_IMM: parse_meth;
            MRC_OP_WRITE_ONLY: parse_meth;
            MRC_OP_WRITE_ONLY_IMM: parse_meth;
            default: accept;   /* the switch never looks past the BTH of other opcodes */
        }
    }
    state parse_meth {
        pkt.extract(hdr.meth);
        transition select(hdr.bth.ts) {
            1: parse_tseth;
            default: parse_reth;
        }
    }
    state parse_tseth {
        pkt.extract(hdr.tseth);
        transition parse_reth;
    }
    state parse_reth {
        pkt.extract(hdr.reth);
        transition select(hdr.bth.opcode) {
            MRC_OP_WRITE_LAST_IMM: parse_immdt;
            MRC_OP_WRITE_ONLY_IMM: parse_immdt;
            default: accept;
        }
    }
    state parse_immdt {
        pkt.extract(hdr.immdt);
        transition accept;
    }
}

control MrcVerifyChecksum(inout mrc_headers_t hdr, inout mrc_meta_t meta) {
    apply { }   /* IPv6 has no header checksum; MRC's UDP checksum is 0 (design 3.1) */
}

control MrcIngress(inout mrc_headers_t hdr, inout mrc_meta_t meta,
                   inout standard_metadata_t standard_metadata) {

    /* @hidden: internal helpers stay out of the P4Info, whose actions are the contract's. */
    @hidden action drop_at_ingress(bit<32> reason) {
        meta.dropped = 1;
        meta.drop_reason = reason;
        mark_to_drop(standard_metadata);
    }

    /* RFC 9800 NEXT-C-SID with lblen 32, nflen 16: shift the 96 bits after the locator left
     * by one uSID, zero-filled. */
    action usid_un() {
        hdr.outer_ipv6.dst_addr[95:0] = hdr.outer_ipv6.dst_addr[79:0] ++ 16w0;
    }

    action set_egress(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    action drop() {
        drop_at_ingress(MRC_DROP_NO_ROUTE);
    }

    action set_port(bit<48> src_mac, bit<48> dst_mac, bit<1> faces_host,
                    bit<32> trim_threshold, bit<32> ecn_threshold) {
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        meta.faces_host = faces_host;
        meta.trim_threshold = trim_threshold;
        meta.ecn_threshold = ecn_threshold;
    }

    /* The uN/FIB key is the DA slice [127:80], copied to metadata so bmv2 matches it as a
     * plain 48-bit field; @name keeps the P4Runtime name of design section 4. */
    table my_usid {
        key = { meta.usid_prefix : exact @name("hdr.outer_ipv6.dst_addr[127:80]"); }
        actions = { usid_un; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    table usid_fib {
        key = { meta.usid_prefix : exact @name("hdr.outer_ipv6.dst_addr[127:80]"); }
        actions = { set_egress; drop; }
        default_action = drop();
        size = 65536;
    }

    /* EV-hash mode (docs/ecmp-mode.md). bmv2 hashes the selector fields of valid headers,
     * packed MSB first without gaps, with CRC-32 and takes member [hash % group size] in
     * member handle order; mrckit.wire.ecmp is the reference the eBPF target follows. */
    @max_group_size(256)
    action_selector(HashAlgorithm.crc32, ECMP_MEMBERS, ECMP_HASH_BITS) ecmp_selector;

    table ipv6_fib {
        key = {
            hdr.outer_ipv6.dst_addr   : lpm;
            hdr.outer_ipv6.flow_label : selector;
            hdr.udp.src_port          : selector;
        }
        actions = { set_egress; drop; }
        implementation = ecmp_selector;
        size = 65536;
    }

    table port_config {
        key = { standard_metadata.egress_spec : exact; }
        actions = { set_port; NoAction; }
        default_action = NoAction();
        size = PORT_COUNT;
    }

    apply {
        meta.dropped = 0;
        meta.faces_host = 0;
        meta.trim_threshold = THRESHOLD_NONE;
        meta.ecn_threshold = THRESHOLD_NONE;
        rx_port.count((bit<32>) standard_metadata.ingress_port);

        if (!hdr.ethernet.isValid()) {
            drop_at_ingress(MRC_DROP_MALFORMED);
        } else if (hdr.ethernet.ether_type != MRC_ETHERTYPE_IPV6) {
            drop_at_ingress(MRC_DROP_NOT_IPV6);
        } else if (!hdr.outer_ipv6.isValid()) {
            drop_at_ingress(MRC_DROP_MALFORMED);
        } else if (hdr.outer_ipv6.hop_limit <= 1) {
            drop_at_ingress(MRC_DROP_HOP_LIMIT);
        } else if (!ipv6_fib.apply().hit) {   /* a hit's action decides: port or no_route */
            meta.usid_prefix = hdr.outer_ipv6.dst_addr[127:80];
            my_usid.apply();      /* at most one shift per switch */
            meta.usid_prefix = hdr.outer_ipv6.dst_addr[127:80];
            usid_fib.apply();
        }

        if (meta.dropped == 1) {
            drop_port.count((bit<32>) standard_metadata.ingress_port);
            drop_reason.count(meta.drop_reason);
        } else {
            hdr.outer_ipv6.hop_limit = hdr.outer_ipv6.hop_limit - 1;
            port_config.apply();
            bit<6> dscp = hdr.outer_ipv6.dscp;
            if (dscp == MRC_DSCP_CONTROL || dscp == MRC_DSCP_TRIMMED ||
                dscp == MRC_DSCP_TRIMMED_LASTHOP) {
                standard_metadata.priority = QUEUE_PRIORITY_HIGH;
            } else {
                standard_metadata.priority = QUEUE_PRIORITY_LOW;
            }
        }
    }
}

control MrcEgress(inout mrc_headers_t hdr, inout mrc_meta_t meta,
                  inout standard_metadata_t standard_metadata) {

    /* Cut the write after its last header (RETH, or ImmDt, with TSETH when ts = 1) so payload
     * and ICRC go, fix the length fields, and mark the outer DSCP (design section 4.5). Without
     * an inner header (EV-hash mode) UDP follows the first IPv6 header, whose payload is UDP. */
    @hidden action trim(bit<32> frame_len) {
        truncate(frame_len);
        hdr.outer_ipv6.payload_len = (bit<16>) (frame_len - OFF_INNER_IPV6);
        if (hdr.inner_ipv6.isValid()) {
            hdr.inner_ipv6.payload_len = (bit<16>) (frame_len - OFF_UDP);
            hdr.udp.length = (bit<16>) (frame_len - OFF_UDP);
        } else {
            hdr.udp.length = (bit<16>) (frame_len - OFF_UDP_NO_ENCAP);
        }
        if (meta.faces_host == 1) {
            hdr.outer_ipv6.dscp = MRC_DSCP_TRIMMED_LASTHOP;
        } else {
            hdr.outer_ipv6.dscp = MRC_DSCP_TRIMMED;
        }
    }

    apply {
        bit<32> port = (bit<32>) standard_metadata.egress_port;
        bit<32> depth = (bit<32>) standard_metadata.enq_qdepth + 1;   /* counting this packet */
        bit<6> dscp = hdr.outer_ipv6.dscp;
        bool dropped = false;
        bool trimmed = false;

        if (depth >= meta.trim_threshold && dscp != MRC_DSCP_CONTROL &&
            dscp != MRC_DSCP_TRIMMED && dscp != MRC_DSCP_TRIMMED_LASTHOP) {
            bool is_imm = hdr.bth.opcode == MRC_OP_WRITE_LAST_IMM ||
                          hdr.bth.opcode == MRC_OP_WRITE_ONLY_IMM;
            bool complete = hdr.reth.isValid() && (!is_imm || hdr.immdt.isValid());
            if ((dscp == MRC_DSCP_TRIMMABLE || dscp == MRC_DSCP_TRIMMABLE_RETX) && complete) {
                bit<32> frame_len = TRIMMED_WRITE_LEN;
                if (!hdr.inner_ipv6.isValid()) {
                    frame_len = TRIMMED_WRITE_LEN_NO_ENCAP;
                }
                if (hdr.tseth.isValid()) {
                    frame_len = frame_len + (bit<32>) MRC_TSETH_LEN;
                }
                if (hdr.immdt.isValid()) {
                    frame_len = frame_len + (bit<32>) MRC_IMMDT_LEN;
                }
                trim(frame_len);
                trimmed = true;
            } else {
                dropped = true;
            }
        }

        if (dropped) {
            mark_to_drop(standard_metadata);
            drop_port.count(port);
            drop_reason.count(MRC_DROP_CONGESTION);
        } else {
            if (depth >= meta.ecn_threshold && meta.faces_host == 0 &&
                (hdr.outer_ipv6.ecn == MRC_ECN_ECT0 || hdr.outer_ipv6.ecn == MRC_ECN_ECT1)) {
                hdr.outer_ipv6.ecn = MRC_ECN_CE;
                ecn_port.count(port);
            }
            if (trimmed) {
                trim_port.count(port);
            }
            tx_port.count(port);
        }
    }
}

control MrcComputeChecksum(inout mrc_headers_t hdr, inout mrc_meta_t meta) {
    apply { }
}

control MrcDeparser(packet_out pkt, in mrc_headers_t hdr) {
    apply {
        pkt.emit(hdr);   /* struct order is wire order; only valid headers are emitted */
    }
}

V1Switch(MrcParser(), MrcVerifyChecksum(), MrcIngress(), MrcEgress(), MrcComputeChecksum(),
         MrcDeparser()) main;
