// Tests: header_union (P4_16 8.20) and a stack of unions (8.22). Extract into a
// union member; u.isValid() (BMv2 valid_union); member isValid/setValid/setInvalid,
// where making one member valid invalidates the other; assigning a union (member by
// member); emitting a union (only its valid member leaves) and a stack of unions;
// extract(us.next.<member>) in a parser loop, StackOutOfBounds on a third element,
// push_front/pop_front and lastIndex on the stack of unions. BMv2 shifts a stack of
// unions by swapping elements and does not invalidate the vacated ones
// (HeaderUnion::mark_invalid is a no-op): they keep what was swapped into them.
#include <core.p4>
#include <v1model.p4>

header top_t {
    bit<8> kind;
    bit<8> flags;
}

header a_t {
    bit<8> x;
}

header b_t {
    bit<16> y;
}

header_union ab_t {
    a_t a;
    b_t b;
}

struct headers_t {
    top_t top;
    ab_t  u;
    ab_t[2] us;
}

struct meta_t {
    bit<8> t;
    bit<8> last_b;  // us.lastIndex after the last extract into a b member
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.top);
        transition select(hdr.top.kind) {
            0x0a: get_a;
            0x0b: get_b;
            0x0c: tags;
            default: accept;
        }
    }
    state get_a {
        pkt.extract(hdr.u.a);
        transition accept;
    }
    state get_b {
        pkt.extract(hdr.u.b);
        transition accept;
    }
    // a tag byte 0xaa or 0xbb says which member the next stack element holds
    state tags {
        transition select(pkt.lookahead<bit<8>>()) {
            0xaa: tag_a;
            0xbb: tag_b;
            default: accept;
        }
    }
    state tag_a {
        pkt.advance(8);
        pkt.extract(hdr.us.next.a);
        transition tags;
    }
    state tag_b {
        pkt.advance(8);
        pkt.extract(hdr.us.next.b);
        meta.last_b = (bit<8>)hdr.us.lastIndex;
        transition tags;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

// a sub-control taking a struct that holds a union and a stack of unions
control Tail(inout headers_t h) {
    apply {
        if (h.us[1].a.isValid()) {
            h.us[1].a.x = h.us[1].a.x + 1;
        }
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Tail() tail;
    // copy-in/copy-out of a union (P4_16 6.8): x is a copy of hdr.u, so making hdr.u.b
    // valid does not touch x, and copying x out leaves u.a = 0x99 (u.b invalid)
    action set_a(inout ab_t x) {
        x.a.setValid();
        x.a.x = 0x99;
        hdr.u.b.setValid();
        hdr.u.b.y = 0x5555;
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.u.isValid()) {
            sm.egress_spec = 2;
            if (hdr.u.a.isValid()) {
                // a -> b: setValid on b makes a invalid
                meta.t = hdr.u.a.x;
                hdr.u.b.setValid();
                hdr.u.b.y = 8w0 ++ meta.t;
            } else {
                // b -> a
                meta.t = hdr.u.b.y[7:0];
                hdr.u.a.setValid();
                hdr.u.a.x = meta.t;
            }
            if (hdr.top.flags == 0xff) {
                hdr.u.b.setInvalid();
                hdr.u.a.setInvalid();
            }
            if (!hdr.u.isValid()) {
                sm.egress_spec = 6;
            }
        }
        if (sm.parser_error == error.StackOutOfBounds) {
            sm.egress_spec = 4;
        } else if (hdr.us[0].a.isValid()) {
            sm.egress_spec = 3;
            hdr.us.push_front(1);
            hdr.us[0].b.setValid();
            hdr.us[0].b.y = 0x1234;
            hdr.u = hdr.us[1];
        } else if (hdr.us[0].b.isValid()) {
            sm.egress_spec = 5;
            hdr.us.pop_front(1);
            if (meta.last_b == 0) {
                sm.egress_spec = 7;
            }
        }
        if (hdr.top.kind == 0x0d) {
            set_a(hdr.u);
        }
        tail.apply(hdr);
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.top);
        pkt.emit(hdr.u);
        pkt.emit(hdr.us);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
