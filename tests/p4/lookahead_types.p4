// Tests: lookahead of a header type (assigned to a header, which becomes valid, and a
// field of it as a select key) and of a struct type (a local with bool and sub-byte
// fields), as p4c lowers them: the next bits into one scalar, each field a slice of
// it; nothing is consumed. Issue 37: p4lite refused lookahead of a header or struct.
#include <core.p4>
#include <v1model.p4>

header pre_t {
    bit<4>  k;
    bit<12> v;
}

header h_t {
    bit<8> a;
    bit<8> b;
}

header o_t {
    bit<8>  x;
    bit<8>  y;
    bit<8>  w;
    bit<16> z;
}

struct pair_t {
    bit<4> hi;
    bit<4> lo;
    bool   f;
    bit<7> r;
}

struct headers_t {
    pre_t peek;
    h_t   h;
    o_t   o;
}

struct meta_t {
    bit<8> x;
    bit<8> y;
    bit<8> w;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        hdr.peek = pkt.lookahead<pre_t>();
        pair_t pr = pkt.lookahead<pair_t>();
        meta.x = (bit<8>)pr.lo;
        meta.y = (bit<8>)pr.r;
        meta.w = pr.f ? 8w1 : 8w2;
        transition select(pkt.lookahead<pre_t>().k) {
            1: one;
            default: two;
        }
    }
    state one {
        pkt.extract(hdr.h);
        transition accept;
    }
    state two {
        pkt.advance(8);
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
        hdr.o.setValid();
        hdr.o.x = meta.x;
        hdr.o.y = meta.y;
        hdr.o.w = meta.w;
        hdr.o.z = (bit<16>)hdr.peek.v;
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
        pkt.emit(hdr.peek);
        pkt.emit(hdr.h);
        pkt.emit(hdr.o);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
