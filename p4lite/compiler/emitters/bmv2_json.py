"""The BMv2 JSON as p4c writes it: expression parameters wrapped twice, p4c's text layout."""

from __future__ import annotations

import json
from typing import Any

Json = dict[str, Any]

def with_p4c_nesting(bmv2: Json) -> Json:
    """Wrap expression-valued primitive parameters once more, as p4c and BMv2 do.

    BMv2 builds a primitive (or parser ``set``) ``expression`` parameter from its
    ``value``, which must itself be ``{"type": "expression", "value": {op...}}``; p4c
    therefore writes these parameters doubly wrapped (``stack_field`` too). p4lite's
    switch reads the single wrapping, so the driver applies this only on request.
    Conditionals, ``if_cond`` and ``verify`` conditions are not wrapped twice.
    """
    for action in bmv2["actions"]:
        for prim in action["primitives"]:
            _wrap_params(prim)
    for parser in bmv2["parsers"]:
        for state in parser["parse_states"]:
            for op in state["parser_ops"]:
                if op["op"] == "set":
                    op["parameters"][1] = _wrapped(op["parameters"][1], ("expression",))
                elif op["op"] == "primitive":
                    _wrap_params(op["parameters"][0])
    return bmv2


def _wrap_params(prim: Json) -> None:
    prim["parameters"] = [_wrapped(p, ("expression", "stack_field"))
                          for p in prim["parameters"]]


def _wrapped(param: Any, kinds: tuple[str, ...]) -> Any:
    if isinstance(param, dict) and param.get("type") in kinds:
        return {"type": "expression", "value": param}
    return param


def to_text(bmv2: Json) -> str:
    """The JSON text laid out like p4c's: 2-space indent, arrays of scalars on one line."""
    out: list[str] = []
    _write(bmv2, 0, out)
    out.append("\n")
    return "".join(out)


def _is_flat(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(v, dict | list) for v in value)


def _write(value: Any, depth: int, out: list[str]) -> None:
    pad = "  " * (depth + 1)
    if isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        out.append("{\n")
        items = list(value.items())
        for i, (key, item) in enumerate(items):
            out.append(f"{pad}{json.dumps(key)} : ")
            _write(item, depth + 1, out)
            out.append(",\n" if i + 1 < len(items) else "\n")
        out.append("  " * depth + "}")
    elif isinstance(value, list) and value and not _is_flat(value):
        out.append("[\n")
        for i, item in enumerate(value):
            out.append(pad)
            _write(item, depth + 1, out)
            out.append(",\n" if i + 1 < len(value) else "\n")
        out.append("  " * depth + "]")
    elif isinstance(value, list):
        out.append("[" + ", ".join(json.dumps(v) for v in value) + "]")
    else:
        out.append(json.dumps(value))
