// Tests: == != < <= > >= on unsigned and signed (int<8>) operands, && || !,
// a bool local, the ?: operator, and local variables declared in apply.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    int<8> sa;
    int<8> sb;
    bit<8> flags;
    bit<8> flags2;
    bit<8> mux;
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
        bit<8> f = 0;
        if (hdr.h.a == hdr.h.b) { f = f | 0x01; }
        if (hdr.h.a != hdr.h.b) { f = f | 0x02; }
        if (hdr.h.a < hdr.h.b) { f = f | 0x04; }
        if (hdr.h.a <= hdr.h.b) { f = f | 0x08; }
        if (hdr.h.a > hdr.h.b) { f = f | 0x10; }
        if (hdr.h.a >= hdr.h.b) { f = f | 0x20; }
        if (hdr.h.sa < hdr.h.sb) { f = f | 0x40; }
        if (hdr.h.sa > hdr.h.sb) { f = f | 0x80; }
        hdr.h.flags = f;
        bit<8> g = 0;
        if (hdr.h.a == 1 && hdr.h.b == 2) { g = g | 0x01; }
        if (hdr.h.a == 1 || hdr.h.b == 1) { g = g | 0x02; }
        if (!(hdr.h.a == 1)) { g = g | 0x04; }
        bool big = hdr.h.a > 5;
        if (big && !(hdr.h.b > 5)) { g = g | 0x08; }
        hdr.h.flags2 = g;
        hdr.h.mux = (hdr.h.a > hdr.h.b) ? hdr.h.a : hdr.h.b;
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
