// Tests: switch (t.apply().action_run) with action labels and default,
// including a miss running the default action, a branch setting the port,
// and two labels sharing one block (a4: a2: { ... }).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> k;
    bit<8> x;
    bit<8> res;
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
    action a1() { hdr.h.x = 0xa1; }
    action a2() { hdr.h.x = 0xa2; }
    action a3() { hdr.h.x = 0xa3; }
    action a4() { hdr.h.x = 0xa4; }
    table t {
        key = { hdr.h.k : exact; }
        actions = { a1; a2; a3; a4; }
        default_action = a3();
    }
    apply {
        sm.egress_spec = 1;
        switch (t.apply().action_run) {
            a1: {
                hdr.h.res = 1;
            }
            a4:
            a2: {
                hdr.h.res = 2;
                sm.egress_spec = 2;
            }
            default: {
                hdr.h.res = 9;
            }
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
