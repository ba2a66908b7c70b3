// Tests: parser select on two keys with exact values, a value &&& mask, ranges
// (lo .. hi), the don't-care `_`, default, first-match order, a second select
// on one masked key, and metadata assigned in parser states.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> which;
}

struct headers_t {
    h_t h;
}

struct meta_t {
    bit<8> which;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.a, hdr.h.b) {
            (0x01, 0x02): s_exact;
            (0x10 &&& 0xf0, _): s_mask;
            (0x20 .. 0x2f, 0x00 .. 0x0f): s_range;
            (_, 0xff): s_b;
            default: s_default;
        }
    }
    state s_exact {
        meta.which = 1;
        transition accept;
    }
    state s_mask {
        meta.which = 2;
        transition accept;
    }
    state s_range {
        meta.which = 3;
        transition accept;
    }
    state s_b {
        meta.which = 4;
        transition accept;
    }
    state s_default {
        transition select(hdr.h.b) {
            0x80 &&& 0x80: s_high;
            default: s_low;
        }
    }
    state s_low {
        meta.which = 5;
        transition accept;
    }
    state s_high {
        meta.which = 6;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.h.which = meta.which;
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
