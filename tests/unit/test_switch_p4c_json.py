"""The switch core reading BMv2 JSON in the exact shape real p4c writes it.

Every program here is a hand-written fragment in p4c-bm2-ss's shape: expression-valued
primitive parameters and parser ``set``/``advance`` sources wrapped twice, ``source_info``
everywhere, ``"mask": null`` keys, ``"direct_meters": null``, duplicated ``NoAction``
actions, range const entries with ``start``/``end`` only, and so on.
"""

from __future__ import annotations

import copy

import pytest

from bench._frames import internet_checksum
from p4lite.compiler.driver import compile_text
from p4lite.switch.core.codegen import unwrap
from p4lite.switch.core.runtime_api import ActionCall, MatchField, TableEntry
from p4lite.switch.core.switch import Switch, SwitchLoadError
from tests.support.samples import (
    ETHERNET,
    IPV4,
    ProgramBuilder,
    expr,
    fld,
    hexstr,
    key,
    masked,
    prim,
)


def twice(value: dict) -> dict:
    """p4c's form of an expression-valued primitive parameter."""
    return {"type": "expression", "value": value}


def src(line: int, fragment: str) -> dict:
    return {"filename": "prog.p4", "line": line, "column": 8, "source_fragment": fragment}


def default_transition(next_state: str | None) -> dict:
    return {"type": "default", "value": None, "mask": None, "next_state": next_state}


H = [["a", 8, False], ["b", 8, False], ["c", 16, False]]
E = [["v", 8, False]]


