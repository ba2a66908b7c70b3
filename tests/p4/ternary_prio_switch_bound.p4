// Tests: a ternary table whose STF entries carry explicit priorities (0 and 503),
// applied before switch (t2.apply().action_run) on a table whose actions bind
// directional parameters in the action list. A packet whose key differs from an
// entry's value only in masked-out bits matches it, like one equal to the value.
// Regression pair for issue 37 (the switch labels of bound actions).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<16> k;
    bit<8> sel;
    bit<8> out1;
    bit<8> out2;
}

struct headers_t {
    h_t h;
}

struct meta_t {
    bit<8> m;
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
    action set1(bit<8> v) {
        hdr.h.out1 = v;
    }
    action add_to(inout bit<8> x, bit<8> v) {
        x = x + v;
    }
    action put(inout bit<8> x) {
        x = 0xaa;
    }
    table t1 {
        key = {
            hdr.h.k: ternary;
        }
        actions = {
            set1;
            NoAction;
        }
        default_action = NoAction();
    }
    table t2 {
        key = {
            hdr.h.sel: exact;
        }
        actions = {
            add_to(meta.m);
            put(hdr.h.out2);
            NoAction;
        }
        default_action = NoAction();
    }
    apply {
        meta.m = 1;
        t1.apply();
        switch (t2.apply().action_run) {
            add_to: {
                hdr.h.out2 = meta.m;
            }
            put: {
                hdr.h.out1 = hdr.h.out1 + 1;
            }
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
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
