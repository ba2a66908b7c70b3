// Tests: function calls with side effects on the right of && and || (P4_16 8.6:
// evaluated only when the left side does not decide): in an if condition of the
// apply block, in an assignment inside an action, and nested (a call on the right
// whose argument holds another call). Issue 37: p4lite refused them.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> n;
    bit<8> r;
}

struct headers_t {
    h_t h;
}

struct meta_t {
}

// counts its calls in n
bool is_big(inout bit<8> n, in bit<8> x) {
    n = n + 1;
    return x > 100;
}

bit<8> twice(inout bit<8> n, in bit<8> x) {
    n = n + 0x10;
    return x + x;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action decide() {
        bool both = hdr.h.a != 0 && is_big(hdr.h.n, hdr.h.b);
        bool either = hdr.h.a == 0 || is_big(hdr.h.n, twice(hdr.h.n, hdr.h.b));
        hdr.h.r = (both ? 8w1 : 8w0) | (either ? 8w2 : 8w0);
    }
    apply {
        decide();
        if (hdr.h.b == 7 || is_big(hdr.h.n, hdr.h.a)) {
            hdr.h.r = hdr.h.r | 0x80;
        }
        sm.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
