// Tests: a ternary table keyed on a header stack element field, applied in
// switch (t.apply().action_run), with entries added at run time: each action's
// branch sets the egress port, the default branch one more field.
#include <core.p4>
#include <v1model.p4>

header tag_t {
    bit<8> val;
    bit<8> kind;
}

header out_t {
    bit<8> branch;
}

struct headers_t {
    tag_t[2] tags;
    out_t o;
}

struct meta_t {
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.tags.next);
        pkt.extract(hdr.tags.next);
        pkt.extract(hdr.o);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
    }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action fwd(bit<9> port) {
        sm.egress_spec = port;
    }
    action to_cpu() {
        sm.egress_spec = 7;
    }
    action drop() {
        mark_to_drop(sm);
    }
    table t {
        key = {
            hdr.tags[1].val : ternary;
            hdr.tags[0].kind : exact;
        }
        actions = { fwd; to_cpu; drop; }
        default_action = drop();
    }
    apply {
        switch (t.apply().action_run) {
            fwd: {
                hdr.o.branch = 1;
            }
            to_cpu: {
                hdr.o.branch = 2;
            }
            default: {
                hdr.o.branch = 3;
            }
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
        pkt.emit(hdr.tags);
        pkt.emit(hdr.o);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
