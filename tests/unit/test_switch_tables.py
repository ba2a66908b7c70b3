"""Tables of the switch core: match kinds, priorities, defaults, const entries, control-plane errors."""

from __future__ import annotations

import pytest

from p4lite.switch.core.runtime_api import (
    CODE_ALREADY_EXISTS,
    CODE_INVALID_ARGUMENT,
    CODE_NOT_FOUND,
    CODE_PERMISSION_DENIED,
    CODE_RESOURCE_EXHAUSTED,
    ActionCall,
    MatchField,
    SwitchRuntimeError,
    TableEntry,
)
from p4lite.switch.core.switch import Switch
from tests.support.samples import ProgramBuilder, fld, hexstr, key, param, prim

K = [["a", 8, False], ["b", 16, False], ["c", 32, False], ["out", 8, False]]
T = "ingress.t"
SET = "ingress.set_out"


def program(keys: list, *, entries: list | None = None, with_counters: bool = False,
            max_size: int = 64, default_const: bool = False, next_tables: dict | None = None) -> dict:
    b = ProgramBuilder()
    b.header("k", K)
    b.header("o", [["v", 8, False]])
    done = {"type": "default", "value": None, "mask": None, "next_state": None}
    b.set_parser([
        {"name": "start", "id": 0, "parser_ops": [
            {"op": "extract", "parameters": [{"type": "regular", "value": "k"}]}],
         "transition_key": [fld("k", "a")], "transitions": [
             {"type": "hexstr", "value": "0xff", "mask": None, "next_state": "opt"}, done]},
        {"name": "opt", "id": 1, "parser_ops": [
            {"op": "extract", "parameters": [{"type": "regular", "value": "o"}]}],
         "transition_key": [], "transitions": [done]},
    ], ["k", "o"])
    set_out = b.action(SET, [("v", 8)], [prim("assign", fld("k", "out"), param(0))])
    noop = b.action("NoAction", [], [])
    b.table("ingress", T, keys, [(SET, set_out), ("NoAction", noop)], default=(noop, []),
            entries=entries, with_counters=with_counters, max_size=max_size,
            default_const=default_const, next_tables=next_tables)
    if with_counters:
        b.doc["counter_arrays"].append({"name": "ingress.t_counter", "id": 0, "is_direct": True,
                                        "binding": T, "size": max_size})
    return b.doc


def out_of(sw: Switch, a: int = 0, b: int = 0, c: int = 0, extra: bytes = b"") -> int:
    data = bytes([a]) + b.to_bytes(2, "big") + c.to_bytes(4, "big") + b"\0" + extra
    return sw.process(data, 0)[0][1][7]


def entry(match: tuple, v: int, priority: int = 0, action: str = SET) -> TableEntry:
    return TableEntry(T, match, ActionCall(action, (v,) if action == SET else ()), priority)


def code_of(fn, *args) -> str:
    with pytest.raises(SwitchRuntimeError) as info:
        fn(*args)
    return info.value.code


def test_exact_match_on_two_fields() -> None:
    sw = Switch(program([key("exact", "k", "a"), key("exact", "k", "b")]))
    sw.table_add(entry((MatchField("exact", 1), MatchField("exact", 0x0203)), 9))
    assert out_of(sw, 1, 0x0203) == 9
    assert out_of(sw, 1, 0x0204) == 0


def test_lpm_longest_prefix_wins() -> None:
    sw = Switch(program([key("lpm", "k", "c")]))
    sw.table_add(entry((MatchField("lpm", 0, prefix_len=0),), 1))
    sw.table_add(entry((MatchField("lpm", 0x0A000000, prefix_len=8),), 8))
    sw.table_add(entry((MatchField("lpm", 0x0A010000, prefix_len=16),), 16))
    sw.table_add(entry((MatchField("lpm", 0x0A010203, prefix_len=32),), 32))
    assert out_of(sw, c=0x0A010203) == 32
    assert out_of(sw, c=0x0A010204) == 16
    assert out_of(sw, c=0x0A020304) == 8
    assert out_of(sw, c=0x0B000000) == 1
    sw.table_delete(T, (MatchField("lpm", 0x0A010000, prefix_len=16),))
    assert out_of(sw, c=0x0A010204) == 8


