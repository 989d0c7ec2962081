// SPDX-License-Identifier: GPL-2.0
/*
 * mrckit host dataplane (design section 5): the NIC half of MRC on Linux.
 *
 * - SEC("tc") mrc_host_egress: tc egress on the host's virtual NIC device (one end of a veth
 *   pair that carries the NIC address). For every RoCEv2 packet from the local NIC address it
 *   picks a GOOD EV of the destination's EV set, writes the EV into the UDP source port and the
 *   flow label, pushes the outer IPv6 header (uSID DA = path derived from the EV and the
 *   destination NIC address, design 3.3), rewrites the MACs and redirects to the plane's port.
 * - SEC("xdp") mrc_host_ingress: XDP on every plane port. Decapsulates packets for the local
 *   NIC address (copying DSCP, CE and flow label inward, design 3.1 / RFC 6040), redirects QP 0x2
 *   traffic to the agent's UDP port and applies SACK/NACK feedback to the EV state.
 *
 * EV-hash mode (host_load.mode == HOST_MODE_ECMP, a load-time setting, docs/host.md): the switches
 * hash the EV instead of following a uSID path. tc egress picks the EV exactly as above, writes
 * it into the flow label and UDP source port of the packet as is, pushes no outer header, sets
 * the MACs and redirects to the EV's plane port; XDP ingress applies the same SACK/NACK and
 * QP 0x2 handling to the plain packets and decapsulates nothing. Denied links do not apply.
 *
 * The per-peer EV set lives in an LRU map seeded from the template on the first packet to a
 * peer; the agent (controller/mrckit/host) owns the maps and mirrors these structs with ctypes.
 *
 * Loss retirement (MRC path health, mrc-facts section 1; docs/host.md): tc egress records the
 * EV of every data packet by (peer, PSN) in tx_records (direct-mapped); XDP ingress marks a record when a NACK
 * echoes that PSN and EV (the packet reached the receiver, trimmed or refused); a retransmission
 * of a PSN whose record is unmarked means its EV lost the packet outright, so tc egress makes
 * that EV ASSUMED_BAD before it picks one for the retransmission.
 *
 * Layout (as Katran splits its balancer): ebpf/host/maps.h (structs and maps), stats.h
 * (counters, events, transmit accounting), evset.h (EV set and pick), encap.h (tc egress
 * rewriting), loss.h (loss retirement), feedback.h (SACK/NACK), decap.h (XDP ingress MRC
 * handling), one program file per attach point: tc_egress.c and xdp_ingress.c, and
 * slot_write.c, the syscall program through which the agent changes a live slot. They form
 * one object so that the programs share the maps.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "host/tc_egress.c"
#include "host/xdp_ingress.c"
#include "host/slot_write.c"

char LICENSE[] SEC("license") = "GPL";
