// Tests: bit slices as r-values (w[11:4], a[7:4]) and as l-values
// (b[7:4] = ..., x[31:24] = ..., a one-bit slice w[15:15] = 1).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<16> w;
    bit<8>  a;
    bit<8>  b;
    bit<32> x;
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
        hdr.h.a = hdr.h.w[11:4];
        hdr.h.b[7:4] = hdr.h.w[3:0];
        hdr.h.x[31:24] = 0xaa;
        hdr.h.x[3:0] = hdr.h.a[7:4];
        hdr.h.w[15:15] = 1;
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
