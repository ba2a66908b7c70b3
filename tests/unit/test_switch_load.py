"""Loading BMv2 JSON: the L3 sample end to end, and clear SwitchLoadErrors for bad programs."""

from __future__ import annotations

import copy
import json
import pathlib

import pytest

from p4lite.switch.core import hashes
from p4lite.switch.core.runtime_api import ActionCall, MatchField, TableEntry
from p4lite.switch.core.switch import Switch, SwitchLoadError
from tests.support.samples import l3_router, lifecycle_program, prim

ETH = bytes.fromhex("aabbccddeeff0011223344550800")


def ipv4(ttl: int = 64, dst: bytes = bytes([10, 0, 0, 2]), good: bool = True) -> bytes:
    hdr = bytes.fromhex("4500001c00004000") + bytes([ttl, 17]) + b"\0\0" + bytes([192, 168, 0, 1]) + dst
    ck = hashes.csum16(hdr) ^ (0 if good else 1)
    return hdr[:10] + ck.to_bytes(2, "big") + hdr[12:]


def router() -> Switch:
    sw = Switch(l3_router())
    sw.table_add(TableEntry("MyIngress.ipv4_lpm", (MatchField("lpm", 0x0A000000, prefix_len=8),),
                            ActionCall("MyIngress.ipv4_forward", (0x020000000001, 3))))
    return sw


def test_l3_router_rewrites_decrements_ttl_and_updates_checksum() -> None:
    out = router().process(ETH + ipv4() + b"payload!", 1)
    assert [p for p, _ in out] == [3]
    data = out[0][1]
    assert data[:12] == bytes.fromhex("020000000001aabbccddeeff")
    assert data[22] == 63
    assert hashes.csum16(data[14:34]) == 0  # a valid header sums to 0xffff
    assert data[34:] == b"payload!"


def test_l3_router_miss_drops_and_non_ipv4_round_trips() -> None:
    sw = router()
    assert sw.process(ETH + ipv4(dst=bytes([11, 0, 0, 1])), 1) == []
    arp = ETH[:12] + b"\x08\x06" + bytes(range(28))
    assert sw.process(arp, 1) == [(0, arp)]  # no table applies: egress_spec 0, unchanged


def test_ttl_wraps_at_zero() -> None:
    out = router().process(ETH + ipv4(ttl=0), 1)
    assert out[0][1][22] == 255


def test_load_from_path_and_text(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "prog.json"
    path.write_text(json.dumps(l3_router()))
    assert Switch(path).tables.keys() == Switch(str(path)).tables.keys()
    assert "MyIngress.ipv4_lpm" in Switch(json.dumps(l3_router())).tables


def broken(change) -> dict:
    doc = copy.deepcopy(l3_router())
    change(doc)
    return doc


def _action(doc: dict, name: str) -> dict:
    return next(a for a in doc["actions"] if a["name"] == name)


@pytest.mark.parametrize("change,message", [
    (lambda d: d["__meta__"].update(version=[3, 0]), "version"),
    (lambda d: d["__meta__"].update(version=[2, 25]), "version"),
    (lambda d: d["headers"][2].update(header_type="nope_t"), "unknown header type 'nope_t'"),
    (lambda d: d["header_types"][2]["fields"].append(["opts", "*", False]), "varbit"),
    (lambda d: _action(d, "MyIngress.drop")["primitives"].append(prim("frobnicate")),
     "primitive 'frobnicate' is not supported"),
    (lambda d: _action(d, "MyIngress.ipv4_forward")["primitives"].append(
        prim("assign", {"type": "field", "value": ["ipv4", "nope"]}, {"type": "hexstr", "value": "0x1"})),
     "header 'ipv4' has no field 'nope'"),
    (lambda d: d["pipelines"][0]["tables"][0]["key"][0].update(match_type="fuzzy"),
     "match type 'fuzzy'"),
    (lambda d: d["pipelines"][0]["tables"][0].update(type="indirect"),
     "only 'simple' tables can have a 'default_entry'"),
    (lambda d: d["pipelines"][0]["conditionals"][0].update(true_next="nowhere"), "nowhere"),
    (lambda d: d["pipelines"][0]["conditionals"][0].update(true_next="node_2"), "cycle"),
    (lambda d: d["pipelines"][0]["tables"][0].update(base_default_next="node_2", next_tables={}),
     "cycle"),
    (lambda d: d["pipelines"][0]["tables"][0]["action_ids"].append(99), "differ in length"),
    (lambda d: d.pop("parsers"), "missing 'parsers'"),
    (lambda d: d["parsers"][0]["parse_states"][0]["transitions"][0].update(next_state="nope"),
     "unknown next state 'nope'"),
    (lambda d: d["calculations"][0].update(algo="md5"), "hash algorithm 'md5'"),
    (lambda d: d["pipelines"].pop(), "no pipeline named 'egress'"),
    (lambda d: d["header_unions"].append({"name": "u", "id": 0, "union_type": "nope_t",
                                          "header_ids": []}),
     "header_unions\\[0\\] 'u': union_type: unknown header union type 'nope_t'"),
    (lambda d: d["pipelines"][0]["tables"][0]["default_entry"].update(action_id=42),
     r"default_entry.action_id: action id 42 names no action"),
])
def test_bad_programs_raise_a_load_error_naming_the_object(change, message: str) -> None:
    with pytest.raises(SwitchLoadError, match=message):
        Switch(broken(change))


def test_unreadable_program() -> None:
    with pytest.raises(SwitchLoadError):
        Switch("/nonexistent/prog.json")
    with pytest.raises(SwitchLoadError):
        Switch("{not json")
    with pytest.raises(SwitchLoadError):
        Switch({"header_types": "oops"})


def test_json_without_meta_and_aliases_loads() -> None:
    doc = l3_router()
    del doc["__meta__"]
    del doc["field_aliases"]
    assert router().process(ETH + ipv4(), 1)[0][0] == 3
    assert Switch(doc).process(ETH + ipv4(), 1) == []  # no entries: default drop


def _paths(obj, prefix=()):
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, list):
        items = enumerate(obj)
    else:
        return
    for k, v in items:
        yield prefix + (k,)
        yield from _paths(v, prefix + (k,))