def one_action_program(prims: list, *, stack: bool = False, registers: int = 0) -> Switch:
    """Parse h (and two stack elements when ``stack``), run ``prims`` in ingress, deparse."""
    b = ProgramBuilder()
    b.header("h", H)
    order = ["h"]
    ops = [{"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}]
    if stack:
        order += b.stack("st", "e_t", E, 2)
        ops += [{"op": "extract", "parameters": [{"type": "stack", "value": "st"}]}] * 2
    if registers:
        b.register("ingress.r", registers, 16)
    b.set_parser([{"name": "start", "id": 0, "parser_ops": ops, "transition_key": [],
                   "transitions": [default_transition(None)]}], order)
    aid = b.action("ingress.act", [], prims)
    b.table("ingress", "tbl_act", [], [("ingress.act", aid)], default=(aid, []),
            default_const=True)
    return Switch(b.doc)


def run_once(sw: Switch, data: bytes, port: int = 0) -> bytes:
    out = sw.process(data, port)
    assert sw.errors == 0 and len(out) == 1
    return out[0][1]


# -- the wrapper itself --------------------------------------------------------------


def test_unwrap_drops_only_wrappers_around_typed_nodes() -> None:
    op = {"op": "+", "left": fld("h", "a"), "right": hexstr(1)}
    single = {"type": "expression", "value": op}
    assert unwrap(single) is single  # an operator node keeps its one wrapper
    assert unwrap(twice(single)) is single
    assert unwrap(twice(twice(single))) is single
    assert unwrap(twice(fld("h", "a"))) == fld("h", "a")
    stack_field = {"type": "stack_field", "value": ["st", "v"]}
    assert unwrap(twice(stack_field)) == stack_field
    assert unwrap(hexstr(3)) == hexstr(3)
    assert unwrap(None) is None


# -- primitive parameters ------------------------------------------------------------


@pytest.mark.parametrize("wrap", [twice, lambda v: v], ids=["p4c-double", "single"])
def test_assign_with_a_computed_source_in_either_wrapping(wrap) -> None:
    # hdr.h.a = hdr.h.a - 1 (p4c: (a + 0xff) & 0xff); hdr.h.c = a ++ b
    dec = masked(expr("+", fld("h", "a"), hexstr(0xFF)), 8)
    concat = masked(expr("|", expr("<<", fld("h", "a"), hexstr(8)), fld("h", "b")), 16)
    sw = one_action_program([prim("assign", fld("h", "a"), wrap(dec)),
                             prim("assign", fld("h", "c"), wrap(concat))])
    out = run_once(sw, bytes([0x00, 0x22, 0, 0]) + b"tail")
    assert out == bytes([0xFF, 0x22, 0xFF, 0x22]) + b"tail"


def test_wrapped_stack_field_source() -> None:
    # p4c wraps stack_field like an expression: hdr.h.a = hdr.st.last.v
    last = twice({"type": "stack_field", "value": ["st", "v"]})
    sw = one_action_program([prim("assign", fld("h", "a"), last)], stack=True)
    assert run_once(sw, bytes([1, 2, 0, 0, 7, 9])) == bytes([9, 2, 0, 0, 7, 9])


def test_wrapped_register_index_and_value() -> None:
    # r.write((bit<32>)(a + 1), c + 5); hdr.h.c = r.read(a + 1) computed the same way
    index = twice(masked(expr("+", fld("h", "a"), hexstr(1)), 32))
    value = twice(masked(expr("+", fld("h", "c"), hexstr(5)), 16))
    reg = {"type": "register_array", "value": "ingress.r"}
    sw = one_action_program([prim("register_write", reg, index, value),
                             prim("assign", fld("h", "c"), hexstr(0)),
                             prim("register_read", fld("h", "c"), reg, index)], registers=8)
    assert run_once(sw, bytes([2, 0, 0x01, 0x00])) == bytes([2, 0, 0x01, 0x05])
    assert sw.register_read("ingress.r", 3) == 0x105


def test_wrapped_condition_of_jump_if_zero() -> None:
    # if (hdr.h.a == 1) { hdr.h.b = 0x11; } else { hdr.h.b = 0x22; } inside an action
    cond = twice(expr("b2d", None, expr("==", fld("h", "a"), hexstr(1))))
    prims = [prim("_jump_if_zero", cond, hexstr(3)),
             prim("assign", fld("h", "b"), hexstr(0x11)),
             prim("_jump", hexstr(4)),
             prim("assign", fld("h", "b"), hexstr(0x22))]
    sw = one_action_program(prims)
    assert run_once(sw, bytes([1, 0, 0, 0]))[1] == 0x11
    assert run_once(sw, bytes([5, 0, 0, 0]))[1] == 0x22


def test_unary_minus_has_a_null_left_operand() -> None:
    # hdr.h.a = -hdr.h.b (p4c: {"op": "-", "left": null, ...} then the 8-bit mask)
    neg = twice(masked(expr("-", None, fld("h", "b")), 8))
    sw = one_action_program([prim("assign", fld("h", "a"), neg)])
    assert run_once(sw, bytes([0, 3, 0, 0]))[0] == 0xFD


def test_wrapped_log_msg_argument(caplog: pytest.LogCaptureFixture) -> None:
    arg = twice(masked(expr("+", fld("h", "a"), hexstr(1)), 8))
    params = [{"type": "string", "value": "a+1={}"},
              {"type": "parameters_vector", "value": [arg]}]
    sw = one_action_program([{"op": "log_msg", "parameters": params}])
    with caplog.at_level("INFO", logger="p4lite.switch.log_msg"):
        run_once(sw, bytes([41, 0, 0, 0]))
    assert "a+1=42" in caplog.text


# -- parser ----------------------------------------------------------------------------


def parser_program(states: list, errors: list | None = None) -> Switch:
    """A parser of h and g, then ingress copies parser_error into hdr.h.c (to observe it)."""
    b = ProgramBuilder()
    if errors is not None:
        b.doc["errors"] = errors
    b.header("h", H)
    b.header("g", [["x", 8, False]])
    b.scalar("tmp", 1)
    b.scalar("rem", 8)
    b.set_parser(states, ["h", "g"])
    aid = b.action("ingress.act", [], [
        prim("assign", fld("h", "c"), masked(fld("standard_metadata", "parser_error"), 16)),
        prim("assign", fld("h", "b"), fld("scalars", "rem"))])
    b.table("ingress", "tbl_act", [], [("ingress.act", aid)], default=(aid, []),
            default_const=True)
    return Switch(b.doc)


def extract(name: str) -> dict:
    return {"op": "extract", "parameters": [{"type": "regular", "value": name}]}


def test_parser_set_and_verify_as_p4c_writes_them() -> None:
    # tmp = (bit<1>)(h.a >= 5) written twice-wrapped; verify(tmp == 1, error 7) single-wrapped;
    # rem = h.a - 1 twice-wrapped
    set_tmp = {"op": "set", "parameters": [
        fld("scalars", "tmp"),
        twice(expr("b2d", None, expr(">=", fld("h", "a"), hexstr(5))))]}
    verify = {"op": "verify", "parameters": [expr("d2b", None, fld("scalars", "tmp")),
                                             hexstr(7)]}
    set_rem = {"op": "set", "parameters": [
        fld("scalars", "rem"), twice(masked(expr("+", fld("h", "a"), hexstr(0xFF)), 8))]}
    states = [{"name": "start", "id": 0, "parser_ops": [extract("h"), set_tmp, verify, set_rem],
               "transition_key": [], "transitions": [default_transition(None)]}]
    errors = [["NoError", 0], ["PacketTooShort", 1], ["NoMatch", 2], ["StackOutOfBounds", 3],
              ["HeaderTooShort", 4], ["ParserTimeout", 5], ["ParserInvalidArgument", 6],
              ["IPHeaderTooShort", 7]]
    sw = parser_program(states, errors)
    assert run_once(sw, bytes([9, 0, 0xAA, 0xAA])) == bytes([9, 8, 0, 0])
    # the verify fails: parser_error 7, the rest of the state is skipped (rem stays 0)
    assert run_once(sw, bytes([4, 0, 0xAA, 0xAA])) == bytes([4, 0, 0, 7])


def test_verify_with_a_bare_error_number() -> None:
    verify = {"op": "verify", "parameters": [expr("==", fld("h", "a"), hexstr(1)), 3]}
    states = [{"name": "start", "id": 0, "parser_ops": [extract("h"), verify],
               "transition_key": [], "transitions": [default_transition(None)]}]
    sw = parser_program(states)
    assert run_once(sw, bytes([2, 0, 0, 0]))[2:] == b"\x00\x03"


def test_advance_with_a_wrapped_amount_and_shift_with_a_byte_count() -> None:
    # advance(8 * (bit<32>)h.b) as p4c writes it, then extract g; shift skips 1 byte
    amount = twice(masked(expr("<<", fld("h", "b"), hexstr(3)), 32))
    states = [
        {"name": "start", "id": 0,
         "parser_ops": [extract("h"), {"op": "advance", "parameters": [amount]},
                        {"op": "shift", "parameters": [1]}, extract("g")],
         "transition_key": [], "transitions": [default_transition(None)]}]
    sw = parser_program(states)
    out = run_once(sw, bytes([0, 2, 0, 0, 0xEE, 0xEE, 0xDD, 0x55, 0x99]))
    # h, then g = 0x55 (after 2 + 1 skipped bytes), then the payload
    assert out == bytes([0, 0, 0, 0, 0x55, 0x99])


def test_missing_core_errors_get_the_next_free_values() -> None:
    # an older p4c numbered errors from 1 and had no ParserInvalidArgument: BMv2 adds it
    # after the largest value (7 here); an advance by a non-multiple of 8 raises it
    errors = [["NoError", 1], ["PacketTooShort", 2], ["NoMatch", 3], ["StackOutOfBounds", 4],
              ["HeaderTooShort", 5], ["ParserTimeout", 6]]
    states = [{"name": "start", "id": 0,
               "parser_ops": [extract("h"), {"op": "advance", "parameters": [hexstr(4)]}],
               "transition_key": [], "transitions": [default_transition(None)]}]
    sw = parser_program(states, errors)
    assert run_once(sw, bytes([0, 0, 0, 0, 1]))[2:4] == b"\x00\x07"


def test_old_default_transition_spelling() -> None:
    # older p4c: {"value": "default", "mask": null, "next_state": ...} without a type
    states = [
        {"name": "start", "id": 0, "parser_ops": [extract("h")],
         "transition_key": [fld("h", "a")],
         "transitions": [{"type": "hexstr", "value": "0x01", "mask": None, "next_state": None},
                         {"value": "default", "mask": None, "next_state": "parse_g"}]},
        {"name": "parse_g", "id": 1, "parser_ops": [extract("g")], "transition_key": [],
         "transitions": [{"value": "default", "mask": None, "next_state": None}]}]
    sw = parser_program(states)
    assert run_once(sw, bytes([1, 0, 0, 0, 0x42])) == bytes([1, 0, 0, 0, 0x42])  # g is payload
    assert run_once(sw, bytes([2, 0, 0, 0, 0x42, 0x43])) == bytes([2, 0, 0, 0, 0x42, 0x43])


# -- conditionals, checksums, const entries ------------------------------------------


@pytest.mark.parametrize("wrap", [twice, lambda v: v], ids=["double", "single"])
def test_conditional_and_checksum_condition_in_either_wrapping(wrap) -> None:
    b = ProgramBuilder()
    b.header("h", H)
    b.set_parser([{"name": "start", "id": 0, "parser_ops": [extract("h")], "transition_key": [],
                   "transitions": [default_transition(None)]}], ["h"])
    calc = b.calculation("calc", "csum16", [fld("h", "a"), fld("h", "b")])
    b.doc["checksums"] = [{"name": "cksum", "id": 0, "source_info": src(9, "update_checksum"),
                           "target": ["h", "c"], "type": "generic", "calculation": calc,
                           "verify": False, "update": True,
                           "if_cond": wrap(expr("==", fld("h", "a"), hexstr(1)))}]
    aid = b.action("ingress.set_b", [], [prim("assign", fld("h", "b"), hexstr(0x10))])
    b.table("ingress", "tbl_set_b", [], [("ingress.set_b", aid)], default=(aid, []),
            default_const=True)
    b.conditional("ingress", "node_2", wrap(expr("d2b", None, fld("h", "$valid$"))),
                  "tbl_set_b", None)
    b.doc["pipelines"][0]["init_table"] = "node_2"
    sw = Switch(b.doc)
    # a == 1: b set, checksum updated over (a, b) = 0x0110 -> ~0x0110
    assert run_once(sw, bytes([1, 0, 0, 0])) == bytes([1, 0x10, 0xFE, 0xEF])
    assert run_once(sw, bytes([2, 0, 0, 0])) == bytes([2, 0x10, 0, 0])  # no update


def test_const_entries_in_p4c_shape() -> None:
    # key: h.a range, h.b ternary; entries as p4c writes them (range: start/end, no key)
    b = ProgramBuilder()
    b.header("h", H)
    b.set_parser([{"name": "start", "id": 0, "parser_ops": [extract("h")], "transition_key": [],
                   "transitions": [default_transition(None)]}], ["h"])
    fwd = b.action("ingress.fwd", [("port", 9)],
                   [prim("assign", fld("standard_metadata", "egress_spec"),
                         {"type": "runtime_data", "value": 0})])
    noop = b.action("NoAction", [], [])
    entries = [
        {"source_info": src(20, "1..5, 0x10 &&& 0xf0 : fwd(2)"),
         "match_key": [{"match_type": "range", "start": "0x01", "end": "0x05"},
                       {"match_type": "ternary", "key": "0x10", "mask": "0xf0"}],
         "action_entry": {"action_id": fwd, "action_data": ["0x0002"]}, "priority": 1},
        {"source_info": src(21, "0..0xff, _ : fwd(3)"),
         "match_key": [{"match_type": "range", "start": "0x00", "end": "0xff"},
                       {"match_type": "ternary", "key": "0x00", "mask": "0x00"}],
         "action_entry": {"action_id": fwd, "action_data": ["0x0003"]}, "priority": 2}]
    b.table("ingress", "ingress.t", [key("range", "h", "a"), key("ternary", "h", "b")],
            [("ingress.fwd", fwd), ("NoAction", noop)], default=(noop, []), entries=entries)
    sw = Switch(b.doc)
    assert sw.process(bytes([3, 0x1F, 0, 0]), 0)[0][0] == 2
    assert sw.process(bytes([9, 0x1F, 0, 0]), 0)[0][0] == 3  # outside 1..5: second entry
    assert sw.process(bytes([3, 0x2F, 0, 0]), 0)[0][0] == 3  # b does not match 0x1?


def test_a_range_entry_missing_its_end_is_a_load_error() -> None:
    b = ProgramBuilder()
    b.header("h", H)
    noop = b.action("NoAction", [], [])
    b.table("ingress", "ingress.t", [key("range", "h", "a")], [("NoAction", noop)],
            entries=[{"match_key": [{"match_type": "range", "start": "0x01"}],
                      "action_entry": {"action_id": noop, "action_data": []}, "priority": 1}])
    with pytest.raises(SwitchLoadError, match=r"tables\[0\] 'ingress.t': entries\[0\].match_key\[0\]: missing 'end'"):
        Switch(b.doc)


# -- a whole program in p4c's shape -------------------------------------------------


def tutorial_basic() -> dict:
    """The p4lang/tutorials basic.p4 solution as p4c-bm2-ss 1.2 writes it (hand-written):
    ARP reply table, IPv4 LPM with a TTL decrement, checksum update under isValid()."""
    b = ProgramBuilder()
    b.doc["headers"][0]["pi_omit"] = True
    b.header("ethernet", ETHERNET)
    b.header("ipv4", IPV4)
    states = [
        {"name": "start", "id": 0, "parser_ops": [extract("ethernet")],
         "transitions": [{"type": "hexstr", "value": "0x0800", "mask": None,
                          "next_state": "parse_ipv4"}, default_transition(None)],
         "transition_key": [fld("ethernet", "etherType")]},
        {"name": "parse_ipv4", "id": 1, "parser_ops": [extract("ipv4")],
         "transitions": [default_transition(None)], "transition_key": []}]
    b.set_parser(states, ["ethernet", "ipv4"])
    b.doc["deparsers"][0]["source_info"] = src(90, "MyDeparser")
    b.doc["register_arrays"].append({"name": "MyIngress.seen", "id": 0, "size": 1,
                                     "bitwidth": 32, "source_info": src(40, "seen")})
    inputs = [fld("ipv4", f[0]) for f in IPV4 if f[0] != "hdrChecksum"]
    b.calculation("calc", "csum16", inputs)
    b.doc["calculations"][0]["source_info"] = src(80, "update_checksum( ...")
    no0 = b.action("NoAction", [], [])
    drop = b.action("MyIngress.drop", [], [
        {"op": "mark_to_drop", "parameters": [{"type": "header", "value": "standard_metadata"}],
         "source_info": src(46, "mark_to_drop(standard_metadata)")}])
    ttl = twice(masked(expr("+", fld("ipv4", "ttl"), hexstr(0xFF)), 8))
    fwd = b.action("MyIngress.ipv4_forward", [("dstAddr", 48), ("port", 9)], [
        prim("assign", fld("standard_metadata", "egress_spec"), {"type": "runtime_data", "value": 1}),
        prim("assign", fld("ethernet", "srcAddr"), fld("ethernet", "dstAddr")),
        prim("assign", fld("ethernet", "dstAddr"), {"type": "runtime_data", "value": 0}),
        {"op": "assign", "parameters": [fld("ipv4", "ttl"), ttl],
         "source_info": src(53, "hdr.ipv4.ttl = hdr.ipv4.ttl - 1")}])
    t = b.table("ingress", "MyIngress.ipv4_lpm", [key("lpm", "ipv4", "dstAddr")],
                [("MyIngress.ipv4_forward", fwd), ("MyIngress.drop", drop), ("NoAction", no0)],
                default=(drop, []))
    t["source_info"] = src(60, "ipv4_lpm")
    b.conditional("ingress", "node_2", expr("d2b", None, fld("ipv4", "$valid$")),
                  "MyIngress.ipv4_lpm", None)
    b.doc["pipelines"][0]["init_table"] = "node_2"
    b.doc["checksums"] = [{"name": "cksum", "id": 0, "source_info": src(80, "update_checksum"),
                           "target": ["ipv4", "hdrChecksum"], "type": "generic",
                           "calculation": "calc", "verify": False, "update": True,
                           "if_cond": expr("d2b", None, fld("ipv4", "$valid$"))}]
    b.doc["program"] = "basic.p4"
    b.doc["__meta__"] = {"version": [2, 23], "compiler": "https://github.com/p4lang/p4c"}
    return b.doc


def ipv4_ok(hdr: bytes) -> bool:
    return len(hdr) == 20 and internet_checksum(hdr) == 0


def test_tutorial_basic_in_p4c_shape_forwards() -> None:
    doc = tutorial_basic()
    for kind in ("header_union_types", "parse_vsets", "extern_instances", "force_arith"):
        assert doc[kind] == []  # present and empty, as p4c writes them
    sw = Switch(doc)
    sw.table_add(TableEntry("MyIngress.ipv4_lpm", (MatchField("lpm", 0x0A000000, prefix_len=8),),
                            ActionCall("MyIngress.ipv4_forward", (0x020000000001, 3))))
    eth = bytes.fromhex("ffffffffffff" "000000000002" "0800")
    ip = bytes.fromhex("4500001400010000" "4006" "0000" "0a000001" "0a000202")
    port, out = sw.process(eth + ip, 1)[0]
    assert port == 3 and out[:12] == bytes.fromhex("020000000001ffffffffffff")
    assert out[22] == 0x3F and ipv4_ok(out[14:34])
    assert sw.process(eth + ip[:8] + b"\x40\x06" + ip[10:16] + b"\x0b" + ip[17:], 1) == []


def test_duplicate_noaction_ids_resolve_per_table() -> None:
    doc = tutorial_basic()
    second = copy.deepcopy(doc["actions"][0])
    second["id"] = len(doc["actions"])
    doc["actions"].append(second)  # p4c writes one NoAction per table that lists it
    doc["pipelines"][0]["tables"][0]["action_ids"][2] = second["id"]
    sw = Switch(doc)
    sw.table_set_default("MyIngress.ipv4_lpm", ActionCall("NoAction"))
    eth = bytes.fromhex("ffffffffffff" "000000000002" "0800")
    ip = bytes.fromhex("4500001400010000" "4006" "0000" "0a000001" "0a000202")
    assert sw.process(eth + ip, 1)[0][0] == 0  # NoAction: egress_spec stays 0


# -- the compiler's default output ---------------------------------------------------

PROGRAM = r"""
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct hs { h_t h; }
struct m_t { bit<8> rem; }
parser P(packet_in p, out hs hdr, inout m_t meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); meta.rem = hdr.h.a - 1; transition accept; }
}
control VC(inout hs hdr, inout m_t meta) { apply {} }
control I(inout hs hdr, inout m_t meta, inout standard_metadata_t sm) {
    apply { hdr.h.b = meta.rem + hdr.h.b; sm.egress_spec = 2; }
}
control E(inout hs hdr, inout m_t meta, inout standard_metadata_t sm) { apply {} }
control CC(inout hs hdr, inout m_t meta) { apply {} }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def test_compiler_default_is_p4c_nesting_and_runs() -> None:
    bmv2 = compile_text(PROGRAM, filename="prog.p4").bmv2
    set_op = bmv2["parsers"][0]["parse_states"][0]["parser_ops"][1]
    assert set_op["op"] == "set" and set_op["parameters"][1]["value"]["type"] == "expression"
    assigns = [p for a in bmv2["actions"] for p in a["primitives"] if p["op"] == "assign"]
    computed = [p["parameters"][1] for p in assigns if p["parameters"][1]["type"] == "expression"]
    assert computed and all(v["value"]["type"] == "expression" for v in computed)
    nested, plain = Switch(bmv2), Switch(compile_text(PROGRAM, "prog.p4", p4c_nesting=False).bmv2)
    assert nested.process(bytes([5, 10]), 1) == [(2, bytes([5, 14]))]
    assert nested.generated == plain.generated  # both forms compile to the same code


def test_a_saturating_field_is_rejected_not_wrapped() -> None:
    b = ProgramBuilder()
    b.header("h", [["a", 8, False, True]])  # BMv2's 4th field element: saturating
    with pytest.raises(SwitchLoadError, match="'a' is saturating: not supported by p4lite"):
        Switch(b.doc)
