// Tests: `return` in a control's apply block, `exit` in the apply block and
// inside an action (exit ends ingress only: egress still runs).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
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

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action do_exit() {
        hdr.h.d = 0x55;
        exit;
    }
    apply {
        sm.egress_spec = 1;
        hdr.h.b = 0x11;
        if (hdr.h.a == 1) {
            return;
        }
        hdr.h.b = 0x22;
        if (hdr.h.a == 2) {
            exit;
        }
        if (hdr.h.a == 3) {
            do_exit();
        }
        hdr.h.b = 0x33;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.c = 0x44;
    }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
