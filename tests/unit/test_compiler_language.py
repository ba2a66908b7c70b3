"""P4_16 constructs of issue 13: ill-formed uses are errors at file:line:col."""

from __future__ import annotations

import re

import pytest

from p4lite.compiler.driver import compile_text
from p4lite.compiler.errors import CompileError
from p4lite.switch.core.switch import Switch
from tests.unit.test_compiler_backend_json import program


def _error_at(text: str, needle: str, message: str) -> None:
    """Compiling ``text`` fails with ``message`` at the first line holding ``needle``."""
    with pytest.raises(CompileError) as info:
        compile_text(text, filename="bad.p4")
    err = str(info.value)
    assert message in err, err
    match = re.match(r"bad\.p4:(\d+):(\d+): error: ", err)
    assert match, err
    line = next(n for n, t in enumerate(text.splitlines(), start=1) if needle in t)
    assert int(match.group(1)) == line, err
    start = text.splitlines()[line - 1].index(needle)
    assert start <= int(match.group(2)) - 1 < start + len(needle), err


def test_inout_argument_must_be_an_lvalue() -> None:
    locals_ = "action inc(inout bit<8> x) { x = x + 1; }"
    _error_at(program("inc(hdr.h.v + 1);", locals_), "hdr.h.v + 1",
              "argument for inout parameter x must be an l-value")


def test_out_argument_type_must_match() -> None:
    locals_ = "action set(out bit<8> x) { x = 1; }"
    _error_at(program("set(hdr.h.w);", locals_), "hdr.h.w",
              "type mismatch: parameter x is bit<8>, the argument is bit<16>")


def test_sub_control_inout_argument_must_be_an_lvalue() -> None:
    top = "control S(inout bit<8> p) { apply { p = 1; } }"
    text = program("s.apply(8w3);", "S() s;", top=top)
    _error_at(text, "8w3", "argument for inout parameter p must be an l-value")


def test_function_returning_a_value_needs_a_return_value() -> None:
    top = "bit<8> f(in bit<8> x) {\n    return;\n}"
    _error_at(program("hdr.h.v = f(hdr.h.v);", top=top), "return;",
              "a function that returns a value needs return <value>")


def test_void_function_has_no_value() -> None:
    top = "void f(in bit<8> x) { }"
    _error_at(program("hdr.h.v = f(hdr.h.v);", top=top), "f(hdr.h.v)",
              "function f returns no value")


def test_function_argument_count() -> None:
    top = "bit<8> f(in bit<8> x) { return x; }"
    _error_at(program("hdr.h.v = f(hdr.h.v, 1);", top=top), "f(hdr.h.v, 1)", "argument")


def test_function_call_runs_only_in_the_taken_branch_of_the_conditional_operator() -> None:
    """``c ? f(x) : g(x)`` runs one call (p4c: an if around the calls), in an action
    and in an if condition of the apply block; the ?:'s temporary has its type."""
    top = ("bit<8> inc(inout bit<8> x) { x = x + 1; return 8w0x10; }\n"
           "bit<8> dec(inout bit<8> x) { x = x - 1; return 8w0x20; }\n"
           "bool odd(inout bit<8> x) { x = x + 5; return x[0:0] == 1; }")
    locals_ = ("action pick() { hdr.h.w = (bit<16>)(hdr.h.c == 1 ? inc(hdr.h.v)"
               " : dec(hdr.h.v)); }")
    body = ("pick();\n"
            "if (hdr.h.c == 2 ? odd(hdr.h.v) : false) { hdr.h.b = 3; }\n"
            "sm.egress_spec = 1;")
    switch = Switch(compile_text(program(body, locals_, top=top), filename="tern.p4").bmv2)

    def run(c: int, v: int) -> tuple[int, int, int]:
        h = bytes([0, (c & 3), v, 0, 0])  # a=0 (12 bits), b=0, c, v, w=0
        ((_, data),) = switch.process(bytes(12) + b"\x08\x00" + h, port=0)
        return (data[15] >> 2) & 3, data[16], int.from_bytes(data[17:19], "big")

    assert run(1, 5) == (0, 6, 0x10)  # inc only
    assert run(0, 5) == (0, 4, 0x20)  # dec only
    assert run(2, 5) == (3, 9, 0x20)  # dec, then odd(v): v = 9, odd: b = 3
    assert run(3, 5) == (0, 4, 0x20)  # odd() not run: v = 4


