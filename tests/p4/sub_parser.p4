// Tests: a sub-parser instance declared inside the parser and applied from two
// states (p4c inlines its states; its accept continues the calling state after
// the apply, statements after the apply included), with an out header argument
// and an inout counter.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> count;
    bit<8> seen;
}

header tag_t {
    bit<7> val;
    bit<1> more;
}

struct headers_t {
    h_t h;
    tag_t t1;
    tag_t t2;
}

struct meta_t {
}

parser ParseTag(packet_in pkt, out tag_t t, inout bit<8> count) {
    state start {
        pkt.extract(t);
        count = count + 1;
        transition accept;
    }
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    ParseTag() tag_parser;
    state start {
        pkt.extract(hdr.h);
        tag_parser.apply(pkt, hdr.t1, hdr.h.count);
        transition select(hdr.t1.more) {
            1: second;
            default: accept;
        }
    }
    state second {
        tag_parser.apply(pkt, hdr.t2, hdr.h.count);
        hdr.h.seen = 1;
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
    }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
    }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.h);
        pkt.emit(hdr.t1);
        pkt.emit(hdr.t2);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
