// Tests: for loops (P4_16 v1.2.5, 12.9) in actions, as p4c's BMv2 back end writes them
// (a _jump back to the condition): a constant bound, a bound read from the packet at run
// time, break and continue, two loop variables updated together, a nested loop, and a
// loop in an action called from a table. p4c (34b86e9) writes a loop in an apply block
// as its body once without looping, so p4lite refuses that (unit test); for-in loops
// are refused in p4c's words. Issue 37: p4lite refused every for loop.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> n;
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
}

struct headers_t {
    h_t h;
}

struct meta_t {
    bit<8> x;
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
    action sums() {
        // a = 1 + 2 + 3 + 4; b = sum of 0 .. n-1 (n read from the packet)
        hdr.h.a = 0;
        for (bit<8> i = 1; i <= 4; i = i + 1) {
            hdr.h.a = hdr.h.a + i;
        }
        hdr.h.b = 0;
        for (bit<8> e = 0; e < hdr.h.n; e = e + 1) {
            hdr.h.b = hdr.h.b + e;
        }
    }
    action skips() {
        // c counts the odd i below 10, stopping at 7; d = j after i, j step together
        bit<8> j = 0;
        hdr.h.c = 0;
        for (bit<8> i = 0; i < 10; i = i + 1, j = j + 2) {
            if (i == 7) {
                break;
            }
            if ((i & 1) == 0) {
                continue;
            }
            hdr.h.c = hdr.h.c + 1;
        }
        hdr.h.d = j;
    }
    action nested(bit<8> k) {
        // d = k * n by repeated addition, n x k iterations
        hdr.h.d = 0;
        for (bit<8> i = 0; i < hdr.h.n; i = i + 1) {
            for (bit<8> m = 0; m < k; m = m + 1) {
                hdr.h.d = hdr.h.d + 1;
            }
        }
    }
    table t {
        key = {
            hdr.h.n: exact;
        }
        actions = {
            nested;
            NoAction;
        }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        sums();
        skips();
        t.apply();
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
