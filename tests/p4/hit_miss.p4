// Tests: `if (t.apply().hit) ... else ...`, `if (t.apply().miss)`, and a
// second table keyed on a field the first table's action wrote.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> k;
    bit<8> a;
    bit<8> flag;
    bit<8> flag2;
}

struct headers_t { h_t h; }
struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_a(bit<8> v) {
        hdr.h.a = v;
    }
    action set_flag2(bit<8> v) {
        hdr.h.flag2 = v;
    }
    table t {
        key = { hdr.h.k : exact; }
        actions = { set_a; NoAction; }
        default_action = NoAction();
    }
    table t2 {
        key = { hdr.h.a : exact; }
        actions = { set_flag2; NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        if (t.apply().hit) {
            hdr.h.flag = 1;
        } else {
            hdr.h.flag = 2;
        }
        if (t2.apply().miss) {
            hdr.h.flag2 = 3;
        }
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
