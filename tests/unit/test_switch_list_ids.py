"""Field list and learn list ids: what simple_switch looks up with unordered_map::at.

simple_switch copies a clone's, resubmit's or recirculation's field list by id
(``get_field_list(id)``, i.e. ``field_lists.at(id)``) and generates a digest from its learn
list by id; an id the JSON does not define aborts the switch (std::out_of_range) on the
first packet that uses it. p4lite's loader refuses such a JSON up front, naming the action.
The bases are the reviewed golden JSON that p4lite-c writes for tests/p4.
"""

from __future__ import annotations

import copy
import json
import pathlib
from collections.abc import Callable, Iterator

import pytest

from p4lite.switch.core.switch import Switch, SwitchLoadError

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden" / "p4"


def golden(name: str) -> dict:
    return json.loads((GOLDEN / f"{name}.json").read_text())


def prims(doc: dict, op: str) -> Iterator[tuple[dict, dict]]:
    for action in doc["actions"]:
        for prim in action["primitives"]:
            if prim["op"] == op:
                yield action, prim


def first(doc: dict, op: str) -> tuple[dict, dict]:
    return next(prims(doc, op))


def set_list_param(doc: dict, op: str, pos: int, value: str) -> str:
    """Point the first ``op`` primitive's list id parameter at ``value``; the action's name."""
    action, prim = first(doc, op)
    prim["parameters"][pos] = {"type": "hexstr", "value": value}
    return action["name"]


@pytest.mark.parametrize("program,op,pos", [
    ("clone_i2e", "clone_ingress_pkt_to_egress", 1),
    ("clone_e2e_field_list", "clone_egress_pkt_to_egress", 1),
    ("resubmit_field_list", "resubmit", 0),
    ("recirculate_field_list", "recirculate", 0),
])
def test_unknown_field_list_id_is_refused_naming_the_action(program: str, op: str,
                                                           pos: int) -> None:
    doc = golden(program)
    name = set_list_param(doc, op, pos, "0x63")
    with pytest.raises(SwitchLoadError, match=rf"actions\[\d+\] '{name}'.*'{op}'.*field_list id 99"):
        Switch(doc)


def test_clone_field_list_id_0_is_refused() -> None:
    """p4lite-c wrote 0 for a plain clone() before: BMv2 aborted once the session fired."""
    doc = golden("clone_i2e")
    set_list_param(doc, "clone_ingress_pkt_to_egress", 1, "0x0")
    with pytest.raises(SwitchLoadError, match="field_list id 0.*unordered_map::at"):
        Switch(doc)


def test_resubmit_with_list_0_is_refused_even_if_defined() -> None:
    doc = golden("resubmit_field_list")
    doc["field_lists"].append({"id": 0, "name": "zero", "elements": []})
    set_list_param(doc, "resubmit", 0, "0x0")
    with pytest.raises(SwitchLoadError, match="'resubmit' with field_list id 0"):
        Switch(doc)


def test_missing_field_list_parameter_is_refused() -> None:
    doc = golden("clone_i2e")
    first(doc, "clone_ingress_pkt_to_egress")[1]["parameters"].pop()
    with pytest.raises(SwitchLoadError, match="'clone_ingress_pkt_to_egress' needs 2 param"):
        Switch(doc)
    doc = golden("resubmit_field_list")
    first(doc, "resubmit")[1]["parameters"].clear()
    with pytest.raises(SwitchLoadError, match="'resubmit' needs 1 param"):
        Switch(doc)


def test_unknown_learn_list_id_is_refused() -> None:
    doc = golden("digest_learn")
    name = set_list_param(doc, "generate_digest", 1, "0x7")
    with pytest.raises(SwitchLoadError, match=rf"actions\[\d+\] '{name}'.*learn_list id 7"):
        Switch(doc)


Change = Callable[[dict], None]


@pytest.mark.parametrize("program,change,message", [
    ("resubmit_field_list", lambda d: d["field_lists"].append(copy.deepcopy(d["field_lists"][0])),
     "duplicate field_list id 1"),
    ("digest_learn", lambda d: d["learn_lists"].append(copy.deepcopy(d["learn_lists"][0])),
     "duplicate learn_list id 1"),
    ("resubmit_field_list",
     lambda d: d["field_lists"][0]["elements"].append({"type": "header", "value": "h"}),
     r"field_lists\[0\] 'field_list1': elements\[1\]: element of type 'header'"),
    ("resubmit_field_list",
     lambda d: d["field_lists"][0]["elements"].append({"type": "field",
                                                       "value": ["scalars", "nope"]}),
     r"field_lists\[0\] 'field_list1': elements\[1\].value: .* no field 'nope'"),
    ("digest_learn", lambda d: d.update(learn_lists={}), "learn_lists: expected an array, got dict"),
])
def test_bad_lists_are_refused(program: str, change: Change, message: str) -> None:
    doc = golden(program)
    change(doc)
    with pytest.raises(SwitchLoadError, match=message):
        Switch(doc)


@pytest.mark.parametrize("program", sorted(p.stem for p in GOLDEN.glob("*.json")))
def test_every_golden_program_names_only_lists_it_defines(program: str) -> None:
    """p4lite-c's own output: every list id a primitive names is defined (what BMv2 needs)."""
    doc = golden(program)
    field_ids = {fl["id"] for fl in doc["field_lists"]}
    learn_ids = {ll["id"] for ll in doc["learn_lists"]}
    for op, pos, ids in (("clone_ingress_pkt_to_egress", 1, field_ids),
                         ("clone_egress_pkt_to_egress", 1, field_ids),
                         ("resubmit", 0, field_ids), ("recirculate", 0, field_ids),
                         ("generate_digest", 1, learn_ids)):
        for _, prim in prims(doc, op):
            assert int(prim["parameters"][pos]["value"], 16) in ids, (program, op)
    Switch(doc)
