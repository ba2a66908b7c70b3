// Tests: saturating |+| and |-| on unsigned bit<8> and signed int<8>,
// clamping at both ends.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> usat_add;
    bit<8> usat_sub;
    int<8> sa;
    int<8> sb;
    int<8> ssat_add;
    int<8> ssat_sub;
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
        sm.egress_spec = 1;
        hdr.h.usat_add = hdr.h.a |+| hdr.h.b;
        hdr.h.usat_sub = hdr.h.a |-| hdr.h.b;
        hdr.h.ssat_add = hdr.h.sa |+| hdr.h.sb;
        hdr.h.ssat_sub = hdr.h.sa |-| hdr.h.sb;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
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
