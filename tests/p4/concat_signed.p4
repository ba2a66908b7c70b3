// Tests: ++ of signed operands. The result is int<W1+W2> and the right operand is
// concatenated as its bits (p4c masks it; it is not sign-extended), whatever its sign,
// also for a signed local and a negative constant. p4c refuses operands of different
// signedness (a unit test has its wording).
// Issue 37 (found by the outside-sample proxy): p4lite ORed the right operand in
// sign-extended, so 0x81 ++ 0xf0 gave 0xfff0.
#include <core.p4>
#include <v1model.p4>

header h_t {
    int<8>  a;
    int<8>  b;
    int<16> r;
    int<12> s;
    bit<4>  pad;
    int<16> t;
}

struct headers_t {
    h_t h;
}

struct meta_t {
    int<4> n;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.h.r = hdr.h.a ++ hdr.h.b;
        meta.n = (int<4>)hdr.h.b[3:0];
        hdr.h.s = hdr.h.a ++ meta.n;
        hdr.h.t = hdr.h.a ++ (int<8>)-3;
        std.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
