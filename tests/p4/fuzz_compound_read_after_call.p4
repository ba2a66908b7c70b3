// Tests: a compound assignment whose right side calls a function that writes the
// left side (meta.m2 *= fn0(meta.m2, k)): real p4c + BMv2 read m2 for the product
// after the call has run (f's result times the new m2). Found by python -m
// p4lite.xcheck --fuzz 1 --seed 5238, minimised; the STF's expectation is what BMv2
// sent. The unused declarations are the generator's.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> f0;
    bit<7> f1;
    bit<8> f2;
    bit<3> f3;
    bit<16> f4;
    bit<12> f5;
    bit<2> f6;
}

header s_t {
    bit<8> v;
}

header out_t {
    bit<32> m0;
    bit<8> m1;
    bit<32> m2;
}

struct headers_t {
    h_t h;
    s_t[4] s;
    out_t obs;
}

struct meta_t {
    bit<32> m0;
    bit<8> m1;
    bit<32> m2;
}

bit<32> fn0(inout bit<32> x, in bit<32> y) {
    x = x + y;
    return x + 209;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    bit<8> n;
    state start {
        pkt.extract(hdr.h);
        n = 0;
        transition parse_s;
    }
    state parse_s {
        pkt.extract(hdr.s.next);
        n = n + 1;
        transition select(n) {
            4: accept;
            default: parse_s;
        }
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {

    action a0() {
        hdr.h.f0 = hdr.h.f4[12:5];
        hdr.h.f4 = 16w22218;
    }
    action a1(bit<16> p0) {
        meta.m1[5:5] = (bit<1>)fn0(meta.m0, (bit<32>)hdr.h.f4);
    }
    action a2(bit<16> p0, bit<16> p1) {
        hdr.h.f5 = (-12w3811);
        meta.m0 = meta.m2;
    }
    action a3(inout bit<8> d) {
        d = d + (hdr.h.f0 >> 2);
        d = 8w127;
        meta.m2 = ((bit<31>)hdr.h.f4 ++ (bit<1>)hdr.h.f2);
        hdr.h.f2[6:4] = (bit<3>)hdr.h.f6;
    }

    apply {
        if ((fn0(meta.m2, meta.m2) >= meta.m0)) {
            hdr.s[3].v = (bit<8>)((int<8>)(meta.m1 ^ meta.m1) >> 2);
            meta.m2 *= fn0(meta.m2, 32w3223788593);
        }
        standard_metadata.egress_spec = (bit<9>)hdr.h.f0[0:0];
        hdr.obs.setValid();
        hdr.obs.m0 = meta.m0;
        hdr.obs.m1 = meta.m1;
        hdr.obs.m2 = meta.m2;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.s[0].v = hdr.s[2].v;
    }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {

    }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.h);
        pkt.emit(hdr.s);
        pkt.emit(hdr.obs);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
