"""Back-end diagnostics: every error names file:line:col and says what is wrong."""

from __future__ import annotations

import re

import pytest

from p4lite.compiler.driver import compile_text
from p4lite.compiler.errors import CompileError
from tests.unit.test_compiler_backend_json import program

LOCALS = """
    action drop() { mark_to_drop(sm); }
    table t { key = { hdr.h.v: exact; } actions = { drop; } }
"""


def _error(text: str) -> CompileError:
    with pytest.raises(CompileError) as info:
        compile_text(text, filename="bad.p4")
    return info.value


def _line_of(text: str, needle: str) -> int:
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(needle)


@pytest.mark.parametrize(
    ("body", "locals_", "needle", "message"),
    [
        ("hdr.h.v = hdr.h.w;", "", "hdr.h.v = hdr.h.w;",
         "type mismatch: expected bit<8>, got bit<16>"),
        ("hdr.h.v = nosuch;", "", "nosuch", "unknown name nosuch"),
        ("hdr.h.vv = 1;", "", "hdr.h.vv", "header h_t has no field vv"),
        ("hdr.h.v = true;", "", "hdr.h.v = true", "expected bit<8>, got bool"),
        ("if (hdr.h.v) { }", "", "if (hdr.h.v)", "condition must be bool, not bit<8>"),
        ("hdr.h.v = hdr.h.v / 3;", "", "hdr.h.v / 3", "could not evaluate expression at compilation time"),
        ("t.apply(); t.apply();", LOCALS, "t.apply(); t.apply();",
         "not supported by p4lite: applying table t more than once"),
        ("hdr.h.v = hdr.h.v[8:1];", "", "hdr.h.v[8:1]", "slice [8:1] out of range for bit<8>"),
        ("hdr.h.w = hdr.h.v + hdr.h.w;", "", "hdr.h.v + hdr.h.w",
         "operands of + have different types: bit<8> and bit<16>"),
        ("nosuch_action();", "", "nosuch_action", "unknown action or function nosuch_action"),
        ("hdr.vlan[2].tci = 1;", "", "hdr.vlan[2]", "index 2 out of range for vlan[2]"),
    ],
)
def test_errors_point_at_the_offending_line(body: str, locals_: str, needle: str,
                                            message: str) -> None:
    text = program(body, locals_)
    err = _error(text)
    assert message in str(err)
    match = re.match(r"bad\.p4:(\d+):(\d+): error: ", str(err))
    assert match, str(err)
    assert int(match.group(1)) == _line_of(text, needle)
    line_text = text.splitlines()[int(match.group(1)) - 1]
    start = line_text.index(needle)
    assert start <= int(match.group(2)) - 1 < start + len(needle)


def test_unknown_parser_state() -> None:
    parser = "state start { pkt.extract(hdr.h); transition nowhere; }"
    text = program(parser=parser, deparse="pkt.emit(hdr.h);")
    err = _error(text)
    assert "unknown parser state nowhere" in str(err)
    assert err.loc is not None and err.loc.line == _line_of(text, "transition nowhere")


def test_table_key_expression_needs_a_name() -> None:
    local = "table t2 { key = { hdr.h.v + 1: exact; } actions = { NoAction; } }"
    text = program("t2.apply();", local)
    err = _error(text)
    assert str(err).startswith(f"bad.p4:{_line_of(text, 'hdr.h.v + 1')}:")
    assert "Complex key expression requires a @name annotation" in str(err)


def test_assigning_a_constant_or_a_table_parameter() -> None:
    text = program("K = 1;", top="const bit<8> K = 3;")
    assert "cannot assign to a constant" in str(_error(text))
    local = "action a(bit<8> x) { x = 1; } table t3 { actions = { a; } }"
    assert "cannot assign to a directionless action parameter" in str(
        _error(program("t3.apply();", local)))


def test_default_action_must_be_listed() -> None:
    local = """
    action a() { } action b() { }
    table t { key = { hdr.h.v: exact; } actions = { a; } default_action = b(); }
"""
    text = program("t.apply();", local)
    err = _error(text)
    assert "default action I.b is not in the table's actions" in str(err)
    assert err.loc is not None and err.loc.line == _line_of(text, "table t {")


