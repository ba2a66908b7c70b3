// Tests: constructor parameters (P4_16 14.1) of controls and parsers: two instances of
// one control with different arguments (each instance's action and its table's default
// action see its own values; a bool argument guards a statement), a sub-parser made
// with an expression of its parent's parameter, and V1Switch blocks with arguments.
// Issue 37: p4lite refused control and parser constructor parameters.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
}

struct headers_t {
    h_t h;
}

struct meta_t {
    bit<8> x;
}

parser Mark(packet_in pkt, inout h_t h)(bit<8> mark) {
    state start {
        h.d = mark;
        transition accept;
    }
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm)(bit<8> m) {
    Mark(m + 1) mk;
    state start {
        pkt.extract(hdr.h);
        hdr.h.c = m;
        mk.apply(pkt, hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
    }
}

control Add(inout h_t h)(bit<8> k, bool twice) {
    action add() {
        h.a = h.a + k;
    }
    table t {
        key = {
            h.b: exact;
        }
        actions = {
            add;
            NoAction;
        }
        default_action = add();
    }
    apply {
        t.apply();
        if (twice) {
            h.a = h.a + k;
        }
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t sm)(bit<8> base) {
    Add(8w1, false) one;
    Add(base, true) two;
    apply {
        sm.egress_spec = 1;
        one.apply(hdr.h);
        two.apply(hdr.h);
        hdr.h.b = base;
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

V1Switch(MyParser(8w9), MyVerifyChecksum(), MyIngress(8w16), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
