// Tests: a direct counter that no table names (counted in an action that runs) and a
// direct meter that no table names (read only by an action nothing uses) compile, and
// are left out of the JSON as p4c leaves them out; the indirect counters declared
// around them keep working. Found by the fuzzer's minimiser (dropping the table that
// named them): p4lite refused the program, p4c accepts it.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
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
    apply { }
}

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    counter(2, CounterType.packets) c1;
    direct_counter(CounterType.packets) dc;
    direct_meter<bit<8>>(MeterType.packets) dm;
    counter(2, CounterType.packets) c2;

    action set_b(bit<8> v) {
        dc.count();
        c2.count(0);
        hdr.h.b = v;
    }
    action unused() {
        dm.read(hdr.h.b);
    }
    table t {
        key = { hdr.h.a: exact; }
        actions = { set_b; NoAction; }
        default_action = NoAction();
    }
    apply {
        c1.count(1);
        t.apply();
        sm.egress_spec = 1;
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
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
