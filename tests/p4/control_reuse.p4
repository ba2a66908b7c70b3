// Tests: one control instance applied twice with different arguments (one
// instance: its register counts both applications; its action is lowered for each
// binding), and a control type applied by its name (C.apply(...), no instance).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<8> f;
}

struct headers_t {
    h_t h;
}

struct meta_t {
}

control Bump(inout bit<8> p, in bit<8> step, out bit<8> count) {
    register<bit<8>>(1) calls;
    action dbl() {
        p = p + p;
    }
    apply {
        bit<8> n;
        calls.read(n, 0);
        n = n + 1;
        calls.write(0, n);
        count = n;
        p = p + step;
        if (step == 0) {
            dbl();
        }
    }
}

control Mark(out bit<8> x) {
    apply {
        x = 0x42;
    }
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
    Bump() b;
    apply {
        sm.egress_spec = 1;
        b.apply(hdr.h.a, 1, hdr.h.e);
        b.apply(hdr.h.c, hdr.h.b, hdr.h.f);
        Mark.apply(hdr.h.d);
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
