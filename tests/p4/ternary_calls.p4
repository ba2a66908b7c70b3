// Tests: function calls with side effects in a branch of ?: (P4_16 8.5.1: only the
// taken branch is evaluated, as p4c's SideEffectOrdering lowers it to an if): in an
// action's assignment whose left operand the call writes, in a bool branch of an if
// condition of the apply block, and nested (a call in the inner ?:'s condition and in
// its branch). Issue 37: p4lite refused them.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> n;
    bit<8> r;
    bit<8> s;
    bit<8> t;
}

struct headers_t {
    h_t h;
}

struct meta_t {
}

bit<8> bump(inout bit<8> n, in bit<8> x) {
    n = n + 1;
    return x + 1;
}

bit<8> twice(inout bit<8> n, in bit<8> x) {
    n = n + 0x10;
    return x + x;
}

bool is_big(inout bit<8> n, in bit<8> x) {
    n = n + 0x40;
    return x > 100;
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
    action pick() {
        // the left b is read before the branch's call writes b
        hdr.h.r = hdr.h.b + (hdr.h.a == 0 ? bump(hdr.h.b, hdr.h.a) : twice(hdr.h.n, hdr.h.a));
    }
    apply {
        pick();
        if (hdr.h.a > 5 ? is_big(hdr.h.n, hdr.h.b) : hdr.h.b == 7) {
            hdr.h.s = 1;
        } else {
            hdr.h.s = 2;
        }
        hdr.h.t = hdr.h.a[0:0] == 1 ? (is_big(hdr.h.n, hdr.h.a) ? 8w0xAA : bump(hdr.h.n, hdr.h.b))
                                    : hdr.h.n;
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
