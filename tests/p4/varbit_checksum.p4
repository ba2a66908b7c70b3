// Tests: a varbit field in checksum and hash inputs (issue 37): verify_checksum and
// update_checksum over fields that include one (csum16), and hash() over one (crc16).
// The field enters each calculation at its current length (0 to 8 bytes); its header's
// other fields keep their places around it.
#include <core.p4>
#include <v1model.p4>

header l_t {
    bit<8> n;  // bytes in h.opt
}

header h_t {
    bit<16>    ck;
    bit<8>     x;
    varbit<64> opt;
}

header o_t {
    bit<16> crc;
}

struct headers_t {
    l_t l;
    h_t h;
    o_t o;
}

struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.l);
        pkt.extract(hdr.h, ((bit<32>)hdr.l.n) << 3);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
        verify_checksum(hdr.h.isValid(), { hdr.l.n, hdr.h.x, hdr.h.opt }, hdr.h.ck,
                        HashAlgorithm.csum16);
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.checksum_error == 1) {
            hdr.h.x = 0xEE;
        } else {
            hdr.h.x = hdr.h.x + 1;
        }
        hdr.o.setValid();
        hash(hdr.o.crc, HashAlgorithm.crc16, 16w0, { hdr.h.opt, hdr.h.x }, 32w65536);
        sm.egress_spec = 0;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.h.isValid(), { hdr.l.n, hdr.h.x, hdr.h.opt }, hdr.h.ck,
                        HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.l);
        pkt.emit(hdr.h);
        pkt.emit(hdr.o);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
