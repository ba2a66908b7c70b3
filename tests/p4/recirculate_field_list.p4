// Tests: recirculate_preserving_field_list from egress: the deparsed packet is
// parsed again (instance_type 4) with the @field_list(2) metadata preserved;
// the first pass does not leave the switch.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> passes;
    bit<8> saved;
}

struct headers_t {
    h_t h;
}

struct meta_t {
    @field_list(2)
    bit<8> loops;
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
        hdr.h.passes = hdr.h.passes + 1;
        if (sm.instance_type == 4) {
            hdr.h.saved = meta.loops;
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.h.passes == 1) {
            meta.loops = 0x44;
            recirculate_preserving_field_list(2);
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
