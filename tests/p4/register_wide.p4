// Tests: registers of 64, 48 and 1 bits with wrap-around on read-modify-write,
// constant indices, and check_register with values wider than 32 bits.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<64> a;
    bit<48> b;
    bit<8>  c;
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
    register<bit<64>>(4) r64;
    register<bit<48>>(2) r48;
    register<bit<1>>(2) r1;
    apply {
        sm.egress_spec = 1;
        bit<64> x;
        r64.read(x, 0);
        x = x + hdr.h.a;
        r64.write(0, x);
        hdr.h.a = x;
        bit<48> y;
        r48.read(y, 1);
        y = y - 1;
        r48.write(1, y);
        hdr.h.b = y;
        bit<1> z;
        r1.read(z, 0);
        r1.write(0, ~z);
        hdr.h.c = (bit<8>) z;
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
