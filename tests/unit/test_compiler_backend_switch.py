"""Compiled programs load into the p4lite switch core and forward packets as written."""

from __future__ import annotations

import struct

from p4lite.compiler.driver import compile_text
from p4lite.switch.core import Switch
from p4lite.switch.runtime_api import ActionCall, MatchField, TableEntry

L3 = """
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
struct headers { ethernet_t eth; ipv4_t ipv4; }
struct meta_t { bit<32> hits; }
parser P(packet_in pkt, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) { 0x0800: ipv4; default: accept; }
    }
    state ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}
control VC(inout headers hdr, inout meta_t meta) { apply { } }
control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(4) seen;
    action drop() { mark_to_drop(sm); }
    action fwd(bit<48> mac, bit<9> port) {
        sm.egress_spec = port;
        hdr.eth.src = hdr.eth.dst;
        hdr.eth.dst = mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    table lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { fwd; drop; }
        default_action = drop();
    }
    apply {
        if (hdr.ipv4.isValid()) {
            if (lpm.apply().hit) {
                seen.read(meta.hits, 0);
                seen.write(0, meta.hits + 1);
            }
        } else {
            drop();
        }
    }
}
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.ipv4); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def _ipv4_packet(dst: bytes, ttl: int) -> bytes:
    eth = b"\x00\x00\x00\x00\x00\x01" + b"\x00\x00\x00\x00\x00\x02" + b"\x08\x00"
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20, 7, 0, ttl, 17, 0, b"\x0a\x00\x00\x01", dst)
    return eth + ip + b"payload"


def _csum(data: bytes) -> int:
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def test_l3_program_forwards_rewrites_and_counts() -> None:
    switch = Switch(compile_text(L3, filename="l3.p4").bmv2)
    switch.table_add(TableEntry(
        "I.lpm", (MatchField("lpm", 0x0A000200, prefix_len=24),),
        ActionCall("I.fwd", (0xAABBCCDDEEFF, 3))))
    out = switch.process(_ipv4_packet(b"\x0a\x00\x02\x05", ttl=64), port=1)
    assert len(out) == 1
    port, data = out[0]
    assert port == 3
    assert data[:6] == bytes.fromhex("aabbccddeeff")
    assert data[6:12] == b"\x00\x00\x00\x00\x00\x01"
    ip = data[14:34]
    assert ip[8] == 63
    assert _csum(ip) == 0  # the checksum was recomputed over the rewritten header
    assert data[34:] == b"payload"
    assert switch.register_read("I.seen", 0) == 1


def test_l3_program_drops_on_miss_and_non_ip() -> None:
    switch = Switch(compile_text(L3, filename="l3.p4").bmv2)
    assert switch.process(_ipv4_packet(b"\x0b\x00\x00\x01", ttl=64), port=1) == []
    assert switch.process(b"\x00" * 12 + b"\x86\xdd" + b"\x00" * 40, port=1) == []
    assert switch.register_read("I.seen", 0) == 0
