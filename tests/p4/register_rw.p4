// Tests: register<bit<32>> read and write from the data plane (index from the
// packet, read-modify-write with 32-bit wrap-around), and from STF with
// register_write, register_read and register_reset (values read back through packets).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  op;
    bit<8>  idx;
    bit<32> val;
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
    register<bit<32>>(16) r;
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            r.write((bit<32>) hdr.h.idx, hdr.h.val);
        } else if (hdr.h.op == 2) {
            r.read(hdr.h.val, (bit<32>) hdr.h.idx);
        } else if (hdr.h.op == 3) {
            bit<32> tmp;
            r.read(tmp, (bit<32>) hdr.h.idx);
            tmp = tmp + hdr.h.val;
            r.write((bit<32>) hdr.h.idx, tmp);
            hdr.h.val = tmp;
        }
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
