// Tests: list and struct expressions {...}: as initialisers of struct locals,
// in assignments (a header assigned {...} becomes valid and is emitted), as a
// function argument, and in == / != comparisons with structs and headers.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<8> f;
}

header extra_t {
    bit<8> p;
    bit<8> q;
}

struct headers_t {
    h_t h;
    extra_t ex;
}

struct meta_t {
}

struct pair_t {
    bit<8> x;
    bit<8> y;
}

bit<8> sum(in pair_t v) {
    return v.x + v.y;
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
        pair_t p = {hdr.h.a, hdr.h.b};
        pair_t q = {y = 1, x = 2};
        hdr.h.c = sum(p);
        hdr.h.d = sum({x = 10, y = hdr.h.a});
        if (p == {x = 1, y = 2}) {
            hdr.h.e = 1;
        } else if (p == q) {
            hdr.h.e = 2;
        } else {
            hdr.h.e = 3;
        }
        p = {hdr.h.b, hdr.h.a};
        hdr.h.f = p.x;
        extra_t ex = {p = 0xaa, q = hdr.h.a};
        if (ex == {0xaa, 7} && p != q) {
            hdr.h.f = 0x77;
        }
        hdr.ex = ex;
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
        pkt.emit(hdr.ex);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