def test_unsupported_package_and_constructs() -> None:
    text = program().replace("V1Switch(P(), VC(), I(), E(), CC(), D()) main;",
                             "V1Switch(P(), VC(), I(), E(), CC()) main;")
    assert "V1Switch takes 6 arguments, got 5" in str(_error(text))
    text = program("hdr.h.v = (bit<8>) hdr.h.isValid();")
    assert "cannot cast bool to bit<8>" in str(_error(text))


@pytest.mark.parametrize(
    ("kwargs", "needle", "message"),
    [
        ({"body": "hdr.h.v = hdr.h.v >> -1;"}, "hdr.h.v >> -1", "a shift amount must be unsigned"),
        ({"parser": "state start { verify(true, 1); transition accept; }"}, "verify(true, 1)",
         "verify needs an error code, not int"),
        ({"meta": "bit<8> m; vlan_t[2] st;"}, "vlan_t[2] st",
         "not supported by p4lite: metadata field st of type vlan_t[2]"),
        ({"body": "mark_to_drop(hdr);"}, "mark_to_drop(hdr)", "mark_to_drop needs standard_metadata"),
        ({"deparse": "pkt.emit(hdr.h.v);"}, "pkt.emit(hdr.h.v)",
         "emit needs a header, a header union, a header stack or a struct of headers"),
        ({"compute": "verify_checksum(true, {hdr.h.v}, hdr.h.w, HashAlgorithm.csum16);"},
         "verify_checksum", "verify_checksum belongs in the verifyChecksum control"),
    ],
)
def test_more_errors_name_their_location(kwargs: dict, needle: str, message: str) -> None:
    body = kwargs.pop("body", "")
    text = program(body, **kwargs)
    err = _error(text)
    assert message in str(err)
    assert err.loc is not None and err.loc.line == _line_of(text, needle)


def test_in_parameters_cannot_be_written() -> None:
    top = """
control Sub(in bit<8> x, inout bit<8> y) {
    apply { y = x; x = 1; }
}
"""
    text = program("sub.apply(hdr.h.v, meta.m);", "Sub() sub;", top=top)
    err = _error(text)
    assert "cannot write to in parameter x" in str(err)
    assert err.loc is not None and err.loc.line == _line_of(text, "x = 1;")
    local = "action set(in bit<8> v) { v = 3; }"
    err = _error(program("set(hdr.h.v);", local))
    assert "cannot write to in parameter v" in str(err)


def test_control_instance_with_a_table_applied_twice() -> None:
    top = """
control Sub(inout headers hdr) {
    action a() { }
    table t { key = { hdr.h.v: exact; } actions = { a; } }
    apply { t.apply(); }
}
"""
    text = program("s.apply(hdr); s.apply(hdr);", "Sub() s;", top=top)
    err = _error(text)
    # p4c: "a path from table I.s.t back to itself"
    assert "not supported by p4lite: applying table t more than once" in str(err)


def test_headers_must_be_whole_bytes() -> None:
    text = program().replace("header vlan_t { bit<16> tci; bit<16> etype; }",
                             "header vlan_t { bit<16> tci; bit<15> etype; }")
    err = _error(text)
    assert "header vlan_t is 31 bits long, not a whole number of bytes" in str(err)
    assert err.loc is not None and err.loc.line == _line_of(text, "header vlan_t")


def test_direct_meter_must_be_bound_and_read() -> None:
    local = """
    direct_meter<bit<8>>(MeterType.packets) dm;
    action a() { }
    table t { key = { hdr.h.v: exact; } actions = { a; } meters = dm; }
"""
    text = program("t.apply();", local)
    err = _error(text)
    assert "direct_meter dm is never read" in str(err)
    assert err.loc is not None and err.loc.line == _line_of(text, "direct_meter<bit<8>>")
    unbound = local.replace(" meters = dm;", "").replace("action a() { }",
                                                          "action a() { dm.read(meta.m); }")
    assert "dm: direct meter is not associated with any table via 'meters' table property" in (
        str(_error(program("t.apply();", unbound))))


