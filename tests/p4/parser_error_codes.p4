// Tests: parser errors do not drop the packet on v1model. Ingress reads
// standard_metadata.parser_error and writes a code into the packet: NoError,
// PacketTooShort (extract past the end; the short bytes stay as payload),
// a select without default and no matching case (NoError: BMv2 ends the parse
// there, it sets no NoMatch), a failed verify() with a core error, and
// an explicit `transition reject` (p4c-bm2-ss, like p4lite-c, emits it as
// next_state null with the warning "Explicit transition to reject not supported
// on this target", so BMv2 accepts the packet with NoError).
// Not named parser_errors: p4c's run-bmv2-test.py (isError) takes a file name
// holding "_errors" for a program that must fail to compile.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> kind;
    bit<8> code;
}

header more_t {
    bit<32> m;
}

struct headers_t {
    h_t    h;
    more_t more;
}

struct meta_t {
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.kind) {
            1: accept;
            2: s_reject;
            3: s_verify;
            4: s_more;
        }
    }
    state s_reject {
        transition reject;
    }
    state s_verify {
        verify(hdr.h.code == 0x77, error.HeaderTooShort);
        transition accept;
    }
    state s_more {
        pkt.extract(hdr.more);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.NoError) {
            hdr.h.code = 0;
        } else if (sm.parser_error == error.PacketTooShort) {
            hdr.h.code = 1;
        } else if (sm.parser_error == error.NoMatch) {
            hdr.h.code = 2;
        } else if (sm.parser_error == error.HeaderTooShort) {
            hdr.h.code = 4;
        } else {
            hdr.h.code = 0xee;
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
        pkt.emit(hdr.more);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
