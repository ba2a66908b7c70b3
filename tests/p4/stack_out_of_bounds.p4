// Tests: extracting into a full header stack fails with StackOutOfBounds; the
// packet is not dropped, the elements already extracted stay valid and the
// unparsed bytes stay as payload. A too-short element gives PacketTooShort.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> code;
}

header tag_t {
    bit<8> bos;
    bit<8> val;
}

struct headers_t {
    h_t      h;
    tag_t[2] tags;
}

struct meta_t {
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition parse_tag;
    }
    state parse_tag {
        pkt.extract(hdr.tags.next);
        transition select(hdr.tags.last.bos) {
            0: parse_tag;
            default: accept;
        }
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.StackOutOfBounds) {
            hdr.h.code = 3;
        } else if (sm.parser_error == error.PacketTooShort) {
            hdr.h.code = 1;
        } else {
            hdr.h.code = 0xee;
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
        pkt.emit(hdr.tags);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
