"""Programs compiled by p4lite's compiler, run on the switch core."""

from __future__ import annotations

import os
import pathlib
import struct

from p4lite.compiler.driver import compile_file, compile_text
from p4lite.switch.core import hashes
from p4lite.switch.core.runtime_api import ActionCall, MatchField, Replica, TableEntry
from p4lite.switch.core.switch import Switch

ROOT = pathlib.Path(__file__).resolve().parents[2]

HEADERS = """
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
"""

L3 = HEADERS + """
struct metadata { }
struct headers { ethernet_t ethernet; ipv4_t ipv4; }
parser P(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: parse_ipv4; default: accept; } }
    state parse_ipv4 { packet.extract(hdr.ipv4); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action ipv4_forward(bit<48> dstAddr, bit<9> port) {
        sm.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; drop; NoAction; }
        size = 1024;
        default_action = drop();
    }
    apply {
        if (sm.checksum_error == 1) { drop(); return; }
        if (hdr.ipv4.isValid()) { ipv4_lpm.apply(); }
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}
control D(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.ethernet); packet.emit(hdr.ipv4); }
}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""

LANES = """
#include <core.p4>
#include <v1model.p4>
header agg_t { bit<32> idx; bit<32> v0; bit<32> v1; bit<32> v2; bit<32> v3; }
struct metadata { bit<32> tmp; }
struct headers { agg_t agg; }
parser P(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { packet.extract(hdr.agg); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<bit<32>>(16) r0; register<bit<32>>(16) r1;
    register<bit<32>>(16) r2; register<bit<32>>(16) r3;
    action add_lanes() {
        r0.read(meta.tmp, hdr.agg.idx); hdr.agg.v0 = meta.tmp + hdr.agg.v0; r0.write(hdr.agg.idx, hdr.agg.v0);
        r1.read(meta.tmp, hdr.agg.idx); hdr.agg.v1 = meta.tmp + hdr.agg.v1; r1.write(hdr.agg.idx, hdr.agg.v1);
        r2.read(meta.tmp, hdr.agg.idx); hdr.agg.v2 = meta.tmp + hdr.agg.v2; r2.write(hdr.agg.idx, hdr.agg.v2);
        r3.read(meta.tmp, hdr.agg.idx); hdr.agg.v3 = meta.tmp + hdr.agg.v3; r3.write(hdr.agg.idx, hdr.agg.v3);
    }
    apply {
        add_lanes();
        if (hdr.agg.v0 > 100) { sm.mcast_grp = 1; } else { sm.egress_spec = sm.ingress_port; }
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr.agg); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def ipv4(ttl: int = 64, dst: bytes = bytes([10, 1, 2, 3]), good: bool = True) -> bytes:
    hdr = bytes.fromhex("4500001c00004000") + bytes([ttl, 17]) + b"\0\0" + bytes([192, 168, 0, 1]) + dst
    ck = hashes.csum16(hdr) ^ (0 if good else 0x0101)
    return hdr[:10] + ck.to_bytes(2, "big") + hdr[12:]


ETH = bytes.fromhex("aabbccddeeff0011223344550800")


def test_compiled_l3_router() -> None:
    sw = Switch(compile_text(L3, "l3.p4").bmv2)
    sw.table_add(TableEntry("I.ipv4_lpm", (MatchField("lpm", 0x0A010000, prefix_len=16),),
                            ActionCall("I.ipv4_forward", (0x0200000000AA, 4))))
    out = sw.process(ETH + ipv4() + b"data", 2)
    assert [p for p, _ in out] == [4]
    data = out[0][1]
    assert data[:12] == bytes.fromhex("0200000000aaaabbccddeeff") and data[22] == 63
    assert hashes.csum16(data[14:34]) == 0 and data[34:] == b"data"
    assert sw.process(ETH + ipv4(good=False), 2) == []  # checksum_error -> drop
    assert sw.process(ETH + ipv4(dst=bytes([10, 2, 0, 1])), 2) == []  # default drop


def test_compiled_register_lanes_and_multicast() -> None:
    sw = Switch(compile_text(LANES, "lanes.p4").bmv2)
    sw.mc_group_set(1, [Replica(3, 1), Replica(5, 1)])

    def send(idx: int, *values: int) -> list:
        return sw.process(struct.pack("!5I", idx, *values), 9)

    out = send(2, 10, 20, 30, 40)
    assert out == [(9, struct.pack("!5I", 2, 10, 20, 30, 40))]
    out = send(2, 95, 1, 1, 1)
    assert [p for p, _ in out] == [3, 5]
    assert struct.unpack("!5I", out[0][1]) == (2, 105, 21, 31, 41)
    assert [sw.register_read(f"I.r{i}", 2) for i in range(4)] == [105, 21, 31, 41]
    send(2, 0xFFFFFFFF, 0, 0, 0)
    assert sw.register_read("I.r0", 2) == 104  # 32-bit wrap-around


def test_project_aggregate_program_loads_and_survives_garbage() -> None:
    result = compile_file(ROOT / "p4src" / "aggregate.p4")
    sw = Switch(result.bmv2)
    rng = os.urandom
    for n in list(range(0, 80)) + [200, 600, 1500]:
        sw.process(rng(n), n % 4)
    assert sw.errors == 0
