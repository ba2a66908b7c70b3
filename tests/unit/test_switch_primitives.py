"""Action primitives and expressions of the switch core."""

from __future__ import annotations

import logging

import pytest

from p4lite.switch.core.switch import Switch
from tests.support.samples import HeaderFields, ProgramBuilder, expr, fld, hexstr, masked, prim

# d: 96-bit wide field, signed 8-bit s, plain bytes a/b, then a 3-element stack of e
D = [["wide", 96, False], ["s", 8, True], ["a", 8, False], ["b", 8, False]]
E = [["v", 8, False]]


def run(prims: list, data: bytes = bytes(15), *, jumps: bool = False, extra_parse: bool = False,
        sw_only: bool = False):
    b = ProgramBuilder()
    b.header("d", D)
    b.header("x", [["v", 8, False]])
    stack = b.stack("st", "e_t", E, 3)
    ops = [{"op": "extract", "parameters": [{"type": "regular", "value": "d"}]}]
    if extra_parse:
        ops += [{"op": "extract", "parameters": [{"type": "stack", "value": "st"}]}] * 2
    b.set_parser([{"name": "start", "id": 0, "parser_ops": ops, "transition_key": [],
                   "transitions": [{"type": "default", "value": None, "mask": None,
                                    "next_state": None}]}], ["d", "x"] + stack)
    aid = b.action("ingress.act", [], prims)
    b.table("ingress", "ingress.tbl_act", [], [("ingress.act", aid)], default=(aid, []),
            default_const=True)
    sw = Switch(b.doc)
    if sw_only:
        return sw
    out = sw.process(data, 0)
    assert sw.errors == 0
    return out[0][1] if out else None


def d_fields(out: bytes) -> dict[str, int]:
    return {"wide": int.from_bytes(out[:12], "big"), "s": out[12], "a": out[13], "b": out[14]}


def test_wide_field_arithmetic_wraps_on_store() -> None:
    top = (1 << 96) - 1
    out = run([prim("assign", fld("d", "wide"), hexstr(top)),
               prim("assign", fld("d", "wide"), masked(expr("+", fld("d", "wide"), hexstr(3)), 96))])
    assert d_fields(out)["wide"] == 2
    out = run([prim("assign", fld("d", "wide"), expr("<<", hexstr(1), hexstr(100)))])
    assert d_fields(out)["wide"] == 0  # the store masks even without p4c's mask


def test_signed_field_wraps_two_complement() -> None:
    out = run([prim("assign", fld("d", "s"), hexstr(127)),
               prim("assign", fld("d", "s"), expr("+", fld("d", "s"), hexstr(1))),
               prim("assign", fld("d", "a"), masked(fld("d", "s"), 8))])
    assert out[12] == 0x80 and out[13] == 0x80


def test_two_comp_mod_and_saturating_casts() -> None:
    out = run([
        prim("assign", fld("d", "s"), {"type": "expression", "value": {
            "op": "two_comp_mod", "left": {"type": "hexstr", "value": "-0x81"},
            "right": hexstr(8)}}),
        prim("assign", fld("d", "a"), {"type": "expression", "value": {
            "op": "usat_cast", "left": hexstr(300), "right": hexstr(8)}}),
        prim("assign", fld("d", "b"), {"type": "expression", "value": {
            "op": "sat_cast", "left": hexstr(300), "right": hexstr(8)}}),
    ])
    assert out[12] == 0x7F and out[13] == 255 and out[14] == 127


def test_conditional_expression_and_booleans() -> None:
    cond = expr("and", expr("==", fld("d", "a"), hexstr(1)), expr("not", None, expr("d2b", None, fld("d", "b"))))
    out = run([prim("assign", fld("d", "s"), {"type": "expression", "value": {
        "op": "?", "left": hexstr(5), "right": hexstr(6), "cond": cond}})],
        data=bytes(13) + b"\x01\x00")
    assert out[12] == 5


def test_jump_if_zero_implements_if_inside_actions() -> None:
    prims = [
        prim("_jump_if_zero", expr("b2d", None, expr("==", fld("d", "a"), hexstr(1))), hexstr(3)),
        prim("assign", fld("d", "b"), hexstr(0x11)),
        prim("_jump", hexstr(4)),
        prim("assign", fld("d", "b"), hexstr(0x22)),
        prim("assign", fld("d", "s"), hexstr(9)),
    ]
    assert run(prims, bytes(13) + b"\x01\x00")[14] == 0x11
    assert run(prims, bytes(13) + b"\x02\x00")[14] == 0x22
    assert run(prims, bytes(13) + b"\x02\x00")[12] == 9


def test_exit_ends_the_control() -> None:
    out = run([prim("assign", fld("d", "a"), hexstr(1)), prim("exit"),
               prim("assign", fld("d", "a"), hexstr(2))])
    assert out[13] == 1