def test_lpm_with_an_exact_field() -> None:
    sw = Switch(program([key("exact", "k", "a"), key("lpm", "k", "c")]))
    sw.table_add(entry((MatchField("exact", 1), MatchField("lpm", 0x0A000000, prefix_len=8)), 5))
    assert out_of(sw, 1, c=0x0A000001) == 5
    assert out_of(sw, 2, c=0x0A000001) == 0


def test_ternary_larger_priority_wins() -> None:
    sw = Switch(program([key("ternary", "k", "b"), key("exact", "k", "a")]))
    sw.table_add(entry((MatchField("ternary", 0x0100, mask=0xFF00), MatchField("exact", 1)), 1, 10))
    sw.table_add(entry((MatchField("ternary", 0x0102, mask=0xFFFF), MatchField("exact", 1)), 2, 20))
    sw.table_add(entry((MatchField("ternary", 0, mask=0), MatchField("exact", 1)), 3, 5))
    assert out_of(sw, 1, 0x0102) == 2
    assert out_of(sw, 1, 0x0103) == 1
    assert out_of(sw, 1, 0x0203) == 3
    assert out_of(sw, 2, 0x0102) == 0
    sw.table_modify(entry((MatchField("ternary", 0, mask=0), MatchField("exact", 1)), 4, 5))
    assert out_of(sw, 1, 0x0203) == 4


def test_same_match_with_two_priorities_are_two_entries() -> None:
    sw = Switch(program([key("ternary", "k", "b")]))
    sw.table_add(entry((MatchField("ternary", 1, mask=0xFFFF),), 1, 1))
    sw.table_add(entry((MatchField("ternary", 1, mask=0xFFFF),), 2, 2))
    assert out_of(sw, b=1) == 2
    sw.table_delete(T, (MatchField("ternary", 1, mask=0xFFFF),), 2)
    assert out_of(sw, b=1) == 1


def test_range_bounds_are_inclusive() -> None:
    sw = Switch(program([key("range", "k", "b"), key("ternary", "k", "a")]))
    sw.table_add(entry((MatchField("range", 10, high=20), MatchField("ternary", 0, mask=0)), 1, 1))
    sw.table_add(entry((MatchField("range", 15, high=15), MatchField("ternary", 0, mask=0)), 2, 9))
    assert [out_of(sw, b=v) for v in (9, 10, 14, 15, 20, 21)] == [0, 1, 1, 2, 1, 0]


def test_optional_match() -> None:
    sw = Switch(program([key("optional", "k", "a"), key("exact", "k", "b")]))
    sw.table_add(entry((MatchField("optional", 0, mask=0), MatchField("exact", 7)), 1, 1))
    sw.table_add(entry((MatchField("optional", 3, mask=0xFF), MatchField("exact", 7)), 2, 2))
    assert out_of(sw, 3, 7) == 2 and out_of(sw, 4, 7) == 1
    code = code_of(sw.table_add, entry((MatchField("optional", 1, mask=0x0F), MatchField("exact", 8)), 1, 1))
    assert code == CODE_INVALID_ARGUMENT


def test_valid_match() -> None:
    valid_key = {"match_type": "valid", "name": "o.$valid$", "target": ["o", "$valid$"], "mask": None}
    sw = Switch(program([valid_key]))
    sw.table_add(entry((MatchField("valid", 1),), 4))
    sw.table_add(entry((MatchField("valid", 0),), 5))
    assert out_of(sw, 0xFF, extra=b"\x01") == 4
    assert out_of(sw, 0x01) == 5


def test_sliced_key_uses_the_json_mask() -> None:
    sw = Switch(program([key("exact", "k", "b", mask=0xFF00)]))
    sw.table_add(entry((MatchField("exact", 0x1200),), 6))
    assert out_of(sw, b=0x12AB) == 6 and out_of(sw, b=0x13AB) == 0


def test_default_action_set_get_reset() -> None:
    sw = Switch(program([key("exact", "k", "a")]))
    assert sw.table_get_default(T) == ActionCall("NoAction")
    assert out_of(sw, 1) == 0
    sw.table_set_default(T, ActionCall(SET, (3,)))
    assert out_of(sw, 1) == 3 and sw.table_get_default(T) == ActionCall(SET, (3,))
    sw.table_reset_default(T)
    assert out_of(sw, 1) == 0


