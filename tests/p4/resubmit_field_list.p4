// Tests: resubmit_preserving_field_list: ingress runs again on the original
// packet (ingress changes to headers are lost) with instance_type 6 and the
// @field_list(1) metadata preserved; the first pass emits nothing itself, but
// an I2E clone requested in the same pass still goes out (clone comes before
// resubmit at the end of ingress).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> first;
    bit<8> inst;
    bit<8> cnt;
}

struct headers_t {
    h_t h;
}

struct meta_t {
    @field_list(1)
    bit<8> count;
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
        if (sm.instance_type == 0) {
            meta.count = 0x33;
            hdr.h.first = 0x01;
            sm.egress_spec = 1;
            resubmit_preserving_field_list(1);
            clone(CloneType.I2E, 5);
        } else {
            hdr.h.inst = (bit<8>) sm.instance_type;
            hdr.h.cnt = meta.count;
            sm.egress_spec = 2;
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
