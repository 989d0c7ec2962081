// A user's own P4 program for bmv2 (v1model): each ingress port forwards to the port its table
// entry names, and an indirect counter counts packets per ingress port. Compiled by the example's
// test with p4c-bm2-ss; mrckit.testing runs it on bmv2 and writes its table by P4 names.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers_t { ethernet_t ethernet; }
struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.ethernet); transition accept; }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    counter(512, CounterType.packets_and_bytes) rx;

    action set_egress(bit<9> port) { std.egress_spec = port; }
    action drop() { mark_to_drop(std); }

    table port_fwd {
        key = { std.ingress_port: exact; }
        actions = { set_egress; drop; }
        default_action = drop();
    }

    apply {
        rx.count((bit<32>) std.ingress_port);
        port_fwd.apply();
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.ethernet); } }

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