def test_const_default_refuses_changes() -> None:
    sw = Switch(program([key("exact", "k", "a")], default_const=True))
    assert code_of(sw.table_set_default, T, ActionCall(SET, (1,))) == CODE_PERMISSION_DENIED


def _const(a: int, v: int, mask: int, priority: int) -> dict:
    return {"match_key": [{"match_type": "ternary", "key": hex(a), "mask": hex(mask)}],
            "action_entry": {"action_id": 0, "action_data": [hex(v)]}, "priority": priority}


def test_const_entries_smaller_json_priority_wins_and_table_is_read_only() -> None:
    entries = [_const(0x10, 1, 0xF0, 2), _const(0x11, 2, 0xFF, 1)]
    sw = Switch(program([key("ternary", "k", "a")], entries=entries))
    assert out_of(sw, 0x11) == 2 and out_of(sw, 0x12) == 1
    read = sw.table_entries(T)
    assert len(read) == 2 and read[1].priority > read[0].priority
    assert code_of(sw.table_add, entry((MatchField("ternary", 1, mask=0xFF),), 1, 1)) == CODE_PERMISSION_DENIED
    assert code_of(sw.table_delete, T, read[0].match, read[0].priority) == CODE_PERMISSION_DENIED
    assert code_of(sw.table_clear, T) == CODE_PERMISSION_DENIED
    sw.reset_state()
    assert out_of(sw, 0x11) == 2  # const entries survive a state reset


def test_direct_counters_count_hits_in_bytes_and_packets() -> None:
    sw = Switch(program([key("exact", "k", "a")], with_counters=True))
    m = (MatchField("exact", 1),)
    sw.table_add(entry(m, 1))
    for _ in range(3):
        out_of(sw, 1, extra=b"xx")
    out_of(sw, 2)
    (e,) = sw.table_entries(T)
    assert (e.counter_packets, e.counter_bytes) == (3, 3 * 10)
    sw.direct_counter_write(T, m, 0, 100, 7)
    (e,) = sw.table_entries(T)
    assert (e.counter_packets, e.counter_bytes) == (7, 100)


def test_hit_miss_next_tables() -> None:
    doc = program([key("exact", "k", "a")], next_tables={"__HIT__": None, "__MISS__": "ingress.t2"})
    b_actions = doc["actions"]
    aid = len(b_actions)
    b_actions.append({"name": "ingress.mark", "id": aid, "runtime_data": [], "primitives": [
        prim("assign", fld("k", "out"), hexstr(0x55))]})
    ingress = doc["pipelines"][0]
    ingress["tables"].append({
        "name": "ingress.t2", "id": 1, "key": [], "match_type": "exact", "type": "simple",
        "max_size": 1, "with_counters": False, "support_timeout": False, "direct_meters": None,
        "action_ids": [aid], "actions": ["ingress.mark"], "base_default_next": None,
        "next_tables": {"ingress.mark": None},
        "default_entry": {"action_id": aid, "action_const": True, "action_data": [],
                          "action_entry_const": True}})
    sw = Switch(doc)
    sw.table_add(entry((MatchField("exact", 1),), 9))
    assert out_of(sw, 1) == 9
    assert out_of(sw, 2) == 0x55


def test_table_entries_round_trip_and_clear() -> None:
    sw = Switch(program([key("exact", "k", "a")]))
    e1 = entry((MatchField("exact", 1),), 1)
    e2 = entry((MatchField("exact", 2),), 2)
    sw.table_add(e1)
    sw.table_add(e2)
    assert [(e.match, e.action) for e in sw.table_entries(T)] == [(e1.match, e1.action),
                                                                 (e2.match, e2.action)]
    sw.table_clear(T)
    assert sw.table_entries(T) == [] and out_of(sw, 1) == 0


EXACT = [key("exact", "k", "a")]
LPM = [key("lpm", "k", "c")]
TERN = [key("ternary", "k", "b")]
RANGE = [key("range", "k", "b")]


