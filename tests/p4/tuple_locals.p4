// Tests: local variables of tuple type (issue 37): initialised from a list, read and
// written by constant index, assigned a list and another tuple, in an action and in
// an apply block, with a bool element.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<16> b;
    bit<8>  c;
    bit<8>  d;
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
    action swap() {
        tuple<bit<8>, bit<16>> t = { hdr.h.a, hdr.h.b };
        t[0] = t[0] + 1;
        hdr.h.a = (bit<8>)t[1];
        hdr.h.b = (bit<16>)t[0];
    }
    apply {
        swap();
        tuple<bit<8>, bool> u = { hdr.h.c, hdr.h.d == 1 };
        tuple<bit<8>, bool> v;
        v = u;
        u = { 8w0x55, false };
        if (v[1]) {
            hdr.h.c = u[0];
        } else {
            hdr.h.c = v[0] + 2;
        }
        hdr.h.d = u[1] ? 8w1 : 8w2;
        sm.egress_spec = 0;
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
