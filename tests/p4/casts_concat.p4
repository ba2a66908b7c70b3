// Tests: casts (truncation bit<16> -> bit<8>, sign extension int<8> ->
// int<16>, reinterpretation int<8> -> bit<8> -> bit<16>, bool -> bit<1>),
// concatenation ++, width-annotated literals (4w0xf, 8s100), signed wrap-around.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<16> w;
    bit<8>  lo;
    bit<8>  hi;
    bit<32> cat;
    int<8>  s;
    int<16> sext;
    bit<16> zext;
    bit<8>  lit;
    bit<8>  bool_bit;
    int<8>  sdiff;
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
        hdr.h.lo = (bit<8>) hdr.h.w;
        hdr.h.hi = (bit<8>) (hdr.h.w >> 8);
        hdr.h.cat = hdr.h.hi ++ hdr.h.lo ++ hdr.h.w;
        hdr.h.sext = (int<16>) hdr.h.s;
        hdr.h.zext = (bit<16>) ((bit<8>) hdr.h.s);
        hdr.h.lit = (4w0xf ++ 4w0x3) ^ hdr.h.lo;
        hdr.h.bool_bit = (bit<8>) ((bit<1>) (hdr.h.w == 16w0x1234));
        hdr.h.sdiff = hdr.h.s - 8s100;
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
