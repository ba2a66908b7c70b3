"""BMv2 JSON produced by the p4lite back end, checked against p4c's conventions."""

from __future__ import annotations

from p4lite.compiler.driver import CompileResult, compile_text

HEADERS = """
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header h_t { bit<12> a; bit<2> b; bit<2> c; bit<8> v; bit<16> w; }
header vlan_t { bit<16> tci; bit<16> etype; }
struct headers { ethernet_t eth; h_t h; vlan_t[2] vlan; }
"""

PARSER = """
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) {
            0x0800: parse_h;
            default: accept;
        }
    }
    state parse_h { pkt.extract(hdr.h); transition accept; }
"""


def program(ingress: str = "", ingress_locals: str = "", *, egress: str = "",
            meta: str = "bit<8> m;", parser: str = PARSER, top: str = "",
            compute: str = "", deparse: str = "pkt.emit(hdr.eth); pkt.emit(hdr.h);") -> str:
    """A complete v1model program around the given pieces."""
    return f"""
#include <core.p4>
#include <v1model.p4>
{HEADERS}
struct meta_t {{ {meta} }}
{top}
parser P(packet_in pkt, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{
{parser}
}}
control VC(inout headers hdr, inout meta_t meta) {{ apply {{ }} }}
control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{
{ingress_locals}
    apply {{
{ingress}
    }}
}}
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{
    apply {{ {egress} }}
}}
control CC(inout headers hdr, inout meta_t meta) {{ apply {{ {compute} }} }}
control D(packet_out pkt, in headers hdr) {{ apply {{ {deparse} }} }}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def compile_program(text: str) -> CompileResult:
    # These tests check the lowering itself, in its single-wrapped form; p4c's double
    # wrapping (the driver's default) is checked by test_p4c_nesting_* below.
    return compile_text(text, filename="prog.p4", p4c_nesting=False)


def ingress(result: CompileResult) -> dict:
    return result.bmv2["pipelines"][0]


def table(result: CompileResult, name: str) -> dict:
    for pipeline in result.bmv2["pipelines"]:
        for t in pipeline["tables"]:
            if t["name"] == name:
                return t
    raise KeyError(name)


def action(result: CompileResult, name: str) -> dict:
    matches = [a for a in result.bmv2["actions"] if a["name"] == name]
    assert len(matches) == 1, [a["name"] for a in result.bmv2["actions"]]
    return matches[0]


def field(h: str, f: str) -> dict:
    return {"type": "field", "value": [h, f]}


def hexstr(text: str) -> dict:
    return {"type": "hexstr", "value": text}


def expr(op: str, left, right, cond=None) -> dict:
    value = {"op": op, "left": left, "right": right}
    if cond is not None:
        value["cond"] = cond
    return {"type": "expression", "value": value}


# ------------------------------------------------------------------ top level


def test_top_level_keys_in_p4c_order_and_version() -> None:
    result = compile_program(program())
    assert list(result.bmv2) == [
        "header_types", "headers", "header_stacks", "header_union_types", "header_unions",
        "header_union_stacks", "field_lists", "errors", "enums", "parsers", "parse_vsets",
        "deparsers", "meter_arrays", "counter_arrays", "register_arrays", "calculations",
        "learn_lists", "actions", "pipelines", "checksums", "force_arith", "extern_instances",
        "field_aliases", "program", "__meta__",
    ]
    assert result.bmv2["__meta__"]["version"] == [2, 23]
    assert [p["name"] for p in result.bmv2["parsers"]] == ["parser"]
    assert [d["name"] for d in result.bmv2["deparsers"]] == ["deparser"]
    assert [p["name"] for p in result.bmv2["pipelines"]] == ["ingress", "egress"]


def test_standard_metadata_fields_and_padding() -> None:
    result = compile_program(program())
    types = {t["name"]: t for t in result.bmv2["header_types"]}
    fields = types["standard_metadata"]["fields"]
    assert [f[0] for f in fields] == [
        "ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length",
        "enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth",
        "ingress_global_timestamp", "egress_global_timestamp", "mcast_grp", "egress_rid",
        "checksum_error", "parser_error", "priority", "_padding",
    ]
    assert fields[-2:] == [["priority", 3, False], ["_padding", 3, False]]
    assert ["parser_error", 32, False] in fields
    assert sum(f[1] for f in fields) % 8 == 0


def test_field_aliases_are_the_nine_pairs() -> None:
    aliases = compile_program(program()).bmv2["field_aliases"]
    assert len(aliases) == 9
    assert aliases[0] == ["queueing_metadata.enq_timestamp", ["standard_metadata", "enq_timestamp"]]
    assert ["intrinsic_metadata.mcast_grp", ["standard_metadata", "mcast_grp"]] in aliases
    assert aliases[-1] == ["intrinsic_metadata.priority", ["standard_metadata", "priority"]]


def test_headers_scalars_and_stacks() -> None:
    result = compile_program(program(meta="bit<8> m; bool flag;"))
    headers = [(h["name"], h["header_type"], h["metadata"]) for h in result.bmv2["headers"]]
    assert headers[:4] == [("scalars", "scalars_0", True),
                           ("standard_metadata", "standard_metadata", True),
                           ("eth", "ethernet_t", False), ("h", "h_t", False)]
    assert ("vlan[0]", "vlan_t", False) in headers
    scalars = result.bmv2["header_types"][0]
    assert scalars["name"] == "scalars_0"
    assert scalars["fields"] == [["userMetadata.m", 8, False], ["userMetadata.flag", 1, False],
                                 ["_padding_0", 7, False]]
    stack = result.bmv2["header_stacks"][0]
    ids = {h["name"]: h["id"] for h in result.bmv2["headers"]}
    assert stack["name"] == "vlan" and stack["size"] == 2
    assert stack["header_ids"] == [ids["vlan[0]"], ids["vlan[1]"]]


def test_nested_metadata_is_flattened_like_p4c() -> None:
    result = compile_program(program(meta="bit<8> m; inner_t i;",
                                     top="struct inner_t { bit<4> x; }"))
    names = [f[0] for f in result.bmv2["header_types"][0]["fields"]]
    assert names[:2] == ["userMetadata._m0", "userMetadata._i_x1"]


def test_errors_take_program_values() -> None:
    result = compile_program(program(top="error { Custom }"))
    errors = dict(result.bmv2["errors"])
    assert errors["NoError"] == 1 and errors["NoMatch"] == 3
    assert errors["Custom"] == len(errors)


# ---------------------------------------------------------------------- parser


def test_select_values_are_byte_padded_and_concatenated() -> None:
    parser = """
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.a, hdr.h.b) {
            (0xaba, 3): accept;
            (0x100 &&& 0xf00, _): accept;
            (_, _): accept;
        }
    }
