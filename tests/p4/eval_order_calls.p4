// Tests: P4_16 evaluation order of side effects inside expressions (spec 8.1, left
// to right): an operand read before a call with an inout argument that writes it
// (x + bump(x) reads the old x), an `in` argument before a later argument that
// calls, and a compound assignment whose l-value indexes a header stack with a
// side-effecting call (the index is evaluated once). Regression pair for issue 37.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> i;
    bit<8> e;
}

header s_t {
    bit<8> v;
}

struct headers_t {
    h_t h;
    s_t[4] s;
}

struct meta_t {
}

bit<8> bump(inout bit<8> x) {
    x = x + 1;
    return x;
}

bit<8> sub(in bit<8> x, in bit<8> y) {
    return x - y;
}

// returns the old value of i (masked to a stack index) and increments i
bit<2> next_index(inout bit<8> i) {
    bit<2> old = i[1:0];
    i = i + 1;
    return old;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        // a = 10: b = 10 + 11 = 21, a = 11
        hdr.h.b = hdr.h.a + bump(hdr.h.a);
        // c = 5: d = sub(5, 6) = 0xff, c = 6
        hdr.h.d = sub(hdr.h.c, bump(hdr.h.c));
        // i = 1: s[1].v |= 0x80 once, i = 2 (not s[1] read, s[2] written, i = 3)
        hdr.s[next_index(hdr.h.i)].v |= 0x80;
        // e: e + bump(e) in an if condition: 3 + 4 = 7
        if (hdr.h.e + bump(hdr.h.e) == 7) {
            hdr.h.e = hdr.h.e + 0x10;
        }
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
        pkt.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