def test_conditional_operator_with_a_call_needs_a_scalar_type() -> None:
    top = "h_t f(in h_t x) { return x; }"
    _error_at(program("hdr.h = hdr.h.c == 1 ? f(hdr.h) : hdr.h;", top=top), "hdr.h.c == 1",
              "not supported by p4lite: a ?: of type")


def test_dont_care_for_an_in_or_inout_parameter_is_an_error() -> None:
    """As p4c's type checker: `_` only for out parameters (and an action's
    directionless ones)."""
    top = "bit<8> f(in bit<8> x, inout bit<8> y) { return x; }"
    for call, needle in (("f(_, hdr.h.v)", "_,"), ("f(hdr.h.v, _)", "_)")):
        _error_at(program(f"hdr.h.v = {call};", top=top), needle,
                  "don't care argument is only allowed for out parameters")


def test_dont_care_extern_result_needs_its_type() -> None:
    _error_at(program("hash(_, HashAlgorithm.crc16, 8w0, { hdr.h.v }, 16w8);"), "hash(",
              "could not infer a type for variable O")
    _error_at(program("random(_, 0, 7);"), "random(", "could not infer a type for variable T")
    text = program("random(_, 8w0, 8w7);\n hash<bit<8>, bit<8>, tuple<bit<8>>, bit<16>>"
                   "(_, HashAlgorithm.crc16, 8w0, { hdr.h.v }, 16w8);")
    prims = [p["op"] for a in compile_text(text, filename="dc.p4").bmv2["actions"]
             for p in a["primitives"]]
    assert "modify_field_rng_uniform" in prims and "modify_field_with_hash_based_offset" in prims


def test_compound_assignment_needs_matching_types() -> None:
    _error_at(program("hdr.h.v += hdr.h.w;"), "hdr.h.v += hdr.h.w",
              "operands of + have different types")


def test_masked_key_is_named_after_its_text_and_copied() -> None:
    local = "table t2 { key = { hdr.h.v & 0xf0: exact; } actions = { NoAction; } }"
    result = compile_text(program("t2.apply();", local), filename="prog.p4")
    table = next(t for t in result.bmv2["pipelines"][0]["tables"] if t["name"] == "I.t2")
    assert table["key"][0]["name"] == "hdr.h.v & 0xf0"
    assert table["key"][0]["target"][0] == "scalars"  # computed into key_N, as p4c
    fields = [f for t in result.p4info.tables for f in t.match_fields]
    assert [(f.name, f.bitwidth) for f in fields] == [("hdr.h.v & 0xf0", 8)]


def test_cast_key_without_name_is_an_error() -> None:
    local = "table t2 { key = { (bit<16>) hdr.h.v: exact; } actions = { NoAction; } }"
    _error_at(program("t2.apply();", local), "(bit<16>) hdr.h.v",
              "Complex key expression requires a @name annotation")


def test_top_level_register_index_type() -> None:
    top = "register<bit<8>>(4) acc;"
    _error_at(program("acc.write(0, hdr.h.w);", top=top), "hdr.h.w",
              "type mismatch: expected bit<8>, got bit<16>")


def test_hash_result_must_be_a_field() -> None:
    _error_at(program("hash(hdr.h.v + 1, HashAlgorithm.crc16, 8w0, { hdr.h.v }, 16w8);"),
              "hdr.h.v + 1", "an extern result that is not stored in a field")


def test_control_with_a_table_applied_twice_is_an_error() -> None:
    top = ("control S(inout bit<8> p) {\n"
           "    table t { key = { p : exact; } actions = { NoAction; } }\n"
           "    apply { t.apply(); }\n"
           "}")
    text = program("s.apply(hdr.h.v);\n s.apply(hdr.h.v);", "S() s;", top=top)
    _error_at(text, "t.apply()", "applying table t more than once")


def test_control_type_applied_by_name_checks_its_arguments() -> None:
    top = "control S(inout bit<8> p) { apply { p = 1; } }"
    _error_at(program("S.apply(hdr.h.w);", top=top), "hdr.h.w",
              "type mismatch: parameter p is bit<8>, the argument is bit<16>")


def test_dont_care_inside_an_expression_is_an_error() -> None:
    locals_ = "action f(in bit<8> a) { hdr.h.v = a; }"
    _error_at(program("f(_ + 1);", locals_), "_ + 1", "DontCare")


