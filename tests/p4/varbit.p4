// Tests: a varbit field (P4_16 7.1.6.2): extract with a length in bits (BMv2
// extract_VL), a zero-length varbit, emitting it at its extracted length, copying a
// header with a varbit field (the length goes with it), setInvalid, == of varbit
// fields and of headers holding one, and BMv2's extract_VL errors, in its order:
// a length that is not whole bytes (ParserInvalidArgument), a packet too short
// (PacketTooShort), a header longer than its maximum (HeaderTooShort).
#include <core.p4>
#include <v1model.p4>

header top_t {
    bit<8> len;   // the varbit field's length in bits
    bit<8> kind;
}

header opt_t {
    bit<8>     f;
    varbit<32> opts;
}

struct headers_t {
    top_t top;
    opt_t o;
    opt_t o2;
}

struct meta_t {
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.top);
        pkt.extract(hdr.o, (bit<32>)hdr.top.len);
        transition select(hdr.top.kind) {
            3: second;
            default: accept;
        }
    }
    state second {
        pkt.extract(hdr.o2, (bit<32>)hdr.top.len);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.ParserInvalidArgument) {
            sm.egress_spec = 5;
        } else if (sm.parser_error == error.HeaderTooShort) {
            sm.egress_spec = 6;
        } else if (sm.parser_error == error.PacketTooShort) {
            sm.egress_spec = 7;
        } else if (hdr.o.isValid()) {
            sm.egress_spec = 2;
            if (hdr.top.kind == 1) {
                hdr.o2 = hdr.o;
                sm.egress_spec = 3;
            } else if (hdr.top.kind == 2) {
                hdr.o.setInvalid();
            } else if (hdr.top.kind == 3) {
                if (hdr.o.opts == hdr.o2.opts) {
                    sm.egress_spec = 4;
                } else {
                    sm.egress_spec = 8;
                }
                if (hdr.o == hdr.o2) {
                    sm.egress_spec = 9;
                }
            }
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.top);
        pkt.emit(hdr.o);
        pkt.emit(hdr.o2);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