def test_add_and_remove_header() -> None:
    out = run([prim("add_header", {"type": "header", "value": "x"}),
               prim("assign", fld("x", "v"), hexstr(0xAB))])
    assert out[15] == 0xAB and len(out) == 16
    out = run([prim("remove_header", {"type": "header", "value": "d"})])
    assert out == b""


def test_assign_header_copies_fields_and_validity() -> None:
    out = run([prim("add_header", {"type": "header", "value": "st[2]"}),
               prim("assign", fld("st[2]", "v"), hexstr(7)),
               prim("assign_header", {"type": "header", "value": "st[0]"},
                    {"type": "header", "value": "st[2]"})])
    assert out[15:] == b"\x07\x07"


def test_stack_extract_push_and_pop() -> None:
    data = bytes(15) + b"\x0a\x0b"
    assert run([], data, extra_parse=True)[15:] == b"\x0a\x0b"
    out = run([prim("push", {"type": "header_stack", "value": "st"}, hexstr(1))], data,
              extra_parse=True)
    assert out[15:] == b"\x0a\x0b"  # st[0] now invalid; st[1], st[2] hold the old 0, 1
    out = run([prim("pop", {"type": "header_stack", "value": "st"}, hexstr(1))], data,
              extra_parse=True)
    assert out[15:] == b"\x0b"


def test_stack_extract_out_of_bounds_is_a_parser_error() -> None:
    b = ProgramBuilder()
    b.stack("st", "e_t", E, 1)
    b.set_parser([{"name": "start", "id": 0, "parser_ops": [
        {"op": "extract", "parameters": [{"type": "stack", "value": "st"}]}] * 2,
        "transition_key": [], "transitions": [
            {"type": "default", "value": None, "mask": None, "next_state": None}]}], ["st[0]"])
    aid = b.action("ingress.act", [], [prim("assign", fld("standard_metadata", "egress_spec"),
                                            masked(fld("standard_metadata", "parser_error"), 9))])
    b.table("ingress", "ingress.t", [], [("ingress.act", aid)], default=(aid, []))
    assert Switch(b.doc).process(b"\x01\x02", 0) == [(3, b"\x01\x02")]  # StackOutOfBounds = 3


def test_truncate_limits_the_output() -> None:
    assert run([prim("truncate", hexstr(4))]) == bytes(4)


def test_rng_uniform_stays_in_range() -> None:
    values = {run([prim("modify_field_rng_uniform", fld("d", "a"), hexstr(3), hexstr(5))])[13]
              for _ in range(40)}
    assert values <= {3, 4, 5} and len(values) > 1


def test_log_msg_substitutes_arguments(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="p4lite.switch.log_msg"):
        run([prim("log_msg", {"type": "string", "value": "a={} b={}"},
                  {"type": "parameters_vector", "value": [hexstr(1), fld("d", "b")]})],
            bytes(14) + b"\x09")
    assert "a=1 b=9" in caplog.text


def test_failed_assert_drops_the_packet_and_is_counted() -> None:
    sw = run([prim("assert", expr("==", fld("d", "a"), hexstr(1)))], sw_only=True)
    assert sw.process(bytes(15), 0) == [] and sw.errors == 1
    assert len(sw.process(bytes(13) + b"\x01\x00", 0)) == 1


def test_p4_14_arithmetic_primitives() -> None:
    out = run([prim("modify_field", fld("d", "a"), hexstr(250)),
               prim("add_to_field", fld("d", "a"), hexstr(10)),
               prim("bit_or", fld("d", "b"), hexstr(0xF0), hexstr(0x0F)),
               prim("shift_left", fld("d", "s"), hexstr(1), hexstr(3))])
    assert out[13] == 4 and out[14] == 0xFF and out[12] == 8


def test_packet_controlled_shift_amount_cannot_blow_up() -> None:
    """A 32-bit shift amount from the packet: p4c's mask makes the result 0, and the
    switch must not build a 4-gigabit integer on the way."""
    b = ProgramBuilder()
    b.header("n", [["amount", 32, False], ["out", 32, False]])
    b.parse_only("n")
    aid = b.action("ingress.act", [], [
        prim("assign", fld("n", "out"), masked(expr("<<", hexstr(1), fld("n", "amount")), 32))])
    b.table("ingress", "ingress.t", [], [("ingress.act", aid)], default=(aid, []))
    sw = Switch(b.doc)
    out = sw.process(b"\xff\xff\xff\xff" + bytes(4), 0)
    assert out[0][1] == b"\xff\xff\xff\xff" + bytes(4) and sw.errors == 0
    assert sw.process(b"\x00\x00\x00\x1f" + bytes(4), 0)[0][1][4:] == b"\x80\x00\x00\x00"