def test_list_expression_with_too_few_elements() -> None:
    top = "struct pair_t { bit<8> x; bit<8> y; }"
    _error_at(program("pair_t p = {hdr.h.v};", top=top), "{hdr.h.v}",
              "pair_t has 2 fields, the list has 1")


def test_struct_expression_missing_a_field() -> None:
    top = "struct pair_t { bit<8> x; bit<8> y; }"
    _error_at(program("pair_t p = {x = 1, y = 2};\n if (p == {x = 1}) { hdr.h.v = 1; }",
                      top=top), "{x = 1}", "the expression sets no field y")


def test_comparing_two_list_expressions_is_an_error() -> None:
    _error_at(program("if ({1, 2} == {1, 2}) { hdr.h.v = 1; }"), "{1, 2} == {1, 2}",
              "cannot compare these values with ==")


def test_slice_of_a_slice_out_of_range() -> None:
    _error_at(program("hdr.h.v[7:4][4:0] = 3;"), "hdr.h.v[7:4][4:0]",
              "slice [4:0] out of range for bit<4>")


def test_register_in_a_parser_is_an_error_as_in_p4c() -> None:
    parser = ("register<bit<8>>(1) seen;\n"
              "state start {\n"
              "    seen.write(0, 1);\n"
              "    pkt.extract(hdr.eth); transition accept; }")
    _error_at(program(parser=parser), "seen.write(0, 1)",
              "not supported in parser on this target")


@pytest.mark.parametrize(("top", "stmt", "needle", "message"), [
    ("action a(inout bit<8> v) { v = 1; }", "a(meta.m);", "a(meta.m)",
     "a(meta.m): Action calls are not allowed within parsers"),
    ("", "mark_to_drop(sm);", "mark_to_drop", "mark_to_drop(sm): not supported in parser "
     "on this target"),
    ("", "random(meta.m, 8w0, 8w1);", "random", "not supported in parser on this target"),
    ("bit<8> f(in bit<8> v) {\n if (v == 1) { return 2; }\n return v; }",
     "meta.m = f(meta.m);", "if (v == 1)", "IfStatement: not supported in parser on this "
     "target"),
])
def test_parser_state_calls_refused_as_in_p4c(top: str, stmt: str, needle: str,
                                              message: str) -> None:
    """A parser state calls functions and log_msg; p4c refuses actions, other
    externs and (its inliner runs after RemoveParserIfs) a function holding an if."""
    parser = f"state start {{ pkt.extract(hdr.eth);\n {stmt}\n transition accept; }}"
    _error_at(program(parser=parser, top=top), needle, message)


def test_parser_state_calls_split_the_state_where_a_branch_needs_it() -> None:
    """`c && f(x)` in a parser state: the state ends with a select on `c` and the
    call runs in a state of its own (p4c's RemoveParserIfs)."""
    top = "bit<8> inc(inout bit<8> v) { v = v + 1; return v; }"
    parser = ("state start { pkt.extract(hdr.eth);\n meta.m = inc(meta.m) + meta.m;\n"
              " bool q = meta.m == 2 && inc(meta.m) == 3;\n transition accept; }")
    states = compile_text(program(parser=parser, top=top),
                          filename="p.p4").bmv2["parsers"][0]["parse_states"]
    names = [s["name"] for s in states]
    assert names[0] == "start" and len(states) == 3, names
    assert [t["next_state"] for t in states[0]["transitions"]] == names[1:3]
    assert states[1]["transitions"][0]["next_state"] == names[2]


@pytest.mark.parametrize(("stmt", "needle", "message"), [
    ("hdr.h.v = hdr.h.v / hdr.h.v;", "hdr.h.v / hdr.h.v",
     "could not evaluate expression at compilation time"),
    ("hdr.h.v = hdr.h.v % 3;", "hdr.h.v % 3", "could not evaluate expression at compilation "
     "time"),
    ("hdr.h.v = 8w4 / hdr.h.v;", "8w4 / hdr.h.v", "could not evaluate expression at "
     "compilation time"),
    ("hdr.h.w /= hdr.h.w;", "hdr.h.w /= hdr.h.w", "could not evaluate expression"),
    ("hdr.h.v = hdr.h.v / 256;", "hdr.h.v / 256", "Division by zero"),
    ("hdr.h.v = hdr.h.v % 8w0;", "hdr.h.v % 8w0", "Modulo by zero"),
    ("hdr.h.v = (bit<8>)((int<8>)hdr.h.v / 2);", "(int<8>)hdr.h.v / 2",
     "Cannot operate on signed values"),
])
def test_run_time_division_is_refused_as_in_p4c(stmt: str, needle: str, message: str) -> None:
    """BMv2 has no division: p4c keeps only what it folds (unsigned / or % by a power
    of two, 0 / x; pair div_mod_pow2) and refuses the rest in these words."""
    _error_at(program(stmt), needle, message)


