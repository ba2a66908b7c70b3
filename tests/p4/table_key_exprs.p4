// Tests: table keys that are expressions (p4c computes them into key_N
// temporaries before the table): a sum, a concatenation of slices, a cast, a
// function call's result, and a masked field (kept as a masked key, as p4c does).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
}

struct headers_t {
    h_t h;
}

struct meta_t {
}

bit<8> plus_one(in bit<8> v) {
    return v + 1;
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
    action set(bit<8> v) {
        hdr.h.d = v;
    }
    table sum_t {
        key = {
            hdr.h.a + 1 : exact @name("a_plus_1");
        }
        actions = { set; NoAction; }
        default_action = NoAction();
    }
    table concat_t {
        key = {
            hdr.h.b[3:0] ++ hdr.h.c : exact @name("bc");
            (bit<16>) hdr.h.a : ternary @name("wide_a");
            plus_one(hdr.h.c) : exact @name("c1");
            hdr.h.c & 0xf0 : exact @name("c_hi");
        }
        actions = { set; NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        sum_t.apply();
        concat_t.apply();
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
