// Tests: an extern instance declared at top level (a register), used from an
// apply block that declares a local variable and from an action: the register
// keeps a running sum across packets.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> v;
    bit<8> old;
    bit<8> twice;
}

struct headers_t {
    h_t h;
}

struct meta_t {
}

register<bit<8>>(4) acc;

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
    action double_it() {
        bit<8> t;
        acc.read(t, 1);
        hdr.h.twice = t + t;
        acc.write(1, hdr.h.twice);
    }
    apply {
        sm.egress_spec = 1;
        bit<8> old;
        acc.read(old, 0);
        acc.write(0, old + hdr.h.v);
        hdr.h.old = old;
        if (hdr.h.v == 0) {
            acc.write(1, 1);
        }
        double_it();
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