def test_exit_in_a_fused_chain_of_hidden_tables() -> None:
    """c0 -(b == 1)-> tbl_leave (exit) -> tbl_a (sets a) -> tbl_b (sets s), else
    c0 -> tbl_a: the chains are fused, and exit must still end the control."""
    b = ProgramBuilder()
    b.header("d", D)
    b.parse_only("d")
    set_a = b.action("ingress.set_a", [], [prim("assign", fld("d", "a"), hexstr(0xAA))])
    leave = b.action("ingress.leave", [], [prim("exit")])
    set_b = b.action("ingress.set_b", [], [prim("assign", fld("d", "s"), hexstr(0x0B))])
    b.conditional("ingress", "c0", expr("==", fld("d", "b"), hexstr(1)), "tbl_leave", "tbl_a")
    b.table("ingress", "tbl_leave", [], [("ingress.leave", leave)], default=(leave, []),
            default_const=True, base_default_next="tbl_a",
            next_tables={"ingress.leave": "tbl_a"})
    b.table("ingress", "tbl_a", [], [("ingress.set_a", set_a)], default=(set_a, []),
            default_const=True, next_tables={"ingress.set_a": "tbl_b"})
    b.table("ingress", "tbl_b", [], [("ingress.set_b", set_b)], default=(set_b, []),
            default_const=True)
    b._pipe("ingress")["init_table"] = "c0"
    sw = Switch(b.doc)
    # c0 (with tbl_leave inlined) and tbl_a (a join: two predecessors, with tbl_b inlined)
    assert sorted(n for n in sw.generated if n.startswith("_ingress")) == ["_ingress_c0",
                                                                          "_ingress_t1"]
    out = sw.process(bytes(14) + b"\x02", 0)[0][1]
    assert (out[12], out[13]) == (0x0B, 0xAA)
    out = sw.process(bytes(14) + b"\x01", 0)[0][1]
    assert (out[12], out[13]) == (0, 0)  # exit before tbl_a and tbl_b


def test_egress_sees_timestamps_and_queue_metadata_from_the_caller() -> None:
    b = ProgramBuilder()
    q: HeaderFields = [
        ["ig_ts", 48, False], ["eg_ts", 48, False], ["enq_ts", 32, False], ["enq_depth", 32, False],
        ["deq_depth", 32, False], ["deq_delta", 32, False], ["plen", 32, False]]
    b.header("q", q)
    b.parse_only("q")
    sources = ["ingress_global_timestamp", "egress_global_timestamp", "enq_timestamp",
               "enq_qdepth", "deq_qdepth", "deq_timedelta", "packet_length"]
    # queueing_metadata.* and intrinsic_metadata.* are the aliases p4c's JSON uses
    aliased = {"enq_qdepth": ["queueing_metadata", "enq_qdepth"],
               "egress_global_timestamp": ["intrinsic_metadata", "egress_global_timestamp"]}
    prims = [prim("assign", fld("q", name),
                  {"type": "field", "value": aliased.get(src, ["standard_metadata", src])})
             for (name, _, _), src in zip(q, sources, strict=True)]
    aid = b.action("egress.copy", [], prims)
    b.table("egress", "egress.t", [], [("egress.copy", aid)], default=(aid, []))
    sw = Switch(b.doc)
    (item,) = sw.ingress(bytes(36) + b"xy", 3, now_us=1000)
    out = sw.egress(item, now_us=1500, enq_timestamp=1100, enq_qdepth=7, deq_qdepth=2,
                    deq_timedelta=400)
    value = int.from_bytes(out[0][1][:32], "big")
    fields, nbits = [], 256
    for _, width, _ in q:
        nbits -= width
        fields.append((value >> nbits) & ((1 << width) - 1))
    assert fields == [1000, 1500, 1100, 7, 2, 400, 38]


def test_header_stack_run_time_index_in_expressions() -> None:
    """hdr.st[d.a].v read and written with a run-time index, and its validity."""
    def element(index_field: str) -> dict:
        return {"type": "expression", "value": {
            "op": "dereference_header_stack", "left": {"type": "header_stack", "value": "st"},
            "right": fld("d", index_field)}}

    def field_v(index_field: str) -> dict:
        return {"type": "expression", "value": {
            "op": "access_field", "left": element(index_field), "right": 0}}

    prims = [
        prim("assign", fld("d", "s"), {"type": "expression", "value": {
            "op": "b2d", "left": None, "right": {"type": "expression", "value": {
                "op": "valid", "left": None, "right": element("a")}}}}),
        prim("assign", field_v("a"), expr("+", field_v("a"), hexstr(0x10))),
        prim("assign", fld("d", "b"), {"type": "expression", "value": {
            "op": "last_stack_index", "left": None,
            "right": {"type": "header_stack", "value": "st"}}}),
    ]
    out = run(prims, bytes(13) + b"\x01\x00" + b"\x0a\x0b", extra_parse=True)
    assert out[12] == 1  # st[1] is valid
    assert out[15:] == b"\x0a\x1b"  # st[1].v += 0x10
    assert out[14] == 1  # two elements extracted: last index 1
