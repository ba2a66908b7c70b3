// Tests: an indexed packet meter configured from STF (meter_set_rates, rates in
// packets per microsecond as simple_switch_CLI) giving GREEN, YELLOW, RED
// (0, 1, 2) as its buckets drain; an unconfigured index is always GREEN.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> idx;
    bit<8> color;
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
    meter(4, MeterType.packets) m;
    apply {
        sm.egress_spec = 1;
        bit<8> col;
        m.execute_meter((bit<32>) hdr.h.idx, col);
        hdr.h.color = col;
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
