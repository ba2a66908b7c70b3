// Tests: function calls in the initialisers of a parser's locals (issue 37). They run
// in order at the start of the start state, before its statements, as in p4c: w reads
// meta.m before either call, y's left operand x before its own call, z after both.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
}

struct headers_t { h_t h; }
struct meta_t { bit<8> m; }

bit<8> inc(inout bit<8> v) {
    v = v + 1;
    return v + 0x10;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    bit<8> w = meta.m;
    bit<8> x = inc(meta.m);
    bit<8> y = x + inc(meta.m);
    bit<8> z = meta.m;
    state start {
        pkt.extract(hdr.h);
        hdr.h.a = x;
        hdr.h.b = y + meta.m;
        hdr.h.c = z;
        hdr.h.d = w;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 0; }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
