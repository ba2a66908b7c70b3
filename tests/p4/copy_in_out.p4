// Tests: copy-in/copy-out of directional parameters (P4_16 spec 6.8). An inout or
// out parameter is a copy of its argument made at the call and written back at
// return, left to right; an in parameter is a copy made at the call. So writes an
// action makes to the argument's storage through another name are overwritten by
// the copy-out, and an in parameter keeps the value it had at the call.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<8> f;
    bit<8> g;
    bit<8> x;
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

control Sub(inout bit<8> p, inout bit<8> q) {
    apply {
        p = 3;
        q = q + 1;
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Sub() sub;
    // the direct write to hdr.h.a is lost: x's copy-out writes a_in + 1 over it
    action inc(inout bit<8> x) {
        hdr.h.a = 9;
        x = x + 1;
    }
    // b reads c before r's copy-out writes 5 into c
    action set(out bit<8> r) {
        r = 5;
        hdr.h.b = hdr.h.c;
    }
    // both copies start from d; q's copy-out comes last: d = d_in + 1
    action two(inout bit<8> p, inout bit<8> q) {
        p = 1;
        q = q + 1;
    }
    // v is e as it was at the call
    action rd(in bit<8> v) {
        hdr.h.e = 0;
        hdr.h.f = v;
    }
    // a whole struct of headers: the copy-out of h overwrites the direct write
    action whole(inout headers_t h) {
        hdr.h.g = 7;
        h.h.g = h.h.g + 1;
    }
    apply {
        sm.egress_spec = 1;
        inc(hdr.h.a);
        set(hdr.h.c);
        two(hdr.h.d, hdr.h.d);
        rd(hdr.h.e);
        whole(hdr);
        // sub-control parameters are copies too: x = x_in + 1
        sub.apply(hdr.h.x, hdr.h.x);
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
