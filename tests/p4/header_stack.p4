// Tests: a header stack parsed in a loop with extract(hdr.tags.next) and a
// select on hdr.tags.last.bos, constant-index access tags[0..2], isValid on an
// element, setInvalid on an element, emitting the whole stack, and a table keyed
// on a stack element field (STF key `tags$0.val`).
#include <core.p4>
#include <v1model.p4>

header tag_t {
    bit<8> bos;
    bit<8> val;
}

struct headers_t {
    tag_t[3] tags;
}

struct meta_t {
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.tags.next);
        transition select(hdr.tags.last.bos) {
            0: start;
            default: accept;
        }
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_port(bit<9> port) {
        sm.egress_spec = port;
    }
    table by_first {
        key = { hdr.tags[0].val : exact; }
        actions = { set_port; NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        by_first.apply();
        if (hdr.tags[1].isValid()) {
            hdr.tags[1].val = hdr.tags[0].val + hdr.tags[1].val;
        }
        if (hdr.tags[2].isValid()) {
            hdr.tags[2].setInvalid();
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
        pkt.emit(hdr.tags);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
