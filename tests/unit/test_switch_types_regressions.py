"""Checks added while making p4lite/switch type-check (issue 15).

A malformed ``lookahead`` / ``stack_field`` value used to reach tuple unpacking or
indexing in codegen and surface as ``malformed program: TypeError(...)``; it is now
a located SwitchLoadError that names the bad value.
"""

from __future__ import annotations

import pytest

from p4lite.switch.core.switch import Switch, SwitchLoadError
from tests.support.samples import l3_router


@pytest.mark.parametrize("bad", [None, [8], "x"])
def test_malformed_lookahead_is_a_located_load_error(bad: object) -> None:
    doc = l3_router()
    doc["parsers"][0]["parse_states"][0]["parser_ops"].append(
        {"op": "set", "parameters": [{"type": "field", "value": ["ethernet", "etherType"]},
                                     {"type": "lookahead", "value": bad}]})
    with pytest.raises(SwitchLoadError, match=r"parse_states\[0\] 'start': parser_ops\[1\].parameters\[1\].value: expected \[offset, bitwidth\]"):
        Switch(doc)


@pytest.mark.parametrize("bad", [None, ["st"], 3])
def test_malformed_stack_field_is_a_located_load_error(bad: object) -> None:
    doc = l3_router()
    action = next(a for a in doc["actions"] if a["name"] == "MyIngress.ipv4_forward")
    action["primitives"].append(
        {"op": "assign", "parameters": [{"type": "field", "value": ["ipv4", "ttl"]},
                                        {"type": "stack_field", "value": bad}]})
    with pytest.raises(SwitchLoadError, match=r"'MyIngress.ipv4_forward': primitives\[\d+\].parameters\[1\].value: bad stack field reference"):
        Switch(doc)