def test_constructor_arguments_are_compile_time_values_of_the_right_count() -> None:
    top = "control Add(inout h_t h)(bit<8> k) { apply { h.v = h.v + k; } }"
    _error_at(program("a.apply(hdr.h);", "Add(1, 2) a;", top=top), "Add(1, 2) a",
              "Add takes 1 constructor argument, got 2")
    _error_at(program("a.apply(hdr.h);", "Add(hdr.h.v) a;", top=top), "hdr.h.v) a",
              "expected a compile-time constant")
    _error_at(program("Add.apply(hdr.h);", top=top), "Add.apply",
              "Add takes 1 constructor argument, got 0")


def test_for_loop_refusals() -> None:
    """Loops run in actions only: p4c (34b86e9) writes a loop in an apply block as its
    body once, without looping; for-in loops are refused in p4c's words."""
    loop = "for (bit<8> i = 0; i < 3; i = i + 1) { hdr.h.v = hdr.h.v + i; }"
    _error_at(program(loop), "for (bit<8> i = 0", "a for loop in an apply block")
    _error_at(program("a();", "action a() { for (bit<8> i in 1 .. 3) { hdr.h.v = i; } }"),
              "for (bit<8> i in", "BMV2 does not support for-in loops")
    _error_at(program("a();", "action a() { break; }"), "break;", "break outside a for loop")


def test_a_loop_that_does_not_end_drops_the_packet(monkeypatch: pytest.MonkeyPatch) -> None:
    from p4lite.switch.core import primitives

    monkeypatch.setattr(primitives, "MAX_LOOP_STEPS", 1000)  # read when the switch loads
    locals_ = ("action spin() { for (bit<8> i = 0; i != hdr.h.w[7:0]; i = i + 2) { "
               "hdr.h.v = hdr.h.v + 1; } }")
    switch = Switch(compile_text(program("sm.egress_spec = 1; spin();", locals_),
                                 filename="spin.p4").bmv2)

    def run(w: int) -> list:
        h = bytes([0, 0, 0]) + w.to_bytes(2, "big")  # a, b, c, v = 0, then w
        return switch.process(bytes(12) + b"\x08\x00" + h, port=0)

    assert run(8)[0][1][16] == 4  # i = 0, 2, 4, 6: four passes
    assert run(7) == []  # i is even, never 7: dropped after MAX_LOOP_STEPS primitives


def test_lookahead_statement_needs_a_type() -> None:
    parser = "state start { pkt.lookahead(); pkt.extract(hdr.eth); transition accept; }"
    _error_at(program(parser=parser), "pkt.lookahead()",
              "lookahead takes one type argument and no arguments")


def test_header_field_of_a_struct_holding_a_header_is_rejected() -> None:
    top = ("header inner_t { bit<8> v; }\n"
           "struct wrap_t { inner_t i; }\n"
           "header outer_t {\n    wrap_t w;\n}\n"
           "struct more_t { outer_t o; }")
    text = program("hdr.h.v = 1;", top=top, meta="bit<8> m; more_t more;")
    _error_at(text, "wrap_t w;", "not supported by p4lite: header field w of type")


def test_run_time_stack_index_from_action_data_is_a_local() -> None:
    """Inside an expression an action parameter is "local" (p4c writes "runtime_data"
    there, which simple_switch refuses to load: "Invalid 'type' in expression")."""
    locals_ = ("action mark(bit<8> i) { hdr.vlan[i].tci = 1; }\n"
               "table t { key = { hdr.h.v: exact; } actions = { mark; } }")
    result = compile_text(program("t.apply();", locals_), filename="prog.p4",
                          p4c_nesting=False)
    action = next(a for a in result.bmv2["actions"] if a["name"] == "I.mark")
    target = action["primitives"][0]["parameters"][0]
    assert target["value"]["op"] == "access_field"
    deref = target["value"]["left"]["value"]
    assert deref["op"] == "dereference_header_stack"
    assert deref["right"] == {"type": "local", "value": 0}