"""
    result = compile_program(program(parser=parser, deparse="pkt.emit(hdr.h);"))
    state = result.bmv2["parsers"][0]["parse_states"][0]
    assert state["transition_key"] == [field("h", "a"), field("h", "b")]
    assert state["transitions"][0] == {"type": "hexstr", "value": "0x0aba03", "mask": None,
                                       "next_state": None}
    assert state["transitions"][1]["value"] == "0x010000"
    assert state["transitions"][1]["mask"] == "0x0f0000"
    assert state["transitions"][2]["type"] == "default"


def test_select_range_is_expanded_into_value_mask_pairs() -> None:
    parser = """
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.v) { 1 .. 6: accept; default: reject; }
    }
"""
    result = compile_program(program(parser=parser, deparse="pkt.emit(hdr.h);"))
    pairs = [(t["value"], t["mask"]) for t in
             result.bmv2["parsers"][0]["parse_states"][0]["transitions"][:-1]]
    assert pairs == [("0x01", None), ("0x02", "0xfe"), ("0x04", "0xfe"), ("0x06", None)]


def test_parser_ops_extract_set_verify_lookahead_stack() -> None:
    parser = """
    state start {
        meta.m = pkt.lookahead<bit<8>>();
        pkt.extract(hdr.h);
        verify(hdr.h.v != 0, error.NoMatch);
        transition vl;
    }
    state vl {
        pkt.extract(hdr.vlan.next);
        transition select(hdr.vlan.last.etype) { 0x8100: vl; default: accept; }
    }