def test_unattached_direct_counters_and_meters_are_left_out() -> None:
    """As p4c: a direct counter (even counted) or a direct meter no running action reads,
    named by no table, is not in the JSON; the ids of the others shift down."""
    local = """
    counter(2, CounterType.packets) c1;
    direct_counter(CounterType.packets) dc;
    direct_meter<bit<8>>(MeterType.packets) dm;
    counter(2, CounterType.packets) c2;
    action a() { dc.count(); c2.count(0); }
    action unused() { dm.read(meta.m); }
    table t { key = { hdr.h.v: exact; } actions = { a; } }
"""
    result = compile_text(program("t.apply();", local), filename="prog.p4")
    assert [(c["name"], c["id"]) for c in result.bmv2["counter_arrays"]] == [
        ("I.c1", 0), ("I.c2", 1)]
    assert result.bmv2["meter_arrays"] == []
    assert [c.preamble.name for c in result.p4info.counters] == ["I.c1", "I.c2"]
    assert not result.p4info.direct_counters and not result.p4info.direct_meters


def test_parser_needs_standard_metadata_last() -> None:
    text = program().replace("inout meta_t meta, inout standard_metadata_t sm) {\n\n",
                             "inout meta_t meta, inout headers sm) {\n\n", 1)
    assert "inout headers sm" in text
    err = _error(text)
    assert "the parser's last parameter must be standard_metadata_t, not headers" in str(err)


def test_entry_and_select_values_must_match_key_widths() -> None:
    local = """
    action a() { }
    table t { key = { hdr.h.v: exact; } actions = { a; } const entries = { 16w3: a(); } }
"""
    text = program("t.apply();", local)
    err = _error(text)
    assert "entry value has type bit<16>, the key is bit<8>" in str(err)
    parser = "state start { pkt.extract(hdr.h); transition select(hdr.h.v) { 16w1: accept; } }"
    err = _error(program(parser=parser, deparse="pkt.emit(hdr.h);"))
    assert "case value has type bit<16>, the select key is bit<8>" in str(err)


def test_digest_data_must_match_the_struct() -> None:
    top = "struct learn_t { bit<16> w; bit<9> port; }"
    err = _error(program("digest<learn_t>(1, { hdr.h.w });", top=top))
    assert "learn_t has 2 fields, the digest data has 1" in str(err)
    err = _error(program("digest<learn_t>(1, { hdr.h.v, sm.ingress_port });", top=top))
    assert "digest field has type bit<8>, the struct member is bit<16>" in str(err)


def test_register_read_needs_the_element_type() -> None:
    local = "register<bit<32>>(4) r;"
    err = _error(program("r.read(hdr.h.v, 0);", local))
    assert "register I.r holds bit<32>, cannot read it into a bit<8>" in str(err)


def test_errors_in_unused_tables_and_actions_are_reported() -> None:
    text = program("", "action unused_a() { hdr.h.v = hdr.h.w; }")
    err = _error(text)
    assert "type mismatch: expected bit<8>, got bit<16>" in str(err)
    assert err.loc is not None and err.loc.line == _line_of(text, "unused_a")
    text = program("", "table unused_t { key = { hdr.h.v: fuzzy; } actions = { NoAction; } }")
    assert "not supported by p4lite: match kind fuzzy" in str(_error(text))


def test_duplicate_id_annotation_is_a_located_compile_error() -> None:
    local = """
    @id(0x01000042) action first_a() { }
    @id(0x01000042) action second_a() { }
    table t { key = { hdr.h.v: exact; } actions = { first_a; second_a; } }
"""
    text = program("t.apply();", local)
    err = _error(text)
    assert "@id 0x01000042 is assigned to multiple declarations" in str(err)
    assert err.loc is not None and err.loc.file == "bad.p4"
    assert err.loc.line == _line_of(text, "second_a()")
    assert str(err).startswith(f"bad.p4:{err.loc.line}:{err.loc.col}: error: ")
    # ... and it names the other declaration and where it is
    first = f"bad.p4:{_line_of(text, 'first_a()')}:"
    assert "I.first_a" in str(err) and first in str(err)


def test_duplicate_id_across_kinds_is_a_compile_error() -> None:
    local = """
    @id(7) register<bit<32>>(16) r;
    @id(7) counter(8, CounterType.packets) c;
    action a() { c.count(0); r.write(0, 1); }
    table t { key = { hdr.h.v: exact; } actions = { a; } }
"""
    text = program("t.apply();", local)
    err = _error(text)
    assert "@id 0x00000007 is assigned to multiple declarations" in str(err)
    assert err.loc is not None and err.loc.line == _line_of(text, "CounterType.packets) c;")
    assert f"I.r (bad.p4:{_line_of(text, '(16) r;')}:" in str(err)