def test_is_valid_with_a_run_time_stack_index_is_rejected() -> None:
    _error_at(program("if (hdr.vlan[hdr.h.v].isValid()) { hdr.h.v = 1; }"),
              "hdr.vlan[hdr.h.v].isValid()", "not supported by p4lite: isValid() on a header")


def test_run_time_stack_index_must_be_bits() -> None:
    _error_at(program("hdr.vlan[hdr.h.v == 1].tci = 1;"), "hdr.h.v == 1",
              "a header stack index must be bit<N> or int<N>, not bool")


def test_signed_run_time_stack_index_past_either_end_drops_the_packet() -> None:
    """``int<N>`` indices as p4c takes them: a negative one is not Python's count from
    the end but past the stack (simple_switch aborts; p4lite drops the packet)."""
    parser = ("state start { pkt.extract(hdr.eth); pkt.extract(hdr.vlan.next); "
              "pkt.extract(hdr.vlan.next); transition accept; }")
    body = "hdr.vlan[(int<8>)hdr.eth.src[7:0]].tci = 7;\nsm.egress_spec = 1;"
    switch = Switch(compile_text(program(body, parser=parser, deparse="pkt.emit(hdr.eth); "
                                         "pkt.emit(hdr.vlan);"), filename="idx.p4").bmv2)
    eth = bytes(11) + b"\x01" + b"\x81\x00"
    ((_, data),) = switch.process(eth + bytes(8), port=0)
    assert data[14:] == bytes([0, 0, 0, 0, 0, 7, 0, 0])  # vlan[1]
    for index in (0xFF, 0x80, 2):  # -1, -128, one past the end
        assert switch.process(eth[:11] + bytes([index]) + eth[12:] + bytes(8), port=0) == []


def test_sub_parser_with_a_missing_argument() -> None:
    top = ("parser Sub(packet_in pkt, out ethernet_t e) {\n"
           "    state start { pkt.extract(e); transition accept; } }")
    parser = ("Sub() sub;\n"
              "state start {\n"
              "    sub.apply(pkt);\n"
              "    transition accept; }")
    text = program(parser=parser, top=top)
    _error_at(text, "sub.apply(pkt)", "missing argument for parameter e")


VARBIT = "header v_t { bit<8> len; varbit<32> opts; }"


@pytest.mark.parametrize(("kw", "needle", "message"), [
    # ill-formed: a varbit header is extracted with its length, a fixed one without
    ({"parser": "v_t v;\nstate start { pkt.extract(v); transition accept; }"},
     "pkt.extract(v)", "header v_t has a varbit field: extract needs its length in bits"),
    ({"parser": "state start { pkt.extract(hdr.eth, 32w8); transition accept; }"},
     "pkt.extract(hdr.eth, 32w8)", "header ethernet_t has no varbit field"),
    ({"parser": "v_t v;\nstate start { pkt.extract(v, true); transition accept; }"},
     "true", "type mismatch: expected bit<32>, got bool"),
    # valid P4 that p4lite leaves out
    ({"ingress": "v.opts = w.opts;", "ingress_locals": "v_t v; v_t w;"}, "v.opts",
     "not supported by p4lite: assigning a varbit field"),
    ({"ingress_locals": "varbit<8> x;"}, "varbit<8> x;",
     "not supported by p4lite: a local variable of type varbit<8>"),
    ({"ingress_locals": "w_t z;", "top": VARBIT + "\nheader w_t { varbit<8> a; varbit<8> b; }"},
     "varbit<8> b;", "not supported by p4lite: a header with more than one varbit field"),
    ({"meta": "bit<8> m; v_t v;"}, "header v_t",
     "not supported by p4lite: a header with a varbit field (v_t) as metadata"),
])
def test_varbit_errors(kw: dict[str, str], needle: str, message: str) -> None:
    kw.setdefault("top", VARBIT)
    _error_at(program(**kw), needle, message)


UNION = "header a_t { bit<8> x; }\nheader b_t { bit<16> y; }\nheader_union u_t { a_t a; b_t b; }"


