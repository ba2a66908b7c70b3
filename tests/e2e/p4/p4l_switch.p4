/* p4lite-switch end-to-end program: one table per match kind, an indexed
 * counter, a direct counter, multicast, a digest and packet-in/packet-out
 * through the CPU port (510, as the tutorials use). */
#include <core.p4>
#include <v1model.p4>

const bit<9>  CPU_PORT  = 510;
const bit<16> TYPE_IPV4 = 0x800;

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

struct learn_t {
    bit<48> srcAddr;
    bit<9>  port;
}

struct metadata {
    bit<1>  learn;
    bit<48> src;
    bit<9>  port;
}

struct headers {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    ipv4_t       ipv4;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) port_counter;
    direct_counter(CounterType.packets_and_bytes) acl_counter;

    action drop() {
        mark_to_drop(standard_metadata);
    }
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action set_mcast(bit<16> grp) {
        standard_metadata.mcast_grp = grp;
    }
    action to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
    }
    action ipv4_forward(bit<48> dstAddr, bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action learn() {
        // digests carry end-of-ingress values (as in BMv2): keep the original source
        meta.learn = 1;
        meta.src = hdr.ethernet.srcAddr;
        meta.port = standard_metadata.ingress_port;
    }
    action acl_drop() {
        mark_to_drop(standard_metadata);
        acl_counter.count();
    }
    action acl_to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
        acl_counter.count();
    }
    action acl_pass() {
        acl_counter.count();
    }

    table l2_exact {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { forward; set_mcast; to_cpu; drop; NoAction; }
        default_action = NoAction();
        size = 256;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; drop; NoAction; }
        default_action = drop();
        size = 256;
    }
    table acl_ternary {
        key = {
            hdr.ipv4.srcAddr: ternary;
            hdr.ipv4.protocol: ternary;
        }
        actions = { acl_drop; acl_to_cpu; acl_pass; }
        default_action = acl_pass();
        counters = acl_counter;
        size = 64;
    }
    table ttl_range {
        key = { hdr.ipv4.ttl: range; }
        actions = { drop; NoAction; }
        default_action = NoAction();
        size = 16;
    }
    table proto_optional {
        key = {
            hdr.ipv4.protocol: optional;
            hdr.ipv4.diffserv: optional;
        }
        actions = { drop; NoAction; }
        default_action = NoAction();
        size = 16;
    }
    table smac_learn {
        key = { hdr.ethernet.srcAddr: exact; }
        actions = { learn; NoAction; }
        default_action = learn();
        size = 256;
    }

    apply {
        port_counter.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.ipv4.isValid()) {
            standard_metadata.priority = hdr.ipv4.diffserv[2:0];  // egress queue (--priority-queues)
        }
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            return;
        }
        smac_learn.apply();
        if (meta.learn == 1) {
            digest<learn_t>(1, {meta.src, meta.port});
        }
        if (!l2_exact.apply().hit) {
            if (hdr.ipv4.isValid()) {
                ipv4_lpm.apply();
                ttl_range.apply();
                proto_optional.apply();
                acl_ternary.apply();
            } else {
                drop();
            }
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
