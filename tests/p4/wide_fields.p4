// Tests: 128-bit fields (addition with a carry across 64 bits, wrap-around at
// 128 bits, a shift by 64), and >> on a signed int<8> (arithmetic: keeps the
// sign) versus on its bit<8> reinterpretation (logical).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<128> a;
    bit<128> b;
    bit<128> sum;
    bit<128> shl;
    int<8>   s;
    int<8>   sshr;
    bit<8>   ushr;
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
        hdr.h.sum = hdr.h.a + hdr.h.b;
        hdr.h.shl = hdr.h.a << 64;
        hdr.h.sshr = hdr.h.s >> 1;
        hdr.h.ushr = ((bit<8>) hdr.h.s) >> 1;
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
