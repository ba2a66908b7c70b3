// Tests: controls instantiated and applied from ingress (two instances of one
// control with in/inout parameters, a control with its own table and action),
// `return` inside a sub-control returning only from it, and `exit` inside a
// sub-control ending the whole ingress control.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
}

control Inc(inout bit<8> v, in bit<8> by) {
    apply {
        v = v + by;
    }
}

control Classify(inout h_t h) {
    action set_c(bit<8> x) {
        h.c = x;
    }
    table t {
        key = { h.a : exact; }
        actions = { set_c; NoAction; }
        default_action = NoAction();
    }
    apply {
        t.apply();
        if (h.a == 9) {
            return;
        }
        if (h.a == 8) {
            exit;
        }
        h.d = 0x01;
    }
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
    Inc() inc1;
    Inc() inc2;
    Classify() cls;
    apply {
        sm.egress_spec = 1;
        inc1.apply(hdr.h.b, 1);
        inc2.apply(hdr.h.b, 0x10);
        cls.apply(hdr.h);
        hdr.h.c = hdr.h.c | 0x80;
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
