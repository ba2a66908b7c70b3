// Tests: header stack indices that are not compile-time constants (p4c's BMv2
// back end: dereference_header_stack + access_field): reads and writes of
// hdr.tags[i].val with i from the packet, also inside an action the index is
// passed to, and on an element that is not valid (its value is kept but never
// emitted). An index past the end aborts simple_switch (std::out_of_range), so
// no packet tests it.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> rd;
    bit<8> wr;
    bit<8> got;
    bit<8> valid;
}

header tag_t {
    bit<8> val;
}

struct headers_t {
    h_t h;
    tag_t[3] tags;
}

struct meta_t {
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        pkt.extract(hdr.tags[0]);
        pkt.extract(hdr.tags[1]);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action mark(bit<8> i) {
        hdr.tags[i].val = hdr.tags[i].val + 0x10;
    }
    apply {
        sm.egress_spec = 1;
        hdr.h.got = hdr.tags[hdr.h.rd].val;
        hdr.tags[hdr.h.wr].val = 0xee;
        mark(hdr.h.rd);
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
        pkt.emit(hdr.tags);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
