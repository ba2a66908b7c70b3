// Tests: clone_preserving_field_list(CloneType.E2E, ...) from egress: the clone
// carries the egress-modified headers, instance_type 2, and only the metadata
// field tagged @field_list(1) survives (the other is reset to 0).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> mod;
    bit<8> saved;
    bit<8> other;
    bit<8> inst;
}

struct headers_t {
    h_t h;
}

struct meta_t {
    @field_list(1)
    bit<8> saved;
    bit<8> other;
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
        sm.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.instance_type == 0) {
            meta.saved = 0x5a;
            meta.other = 0x77;
            hdr.h.mod = 0x22;
            clone_preserving_field_list(CloneType.E2E, 4, 1);
        } else {
            hdr.h.saved = meta.saved;
            hdr.h.other = meta.other;
            hdr.h.inst = (bit<8>) sm.instance_type;
        }
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
