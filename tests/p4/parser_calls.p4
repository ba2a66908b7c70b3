// Tests: function calls in parser states (P4_16 12.4 allows them; p4c inlines them),
// as p4c lowers them: inside an assignment's expression (operands left of a call read
// first, 8.1), as a statement, in a branch of ?: and on the right of && (only when
// evaluated: the state splits at the if, as p4c's RemoveParserIfs does), in a select
// key and in verify's condition; and an if statement with an extract in its branch.
// Issue 37: p4lite refused a call inside an expression of a parser state, and if.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
}

header t_t {
    bit<8> t;
}

header out_t {
    bit<8> x;
    bit<8> y;
    bit<8> z;
    bit<8> w;
}

struct headers_t {
    h_t   h;
    t_t   t;
    out_t o;
}

struct meta_t {
    bit<8> x;
    bit<8> y;
    bit<8> z;
    bit<8> w;
}

bit<8> inc(inout bit<8> v) {
    v = v + 1;
    return v;
}

void bump(inout bit<8> v) {
    v = v + 3;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        meta.x = hdr.h.a + inc(hdr.h.a);
        bump(meta.y);
        meta.z = hdr.h.b == 1 ? inc(hdr.h.c) : 8w0;
        bool q = hdr.h.b == 2 && inc(meta.y) == 4;
        if (q) {
            meta.w = 0xaa;
        } else {
            meta.w = 0x55;
        }
        if (hdr.h.d == 7) {
            pkt.extract(hdr.t);
        }
        transition select(inc(meta.y)) {
            5: check;
            default: accept;
        }
    }
    state check {
        verify(inc(hdr.h.d) != 9, error.NoMatch);
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
        hdr.o.setValid();
        hdr.o.x = meta.x;
        hdr.o.y = meta.y;
        hdr.o.z = meta.z;
        hdr.o.w = meta.w;
        if (sm.parser_error != error.NoError) {
            hdr.o.w = 0xee;
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
        pkt.emit(hdr.t);
        pkt.emit(hdr.o);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
