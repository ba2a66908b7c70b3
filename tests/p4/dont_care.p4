// Tests: _ (DontCare) as an out argument of an action, a function and a
// control applied by its type name: the value is computed and thrown away, the
// other arguments are written as usual.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<4> hi;
    bit<4> lo;
}

struct headers_t {
    h_t h;
}

struct meta_t {
}

bool check(in bit<8> v, out bit<8> doubled) {
    doubled = v + v;
    return v > 10;
}

control Sub(out bit<8> x, inout bit<8> y) {
    apply {
        x = 1;
        y = y + 1;
    }
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
    action split(in bit<8> v, out bit<4> hi, out bit<4> lo) {
        hi = v[7:4];
        lo = v[3:0];
    }
    apply {
        sm.egress_spec = 1;
        split(hdr.h.a, hdr.h.hi, _);
        split(hdr.h.b, _, hdr.h.lo);
        if (check(hdr.h.c, _)) {
            hdr.h.d = 1;
        } else {
            hdr.h.d = 2;
        }
        Sub.apply(_, hdr.h.e);
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
