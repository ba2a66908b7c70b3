// Tests: an extern instance as a control's constructor argument (issue 37). Three
// instances of C share the ingress register: c1 and c3 use slot 1, c2 slot 2, so a
// value c1 writes is the one c3 reads.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
}

struct headers_t { h_t h; }
struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control C(inout headers_t hdr)(register<bit<8>> r, bit<32> slot) {
    apply {
        bit<8> old;
        r.read(old, slot);
        r.write(slot, hdr.h.a);
        hdr.h.b = old;
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<8>>(4) regs;
    C(regs, 1) c1;
    C(regs, 2) c2;
    C(regs, 1) c3;
    apply {
        if (hdr.h.a < 0x80) {
            c1.apply(hdr);
        } else if (hdr.h.a < 0xc0) {
            c2.apply(hdr);
        } else {
            c3.apply(hdr);
        }
        sm.egress_spec = 0;
    }
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