@pytest.mark.parametrize(("top", "body", "needle", "message"), [
    # ill-formed: a union member must be a header (P4_16 8.20)
    ("struct s_t { bit<8> x; }\nheader_union u_t { s_t s; }", "", "s_t s;",
     "error: header_union u_t: member s must be a header, not s_t"),
    (UNION, "hdr.h.v = u.c.x;", "u.c.x", "header_union u_t has no member c"),
    (UNION, "hdr.h.v = u.x;", "u.x", "header_union u_t has no member x"),
    (UNION, "u = hdr.h;", "u = hdr.h;", "cannot assign header h to header union u"),
    (UNION, "hdr.h.v = (bit<8>)us.lastIndex;", "us.lastIndex",
     "not supported by p4lite: member .lastIndex of a stack of header unions here"),
    (UNION, "us[hdr.h.v].a.setValid();", "us[hdr.h.v]",
     "not supported by p4lite: a run-time index into a stack of header unions"),
    # valid P4 that p4lite leaves out
    (UNION, "u = {a = {1}};", "{a = {1}}",
     "not supported by p4lite: a {...} expression for a header union"),
])
def test_header_union_errors(top: str, body: str, needle: str, message: str) -> None:
    _error_at(program(body, "u_t u;\nu_t[2] us;", top=top), needle, message)


def test_key_on_a_stack_element_with_a_run_time_index_is_copied() -> None:
    local = ("table t2 { key = { hdr.vlan[hdr.h.b].tci: exact @name(\"tci\"); }\n"
             "    actions = { NoAction; } }")
    result = compile_text(program("t2.apply();", local), filename="prog.p4")
    table = next(t for t in result.bmv2["pipelines"][0]["tables"] if t["name"] == "I.t2")
    assert table["key"][0]["target"][0] == "scalars"
    assert table["key"][0]["target"][1].startswith("key_")


def test_a_stack_of_unions_parameter_aliases_its_argument() -> None:
    locals_ = "u_t[2] us;\naction g(inout u_t[2] x) { x[0].a.setValid(); x.push_front(1); }"
    result = compile_text(program("g(us);", locals_, top=UNION), filename="prog.p4")
    prims = [p for a in result.bmv2["actions"] for p in a["primitives"]]
    assert [(p["op"], p["parameters"][0]) for p in prims[-2:]] == [
        ("add_header", {"type": "header", "value": "us[0].a"}),
        ("push", {"type": "header_union_stack", "value": "us"})]


@pytest.mark.parametrize(("locals_", "body", "needle", "message"), [
    ("u_t[2] us;\naction g(inout u_t[2] x) { x[0].a.setValid(); us[0].b.setValid(); }",
     "g(us);", "g(us);", "not supported by p4lite: copying a stack of header unions"),
    ("u_t u;\nu_t v;", "if (u == v) { hdr.h.v = 1; }", "u == v",
     "not supported by p4lite: operator == on header union u"),
])
def test_header_union_parameters_and_equality_are_not_supported(locals_: str, body: str,
                                                                needle: str,
                                                                message: str) -> None:
    _error_at(program(body, locals_, top=UNION), needle, message)


def test_a_sub_control_applied_to_two_unions_writes_each() -> None:
    """Sub-control actions are cached per argument binding: the key must tell unions apart."""
    top = UNION + ("\ncontrol S(inout u_t x) {\n"
                   "    action mark() { x.a.setValid(); x.a.x = 1; }\n"
                   "    apply { mark(); } }")
    locals_ = "u_t u; u_t v; S() s;"
    result = compile_text(program("s.apply(u); s.apply(v);", locals_, top=top),
                          filename="prog.p4")
    written = {p["parameters"][0]["value"] for a in result.bmv2["actions"]
               for p in a["primitives"] if p["op"] == "add_header"}
    assert written == {"u.a", "v.a"}


@pytest.mark.parametrize("expr, needle, message", [
    ("hdr.h.v ++ (int<8>)hdr.h.v", "(int<8>)hdr.h.v", "Cannot unify type 'int<8>' with type 'bit<16>'"),
    ("(bit<16>)((int<8>)hdr.h.w[7:0] ++ hdr.h.v)", "hdr.h.v)",
     "Cannot unify type 'bit<8>' with type 'int<16>'"),
])
def test_concatenating_mixed_signedness_is_refused_as_in_p4c(expr: str, needle: str,
                                                             message: str) -> None:
    """p4c 34b86e9 refuses `++` of a bit<N> and an int<M> either way round (pair
    concat_signed has signed operands on both sides, which it takes)."""
    _error_at(program(f"bit<16> w = {expr}; hdr.h.v = w[7:0];"), needle, message)


