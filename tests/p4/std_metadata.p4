// Tests: standard_metadata fields: ingress_port and packet_length in ingress,
// egress_port and instance_type in egress, arithmetic on egress_spec; an
// ingress port of 510 makes egress_spec 511, the drop port.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<16> in_port;
    bit<32> len;
    bit<16> out_port;
    bit<8>  inst;
}

struct headers_t {
    h_t h;
}

struct meta_t {
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.in_port = (bit<16>) sm.ingress_port;
        hdr.h.len = sm.packet_length;
        sm.egress_spec = sm.ingress_port + 1;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.out_port = (bit<16>) sm.egress_port;
        hdr.h.inst = (bit<8>) sm.instance_type;
    }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
    }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
