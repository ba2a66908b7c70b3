// Tests: actions with directional parameters (inout, in, out) called from the
// apply block, and an action with a directional argument bound in the
// table's action list plus a control-plane parameter.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> s;
    bit<8> c;
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
    action add_to(inout bit<8> x, in bit<8> y) {
        x = x + y;
    }
    action get_sum(out bit<8> r, in bit<8> p, in bit<8> q) {
        r = p + q;
    }
    action mix(inout bit<8> x, bit<8> v) {
        x = x ^ v;
    }
    table t {
        key = { hdr.h.b : exact; }
        actions = { mix(hdr.h.c); NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        add_to(hdr.h.a, 5);
        get_sum(hdr.h.s, hdr.h.a, hdr.h.b);
        t.apply();
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
