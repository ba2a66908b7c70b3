// Tests: typedef, a const of a typedef'd type, a serializable enum (cast from
// bit<8>, compared, cast back), a plain enum in a local, a user error
// declaration raised by verify(), and that the failing packet is still forwarded.
#include <core.p4>
#include <v1model.p4>

typedef bit<8> byte_t;
const byte_t MAGIC = 0x42;

enum bit<8> Color {
    RED = 1,
    GREEN = 2,
    BLUE = 3
}

enum Mode { FAST, SLOW }

error { BadMagic }

header h_t {
    byte_t magic;
    bit<8> color;
    bit<8> res;
    bit<8> err;
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
        verify(hdr.h.magic == MAGIC, error.BadMagic);
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
        Color c = (Color) hdr.h.color;
        Mode m = Mode.SLOW;
        if (c == Color.GREEN) {
            m = Mode.FAST;
        }
        if (m == Mode.FAST) {
            hdr.h.res = 0x0f;
        } else {
            hdr.h.res = (bit<8>) Color.BLUE;
        }
        if (sm.parser_error == error.BadMagic) {
            hdr.h.err = 1;
        } else if (sm.parser_error == error.NoError) {
            hdr.h.err = 0;
        } else {
            hdr.h.err = 0xee;
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
