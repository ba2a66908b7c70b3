// Tests: extract with a length into a header stack's .next (extract_VL into a stack,
// a full stack is StackOutOfBounds), == and != of whole header stacks (element by
// element, as headers: both invalid, or both valid with equal fields) and of headers
// and varbit fields taken from a stack (issue 37).
#include <core.p4>
#include <v1model.p4>

header n_t {
    bit<8> n0;  // bytes of a[0].v
    bit<8> n1;  // bytes of a[1].v; 0: a[1] is not extracted
    bit<8> n2;  // 1: extract a third element (the stack holds two)
}

header h_t {
    bit<8>     s;
    varbit<32> v;
}

header o_t {
    bit<8> f;
}

struct headers_t {
    n_t    n;
    h_t[2] a;
    o_t    o;
}

struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.n);
        pkt.extract(hdr.a.next, ((bit<32>)hdr.n.n0) << 3);
        transition select(hdr.n.n1) {
            0: accept;
            default: second;
        }
    }
    state second {
        pkt.extract(hdr.a.next, ((bit<32>)hdr.n.n1) << 3);
        transition select(hdr.n.n2) {
            1: third;
            default: accept;
        }
    }
    state third {
        pkt.extract(hdr.a.next, 16);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.o.setValid();
        hdr.o.f = 0;
        if (hdr.a[0] == hdr.a[1]) {
            hdr.o.f = hdr.o.f | 1;
        }
        if (hdr.a[0].v == hdr.a[1].v) {
            hdr.o.f = hdr.o.f | 2;
        }
        h_t[2] t;
        t[0] = hdr.a[1];
        t[1] = hdr.a[0];
        if (t == hdr.a) {
            hdr.o.f = hdr.o.f | 4;
        }
        if (t != hdr.a) {
            hdr.o.f = hdr.o.f | 8;
        }
        if (sm.parser_error == error.StackOutOfBounds) {
            hdr.o.f = hdr.o.f | 0x10;
        }
        sm.egress_spec = 0;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.n);
        pkt.emit(hdr.a);
        pkt.emit(hdr.o);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