@pytest.mark.parametrize("keys,bad_entry,code", [
    (EXACT, TableEntry("nope", (MatchField("exact", 1),), ActionCall(SET, (1,))), CODE_NOT_FOUND),
    (EXACT, TableEntry(T, (MatchField("exact", 1),), ActionCall("ingress.nope", ())), CODE_INVALID_ARGUMENT),
    (EXACT, TableEntry(T, (MatchField("exact", 1),), ActionCall(SET, ())), CODE_INVALID_ARGUMENT),
    (EXACT, TableEntry(T, (MatchField("exact", 1),), ActionCall(SET, (256,))), CODE_INVALID_ARGUMENT),
    (EXACT, TableEntry(T, (MatchField("exact", 256),), ActionCall(SET, (1,))), CODE_INVALID_ARGUMENT),
    (EXACT, TableEntry(T, (), ActionCall(SET, (1,))), CODE_INVALID_ARGUMENT),
    (EXACT, TableEntry(T, (MatchField("lpm", 1, prefix_len=8),), ActionCall(SET, (1,))), CODE_INVALID_ARGUMENT),
    (EXACT, TableEntry(T, (MatchField("exact", 1),), ActionCall(SET, (1,)), 5), CODE_INVALID_ARGUMENT),
    (LPM, TableEntry(T, (MatchField("lpm", 0, prefix_len=33),), ActionCall(SET, (1,))), CODE_INVALID_ARGUMENT),
    (LPM, TableEntry(T, (MatchField("lpm", 0x0A000001, prefix_len=8),), ActionCall(SET, (1,))), CODE_INVALID_ARGUMENT),
    (TERN, TableEntry(T, (MatchField("ternary", 0x11, mask=0x10),), ActionCall(SET, (1,)), 1), CODE_INVALID_ARGUMENT),
    (TERN, TableEntry(T, (MatchField("ternary", 0x10, mask=0x10),), ActionCall(SET, (1,)), 0), CODE_INVALID_ARGUMENT),
    (TERN, TableEntry(T, (MatchField("ternary", 0, mask=0x1FFFF),), ActionCall(SET, (1,)), 1), CODE_INVALID_ARGUMENT),
    (RANGE, TableEntry(T, (MatchField("range", 5, high=4),), ActionCall(SET, (1,)), 1), CODE_INVALID_ARGUMENT),
    (RANGE, TableEntry(T, (MatchField("range", 5, high=0x10000),), ActionCall(SET, (1,)), 1), CODE_INVALID_ARGUMENT),
])
def test_bad_entries_are_refused_with_the_right_code(keys: list, bad_entry: TableEntry, code: str) -> None:
    sw = Switch(program(keys))
    assert code_of(sw.table_add, bad_entry) == code
    assert all(not t.entries for t in sw.tables.values())


def test_duplicate_missing_and_full() -> None:
    sw = Switch(program(EXACT, max_size=2))
    e = entry((MatchField("exact", 1),), 1)
    sw.table_add(e)
    assert code_of(sw.table_add, e) == CODE_ALREADY_EXISTS
    missing = (MatchField("exact", 9),)
    assert code_of(sw.table_delete, T, missing) == CODE_NOT_FOUND
    assert code_of(sw.table_modify, entry(missing, 2)) == CODE_NOT_FOUND
    assert code_of(sw.direct_counter_write, T, missing, 0, 1, 1) == CODE_INVALID_ARGUMENT
    sw.table_add(entry((MatchField("exact", 2),), 1))
    assert code_of(sw.table_add, entry((MatchField("exact", 3),), 1)) == CODE_RESOURCE_EXHAUSTED
    assert code_of(sw.table_entries, "ingress.none") == CODE_NOT_FOUND


def test_meter_config_on_a_table_without_direct_meter_is_refused() -> None:
    sw = Switch(program(EXACT))
    e = TableEntry(T, (MatchField("exact", 1),), ActionCall(SET, (1,)), meter_rates=((1, 1), (2, 2)))
    assert code_of(sw.table_add, e) == CODE_INVALID_ARGUMENT
    sw.table_add(entry((MatchField("exact", 1),), 1))
    changed = TableEntry(T, e.match, ActionCall(SET, (7,)), meter_rates=e.meter_rates)
    assert code_of(sw.table_modify, changed) == CODE_INVALID_ARGUMENT
    assert out_of(sw, 1) == 1  # the refused modify changed nothing
