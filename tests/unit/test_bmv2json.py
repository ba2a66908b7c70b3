"""The typed BMv2 JSON model: exact round trips, errors that name the object and path,
and one minimal JSON per thing BMv2's loader (P4Objects.cpp) refuses or crashes on."""

from __future__ import annotations

import copy
import json
import pathlib
from collections.abc import Callable
from typing import Any

import pytest

from p4lite import bmv2json
from p4lite.switch.core.switch import Switch, SwitchLoadError

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden"


def minimal() -> dict[str, Any]:
    """The smallest program BMv2 loads: one header, a parser, a deparser, one action,
    one table, one conditional, one calculation, checksum, lists and stateful arrays."""
    fld = {"type": "field", "value": ["h", "f"]}
    return {
        "header_types": [{"name": "h_t", "id": 0, "fields": [["f", 8, False], ["g", 8, False]]}],
        "headers": [{"name": "h", "id": 0, "header_type": "h_t", "metadata": False}],
        "header_stacks": [{"name": "hs", "id": 0, "header_type": "h_t", "size": 1,
                           "header_ids": [0]}],
        "field_lists": [{"id": 1, "name": "fl", "elements": [fld]}],
        "learn_lists": [{"id": 1, "name": "ll", "elements": [fld]}],
        "errors": [["NoError", 0], ["PacketTooShort", 1]],
        "enums": [{"name": "E", "entries": [["A", 0], ["B", 1]]}],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
            {"name": "start", "id": 0,
             "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}],
             "transition_key": [fld],
             "transitions": [{"type": "hexstr", "value": "0x01", "mask": None, "next_state": "two"},
                             {"type": "default", "value": None, "mask": None, "next_state": None}]},
            {"name": "two", "id": 1, "parser_ops": [], "transition_key": [], "transitions": [
                {"type": "default", "value": None, "mask": None, "next_state": None}]}]}],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["h"]}],
        "meter_arrays": [{"name": "m", "id": 0, "is_direct": False, "rate_count": 2,
                          "type": "packets", "size": 4}],
        "counter_arrays": [{"name": "c", "id": 0, "is_direct": False, "size": 4}],
        "register_arrays": [{"name": "r", "id": 0, "size": 4, "bitwidth": 8}],
        "calculations": [{"name": "calc", "id": 0, "algo": "crc16", "input": [fld]}],
        "actions": [
            {"name": "set_f", "id": 0, "runtime_data": [{"name": "v", "bitwidth": 8}],
             "primitives": [{"op": "assign", "parameters": [fld, {"type": "runtime_data", "value": 0}]},
                            {"op": "register_write", "parameters": [
                                {"type": "register_array", "value": "r"},
                                {"type": "hexstr", "value": "0x0"}, fld]}]},
            {"name": "clone", "id": 1, "runtime_data": [], "primitives": [
                {"op": "clone_ingress_pkt_to_egress", "parameters": [
                    {"type": "hexstr", "value": "0x5"}, {"type": "hexstr", "value": "0x1"}]}]},
        ],
        "pipelines": [
            {"name": "ingress", "id": 0, "init_table": "cond", "tables": [
                {"name": "t", "id": 0, "key": [{"match_type": "exact", "name": "h.f",
                                                "target": ["h", "f"], "mask": None}],
                 "match_type": "exact", "type": "simple", "max_size": 16, "with_counters": False,
                 "support_timeout": False, "direct_meters": None, "action_ids": [0, 1],
                 "actions": ["set_f", "clone"], "base_default_next": None,
                 "next_tables": {"set_f": None, "clone": None},
                 "default_entry": {"action_id": 0, "action_const": False,
                                   "action_data": ["0x0"], "action_entry_const": False},
                 "entries": [{"match_key": [{"match_type": "exact", "key": "0x02"}],
                              "action_entry": {"action_id": 0, "action_data": ["0x3"]},
                              "priority": 1}]}],
             "action_profiles": [], "conditionals": [
                {"name": "cond", "id": 0, "expression": {"type": "expression", "value": {
                    "op": "==", "left": fld, "right": {"type": "hexstr", "value": "0x1"}}},
                 "true_next": "t", "false_next": None}]},
            {"name": "egress", "id": 1, "init_table": None, "tables": [], "action_profiles": [],
             "conditionals": []},
        ],
        "checksums": [{"name": "ck", "id": 0, "target": ["h", "g"], "type": "generic",
                       "calculation": "calc", "verify": True, "update": True, "if_cond": None}],
        "field_aliases": [],
        "__meta__": {"version": [2, 23], "compiler": "test"},
    }


def test_minimal_program_loads_on_the_switch() -> None:
    Switch(minimal())


