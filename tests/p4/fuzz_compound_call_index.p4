// Tests: a compound assignment (|-|=) whose l-value indexes a header stack with a
// function call that has an inout argument: the index is evaluated once (P4_16
// v1.2.4). Found by python -m p4lite.xcheck --fuzz 1 --seed 125, minimised; the
// STF's expectation is what BMv2 sent. The unused declarations are the generator's.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> f0;
    bit<5> f1;
    bit<48> f2;
    bit<16> f3;
    bit<7> f4;
    bit<4> f5;
}

header s_t {
    bit<8> v;
}

header out_t {
    bit<32> m0;
    bit<8> m1;
    bit<16> m2;
    bit<8> m3;
}

struct headers_t {
    h_t h;
    s_t[4] s;
    out_t obs;
}

struct meta_t {
    bit<32> m0;
    bit<8> m1;
    bit<16> m2;
    bit<8> m3;
}

bit<32> fn0(inout bit<32> x, in bit<32> y) {
    x = x + y;
    return x ^ 121;
}
bit<16> fn1(inout bit<16> x, in bit<16> y) {
    x = x ^ y;
    return x - 41;
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

    action a0(bit<32> p0, bit<8> p1) {
        hdr.h.f4 = (bit<7>)p1;
        hdr.s[2].v[1:1] = hdr.h.f5[3:3];
        hdr.h.f0 = ((bit<8>)hdr.h.f2 >> hdr.s[3].v);
    }
    action a1(bit<8> p0) {
        hdr.s[0].v = (hdr.h.f0 & hdr.h.f0);
        hdr.h.f0 = (meta.m3 - hdr.s[2].v);
        hdr.s[3].v = (bit<8>)(bit<32>)((int<32>)meta.m0 >> 0);
    }

    apply {
        hdr.s[fn0(meta.m0, (bit<32>)hdr.h.f1)[1:0]].v |-|= (-meta.m3);
        standard_metadata.egress_spec = (bit<9>)hdr.h.f0[0:0];
        hdr.obs.setValid();
        hdr.obs.m0 = meta.m0;
        hdr.obs.m1 = meta.m1;
        hdr.obs.m2 = meta.m2;
        hdr.obs.m3 = meta.m3;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.s[1].v = hdr.s[1].v;
        hdr.h.f5[3:1] = ((bit<2>)hdr.s[2].v ++ (bit<1>)meta.m3);
    }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
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
