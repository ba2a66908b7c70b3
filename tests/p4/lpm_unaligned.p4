// Tests: LPM on a key whose width is not whole bytes (12 bits). BMv2 counts a prefix
// length from the top of the key padded to whole bytes, both the one p4c writes for a
// const entry (mask 0xff0 is prefix_length 8) and the one p4c's STF runner hands to
// table_add (0x0a* is /8): on a 12-bit key, /8 is the 4 pad bits and the key's top 4.
// Found by the fuzzer (issue 37); p4lite matched on the key's top 8 bits. Prefixes
// within the pad bits (0xf00 is /4, 0x800 /1) match everything on BMv2, the longer
// first; p4lite refused two of them as duplicates.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<12> k;
    bit<4> pad;
    bit<8> o;
    bit<8> o2;
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
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set(bit<8> v) {
        hdr.h.o = v;
    }
    action set2(bit<8> v) {
        hdr.h.o2 = v;
    }
    table t {
        key = {
            hdr.h.k: lpm;
        }
        actions = {
            set;
            NoAction;
        }
        default_action = NoAction();
    }
    table c {
        key = {
            hdr.h.k: lpm;
        }
        actions = {
            set2;
            NoAction;
        }
        const entries = {
            0x0a0 &&& 0xff0 : set2(0x22);
            0x000 &&& 0xf00 : set2(0x33);
            0x000 &&& 0x800 : set2(0x44);
        }
        default_action = NoAction();
    }
    apply {
        t.apply();
        c.apply();
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