@pytest.mark.parametrize("path", sorted(GOLDEN.rglob("*.json")), ids=lambda p: p.stem)
def test_golden_json_round_trips_exactly(path: pathlib.Path) -> None:
    doc = json.loads(path.read_text())
    assert json.dumps(bmv2json.dump(bmv2json.load(doc))) == json.dumps(doc)


def test_null_lists_and_unknown_keys_round_trip() -> None:
    doc = minimal()
    doc["calculations"][0]["future_key"] = {"x": [1]}
    doc["force_arith"] = None
    assert bmv2json.dump(bmv2json.load(doc)) == doc


def test_field_flags_may_be_numbers_as_p4c_writes_a_bool_field() -> None:
    """p4c writes a header's ``bool`` field as ``[name, 1, 0]``; BMv2 reads the flag with
    asBool, so a number is a valid flag, and the dump gives back what was written."""
    doc = minimal()
    doc["header_types"][0]["fields"][0] = ["f", 8, 0]
    assert bmv2json.dump(bmv2json.load(doc)) == doc
    Switch(doc)
    doc["header_types"][0]["fields"][0] = ["f", 8, "no"]
    with pytest.raises(bmv2json.Bmv2JsonError, match=r"expected \[name, width, signed\]"):
        bmv2json.load(doc)


def test_model_is_typed() -> None:
    prog = bmv2json.load(minimal())
    table = prog.pipelines[0].tables[0]
    assert table.default_entry is not None and table.default_entry.action_data == ("0x0",)
    assert prog.header_types[0].fields[0].width == 8
    assert prog.actions[0].primitives[0].op == "assign"


def test_header_unions_are_typed_and_round_trip() -> None:
    doc = minimal()
    hid = doc["headers"][-1]["id"]
    htype = doc["headers"][-1]["header_type"]
    doc["header_union_types"] = [{"name": "u_t", "id": 0, "headers": [["a", htype]]}]
    doc["header_unions"] = [{"name": "u", "id": 0, "union_type": "u_t", "header_ids": [hid],
                             "pi_omit": True}]
    doc["header_union_stacks"] = [{"name": "us", "id": 0, "union_type": "u_t", "size": 1,
                                   "header_union_ids": [0]}]
    prog = bmv2json.load(doc)
    assert prog.header_union_types[0].headers == (("a", htype),)
    assert prog.header_unions[0].header_ids == (hid,)
    assert prog.header_union_stacks[0].header_union_ids == (0,)
    assert bmv2json.dump(prog) == doc
    doc["header_union_stacks"][0]["header_union_ids"] = [5]
    with pytest.raises(bmv2json.Bmv2JsonError,
                       match=r"header_union_stacks\[0\] 'us': header_union_ids\[0\]: unknown id 5"):
        bmv2json.load(doc)


def test_error_names_the_object_and_the_path() -> None:
    doc = minimal()
    doc["actions"][0]["primitives"][0]["parameters"][1] = 7
    with pytest.raises(bmv2json.Bmv2JsonError) as err:
        bmv2json.load(doc)
    assert str(err.value) == ("actions[0] 'set_f': primitives[0].parameters[1]: "
                              "expected an object with 'type'")


def _set(path: str, value: Any) -> Callable[[dict], None]:
    """A change that sets the value at a dotted path (list indices as numbers)."""
    def change(doc: dict) -> None:
        *parents, last = path.split(".")
        obj: Any = doc
        for part in parents:
            obj = obj[int(part)] if isinstance(obj, list) else obj[part]
        if isinstance(obj, list):
            obj[int(last)] = value
        else:
            obj[last] = value
    return change


def _append(path: str, value: Any) -> Callable[[dict], None]:
    def change(doc: dict) -> None:
        obj: Any = doc
        for part in path.split("."):
            obj = obj[int(part)] if isinstance(obj, list) else obj[part]
        obj.append(copy.deepcopy(value))
    return change


T = "pipelines.0.tables.0"
A0 = "actions.0.primitives"
FLD = {"type": "field", "value": ["h", "f"]}

