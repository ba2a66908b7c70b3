// Tests: slices as l-values beyond a plain field: a slice of a slice, a slice
// of a struct local's field, and slices (also of a slice) as out arguments, which
// are copied out into the sliced bits only.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
}

struct headers_t {
    h_t h;
}

struct meta_t {
}

struct pair_t {
    bit<8> x;
    bit<8> y;
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
    action set_lo(out bit<4> lo) {
        lo = 0xc;
    }
    apply {
        sm.egress_spec = 1;
        hdr.h.a[7:4][1:0] = 3;
        pair_t p = {hdr.h.b, 0};
        p.x[3:0] = 0xf;
        hdr.h.c = p.x;
        set_lo(hdr.h.d[3:0]);
        set_lo(hdr.h.e[7:4][3:0]);
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
