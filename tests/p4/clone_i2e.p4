// Tests: clone(CloneType.I2E, session) to a mirroring_add port (the clone is
// the packet as received, re-parsed, instance_type 1), to an unconfigured
// session (no clone), and to a session with mirroring_add_mc (one copy per
// multicast port); a clone of a packet dropped by mark_to_drop still goes
// out; egress sees instance_type and egress_port.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> sel;
    bit<8> inst;
    bit<8> port;
    bit<8> mod;
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
        sm.egress_spec = 2;
        hdr.h.mod = 0x11;
        if (hdr.h.sel == 1) {
            clone(CloneType.I2E, 5);
        } else if (hdr.h.sel == 2) {
            clone(CloneType.I2E, 6);
        } else if (hdr.h.sel == 3) {
            clone(CloneType.I2E, 7);
        } else if (hdr.h.sel == 4) {
            clone(CloneType.I2E, 5);
            mark_to_drop(sm);
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.inst = (bit<8>) sm.instance_type;
        hdr.h.port = (bit<8>) sm.egress_port;
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
