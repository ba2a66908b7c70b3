// Tests: a table in the egress pipeline keyed on standard_metadata.egress_port
// (added from STF), applied separately to each multicast replica, one replica
// dropped in egress while the others leave, `exit` in egress, an indexed
// counter counting in egress, and a long (300-byte) packet through unicast.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> mc;
    bit<8> tag;
    bit<8> after;
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
        if (hdr.h.mc != 0) {
            sm.mcast_grp = 1;
        } else {
            sm.egress_spec = 4;
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    counter(8, CounterType.packets) tx;
    action tag(bit<8> v) {
        hdr.h.tag = v;
    }
    table port_tag {
        key = { sm.egress_port : exact; }
        actions = { tag; NoAction; }
        default_action = NoAction();
    }
    apply {
        tx.count((bit<32>) sm.egress_port);
        if (hdr.h.mc == 2 && sm.egress_port == 3) {
            mark_to_drop(sm);
        }
        port_tag.apply();
        if (sm.egress_port == 2) {
            exit;
        }
        hdr.h.after = 0xaa;
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
