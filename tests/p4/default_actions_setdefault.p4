// Same program as default_actions.p4 (a copy, as every tests/p4 pair is one .p4 and
// one .stf): default_actions_setdefault.stf changes t1's default before any packet.
// Tests: @name on a table and an action (STF must use the new names),
// default_action with an argument changed by setdefault, @defaultonly and
// @tableonly actions, and const default_action = NoAction().
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> k;
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
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
    @name("renamed_action") action set_a(bit<8> v) {
        hdr.h.a = v;
    }
    action only_default(bit<8> v) {
        hdr.h.b = v;
    }
    action tbl_only(bit<8> v) {
        hdr.h.c = v;
    }
    action set_d(bit<8> v) {
        hdr.h.d = v;
    }
    @name("tab_one") table t1 {
        key = { hdr.h.k : exact; }
        actions = {
            set_a;
            @defaultonly only_default;
            @tableonly tbl_only;
        }
        default_action = only_default(0x11);
    }
    table t2 {
        key = { hdr.h.k : exact; }
        actions = { set_d; NoAction; }
        const default_action = NoAction();
    }
    apply {
        sm.egress_spec = 4;
        t1.apply();
        t2.apply();
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
