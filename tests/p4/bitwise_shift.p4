// Tests: & | ^ ~, shifts by constants and by packet values (including a
// shift amount larger than the width, which gives 0), on bit<8> and bit<16>.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<8>  and_r;
    bit<8>  or_r;
    bit<8>  xor_r;
    bit<8>  not_r;
    bit<8>  shl;
    bit<8>  shr;
    bit<8>  shl_var;
    bit<8>  shr_var;
    bit<16> w;
    bit<16> wshl;
    bit<16> wshr;
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
        hdr.h.and_r = hdr.h.a & hdr.h.b;
        hdr.h.or_r = hdr.h.a | hdr.h.b;
        hdr.h.xor_r = hdr.h.a ^ hdr.h.b;
        hdr.h.not_r = ~hdr.h.a;
        hdr.h.shl = hdr.h.a << 3;
        hdr.h.shr = hdr.h.a >> 2;
        hdr.h.shl_var = hdr.h.a << (hdr.h.b & 7);
        hdr.h.shr_var = hdr.h.a >> hdr.h.b;
        hdr.h.wshl = hdr.h.w << 1;
        hdr.h.wshr = hdr.h.w >> 15;
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
