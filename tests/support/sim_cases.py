"""A simulator scenario for a test: a base table with some sections changed."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from p4hub.sim import scenario


def scenario_from(base: Mapping[str, Any], **sections: Any) -> scenario.Scenario:
    """``base`` (a scenario's raw tables) with each of ``sections`` merged into its table,
    or, given as something other than a dict (``jobs``' list), put in its place; the one
    point it parses to."""
    raw = copy.deepcopy(dict(base))
    for name, fields in sections.items():
        if isinstance(fields, dict):
            raw.setdefault(name, {}).update(fields)
        else:
            raw[name] = fields
    (point,) = scenario.parse(raw, None)
    return point