"""
    result = compile_program(program(parser=parser, deparse="pkt.emit(hdr.h);"))
    states = result.bmv2["parsers"][0]["parse_states"]
    ops = states[0]["parser_ops"]
    assert ops[0] == {"op": "set", "parameters": [field("scalars", "userMetadata.m"),
                                                  {"type": "lookahead", "value": [0, 8]}]}
    assert ops[1] == {"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}
    assert ops[2]["op"] == "verify"
    assert ops[2]["parameters"][1] == hexstr("0x00000003")
    assert states[1]["parser_ops"][0]["parameters"] == [{"type": "stack", "value": "vlan"}]
    assert states[1]["transition_key"] == [{"type": "stack_field", "value": ["vlan", "etype"]}]


def test_deparser_order_expands_stacks() -> None:
    result = compile_program(program(deparse="pkt.emit(hdr.eth); pkt.emit(hdr.vlan);"))
    assert result.bmv2["deparsers"][0]["order"] == ["eth", "vlan[0]", "vlan[1]"]


# ------------------------------------------------------------------ expressions


def test_unsigned_arithmetic_is_masked_and_literals_padded() -> None:
    result = compile_program(program("hdr.h.v = hdr.h.v - 1;"))
    prims = result.bmv2["actions"][0]["primitives"]
    assert prims[0]["op"] == "assign"
    assert prims[0]["parameters"] == [
        field("h", "v"),
        expr("&", expr("-", field("h", "v"), hexstr("0x01")), hexstr("0xff")),
    ]
    assert prims[0]["source_info"]["source_fragment"] == "hdr.h.v = hdr.h.v - 1"


def test_slices_concat_and_constant_folding() -> None:
    body = """
        hdr.h.v = hdr.h.w[11:4];
        hdr.h.w[3:0] = 4w5;
        hdr.h.w = hdr.h.a ++ hdr.h.b ++ hdr.h.c;
        hdr.h.v = (8w3 + 8w255) * 2;
"""
    prims = compile_program(program(body)).bmv2["actions"][0]["primitives"]
    assert prims[0]["parameters"][1] == expr("&", expr(">>", field("h", "w"), hexstr("0x04")),
                                             hexstr("0xff"))
    assert prims[1]["parameters"][1] == expr(
        "|", expr("&", field("h", "w"), hexstr("0xfff0")),
        expr("&", hexstr("0x05"), hexstr("0x000f")))
    concat = prims[2]["parameters"][1]["value"]
    assert concat["op"] == "&" and concat["left"]["value"]["op"] == "|"
    assert prims[3]["parameters"][1] == hexstr("0x04")


def test_bool_storage_uses_b2d_and_d2b() -> None:
    body = """
        meta.flag = hdr.h.isValid();
        if (meta.flag) { hdr.h.v = 1; }
"""
    result = compile_program(program(body, meta="bool flag;"))
    first = result.bmv2["actions"][0]
    valid = expr("d2b", None, field("h", "$valid$"))
    assert first["primitives"][0]["parameters"][1] == expr("b2d", None, valid)
    cond = ingress(result)["conditionals"][0]
    assert cond["expression"] == expr("d2b", None, field("scalars", "userMetadata.flag"))


def test_saturating_arithmetic_uses_usat_and_sat_cast() -> None:
    body = "hdr.h.v = hdr.h.v |+| 8w200; meta.s = meta.s |-| 8s100;"
    prims = compile_program(program(body, meta="int<8> s;")).bmv2["actions"][-1]["primitives"]
    assert prims[0]["parameters"][1] == expr(
        "usat_cast", expr("+", field("h", "v"), hexstr("0xc8")), hexstr("0x8"))
    assert prims[1]["parameters"][1]["value"]["op"] == "sat_cast"
    assert prims[1]["parameters"][1]["value"]["left"]["value"]["op"] == "-"


def test_signed_arithmetic_uses_two_comp_mod() -> None:
    result = compile_program(program("meta.s = meta.s + 1;", meta="int<8> s;"))
    value = result.bmv2["actions"][0]["primitives"][0]["parameters"][1]["value"]
    assert value["op"] == "two_comp_mod" and value["right"] == hexstr("0x8")
    assert result.bmv2["header_types"][0]["fields"][0] == ["userMetadata.s", 8, True]


# --------------------------------------------------------------------- control


LOCALS = """
    action drop() { mark_to_drop(sm); }
    action fwd(bit<9> port, bit<48> mac) { sm.egress_spec = port; hdr.eth.dst = mac; }
    table t {
        key = { hdr.eth.dst: exact; hdr.h.w[11:4]: ternary @name("wslice"); hdr.h.isValid(): exact; }
        actions = { fwd; drop; }
        default_action = fwd(3, 0x0a0b);
        size = 64;
    }
