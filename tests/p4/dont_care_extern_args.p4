// Tests: _ (DontCare) where p4c accepts it beyond dont_care.p4: for an action's
// directionless parameter in a direct call, for a sub-parser's out parameter, and as
// the out argument of extern calls (register read, random, hash, meter, direct
// meter), whose result p4c stores in a temporary nobody reads. The other statements
// run as usual. Issue 37: p4lite refused them.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> n;
    bit<8> r;
    bit<8> c;
}

struct headers_t {
    h_t h;
}

struct meta_t {
}

parser Sub(packet_in pkt, out h_t h, out bit<8> first) {
    state start {
        pkt.extract(h);
        first = h.a;
        transition accept;
    }
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    Sub() sub;
    state start {
        sub.apply(pkt, hdr.h, _);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<8>>(1) last;
    meter(2, MeterType.packets) rate;
    direct_meter<bit<2>>(MeterType.packets) per_entry;

    // v is not read: `_` gives it a value nobody set
    action mark(bit<8> v) {
        hdr.h.r = hdr.h.a + 1;
    }
    action metered() {
        per_entry.read(_);
        hdr.h.c = hdr.h.c + 1;
    }
    table t {
        key = { hdr.h.a: exact; }
        actions = { metered; }
        default_action = metered();
        meters = per_entry;
    }
    apply {
        mark(_);
        t.apply();
        last.read(_, 0);
        last.read(hdr.h.n, 0);
        last.write(0, hdr.h.a);
        random<bit<8>>(_, 0, 3);
        random(_, 8w1, 8w2);
        hash<bit<8>, bit<8>, tuple<bit<8>>, bit<16>>(_, HashAlgorithm.crc16, 8w0, { hdr.h.a },
                                                     16w8);
        rate.execute_meter<bit<2>>(0, _);
        sm.egress_spec = 1;
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
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
