// Tests: header assignment (copies fields and validity: copying a valid header
// into an invalid one makes it valid; copying an invalid one invalidates the
// destination), struct assignment between metadata structs, and a table keyed
// on a slice (hdr.second.y[7:4]: as p4c, p4lite-c copies the slice into a 4-bit
// scalar key_N and matches on that, so STF values are the slice's own 4 bits).
#include <core.p4>
#include <v1model.p4>

header a_t {
    bit<8> x;
    bit<8> y;
}

struct pair_t {
    bit<8> p;
    bit<8> q;
}

struct headers_t {
    a_t first;
    a_t second;
    a_t third;
}

struct meta_t {
    pair_t m1;
    pair_t m2;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.first);
        transition accept;
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
    table t {
        key = { hdr.second.y[7:4] : exact; }
        actions = { set_port; NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        meta.m1.p = hdr.first.x;
        meta.m1.q = 7;
        meta.m2 = meta.m1;
        hdr.second = hdr.first;
        hdr.second.y = hdr.second.y + 1;
        hdr.second.x = meta.m2.p + meta.m2.q;
        if (hdr.first.x == 0xff) {
            hdr.first = hdr.third;
        }
        t.apply();
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
        pkt.emit(hdr.first);
        pkt.emit(hdr.second);
        pkt.emit(hdr.third);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
