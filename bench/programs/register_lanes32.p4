// Benchmark program (bench/switch_core.py): in-network aggregation's inner
// loop. Each packet carries a slot index and 32 lanes of bit<32>; every lane is
// added into its own register array at that slot (read, add, write) and the
// running sum is written back into the packet, which returns to its port.
// (Generated once from a short Python loop; kept as plain P4 for p4c.)
#include <core.p4>
#include <v1model.p4>

header agg_t {
    bit<16> slot;
}

header lanes_t {
    bit<32> v0;
    bit<32> v1;
    bit<32> v2;
    bit<32> v3;
    bit<32> v4;
    bit<32> v5;
    bit<32> v6;
    bit<32> v7;
    bit<32> v8;
    bit<32> v9;
    bit<32> v10;
    bit<32> v11;
    bit<32> v12;
    bit<32> v13;
    bit<32> v14;
    bit<32> v15;
    bit<32> v16;
    bit<32> v17;
    bit<32> v18;
    bit<32> v19;
    bit<32> v20;
    bit<32> v21;
    bit<32> v22;
    bit<32> v23;
    bit<32> v24;
    bit<32> v25;
    bit<32> v26;
    bit<32> v27;
    bit<32> v28;
    bit<32> v29;
    bit<32> v30;
    bit<32> v31;
}

struct headers_t {
    agg_t   agg;
    lanes_t lanes;
}

struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.agg);
        pkt.extract(hdr.lanes);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(256) r0;
    register<bit<32>>(256) r1;
    register<bit<32>>(256) r2;
    register<bit<32>>(256) r3;
    register<bit<32>>(256) r4;
    register<bit<32>>(256) r5;
    register<bit<32>>(256) r6;
    register<bit<32>>(256) r7;
    register<bit<32>>(256) r8;
    register<bit<32>>(256) r9;
    register<bit<32>>(256) r10;
    register<bit<32>>(256) r11;
    register<bit<32>>(256) r12;
    register<bit<32>>(256) r13;
    register<bit<32>>(256) r14;
    register<bit<32>>(256) r15;
    register<bit<32>>(256) r16;
    register<bit<32>>(256) r17;
    register<bit<32>>(256) r18;
    register<bit<32>>(256) r19;
    register<bit<32>>(256) r20;
    register<bit<32>>(256) r21;
    register<bit<32>>(256) r22;
    register<bit<32>>(256) r23;
    register<bit<32>>(256) r24;
    register<bit<32>>(256) r25;
    register<bit<32>>(256) r26;
    register<bit<32>>(256) r27;
    register<bit<32>>(256) r28;
    register<bit<32>>(256) r29;
    register<bit<32>>(256) r30;
    register<bit<32>>(256) r31;
    apply {
        bit<32> idx = (bit<32>) hdr.agg.slot[7:0];
        bit<32> tmp;
        r0.read(tmp, idx);
        tmp = tmp + hdr.lanes.v0;
        r0.write(idx, tmp);
        hdr.lanes.v0 = tmp;
        r1.read(tmp, idx);
        tmp = tmp + hdr.lanes.v1;
        r1.write(idx, tmp);
        hdr.lanes.v1 = tmp;
        r2.read(tmp, idx);
        tmp = tmp + hdr.lanes.v2;
        r2.write(idx, tmp);
        hdr.lanes.v2 = tmp;
        r3.read(tmp, idx);
        tmp = tmp + hdr.lanes.v3;
        r3.write(idx, tmp);
        hdr.lanes.v3 = tmp;
        r4.read(tmp, idx);
        tmp = tmp + hdr.lanes.v4;
        r4.write(idx, tmp);
        hdr.lanes.v4 = tmp;
        r5.read(tmp, idx);
        tmp = tmp + hdr.lanes.v5;
        r5.write(idx, tmp);
        hdr.lanes.v5 = tmp;
        r6.read(tmp, idx);
        tmp = tmp + hdr.lanes.v6;
        r6.write(idx, tmp);
        hdr.lanes.v6 = tmp;
        r7.read(tmp, idx);
        tmp = tmp + hdr.lanes.v7;
        r7.write(idx, tmp);
        hdr.lanes.v7 = tmp;
        r8.read(tmp, idx);
        tmp = tmp + hdr.lanes.v8;
        r8.write(idx, tmp);
        hdr.lanes.v8 = tmp;
        r9.read(tmp, idx);
        tmp = tmp + hdr.lanes.v9;
        r9.write(idx, tmp);
        hdr.lanes.v9 = tmp;
        r10.read(tmp, idx);
        tmp = tmp + hdr.lanes.v10;
        r10.write(idx, tmp);
        hdr.lanes.v10 = tmp;
        r11.read(tmp, idx);
        tmp = tmp + hdr.lanes.v11;
        r11.write(idx, tmp);
        hdr.lanes.v11 = tmp;
        r12.read(tmp, idx);
        tmp = tmp + hdr.lanes.v12;
        r12.write(idx, tmp);
        hdr.lanes.v12 = tmp;
        r13.read(tmp, idx);
        tmp = tmp + hdr.lanes.v13;
        r13.write(idx, tmp);
        hdr.lanes.v13 = tmp;
        r14.read(tmp, idx);
        tmp = tmp + hdr.lanes.v14;
        r14.write(idx, tmp);
        hdr.lanes.v14 = tmp;
        r15.read(tmp, idx);
        tmp = tmp + hdr.lanes.v15;
        r15.write(idx, tmp);
        hdr.lanes.v15 = tmp;
        r16.read(tmp, idx);
        tmp = tmp + hdr.lanes.v16;
        r16.write(idx, tmp);
        hdr.lanes.v16 = tmp;
        r17.read(tmp, idx);
        tmp = tmp + hdr.lanes.v17;
        r17.write(idx, tmp);
        hdr.lanes.v17 = tmp;
        r18.read(tmp, idx);
        tmp = tmp + hdr.lanes.v18;
        r18.write(idx, tmp);
        hdr.lanes.v18 = tmp;
        r19.read(tmp, idx);
        tmp = tmp + hdr.lanes.v19;
        r19.write(idx, tmp);
        hdr.lanes.v19 = tmp;
        r20.read(tmp, idx);
        tmp = tmp + hdr.lanes.v20;
        r20.write(idx, tmp);
        hdr.lanes.v20 = tmp;
        r21.read(tmp, idx);
        tmp = tmp + hdr.lanes.v21;
        r21.write(idx, tmp);
        hdr.lanes.v21 = tmp;
        r22.read(tmp, idx);
        tmp = tmp + hdr.lanes.v22;
        r22.write(idx, tmp);
        hdr.lanes.v22 = tmp;
        r23.read(tmp, idx);
        tmp = tmp + hdr.lanes.v23;
        r23.write(idx, tmp);
        hdr.lanes.v23 = tmp;
        r24.read(tmp, idx);
        tmp = tmp + hdr.lanes.v24;
        r24.write(idx, tmp);
        hdr.lanes.v24 = tmp;
        r25.read(tmp, idx);
        tmp = tmp + hdr.lanes.v25;
        r25.write(idx, tmp);
        hdr.lanes.v25 = tmp;
        r26.read(tmp, idx);
        tmp = tmp + hdr.lanes.v26;
        r26.write(idx, tmp);
        hdr.lanes.v26 = tmp;
        r27.read(tmp, idx);
        tmp = tmp + hdr.lanes.v27;
        r27.write(idx, tmp);
        hdr.lanes.v27 = tmp;
        r28.read(tmp, idx);
        tmp = tmp + hdr.lanes.v28;
        r28.write(idx, tmp);
        hdr.lanes.v28 = tmp;
        r29.read(tmp, idx);
        tmp = tmp + hdr.lanes.v29;
        r29.write(idx, tmp);
        hdr.lanes.v29 = tmp;
        r30.read(tmp, idx);
        tmp = tmp + hdr.lanes.v30;
        r30.write(idx, tmp);
        hdr.lanes.v30 = tmp;
        r31.read(tmp, idx);
        tmp = tmp + hdr.lanes.v31;
        r31.write(idx, tmp);
        hdr.lanes.v31 = tmp;
        sm.egress_spec = sm.ingress_port;
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.agg);
        pkt.emit(hdr.lanes);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