"""


def test_table_keys_names_masks_and_default_entry() -> None:
    result = compile_program(program("t.apply();", LOCALS))
    t = table(result, "I.t")
    assert t["key"] == [
        {"match_type": "exact", "name": "hdr.eth.dst", "target": ["eth", "dst"], "mask": None},
        # a sliced key is copied into a scalar key_N just before the apply (as p4c's
        # SimplifyKey): the table matches on the 8-bit copy, not on h.w with a mask
        {"match_type": "ternary", "name": "wslice", "target": ["scalars", "key_0"],
         "mask": None},
        # p4c's name for an isValid() key (JSON and P4Info): h.$valid$
        {"match_type": "exact", "name": "hdr.h.$valid$", "target": ["h", "$valid$"],
         "mask": None},
    ]
    assert t["match_type"] == "ternary" and t["max_size"] == 64
    assert t["actions"] == ["I.fwd", "I.drop"]
    assert t["default_entry"] == {"action_id": action(result, "I.fwd")["id"],
                                  "action_const": False, "action_data": ["0x3", "0xa0b"],
                                  "action_entry_const": False}
    assert ["key_0", 8, False] in result.bmv2["header_types"][0]["fields"]
    pre = table(result, ingress(result)["init_table"])
    assert pre["key"] == [] and pre["base_default_next"] == "I.t"
    copy = action(result, pre["actions"][0])["primitives"][0]["parameters"]
    assert copy[0] == {"type": "field", "value": ["scalars", "key_0"]}
    assert action(result, "I.fwd")["runtime_data"] == [{"name": "port", "bitwidth": 9},
                                                       {"name": "mac", "bitwidth": 48}]


def test_sliced_key_copy_joins_the_statements_before_the_apply() -> None:
    """As p4c: ``key_N = slice`` is one more statement before the apply, merged with the
    straight-line statements before it, and the action is named after the earliest (the key)."""
    result = compile_program(program("hdr.h.v = 1;\n        t.apply();", LOCALS))
    pre = table(result, ingress(result)["init_table"])
    assert pre["base_default_next"] == "I.t"
    prims = action(result, pre["actions"][0])["primitives"]
    assert [p["parameters"][0]["value"] for p in prims] == [["h", "v"], ["scalars", "key_0"]]
    key_line = table(result, "I.t")["source_info"]["line"] + 1  # LOCALS: key on the next line
    assert pre["actions"][0] == f"prog{key_line}"


def test_table_without_default_gets_noaction() -> None:
    local = "action a() { } table t { key = { hdr.h.v: exact; } actions = { a; } }"
    result = compile_program(program("t.apply();", local))
    t = table(result, "I.t")
    assert t["actions"] == ["I.a", "NoAction"]
    assert t["default_entry"]["action_id"] == action(result, "NoAction")["id"]
    assert t["default_entry"]["action_const"] is False


def test_const_entries_have_priorities_in_source_order() -> None:
    local = """
    action a(bit<8> x) { hdr.h.v = x; }
    table t {
        key = { hdr.h.w: ternary; hdr.h.v: lpm; }
        actions = { a; }
        const default_action = a(0);
        const entries = {
            (0x10 &&& 0xf0, 0x80 &&& 0xc0): a(1);
            (_, _): a(2);
            @priority(9) (1, 2): a(3);
        }
    }
