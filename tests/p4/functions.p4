// Tests: P4_16 functions (p4c inlines them): a result used inside expressions,
// nested calls, an early return, a void function with inout parameters called from
// the apply block, a call in an if condition, and return in an action that another
// action calls (the caller goes on after it).
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
}

struct headers_t {
    h_t h;
}

struct meta_t {
}

bit<8> max8(in bit<8> a, in bit<8> b) {
    if (a > b) {
        return a;
    }
    return b;
}

bit<8> twice_max(in bit<8> a, in bit<8> b) {
    return max8(a, b) + max8(b, a);
}

void swap(inout bit<8> a, inout bit<8> b) {
    bit<8> t = a;
    a = b;
    b = t;
}

bool is_small(in bit<8> v) {
    return v < 16;
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
    action early(inout bit<8> x) {
        if (x == 0) {
            return;
        }
        x = x - 1;
    }
    action calls_early() {
        hdr.h.f = hdr.h.f + 1;
        early(hdr.h.e);
        hdr.h.g = hdr.h.g + 4;
    }
    action compute() {
        hdr.h.c = twice_max(hdr.h.a, hdr.h.b);
        hdr.h.d = max8(hdr.h.a, 8w100) |+| 1;
    }
    apply {
        sm.egress_spec = 1;
        compute();
        swap(hdr.h.a, hdr.h.b);
        if (is_small(hdr.h.a))
            hdr.h.g = 1;
        else
            hdr.h.g = 2;
        calls_early();
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
