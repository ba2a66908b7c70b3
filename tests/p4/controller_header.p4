// Tests: @controller_header("packet_out") / ("packet_in") headers: a packet
// from the CPU port (64) carries packet_out, whose egress_port is used and
// which is then removed; other packets go to the CPU port with a packet_in
// header (ingress port + 7 pad bits) added in front.
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 64;

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

header h_t {
    bit<8> x;
}

struct headers_t {
    packet_in_t  pi;
    packet_out_t po;
    h_t          h;
}

struct meta_t {
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_h;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.po);
        transition parse_h;
    }
    state parse_h {
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
        if (hdr.po.isValid()) {
            sm.egress_spec = hdr.po.egress_port;
            hdr.po.setInvalid();
        } else {
            sm.egress_spec = CPU_PORT;
            hdr.pi.setValid();
            hdr.pi.ingress_port = sm.ingress_port;
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
        pkt.emit(hdr.pi);
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