"""
    t = table(compile_program(program("t.apply();", local)), "I.t")
    assert t["default_entry"]["action_const"] is True
    assert t["default_entry"]["action_entry_const"] is True
    first, second, third = t["entries"]
    assert first["match_key"] == [{"match_type": "ternary", "key": "0x0010", "mask": "0x00f0"},
                                  {"match_type": "lpm", "key": "0x80", "prefix_length": 2}]
    assert first["action_entry"]["action_data"] == ["0x1"]  # p4c: minimal digits
    assert [first["priority"], second["priority"], third["priority"]] == [1, 2, 9]
    assert second["match_key"][1] == {"match_type": "lpm", "key": "0x00", "prefix_length": 0}


def test_direct_action_call_becomes_hidden_table() -> None:
    result = compile_program(program("drop(); hdr.h.v = 1;", LOCALS))
    pipe = ingress(result)
    names = [t["name"] for t in pipe["tables"]]
    assert names[0] == "tbl_drop"
    assert pipe["init_table"] == "tbl_drop"
    hidden = table(result, "tbl_drop")
    assert hidden["key"] == [] and hidden["actions"] == ["I.drop"]
    assert hidden["default_entry"]["action_const"] is True
    assert hidden["next_tables"]["I.drop"] == names[1]
    assert names[1].startswith("tbl_prog")
    assert table(result, names[1])["base_default_next"] is None


def test_hidden_tables_are_left_out_of_p4info() -> None:
    result = compile_program(program("drop(); t.apply();", LOCALS))
    assert [t.preamble.name for t in result.p4info.tables] == ["I.t"]


def test_if_else_hit_miss_switch_and_exit() -> None:
    local = LOCALS + """
    table t2 { key = { hdr.h.v: exact; } actions = { drop; } }
    table t3 { key = { hdr.h.w: exact; } actions = { drop; } }
"""
    body = """
        if (hdr.h.isValid()) {
            switch (t.apply().action_run) {
                fwd: { t2.apply(); }
                drop: { exit; }
            }
        } else if (!t3.apply().hit) {
            exit;
        }
"""
    result = compile_program(program(body, local))
    cond = ingress(result)["conditionals"][0]
    # t's sliced key is copied first, in a hidden table between the condition and t
    assert table(result, cond["true_next"])["base_default_next"] == "I.t"
    assert cond["false_next"] == "I.t3"
    assert table(result, "I.t")["next_tables"] == {"I.fwd": "I.t2", "I.drop": None}
    assert table(result, "I.t3")["next_tables"] == {"__HIT__": None, "__MISS__": None}


def test_statements_after_a_table_follow_it() -> None:
    body = "t.apply(); if (hdr.h.v == 3) { hdr.h.v = 4; }"
    result = compile_program(program(body, LOCALS))
    t = table(result, "I.t")
    cond = ingress(result)["conditionals"][0]
    assert set(t["next_tables"].values()) == {cond["name"]}
    assert t["base_default_next"] == cond["name"]
    assert cond["expression"] == expr("==", field("h", "v"), hexstr("0x03"))


def test_if_inside_action_uses_jumps() -> None:
    local = "action a(bit<8> x) { if (x == 1) { hdr.h.v = 2; } else { hdr.h.v = 3; } }" \
            " table t { actions = { a; } }"
    result = compile_program(program("t.apply();", local))
    prims = action(result, "I.a")["primitives"]
    assert [p["op"] for p in prims] == ["_jump_if_zero", "assign", "_jump", "assign"]
    assert prims[0]["parameters"][1] == hexstr("0x3")
    assert prims[2]["parameters"][0] == hexstr("0x4")
    cond = prims[0]["parameters"][0]["value"]
    assert cond["op"] == "b2d"
    assert cond["right"]["value"]["left"] == {"type": "local", "value": 0}


def test_subcontrol_is_inlined_with_prefix() -> None:
    top = """
