// Tests: v1model's hash with result, base and max of different widths (the
// type parameters O, T and M are independent): result = base + (hash % max).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> v;
    bit<16> w;
    bit<4> n;
    bit<4> pad;
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
        hash(hdr.h.w, HashAlgorithm.identity, 8w10, { hdr.h.v }, 32w100);
        hash(hdr.h.n, HashAlgorithm.identity, 2w1, { hdr.h.v }, 16w7);
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
