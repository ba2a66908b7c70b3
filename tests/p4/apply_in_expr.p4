// Tests: t.apply().hit and .miss inside expressions (issue 37): on the right of
// || and &&, in a ?: condition and in a ?: branch, as a function's argument, and
// after an operand the table's action writes. Each table's action leaves a trace in
// the packet, so an apply the short-circuit or the untaken branch skips shows, and
// so does an operand read after the apply instead of before it (left to right).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> k;
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<8> f;
    bit<8> g;
    bit<8> h;
}

struct headers_t { h_t h; }
struct meta_t { }

bit<8> twice(in bit<8> x) {
    return x + x;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action bump() { hdr.h.a = hdr.h.a + 1; }
    action set_b(bit<8> v) { hdr.h.b = v; }
    action set_a(bit<8> v) { hdr.h.a = v; }
    action set_g(bit<8> v) { hdr.h.g = v; }
    action hit_only() { }
    table t1 {
        key = { hdr.h.k : exact; }
        actions = { bump; NoAction; }
        default_action = NoAction();
    }
    table t2 {
        key = { hdr.h.k : exact; }
        actions = { set_b; NoAction; }
        default_action = NoAction();
    }
    table t3 {
        key = { hdr.h.k : exact; }
        actions = { set_a; NoAction; }
        default_action = NoAction();
    }
    table t4 {
        key = { hdr.h.k : exact; }
        actions = { set_g; NoAction; }
        default_action = NoAction();
    }
    table t5 {
        key = { hdr.h.k : exact; }
        actions = { hit_only; NoAction; }
        default_action = NoAction();
    }
    apply {
        bool x = hdr.h.k == 1 || t1.apply().hit;
        if (x) {
            hdr.h.c = 1;
        }
        hdr.h.d = (hdr.h.k != 2 && t2.apply().miss) ? 8w5 : 8w6;
        hdr.h.e = hdr.h.a + (t3.apply().hit ? 8w10 : 8w20);
        hdr.h.f = hdr.h.k == 3 ? (t4.apply().hit ? 8w1 : 8w2) : 8w3;
        hdr.h.h = twice(t5.apply().hit ? 8w7 : 8w8);
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
