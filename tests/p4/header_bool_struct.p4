// Tests: bool and struct-typed fields in a header (p4c flattens the struct into
// the header's fields; a bool is one bit on the wire).
#include <core.p4>
#include <v1model.p4>

struct nib_t {
    bit<4> hi;
    bit<4> lo;
}

header h_t {
    bool flag;
    bit<7> x;
    nib_t n;
    bit<8> y;
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
    apply {
        sm.egress_spec = 1;
        if (hdr.h.flag) {
            hdr.h.x = hdr.h.x + 1;
            hdr.h.n.lo = hdr.h.n.hi;
        } else {
            hdr.h.flag = true;
            hdr.h.n = {hi = 1, lo = 2};
        }
        hdr.h.y = (bit<8>) hdr.h.n.hi;
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