@pytest.mark.parametrize("make", [l3_router, lifecycle_program])
def test_mutated_programs_either_load_error_or_run_cleanly(make) -> None:
    """Random damage to a program: loading fails with SwitchLoadError, or the switch
    loads and then runs packets without an internal error."""
    import random

    rng = random.Random(11)
    base = make()
    paths = list(_paths(base))
    junk: list[object] = [None, 0, -1, 7, "x", "0xzz", [], {}, True, 2 ** 70, 1.5]
    for _ in range(300):
        doc = copy.deepcopy(base)
        path = rng.choice(paths)
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        if rng.random() < 0.3:
            del parent[path[-1]]
        else:
            parent[path[-1]] = rng.choice(junk)
        try:
            sw = Switch(doc)
        except SwitchLoadError:
            continue
        for data in (b"", bytes(20), bytes(range(60))):
            sw.process(data, 1)
        assert sw.errors == 0, path


def _varbit_program() -> dict:
    from p4lite.compiler.driver import compile_file
    root = pathlib.Path(__file__).resolve().parents[2]
    return compile_file(str(root / "tests" / "p4" / "varbit.p4")).bmv2


def _first_extract_vl(doc: dict) -> dict:
    ops = doc["parsers"][0]["parse_states"][0]["parser_ops"]
    return next(op for op in ops if op["op"] == "extract_VL")


@pytest.mark.parametrize("change,message", [
    # extract (fixed size) of a header with a varbit field
    (lambda d: _first_extract_vl(d).update(op="extract", parameters=[
        {"type": "regular", "value": "o"}]), "which has a varbit field, without a length"),
    # a varbit field written directly: BMv2 would keep the old length
    (lambda d: d["actions"][0]["primitives"].append(
        prim("assign", {"type": "field", "value": ["o", "opts"]},
             {"type": "hexstr", "value": "0x1"})), "assigning a varbit field"),
    # a whole header holding a varbit field as a hash input (its fields one by one load)
    (lambda d: d["calculations"].append({"name": "c", "id": 9, "algo": "crc16", "input": [
        {"type": "header", "value": "o"}]}), "has a varbit field: not supported by p4lite "
                                             "in a calculation"),
    (lambda d: d["header_types"][-1].pop("max_length"), "needs 'max_length'"),
])
def test_varbit_limits_are_load_errors(change, message: str) -> None:
    doc = _varbit_program()
    Switch(copy.deepcopy(doc))
    change(doc)
    with pytest.raises(SwitchLoadError, match=message):
        Switch(doc)
