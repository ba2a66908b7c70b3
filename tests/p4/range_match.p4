// Tests: a range-match table (const entries: p4c's STF has no syntax for range
// values) with overlapping ranges resolved by entry order (the first listed wins),
// range end points, and the const default action taking a compile-time argument
// on a miss.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<16> b;
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
    action set_result(bit<8> v) {
        hdr.h.result = v;
    }
    table t {
        key = {
            hdr.h.a : range;
            hdr.h.b : exact;
        }
        actions = { set_result; }
        const default_action = set_result(0xee);
        const entries = {
            (15 .. 30, 0x0001) : set_result(2);
            (10 .. 20, 0x0001) : set_result(1);
            (0 .. 255, 0x0001) : set_result(9);
        }
    }
    apply {
        sm.egress_spec = 2;
        t.apply();
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
