"""P4Info from the p4lite back end: names, ids, aliases, params, scopes, resources."""

from __future__ import annotations

from p4.config.v1 import p4info_pb2

from p4lite.compiler.emitters import ids
from tests.unit.test_compiler_backend_json import compile_program, program

BASIC_LOCALS = """
    action drop() { mark_to_drop(sm); }
    action ipv4_forward(bit<48> dstAddr, bit<9> port) {
        sm.egress_spec = port;
        hdr.eth.dst = dstAddr;
    }
    table ipv4_lpm {
        key = { hdr.h.w: lpm; }
        actions = { ipv4_forward; drop; NoAction; }
        size = 1024;
        default_action = drop();
    }
"""


def _expected_id(prefix: int, name: str) -> int:
    return (prefix << 24) | (ids.jenkins_one_at_a_time(name) & 0xFFFFFF)


def test_table_and_action_names_ids_aliases_and_params() -> None:
    info = compile_program(program("ipv4_lpm.apply();", BASIC_LOCALS)).p4info
    assert info.pkg_info.arch == "v1model"
    (table,) = info.tables
    assert table.preamble.name == "I.ipv4_lpm" and table.preamble.alias == "ipv4_lpm"
    assert table.preamble.id == _expected_id(ids.PREFIX_TABLE, "I.ipv4_lpm")
    assert [(m.id, m.name, m.bitwidth, m.match_type) for m in table.match_fields] == [
        (1, "hdr.h.w", 16, p4info_pb2.MatchField.LPM)]
    assert table.size == 1024
    assert table.initial_default_action.action_id == _expected_id(ids.PREFIX_ACTION, "I.drop")
    names = [a.preamble.name for a in info.actions]
    assert names == ["NoAction", "I.drop", "I.ipv4_forward"]  # declaration order, like p4c
    noaction = info.actions[0].preamble
    assert noaction.id == 21257015
    forward = info.actions[2]
    assert [(p.id, p.name, p.bitwidth) for p in forward.params] == [(1, "dstAddr", 48),
                                                                     (2, "port", 9)]
    assert [r.id for r in table.action_refs] == [
        _expected_id(ids.PREFIX_ACTION, n) for n in ("I.ipv4_forward", "I.drop", "NoAction")]


def test_implicit_noaction_is_default_only_without_initial_default() -> None:
    local = "action a() { } table t { key = { hdr.h.v: exact; } actions = { a; } }"
    (table,) = compile_program(program("t.apply();", local)).p4info.tables
    refs = {r.id: r for r in table.action_refs}
    assert refs[21257015].scope == p4info_pb2.ActionRef.DEFAULT_ONLY
    assert list(refs[21257015].annotations) == ["@defaultonly"]
    assert not table.HasField("initial_default_action")


def test_scopes_const_default_and_const_entries() -> None:
    local = """
    action a(bit<8> x) { hdr.h.v = x; }
    action b() { }
    table t {
        key = { hdr.h.v: exact; }
        actions = { @tableonly a; @defaultonly b; }
        const default_action = b();
        const entries = { 1: a(2); }
    }
"""
    (table,) = compile_program(program("t.apply();", local)).p4info.tables
    scopes = [r.scope for r in table.action_refs]
    assert scopes == [p4info_pb2.ActionRef.TABLE_ONLY, p4info_pb2.ActionRef.DEFAULT_ONLY]
    assert table.const_default_action_id == _expected_id(ids.PREFIX_ACTION, "I.b")
    assert table.is_const_table and table.has_initial_entries


def test_default_action_arguments_are_canonical_bytes() -> None:
    local = """
    action a(bit<16> x) { hdr.h.w = x; }
    table t { key = { hdr.h.v: exact; } actions = { a; } default_action = a(0x0102); }
"""
    (table,) = compile_program(program("t.apply();", local)).p4info.tables
    (arg,) = table.initial_default_action.arguments
    assert arg.param_id == 1 and arg.value == b"\x01\x02"


def test_name_annotations_and_id_override() -> None:
    local = """
    @name(".global_act") action a() { }
    @id(0x01000042) action b() { }
    @name("renamed") table t { key = { hdr.h.v: exact; } actions = { a; b; } }
"""
    info = compile_program(program("t.apply();", local)).p4info
    assert info.tables[0].preamble.name == "I.renamed"
    by_name = {a.preamble.name: a.preamble.id for a in info.actions}
    assert by_name["global_act"] == _expected_id(ids.PREFIX_ACTION, "global_act")
    assert by_name["I.b"] == 0x01000042


def test_externs_in_p4info() -> None:
    local = """
    register<bit<32>>(16) r;
    counter(8, CounterType.packets) c;
    direct_counter(CounterType.packets_and_bytes) dc;
    meter(4, MeterType.bytes) mt;
    action a() { c.count(0); dc.count(); }
    table t { key = { hdr.h.v: exact; } actions = { a; } counters = dc; }
"""
    info = compile_program(program("t.apply();", local)).p4info
    (reg,) = info.registers
    assert reg.preamble.name == "I.r" and reg.size == 16
    assert reg.type_spec.bitstring.bit.bitwidth == 32
    (counter,) = info.counters
    assert counter.spec.unit == p4info_pb2.CounterSpec.PACKETS and counter.size == 8
    (direct,) = info.direct_counters
    assert direct.spec.unit == p4info_pb2.CounterSpec.BOTH
    assert direct.direct_table_id == info.tables[0].preamble.id
    assert list(info.tables[0].direct_resource_ids) == [direct.preamble.id]
    (meter,) = info.meters
    assert meter.spec.unit == p4info_pb2.MeterSpec.BYTES and meter.size == 4
    assert reg.preamble.id >> 24 == ids.PREFIX_REGISTER
    assert direct.preamble.id >> 24 == ids.PREFIX_DIRECT_COUNTER


def test_digest_and_controller_header() -> None:
    top = """
struct learn_t { bit<16> w; bit<9> port; }
@controller_header("packet_in") header packet_in_t { bit<9> port; bit<7> pad; }
"""
    local = "action a() { digest<learn_t>(1, { hdr.h.w, sm.ingress_port }); }" \
            " table t { actions = { a; } }"
    info = compile_program(program("t.apply();", local, top=top)).p4info
    (digest,) = info.digests
    assert digest.preamble.name == "learn_t"
    assert digest.type_spec.struct.name == "learn_t"
    members = info.type_info.structs["learn_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [("w", 16),
                                                                             ("port", 9)]
    (cpm,) = info.controller_packet_metadata
    assert cpm.preamble.name == "packet_in"
    assert cpm.preamble.id >> 24 == ids.PREFIX_CONTROLLER_HEADER
    assert [(m.id, m.name, m.bitwidth) for m in cpm.metadata] == [(1, "port", 9), (2, "pad", 7)]


def test_aliases_are_shortest_unique_suffixes_across_controls() -> None:
    top = """
control Sub(inout headers hdr) {
    action a() { }
    table t { key = { hdr.h.v: exact; } actions = { a; } }
    apply { t.apply(); }
}
"""
    local = "Sub() s1; Sub() s2;"
    info = compile_program(program("s1.apply(hdr); s2.apply(hdr);", local, top=top)).p4info
    assert [(t.preamble.name, t.preamble.alias) for t in info.tables] == [
        ("I.s1.t", "s1.t"), ("I.s2.t", "s2.t")]


def test_p4info_text_has_p4c_header() -> None:
    text = compile_program(program()).p4info_text()
    assert text.startswith("# proto-file: p4/config/v1/p4info.proto\n")
    assert 'arch: "v1model"' in text
