// Tests: const entries on an exact table and on a ternary table with
// @priority annotations (as in p4c's table-entries-priority-bmv2: the SMALLER
// @priority number wins on BMv2), value &&& mask keysets, and that
// egress_spec left at 0 sends the packet to port 0.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  e;
    bit<16> t;
    bit<8>  result;
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
    action set_port(bit<9> p) {
        sm.egress_spec = p;
    }
    action set_result(bit<8> v) {
        hdr.h.result = v;
    }
    table t_exact {
        key = { hdr.h.e : exact; }
        actions = { set_port; NoAction; }
        const entries = {
            1 : set_port(2);
            2 : set_port(3);
        }
        default_action = NoAction();
    }
    table t_ternary {
        key = { hdr.h.t : ternary; }
        actions = { set_result; }
        default_action = set_result(0xff);
        const entries = {
            0x1111 &&& 0x000f : set_result(1) @priority(3);
            0x2221            : set_result(2) @priority(2);
            0x1181 &&& 0xf00f : set_result(3) @priority(1);
        }
    }
    apply {
        t_exact.apply();
        t_ternary.apply();
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