control Sub(inout headers hdr, inout bit<8> val) {
    action bump() { val = val + 1; }
    table st { key = { hdr.h.w: exact; } actions = { bump; } }
    apply { st.apply(); }
}
"""
    result = compile_program(program("sub.apply(hdr, meta.m);", "Sub() sub;", top=top))
    st = table(result, "I.sub.st")
    assert st["actions"] == ["I.sub.bump", "NoAction"]
    bump = action(result, "I.sub.bump")["primitives"][0]
    assert bump["parameters"][0] == field("scalars", "userMetadata.m")
    assert "I.sub.st" in [t.preamble.name for t in result.p4info.tables]


def test_externs_registers_counters_meters_hash_digest_clone() -> None:
    local = """
    register<bit<32>>(16) r;
    counter(8, CounterType.packets) c;
    meter(4, MeterType.bytes) mt;
    action a(bit<32> i) {
        bit<32> x;
        r.read(x, i);
        r.write(i, x + 1);
        c.count(i);
        mt.execute_meter(i, meta.m);
        hash(meta.hv, HashAlgorithm.crc16, 16w0, { hdr.h.a, hdr.h.w }, 32w1024);
        digest<learn_t>(1, { hdr.h.w, sm.ingress_port });
        clone_preserving_field_list(CloneType.I2E, 5, 1);
        random(meta.m, 0, 7);
    }
    table t { actions = { a; } }
"""
    meta = "bit<8> m; bit<16> hv; @field_list(1) bit<16> keep;"
    top = "struct learn_t { bit<16> w; bit<9> port; }"
    result = compile_program(program("t.apply();", local, meta=meta, top=top))
    bmv2 = result.bmv2
    assert bmv2["register_arrays"][0] | {"source_info": None} == {
        "name": "I.r", "id": 0, "source_info": None, "size": 16, "bitwidth": 32}
    assert bmv2["counter_arrays"][0]["is_direct"] is False
    assert bmv2["meter_arrays"][0]["type"] == "bytes"
    ops = [p["op"] for p in action(result, "I.a")["primitives"]]
    assert ops == ["register_read", "register_write", "count", "execute_meter",
                   "modify_field_with_hash_based_offset", "generate_digest",
                   "clone_ingress_pkt_to_egress", "modify_field_rng_uniform"]
    prims = action(result, "I.a")["primitives"]
    assert prims[0]["parameters"][1] == {"type": "register_array", "value": "I.r"}
    assert prims[4]["parameters"][2] == {"type": "calculation", "value": "calc"}
    calc = bmv2["calculations"][0]
    assert calc["algo"] == "crc16" and calc["input"] == [field("h", "a"), field("h", "w")]
    assert bmv2["learn_lists"][0]["name"] == "learn_t"
    assert bmv2["field_lists"][0] == {"id": 1, "name": "field_list1",
                                      "elements": [field("scalars", "userMetadata.keep")]}
    assert prims[6]["parameters"][1] == hexstr("0x1")


def test_direct_counter_and_meter_bind_to_their_table() -> None:
    local = """
    direct_counter(CounterType.packets_and_bytes) dc;
    direct_meter<bit<8>>(MeterType.packets) dm;
    action a() { dc.count(); dm.read(meta.m); }
    table t { key = { hdr.h.v: exact; } actions = { a; } counters = dc; meters = dm; }
"""
    result = compile_program(program("t.apply();", local))
    t = table(result, "I.t")
    assert t["with_counters"] is True and t["direct_meters"] == "I.dm"
    counter = result.bmv2["counter_arrays"][0]
    assert counter["is_direct"] is True and counter["binding"] == "I.t"
    meter = result.bmv2["meter_arrays"][0]
    assert meter["binding"] == "I.t" and meter["result_target"] == ["scalars", "userMetadata.m"]
    assert action(result, "I.a")["primitives"] == []


def test_checksums_verify_and_update() -> None:
    compute = """update_checksum(hdr.h.isValid(), { hdr.h.a, hdr.h.b, hdr.h.c, hdr.h.v },
                                 hdr.h.w, HashAlgorithm.csum16);"""
    result = compile_program(program(compute=compute))
    cksum = result.bmv2["checksums"][0]
    assert cksum["target"] == ["h", "w"] and cksum["update"] is True and cksum["verify"] is False
    assert cksum["if_cond"] == expr("d2b", None, field("h", "$valid$"))
    assert result.bmv2["calculations"][0]["algo"] == "csum16"


def test_setvalid_stack_ops_and_exit_in_action() -> None:
    body = "hdr.h.setValid(); hdr.eth.setInvalid(); hdr.vlan.push_front(1); exit;"
    prims = compile_program(program(body)).bmv2["actions"][0]["primitives"]
    assert [p["op"] for p in prims] == ["add_header", "remove_header", "push"]
    assert prims[2]["parameters"] == [{"type": "header_stack", "value": "vlan"}, hexstr("0x1")]


def test_compile_time_for_a_long_program_is_small() -> None:
    # Not a timing assertion: a 1,000-line program must compile at all (no quadratic blowup
    # shows up as a timeout here).
    body = "\n".join(f"hdr.h.v = hdr.h.v + {i % 200};" for i in range(1000))
    result = compile_program(program(body))
    assert len(result.bmv2["actions"][0]["primitives"]) == 1000


def test_json_text_round_trips_and_keeps_scalar_arrays_inline() -> None:
    import json

    result = compile_program(program("hdr.h.v = 1;"))
    text = result.bmv2_text()
    assert json.loads(text) == result.bmv2
    assert '        ["ingress_port", 9, false],\n' in text
    assert '"version" : [2, 23]' in text


def _bmv2_can_build(expr_json: dict) -> bool:
    """BMv2's build_expression: every node it visits has a "type" (or is null)."""
    if expr_json is None:
        return True
    if "type" not in expr_json:
        return False
    if expr_json["type"] != "expression":
        return True
    value = expr_json["value"]
    if "op" not in value:
        return False
    return all(_bmv2_can_build(value.get(k)) for k in ("left", "right", "cond"))


