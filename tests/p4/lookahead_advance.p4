// Tests: select on pkt.lookahead<bit<8>>(), assigning a lookahead<bit<16>>
// to metadata, and pkt.advance(16) skipping bytes (they are not re-emitted).
#include <core.p4>
#include <v1model.p4>

header kind_t {
    bit<8> kind;
}

header big_t {
    bit<16> v;
}

header tail_t {
    bit<8> t;
}

struct headers_t {
    kind_t kind;
    big_t  big;
    tail_t tail;
}

struct meta_t {
    bit<16> peek;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        meta.peek = pkt.lookahead<bit<16>>();
        transition select(pkt.lookahead<bit<8>>()) {
            0x01: parse_big;
            default: parse_small;
        }
    }
    state parse_big {
        pkt.extract(hdr.kind);
        pkt.extract(hdr.big);
        transition accept;
    }
    state parse_small {
        pkt.extract(hdr.kind);
        pkt.advance(16);
        pkt.extract(hdr.tail);
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
        if (hdr.big.isValid()) {
            hdr.big.v = hdr.big.v + 1;
        }
        if (hdr.tail.isValid()) {
            hdr.tail.t = meta.peek[7:0];
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
        pkt.emit(hdr.kind);
        pkt.emit(hdr.big);
        pkt.emit(hdr.tail);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
