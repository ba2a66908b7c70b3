// Same program as basic_exact.p4 (a copy, as every tests/p4 pair is one .p4 and one
// .stf): basic_exact_setdefault.stf changes the default action before any packet.
// Tests: Ethernet parsing, an exact-match table with a control-plane port
// parameter, mark_to_drop as the default action, setdefault and remove from STF,
// and that a dropped packet reaches no port.
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct headers_t { ethernet_t ethernet; }
struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_port(bit<9> port) {
        sm.egress_spec = port;
    }
    action drop() {
        mark_to_drop(sm);
    }
    table fwd {
        key = { hdr.ethernet.dstAddr : exact; }
        actions = { set_port; drop; }
        default_action = drop();
        size = 64;
    }
    apply {
        fwd.apply();
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
