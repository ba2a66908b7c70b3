"""Forms real p4c writes that p4lite-c does not, accepted by p4lite's loader as BMv2 does."""

from __future__ import annotations

import pytest

from p4lite.switch.core.switch import Switch, SwitchLoadError
from tests.unit.test_switch_list_ids import golden, prims


def _vectors(doc: dict) -> list[dict]:
    return [prim["parameters"][1] for _, prim in prims(doc, "log_msg")
            if len(prim["parameters"]) > 1]


def test_log_msg_empty_parameters_vector_as_object_loads() -> None:
    """p4c writes ``log_msg("text")``'s empty parameters_vector as ``{}``, not ``[]``."""
    doc = golden("log_msg")
    vectors = _vectors(doc)
    assert vectors
    vectors[0]["value"] = {}  # this log_msg now logs its text alone
    Switch(doc)


def test_log_msg_non_empty_object_is_refused() -> None:
    doc = golden("log_msg")
    _vectors(doc)[0]["value"] = {"type": "field", "value": ["scalars", "x"]}
    with pytest.raises(SwitchLoadError, match=r"parameters\[1\].value: expected an array"):
        Switch(doc)