# (change, message): each is something BMv2's P4Objects.cpp refuses (json_exception) or
# crashes on (unordered_map::at, a null node), per the comment.
REFUSALS = [
    # check_json_version
    (_set("__meta__.version", [3, 0]), r"__meta__: version: unsupported JSON format version 3.0"),
    # init_headers: get_header_type (.at)
    (_set("headers.0.header_type", "nope_t"), r"headers\[0\] 'h': header_type: unknown header type 'nope_t'"),
    # init_header_stacks: get_header_type (.at)
    (_set("header_stacks.0.header_type", "nope_t"), r"header_stacks\[0\] 'hs': header_type: unknown header type"),
    (_set("header_stacks.0.header_ids", [7]), r"header_stacks\[0\] 'hs': header_ids\[0\]: unknown header id 7"),
    # field_aliases: assert(field_exists)
    (_set("field_aliases", [["a.b", ["h", "nope"]]]), r"field_aliases\[0\] 'a.b': header 'h' has no field 'nope'"),
    # init_errors / init_enums: add refuses duplicates
    (_append("errors", ["Again", 1]), r"errors\[2\]: duplicate error 'Again' = 1"),
    (_append("enums.0.entries", ["A", 5]), r"enums\[0\] 'E'\[2\]: duplicate enum entry 'A'"),
    # init_parsers: unknown op, extract header (get_header_id), set destination, verify error
    (_set("parsers.0.parse_states.0.parser_ops.0.op", "frob"), r"parser_ops\[0\].op: parser op 'frob' not supported"),
    (_set("parsers.0.parse_states.0.parser_ops.0.parameters.0.value", "nope"),
     r"parse_states\[0\] 'start': parser_ops\[0\].parameters\[0\].value: unknown header instance 'nope'"),
    (_append("parsers.0.parse_states.0.parser_ops", {"op": "set", "parameters": [
        {"type": "hexstr", "value": "0x1"}, {"type": "hexstr", "value": "0x1"}]}),
     r"parser 'set' destination must be of type 'field'"),
    (_append("parsers.0.parse_states.0.parser_ops", {"op": "verify", "parameters": [
        {"type": "bool", "value": True}, 9]}), r"invalid error code 9 in verify statement"),
    (_set("parsers.0.parse_states.0.transition_key.0", {"type": "header", "value": "h"}),
     r"transition_key\[0\]: invalid entry in parse state key"),
    # parse states: next_state / init_state names (BMv2 maps an unknown name to null)
    (_set("parsers.0.parse_states.0.transitions.0.next_state", "nope"),
     r"transitions\[0\].next_state: unknown next state 'nope'"),
    (_set("parsers.0.init_state", "nope"), r"parsers\[0\] 'parser': init_state: unknown parse state 'nope'"),
    # init_deparsers: get_header_id
    (_set("deparsers.0.order", ["nope"]), r"deparsers\[0\] 'deparser': order\[0\]: unknown header instance 'nope'"),
    # init_calculations: input types, field_info, check_hash
    (_set("calculations.0.algo", "md5"), r"calculations\[0\] 'calc': algo: unknown hash algorithm 'md5'"),
    (_set("calculations.0.input.0", {"type": "field", "value": ["h", "zz"]}),
     r"calculations\[0\] 'calc': input\[0\].value: header 'h' has no field 'zz'"),
    (_set("calculations.0.input.0", {"type": "local", "value": 0}), r"unsupported input type 'local'"),
    # init_meter_arrays: meter type; direct meter result_target (field_info)
    (_set("meter_arrays.0.type", "bits"), r"meter_arrays\[0\] 'm': type: invalid meter type 'bits'"),
    (_set("meter_arrays.0.is_direct", True), r"meter_arrays\[0\] 'm': a direct meter needs 'result_target'"),
    # init_actions: add_action overwrites a duplicate id (p4lite refuses it)
    (_set("actions.1.id", 0), r"actions\[1\]: duplicate action id 0"),
    # add_primitive_to_action: runtime_data offset, parameter type, named objects, fields
    (_set(f"{A0}.0.parameters.1", {"type": "runtime_data", "value": 1}),
     r"actions\[0\] 'set_f': primitives\[0\].parameters\[1\]: runtime_data 1 but the action has 1 parameter"),
    (_set(f"{A0}.0.parameters.1", {"type": "frob", "value": 1}), r"parameter type 'frob' not supported"),
    (_set(f"{A0}.1.parameters.0", {"type": "register_array", "value": "nope"}),
     r"primitives\[1\].parameters\[0\].value: unknown register_array 'nope'"),
    (_set(f"{A0}.0.parameters.0", {"type": "field", "value": ["nope", "f"]}),
     r"primitives\[0\].parameters\[0\].value: unknown header instance 'nope'"),
    (_set(f"{A0}.0.parameters.1", {"type": "expression", "value": {
        "op": "+", "left": FLD, "right": {"type": "frob", "value": 1}}}),
     r"parameters\[1\].value.right: invalid 'type' in expression: 'frob'"),
    (_set(f"{A0}.0.parameters.1", {"type": "calculation", "value": "nope"}), r"unknown calculation 'nope'"),
    # simple_switch: field list ids looked up with unordered_map::at
    (_set("actions.1.primitives.0.parameters.1", {"type": "hexstr", "value": "0x9"}),
     r"actions\[1\] 'clone': primitives\[0\].parameters\[1\]: primitive 'clone_ingress_pkt_to_egress' "
     r"names field_list id 9"),
    # init_pipelines: key fields, match types, two LPM keys, table type, size, action ids,
    # direct meters, next nodes (get_control_node), default entry, const entries
    (_set(f"{T}.key.0.target", ["h", "nope"]), r"tables\[0\] 't': key\[0\].target: header 'h' has no field 'nope'"),
    (_set(f"{T}.key.0.match_type", "fuzzy"), r"key\[0\].match_type: invalid match type 'fuzzy'"),
    (lambda d: d["pipelines"][0]["tables"][0]["key"].extend(
        [{"match_type": "lpm", "target": ["h", "f"]}, {"match_type": "lpm", "target": ["h", "g"]}]),
     r"tables\[0\] 't': key: table 't' features 2 LPM match fields"),
    (_set(f"{T}.type", "weird"), r"tables\[0\] 't': type: invalid table type 'weird'"),
    (lambda d: d["pipelines"][0]["tables"][0].pop("max_size") and d["pipelines"][0]["tables"][0].pop("entries"),
     r"tables\[0\] 't': table has neither 'max_size' nor 'entries'"),
    (_set(f"{T}.action_ids", [0, 9]), r"action_ids\[1\]: action id 9 names no action"),
    (_set(f"{T}.actions", ["set_f", "other"]), r"actions\[1\]: action id 1 is 'clone', not 'other'"),
    (_set(f"{T}.direct_meters", "nope"), r"direct_meters: unknown meter_array 'nope'"),
    (_set(f"{T}.next_tables", {"set_f": "nowhere"}), r"next_tables.set_f: unknown next node 'nowhere'"),
    (_set(f"{T}.base_default_next", "nowhere"), r"base_default_next: unknown next node 'nowhere'"),
    (_set("pipelines.0.init_table", "nowhere"), r"pipelines\[0\] 'ingress': init_table: unknown next node"),
    (_set("pipelines.0.conditionals.0.false_next", "nowhere"), r"conditionals\[0\] 'cond': false_next: unknown next node"),
    (_set("pipelines.1.conditionals", [{"name": "t", "expression": {"type": "bool", "value": True}}]),
     r"pipelines\[1\] 'egress': conditionals\[0\]: duplicate node name 't'"),
    (_set(f"{T}.default_entry.action_id", 42), r"default_entry.action_id: action id 42 names no action"),
    (_set(f"{T}.default_entry.action_data", []), r"default_entry.action_data: action 'set_f' takes 1 argument"),
    (_set(f"{T}.entries.0.match_key", []), r"entries\[0\].match_key: expected 1 match fields, got 0"),
    (_set(f"{T}.entries.0.match_key.0.match_type", "lpm"), r"match_key\[0\]: match type 'lpm', the key's is 'exact'"),
    (_set(f"{T}.entries.0.match_key.0", {"match_type": "exact"}), r"entries\[0\].match_key\[0\]: missing 'key'"),
    (_set(f"{T}.entries.0.action_entry.action_data", []), r"action_entry.action_data: action 'set_f' takes 1"),
    # init_checksums: target field, calculation (get_named_calculation .at), type
    (_set("checksums.0.calculation", "nope"), r"checksums\[0\] 'ck': calculation: unknown calculation 'nope'"),
    (_set("checksums.0.target", ["h", "nope"]), r"checksums\[0\] 'ck': target: header 'h' has no field 'nope'"),
    # init_learn_lists / init_field_lists: element types, fields
    (_set("learn_lists.0.elements.0", {"type": "hexstr", "value": "0x1"}),
     r"learn_lists\[0\] 'll': elements\[0\]: element of type 'hexstr' \(BMv2 takes field\)"),
    (_set("field_lists.0.elements.0", {"type": "field", "value": ["h", "zz"]}),
     r"field_lists\[0\] 'fl': elements\[0\].value: header 'h' has no field 'zz'"),
    (_append("field_lists", {"id": 1, "name": "again", "elements": []}), r"field_lists\[1\]: duplicate field_list id 1"),
    # init_header_unions / init_header_union_stacks: union types, member ids
    (_set("header_union_types", [{"name": "u_t", "id": 0, "headers": [["a", "nope_t"]]}]),
     r"header_union_types\[0\] 'u_t': headers\[0\]: unknown header type 'nope_t'"),
    (_set("header_unions", [{"name": "u", "id": 0, "union_type": "u_t", "header_ids": []}]),
     r"header_unions\[0\] 'u': union_type: unknown header union type 'u_t'"),
    # the document's shape
    (_set("actions", {}), r"^actions: expected an array, got dict"),
    (lambda d: d.pop("pipelines"), r"^program: missing 'pipelines'"),
]


@pytest.mark.parametrize("change,message", REFUSALS)
def test_what_bmv2_refuses_is_refused_naming_the_object(change: Callable[[dict], None],
                                                        message: str) -> None:
    doc = minimal()
    change(doc)
    with pytest.raises(bmv2json.Bmv2JsonError, match=message):
        bmv2json.load(doc)
    with pytest.raises(SwitchLoadError, match=message):  # the switch reports it in its type
        Switch(doc)
