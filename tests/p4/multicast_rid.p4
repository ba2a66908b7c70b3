// Tests: multicast with mc_mgrp_create / mc_node_create / mc_node_associate:
// copies per node and port with egress_rid = the node's rid and
// instance_type 5, an unknown group (no copies), and mcast_grp 0 (unicast).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  grp;
    bit<16> rid;
    bit<8>  port;
    bit<8>  inst;
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
    apply {
        sm.mcast_grp = (bit<16>) hdr.h.grp;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.rid = sm.egress_rid;
        hdr.h.port = (bit<8>) sm.egress_port;
        hdr.h.inst = (bit<8>) sm.instance_type;
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
