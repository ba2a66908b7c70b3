"""Compiled programs load into the p4lite switch core and forward packets as written."""

from __future__ import annotations

import struct
from pathlib import Path

from bench._frames import internet_checksum
from p4lite.compiler.driver import compile_file, compile_text
from p4lite.switch.core.runtime_api import ActionCall, MatchField, TableEntry
from p4lite.switch.core.switch import Switch

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
    assert internet_checksum(ip) == 0  # the checksum was recomputed over the rewritten header
    assert data[34:] == b"payload"
    assert switch.register_read("I.seen", 0) == 1


def test_l3_program_drops_on_miss_and_non_ip() -> None:
    switch = Switch(compile_text(L3, filename="l3.p4").bmv2)
    assert switch.process(_ipv4_packet(b"\x0b\x00\x00\x01", ttl=64), port=1) == []
    assert switch.process(b"\x00" * 12 + b"\x86\xdd" + b"\x00" * 40, port=1) == []
    assert switch.register_read("I.seen", 0) == 0


EXPR = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> sat; bit<8> sub; bit<16> cat; bit<8> sl; int<8> s;
             bit<8> mode; bit<8> res; }
struct headers { h_t h; }
struct meta_t { bool flag; }
parser P(packet_in pkt, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t meta) { apply { } }
control Sub(inout bit<8> v) {
    apply { if (v == 0) { return; } v = v + 100; }
}
control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Sub() sub;
    action pick(bit<8> k) {
        if (k == 1) { hdr.h.res = 11; } else { hdr.h.res = 22; }
    }
    action stop() { hdr.h.res = 99; }
    table modes {
        key = { hdr.h.mode: exact; }
        actions = { pick; stop; }
        const entries = { 1: pick(1); 2: pick(2); 3: stop(); }
        default_action = pick(0);
    }
    apply {
        sm.egress_spec = 2;
        hdr.h.sat = hdr.h.a |+| hdr.h.b;
        hdr.h.sub = hdr.h.a |-| hdr.h.b;
        hdr.h.cat = hdr.h.a ++ hdr.h.b;
        hdr.h.sl = hdr.h.cat[11:4];
        hdr.h.s = hdr.h.s - 8s100;
        meta.flag = hdr.h.a > hdr.h.b;
        switch (modes.apply().action_run) {
            stop: { exit; }
        }
        if (meta.flag) { sub.apply(hdr.h.sl); }
        hdr.h.sl[0:0] = 1w1;
    }
}
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def _run(a: int, b: int, s: int, mode: int) -> bytes:
    switch = Switch(compile_text(EXPR, filename="expr.p4").bmv2)
    packet = bytes([a, b, 0, 0, 0, 0, 0, s & 0xFF, mode, 0])
    ((port, data),) = switch.process(packet, port=1)
    assert port == 2
    return data


def test_expression_semantics_on_the_switch() -> None:
    data = _run(200, 100, -100, 1)
    assert data[2] == 255  # |+| saturates
    assert data[3] == 100  # |-|
    assert data[4:6] == bytes([200, 100])  # ++
    cat = (200 << 8) | 100
    assert data[6] == (((cat >> 4) & 0xFF) + 100) & 0xFF | 1  # slice, sub-control, slice store
    assert struct.unpack("b", data[7:8])[0] == 56  # int<8>: -100 - 100 wraps to 56
    assert data[9] == 11  # if inside an action (_jump_if_zero / _jump)


def test_exit_and_return_paths_on_the_switch() -> None:
    data = _run(1, 5, 0, 3)  # stop: exit before the sub-control and the slice store
    assert data[9] == 99 and data[6] == ((1 << 8 | 5) >> 4) & 0xFF
    data = _run(1, 5, 0, 2)
    assert data[3] == 0 and data[9] == 22
    data = _run(5, 1, 0, 7)  # default pick(0); flag true; sl == 0x50 -> +100
    assert data[9] == 22 and data[6] == (0x50 + 100) | 1


