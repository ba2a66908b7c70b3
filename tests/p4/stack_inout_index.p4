// Tests: a field of a header stack element indexed at run time, passed to inout
// parameters (issue 37): the index is evaluated once, before the call (bump writes
// k, the index it was called with), through a function call (pick), and with two
// arguments that name the same element (copied out left to right, so y wins).
#include <core.p4>
#include <v1model.p4>

header m_t {
    bit<8> k;
    bit<8> j;
    bit<8> r;
}

header s_t {
    bit<8> a;
}

struct headers_t {
    m_t m;
    s_t[3] s;
}

struct meta_t { }

bit<8> pick(in bit<8> v) {
    return v & 1;
}

bit<8> inc(inout bit<8> v) {
    v = v + 1;
    return v;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.m);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action bump(inout bit<8> x) {
        hdr.m.k = hdr.m.k + 1;
        x = x + 0x10;
    }
    action two(inout bit<8> x, inout bit<8> y) {
        x = 1;
        y = 2;
    }
    apply {
        bump(hdr.s[hdr.m.k].a);
        hdr.m.r = inc(hdr.s[pick(hdr.m.j)].a);
        if (hdr.m.j == 2) {
            two(hdr.s[hdr.m.k].a, hdr.s[1].a);
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.m);
        pkt.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
