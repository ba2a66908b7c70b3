// Forwards every frame by ingress port only: 1 -> 2, 2 -> 1, 3 -> 2 (for the packet-I/O
// tests, tests/e2e/test_switch_rings.py: no tables, so no controller is needed).
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct headers_t { ethernet_t ethernet; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ethernet); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.ingress_port == 1) { sm.egress_spec = 2; } else { sm.egress_spec = 1; }
        if (sm.ingress_port == 3) { sm.egress_spec = 2; }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.ethernet); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
