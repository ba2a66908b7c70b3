// Tests: if/else inside an action body, and a nested if/else-if chain in the
// apply block.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
}

struct headers_t {
    h_t h;
}

struct meta_t {
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
    action classify() {
        if (hdr.h.a > 10) {
            hdr.h.b = 1;
        } else {
            hdr.h.b = 2;
        }
    }
    apply {
        sm.egress_spec = 1;
        classify();
        if (hdr.h.a < 5) {
            hdr.h.c = 1;
        } else if (hdr.h.a < 10) {
            if (hdr.h.a == 7) {
                hdr.h.c = 7;
            } else {
                hdr.h.c = 2;
            }
        } else {
            hdr.h.c = 3;
        }
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