FLOW = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> sel; bit<8> a; bit<8> b; bit<8> trace; }
struct headers { h_t h; }
struct meta_t { bit<8> unused; }
parser P(packet_in pkt, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t meta) { apply { } }
control Leaf(inout h_t h) {
    apply {
        if (h.sel == 3) { exit; }
        if (h.sel == 4) { return; }
        h.trace = h.trace | 8w0x10;
    }
}
control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Leaf() leaf;
    action mark(bit<8> bitv) { hdr.h.trace = hdr.h.trace | bitv; }
    table ta { key = { hdr.h.a: exact; } actions = { mark; NoAction; }
               const entries = { 1: mark(1); 2: NoAction(); } }
    table tb { key = { hdr.h.b: exact; } actions = { mark; NoAction; }
               const entries = { 1: mark(2); } }
    table tc { key = { hdr.h.b: exact; } actions = { mark; NoAction; }
               const entries = { 1: mark(2); } }
    apply {
        sm.egress_spec = 1;
        if (hdr.h.sel >= 2) {
            leaf.apply(hdr.h);
            hdr.h.trace = hdr.h.trace | 8w0x20;
        } else if (ta.apply().hit) {
            if (tb.apply().miss) { hdr.h.trace = hdr.h.trace | 8w0x40; }
        } else {
            switch (tc.apply().action_run) {
                mark: { hdr.h.trace = hdr.h.trace | 8w0x04; }
                default: { hdr.h.trace = hdr.h.trace | 8w0x08; }
            }
        }
        hdr.h.trace = hdr.h.trace | 8w0x80;
    }
}
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_nested_control_flow_on_the_switch() -> None:
    switch = Switch(compile_text(FLOW, filename="flow.p4").bmv2)

    def trace(sel: int, a: int, b: int) -> int:
        ((_, data),) = switch.process(bytes([sel, a, b, 0]), port=0)
        return data[3]

    assert trace(2, 0, 0) == 0x10 | 0x20 | 0x80  # sub-control runs to its end
    assert trace(3, 0, 0) == 0x00  # exit inside the sub-control ends ingress
    assert trace(4, 0, 0) == 0x20 | 0x80  # return ends only the sub-control
    assert trace(0, 1, 1) == 0x01 | 0x02 | 0x80  # ta hit (mark 1), tb hit (mark 2)
    assert trace(0, 1, 9) == 0x01 | 0x40 | 0x80  # ta hit, tb miss
    assert trace(0, 2, 9) == 0x40 | 0x80  # ta hit with NoAction, tb miss
    assert trace(0, 9, 1) == 0x02 | 0x04 | 0x80  # ta miss, switch: mark
    assert trace(0, 9, 9) == 0x08 | 0x80  # ta miss, switch: default (NoAction)


VALUE_SWITCH = FLOW.replace("""        sm.egress_spec = 1;
        if (hdr.h.sel >= 2) {""", """        sm.egress_spec = 1;
        switch (hdr.h.a) {
            7: { hdr.h.b = 70; }
            8:
            9: { hdr.h.b = 89; }
            default: { hdr.h.b = 1; }
        }
        if (hdr.h.sel >= 2) {""")


def test_switch_on_a_value_on_the_switch() -> None:
    switch = Switch(compile_text(VALUE_SWITCH, filename="vswitch.p4").bmv2)

    def b_after(a: int) -> int:
        ((_, data),) = switch.process(bytes([5, a, 0, 0]), port=0)
        return data[2]

    assert [b_after(a) for a in (7, 8, 9, 10)] == [70, 89, 89, 1]


ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted((ROOT / "tests" / "p4").glob("*.p4")) + sorted((ROOT / "p4src").glob("*.p4"))


def test_every_repository_program_compiles_and_loads() -> None:
    assert PROGRAMS, "no .p4 programs found"
    for path in PROGRAMS:
        result = compile_file(path, include_dirs=[ROOT / "p4src"])
        Switch(result.bmv2)
        assert result.p4info.pkg_info.arch == "v1model", path
