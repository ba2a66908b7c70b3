// Tests: / and % on run-time values where p4c accepts them (its StrengthReduction
// folds them away; BMv2 has no division): an unsigned value divided by a power of two
// (a shift), % a power of two (a mask), / 1, % 1, compound /= and %=, 0 / x, and in a
// parser state. p4c refuses any other run-time / or % (unit tests: its wording).
// Issue 37: p4lite refused every run-time / and %.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
}

header o_t {
    bit<8> p;
    bit<8> q;
    bit<8> r;
    bit<8> s;
    bit<8> t;
    bit<8> u;
}

struct headers_t {
    h_t h;
    o_t o;
}

struct meta_t {
    bit<8> x;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        meta.x = hdr.h.a / 8w128;
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
        hdr.o.setValid();
        hdr.o.p = hdr.h.a / 4;
        hdr.o.q = hdr.h.a % 8w16;
        hdr.o.r = (hdr.h.a + hdr.h.b) / 8w1 + hdr.h.b % 8w1;
        hdr.o.s = 8w0 / hdr.h.b;
        hdr.o.t = meta.x;
        hdr.o.u = hdr.h.b / (8w16 + 8w16);
        hdr.h.c /= 2;
        hdr.h.b %= 8w8;
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
        pkt.emit(hdr.o);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