def test_table_apply_in_an_expression_follows_the_short_circuit() -> None:
    """``t.apply().hit`` in ``||``, ``?:`` and an argument: a table is applied only where
    P4 evaluates it (each table's default action counts its applies in ``v``), and
    ``w``'s left operand ``v`` is read before the apply that writes it."""
    top = "bit<8> twice(in bit<8> x) { return x + x; }"
    tables = "\n".join(
        f"table {t} {{ key = {{ hdr.h.c : exact; }} actions = {{ count; }} "
        f"default_action = count(); }}" for t in ("t1", "t2", "t3", "t4"))
    locals_ = "action count() { hdr.h.v = hdr.h.v + 1; }\n" + tables
    body = ("bool x = hdr.h.c == 1 || t1.apply().hit;\n"
            "hdr.h.b = (hdr.h.c == 2 ? (t2.apply().miss ? 2w1 : 2w2) : 2w3);\n"
            "hdr.h.w = (bit<16>)(hdr.h.v + (t3.apply().hit ? 8w0x10 : 8w0x20));\n"
            "hdr.h.a = (bit<12>)twice(t4.apply().miss ? 8w3 : 8w4);\n"
            "if (x) { hdr.h.a = hdr.h.a + 0x100; }\n"
            "sm.egress_spec = 1;")
    switch = Switch(compile_text(program(body, locals_, top=top), filename="hit.p4").bmv2)

    def run(c: int) -> tuple[int, int, int, int]:
        h = bytes([0, (c & 3), 0, 0, 0])  # a=0, b=0, c, v=0, w=0
        ((_, data),) = switch.process(bytes(12) + b"\x08\x00" + h, port=0)
        a = (data[14] << 4) | (data[15] >> 4)
        return a, (data[15] >> 2) & 3, data[16], int.from_bytes(data[17:19], "big")

    # c=1: t1 skipped (x true), t2 skipped (b=3), t3 (v 0 -> 1, w = 0 + 0x20), t4 (miss)
    assert run(1) == (0x106, 3, 2, 0x20)
    # c=2: t1 (miss: x false), t2 (miss: b=1), t3 (v 2 -> 3, w = 2 + 0x20), t4
    assert run(2) == (6, 1, 4, 0x22)
    # c=0: t1, t2 skipped, t3 (v 1 -> 2, w = 1 + 0x20), t4
    assert run(0) == (6, 3, 3, 0x21)


@pytest.mark.parametrize(("body", "needle", "message"), [
    ("hdr.h.v = t.apply().action_run == 1 ? 8w1 : 8w2;", "t.apply().action_run",
     "apply().action_run inside an expression"),
    ("bool b = t.apply() == t.apply();", "t.apply() ==", "an apply() inside an expression"),
])
def test_table_apply_in_an_expression_other_than_hit_or_miss_is_refused(
        body: str, needle: str, message: str) -> None:
    locals_ = "table t { key = { hdr.h.c : exact; } actions = { NoAction; } }"
    _error_at(program(body, locals_), needle, message)


STACK_PARSER = """
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.vlan.next);
        pkt.extract(hdr.vlan.next);
        transition accept;
    }
"""


def test_run_time_indexed_stack_field_as_an_inout_argument() -> None:
    """The index is saved before the call (bump writes it) and the field copied in and
    out through it; an argument the body never touches is not copied, so its index is
    never used (p4lite's switch drops a packet whose index is past the end)."""
    locals_ = ("action bump(inout bit<16> x) { hdr.eth.etype = hdr.eth.etype + 1; "
               "x = x + 0x100; }\n"
               "action keep(inout bit<16> x) { }")
    body = ("bump(hdr.vlan[hdr.eth.etype].tci);\n"
            "keep(hdr.vlan[hdr.eth.src[15:0]].tci);\n"
            "sm.egress_spec = 1;")
    text = program(body, locals_, parser=STACK_PARSER, deparse="pkt.emit(hdr.eth); "
                   "pkt.emit(hdr.vlan);")
    switch = Switch(compile_text(text, filename="idx.p4").bmv2)
    vlans = bytes([0, 1, 0, 2, 0, 3, 0, 4])
    eth = bytes(6) + bytes([0, 0, 0, 0, 0x77, 0x77])
    ((_, data),) = switch.process(eth + b"\x00\x01" + vlans, port=0)
    assert data[12:14] == b"\x00\x02"  # etype (the index) + 1
    assert data[14:] == bytes([0, 1, 0, 2, 1, 3, 0, 4])  # vlan[1].tci, the old index


