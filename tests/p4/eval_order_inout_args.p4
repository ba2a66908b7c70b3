// Tests: P4_16 evaluation order of inout arguments (spec 6.8, 8.1): an inout argument
// is copied in when it is evaluated, left to right, so in mix(x, mix(x, k)) the outer
// call gets x's old value even though the inner call, evaluated later, writes x; its
// copy-out comes last. As an expression and as a statement. Regression pair for issue
// 37 (found by the fuzzer, seed 1042).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
}

struct headers_t {
    h_t h;
}

struct meta_t {
}

bit<8> mix(inout bit<8> x, in bit<8> y) {
    x = x ^ y;
    return x;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.b = mix(hdr.h.a, mix(hdr.h.a, 0x0f));
        mix(hdr.h.c, mix(hdr.h.c, 0xf0));
        sm.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
