// Tests: compound assignment (a op= b is a = a op b, wrapping at the width;
// |+|= and |-|= saturate) and if/else branches that are single statements without
// braces (an assignment, a method call) in an apply block and in an action.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<8> f;
    bit<8> g;
    bit<8> h;
    bit<8> i;
    bit<8> j;
    bit<8> k;
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
    action branches() {
        if (hdr.h.k == 1)
            hdr.h.k = 10;
        else
            hdr.h.k = 20;
    }
    apply {
        sm.egress_spec = 1;
        hdr.h.a += 5;
        hdr.h.b -= 3;
        hdr.h.c *= 3;
        hdr.h.d &= 0x0f;
        hdr.h.e |= 0x81;
        hdr.h.f ^= 0xff;
        hdr.h.g <<= 2;
        hdr.h.h >>= 3;
        hdr.h.i |+|= 0x80;
        hdr.h.j |-|= 0x10;
        branches();
        if (hdr.h.a == 0)
            mark_to_drop(sm);
        else if (hdr.h.a == 1)
            hdr.h.setInvalid();
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