def test_p4c_nesting_wraps_expression_parameters_twice() -> None:
    body = "hdr.h.v = hdr.h.v - 1; hdr.h.w = 16w7;"
    parser = """
    state start {
        pkt.extract(hdr.h);
        meta.m = hdr.h.v + 1;
        transition accept;
    }
"""
    text = program(body, parser=parser, deparse="pkt.emit(hdr.h);")
    nested = compile_text(text, filename="prog.p4", p4c_nesting=True).bmv2
    plain = compile_program(text).bmv2
    prim = nested["actions"][-1]["primitives"][0]
    value = prim["parameters"][1]
    assert value["type"] == "expression" and value["value"]["type"] == "expression"
    assert value["value"] == plain["actions"][-1]["primitives"][0]["parameters"][1]
    assert prim["parameters"][0] == field("h", "v")  # fields stay as they are
    # BMv2 passes a parameter's "value" to build_expression, which needs a typed node.
    assert _bmv2_can_build(value["value"])
    assert not _bmv2_can_build(plain["actions"][-1]["primitives"][0]["parameters"][1]["value"])
    set_op = nested["parsers"][0]["parse_states"][0]["parser_ops"][1]
    assert set_op["op"] == "set" and _bmv2_can_build(set_op["parameters"][1]["value"])


def test_direct_call_with_runtime_argument_is_inlined() -> None:
    local = "action setp(bit<9> p) { sm.egress_spec = p; }"
    result = compile_program(program("setp(7); setp(sm.ingress_port);", local))
    names = [t["name"] for t in ingress(result)["tables"]]
    assert names[0] == "tbl_setp"
    assert table(result, "tbl_setp")["default_entry"]["action_data"] == ["0x7"]
    inlined = table(result, names[1])["actions"][0]
    prims = action(result, inlined)["primitives"]
    assert prims[-1]["parameters"] == [field("standard_metadata", "egress_spec"),
                                       field("standard_metadata", "ingress_port")]


def test_stack_last_and_last_index_in_controls() -> None:
    body = "hdr.h.w = hdr.vlan.last.tci; meta.i = hdr.vlan.lastIndex;"
    prims = compile_program(program(body, meta="bit<32> i;")).bmv2["actions"][-1]["primitives"]
    assert prims[0]["parameters"][1] == {"type": "stack_field", "value": ["vlan", "tci"]}
    assert prims[1]["parameters"][1] == expr(
        "last_stack_index", None, {"type": "header_stack", "value": "vlan"})


def test_the_compiler_has_no_import_circles() -> None:
    """The compiler's own modules (lower_control / lower_table once) import no circle;
    tests/unit/test_import_graph.py checks the whole project the same way."""
    from tests.unit.test_import_graph import import_cycles

    cycles = [c for c, _ in import_cycles() if any(m.startswith("p4lite.compiler") for m in c)]
    assert not cycles, cycles
