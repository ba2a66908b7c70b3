"""Field list ids in the clone primitives p4lite-c writes (issue 20).

simple_switch copies the field list of a clone with ``field_lists.at(id)`` once a configured
session fires; p4lite-c used to write id 0 for a plain ``clone()``, and real BMv2 aborted with
std::out_of_range. p4c gives each ``clone()`` call an empty field list of its own (``fl``,
``fl_0`` ...); so does p4lite-c.
"""

from __future__ import annotations

from p4lite.switch.core.switch import Switch
from tests.unit.test_compiler_backend_json import compile_program, program


def _prims(bmv2: dict, op: str) -> list[dict]:
    return [p for a in bmv2["actions"] for p in a["primitives"] if p["op"] == op]


def test_each_plain_clone_gets_an_empty_field_list_of_its_own() -> None:
    ingress = """
        if (hdr.h.v == 1) { clone(CloneType.I2E, 5); }
        else if (hdr.h.v == 2) { clone(CloneType.I2E, 6); }
        resubmit_preserving_field_list(1);
"""
    egress = "clone(CloneType.E2E, 7);"
    meta = "bit<8> m; @field_list(1) bit<16> keep;"
    bmv2 = compile_program(program(ingress, egress=egress, meta=meta)).bmv2
    lists = {fl["id"]: fl for fl in bmv2["field_lists"]}
    assert sorted(lists) == list(range(1, len(lists) + 1))
    clones = _prims(bmv2, "clone_ingress_pkt_to_egress") + _prims(bmv2, "clone_egress_pkt_to_egress")
    ids = [int(p["parameters"][1]["value"], 16) for p in clones]
    assert len(clones) == 3 and len(set(ids)) == 3 and 0 not in ids
    assert all(lists[i]["elements"] == [] and lists[i]["name"].startswith("fl") for i in ids)
    assert sorted(lists[i]["name"] for i in ids) == ["fl", "fl_0", "fl_1"]
    (resubmit,) = _prims(bmv2, "resubmit")
    kept = lists[int(resubmit["parameters"][0]["value"], 16)]
    assert kept["name"] == "field_list1" and len(kept["elements"]) == 1
    Switch(bmv2)  # p4lite's loader checks every list id a primitive names


def test_clone_preserving_field_list_shares_the_indexed_list() -> None:
    ingress = """
        clone_preserving_field_list(CloneType.I2E, 5, 1);
        resubmit_preserving_field_list(1);
"""
    meta = "bit<8> m; @field_list(1) bit<16> keep;"
    bmv2 = compile_program(program(ingress, meta=meta)).bmv2
    assert [fl["name"] for fl in bmv2["field_lists"]] == ["field_list1"]
    (clone,) = _prims(bmv2, "clone_ingress_pkt_to_egress")
    assert clone["parameters"][1] == {"type": "hexstr", "value": "0x1"}
    Switch(bmv2)
