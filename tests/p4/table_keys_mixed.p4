// Tests: tables mixing match kinds: exact + lpm (longest prefix within the
// exact key), lpm + ternary (priorities decide, a /0 prefix and a wildcard),
// @name on a key (STF uses the new name), and a keyless table whose default
// action the control plane changes.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  vrf;
    bit<32> dst;
    bit<8>  proto;
    bit<8>  r1;
    bit<8>  r2;
    bit<8>  r3;
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
    apply {
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set1(bit<8> v) {
        hdr.h.r1 = v;
    }
    action set2(bit<8> v) {
        hdr.h.r2 = v;
    }
    action set3(bit<8> v) {
        hdr.h.r3 = v;
    }
    table t_lpm_exact {
        key = {
            hdr.h.vrf : exact;
            hdr.h.dst : lpm;
        }
        actions = { set1; }
        default_action = set1(0xff);
    }
    table t_lpm_ternary {
        key = {
            hdr.h.dst   : lpm;
            hdr.h.proto : ternary @name("proto_key");
        }
        actions = { set2; }
        default_action = set2(0xff);
    }
    table t_keyless {
        actions = { set3; }
        default_action = set3(0x01);
    }
    apply {
        sm.egress_spec = 1;
        t_lpm_exact.apply();
        t_lpm_ternary.apply();
        t_keyless.apply();
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
