// Tests: mark_to_drop also clears mcast_grp (a marked multicast packet is
// dropped), and fields written after mark_to_drop take effect again
// (egress_spec -> unicast, mcast_grp -> multicast).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
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

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.mcast_grp = 1;
        sm.egress_spec = 2;
        if (hdr.h.a == 1) {
            mark_to_drop(sm);
        }
        if (hdr.h.a == 2) {
            mark_to_drop(sm);
            sm.egress_spec = 3;
        }
        if (hdr.h.a == 3) {
            mark_to_drop(sm);
            sm.mcast_grp = 1;
        }
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