@pytest.mark.parametrize(("locals_", "body", "needle", "message"), [
    ("action act(inout vlan_t v) { }", "act(hdr.vlan[hdr.eth.etype]);", "hdr.vlan[",
     "a header stack element with a run-time index as an inout argument"),
    ("S() s;", "s.apply(hdr.vlan[hdr.eth.etype].tci);", "hdr.vlan[",
     "a field of a header stack element with a run-time index as a control's"),
])
def test_run_time_indexed_stack_arguments_that_are_refused(locals_: str, body: str,
                                                            needle: str, message: str) -> None:
    top = "control S(inout bit<16> p) { apply { p = 1; } }"
    _error_at(program(body, locals_, parser=STACK_PARSER, top=top), needle, message)


def test_comparing_a_header_stack_needs_a_stack_of_its_type() -> None:
    top = "header w_t { bit<8> b; }"
    locals_ = "w_t[2] w;"
    _error_at(program("if (hdr.vlan == w) { hdr.h.v = 1; }", locals_, top=top),
              "hdr.vlan == w", "cannot compare header stack vlan with == to anything but")


def test_parser_local_initialisers_with_calls_run_in_order_in_the_start_state() -> None:
    """Once one initialiser calls a function, every local's initial value is set by
    the start state's first statements, in declaration order (``after`` reads
    meta.m after ``inc`` wrote it; ``before`` reads it before)."""
    top = "bit<8> inc(inout bit<8> v) { v = v + 1; return v + 0x10; }"
    parser = ("bit<8> before = meta.m;\n"
              "bit<8> got = inc(meta.m);\n"
              "bit<8> after = meta.m;\n"
              "state start { pkt.extract(hdr.eth); pkt.extract(hdr.h);\n"
              "    hdr.h.v = got; hdr.h.w = before ++ after; transition accept; }")
    switch = Switch(compile_text(program("sm.egress_spec = 1;", parser=parser, top=top),
                                 filename="locals.p4").bmv2)
    ((_, data),) = switch.process(bytes(12) + b"\x08\x00" + bytes(5), port=0)
    assert data[16] == 0x11 and data[17:19] == b"\x00\x01"


def test_extern_constructor_arguments_name_an_instance_of_the_type() -> None:
    top = ("control Keep(inout h_t h)(register<bit<8>> r) { apply { r.write(0, h.v); } }\n"
           "control Sub(inout h_t h) { apply { } }\n"
           "control Nest(inout h_t h)(Sub s) { apply { s.apply(h); } }")
    _error_at(program("k.apply(hdr.h);", "Keep(3) k;", top=top), "3) k",
              "constructor argument for r of Keep must be an instance of")
    _error_at(program("k.apply(hdr.h);", "register<bit<16>>(2) w;\nKeep(w) k;", top=top),
              "w) k", "type mismatch: constructor parameter r of Keep is")
    _error_at(program("n.apply(hdr.h);", "Sub() s;\nNest(s) n;", top=top), "Sub s",
              "not supported by p4lite: constructor parameter s of type")
    # the instance itself: both Keep instances write the one register
    text = program("k1.apply(hdr.h); k2.apply(hdr.h);",
                   "register<bit<8>>(2) r8;\nKeep(r8) k1;\nKeep(r8) k2;", top=top)
    arrays = compile_text(text, filename="ok.p4").bmv2["register_arrays"]
    assert [a["name"] for a in arrays] == ["I.r8"]


def test_tuple_locals_index_by_constants_in_range() -> None:
    _error_at(program("tuple<bit<8>, bit<16>> t = {hdr.h.v, hdr.h.w};\nhdr.h.v = t[2];"),
              "v = t[2]", "index 2 out of range for tuple<bit<8>, bit<16>>")
    _error_at(program("tuple<bit<8>, bit<16>> t = {hdr.h.v, hdr.h.w};\n"
                      "hdr.h.v = t[hdr.h.v];"), "hdr.h.v];", "expected a compile-time constant")
    # two locals of one tuple type have one type: one is assigned to the other
    text = program("tuple<bit<8>, bool> t = {hdr.h.v, true};\ntuple<bit<8>, bool> u = t;\n"
                   "hdr.h.v = u[0] + 1;\nsm.egress_spec = 1;")
    switch = Switch(compile_text(text, filename="tuple.p4").bmv2)
    ((_, data),) = switch.process(bytes(12) + b"\x08\x00" + bytes([0, 0, 0x41, 0, 0]), port=0)
    assert data[16] == 0x42
