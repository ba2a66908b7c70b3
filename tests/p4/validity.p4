// Tests: isValid() in an if and as a table key (STF key `opt.$valid$`),
// setInvalid() removing a parsed header from the output, setValid() adding a
// zero-filled header that the deparser emits in its place.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> op;
}

header opt_t {
    bit<16> v;
}

header added_t {
    bit<8> a;
    bit<8> b;
}

struct headers_t {
    h_t     h;
    opt_t   opt;
    added_t added;
}

struct meta_t {
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.op) {
            1: parse_opt;
            default: accept;
        }
    }
    state parse_opt {
        pkt.extract(hdr.opt);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_port(bit<9> port) {
        sm.egress_spec = port;
    }
    table vt {
        key = { hdr.opt.isValid() : exact; }
        actions = { set_port; NoAction; }
        default_action = NoAction();
    }
    apply {
        vt.apply();
        if (hdr.opt.isValid()) {
            hdr.opt.setInvalid();
            hdr.h.op = 0x10;
        } else {
            hdr.added.setValid();
            hdr.added.b = 0x99;
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
        pkt.emit(hdr.opt);
        pkt.emit(hdr.added);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
