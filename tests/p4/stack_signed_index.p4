// Tests: a header stack indexed at run time by a signed value (issue 37), as p4c
// takes it: read, written, and passed to an inout parameter. Only indices in range are
// sent: simple_switch aborts on a negative one or one past the end (p4lite's switch
// drops the packet; unit test).
#include <core.p4>
#include <v1model.p4>

header s_t {
    int<8> i;
    bit<8> res;
}

header e_t {
    bit<8> v;
}

struct headers_t {
    s_t    s;
    e_t[3] e;
}

struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.s);
        pkt.extract(hdr.e.next);
        pkt.extract(hdr.e.next);
        pkt.extract(hdr.e.next);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action twice(inout bit<8> x) {
        x = x + x;
    }
    apply {
        hdr.s.res = hdr.e[hdr.s.i].v;
        hdr.e[hdr.s.i].v = hdr.e[hdr.s.i].v + 0x10;
        int<8> j = hdr.s.i + 1;
        if (j < 3) {
            twice(hdr.e[j].v);
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
        pkt.emit(hdr.s);
        pkt.emit(hdr.e);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
