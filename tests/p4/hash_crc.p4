// Tests: hash() with crc16 (CRC-16/ARC) and crc32 over a two-field tuple,
// with base 0 and a max covering the whole range, and with a base and a
// small max (result = base + H % max). Expected values computed by hand with
// a reference CRC in Python.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<16> a;
    bit<8>  b;
    bit<16> h16;
    bit<8>  small;
    bit<32> h32;
    bit<16> m1000;
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
        hash(hdr.h.h16, HashAlgorithm.crc16, (bit<16>) 0, { hdr.h.a, hdr.h.b }, (bit<32>) 65536);
        hash(hdr.h.small, HashAlgorithm.crc16, (bit<8>) 100, { hdr.h.a, hdr.h.b }, (bit<16>) 10);
        hash(hdr.h.h32, HashAlgorithm.crc32, (bit<32>) 0, { hdr.h.a, hdr.h.b }, (bit<64>) 0x100000000);
        hash(hdr.h.m1000, HashAlgorithm.crc32, (bit<16>) 0, { hdr.h.a, hdr.h.b }, (bit<16>) 1000);
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
