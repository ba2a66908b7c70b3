"""Validation of BMv2's typed value trees: expressions, primitive parameters, parser op
operands, calculation and list elements (``{"type": ..., "value": ...}``).

The accepted types and the lookups follow behavioral-model's P4Objects.cpp
(``build_expression`` and ``add_primitive_to_action``): an unknown ``type`` is refused
there ("Invalid 'type' in expression", "Parameter type ... not supported"), and every
name is looked up (header, field, stack, register, counter, meter, calculation, extern).
Both p4c's double ``expression`` wrapping and the single one are read.
"""

from __future__ import annotations

from p4lite.bmv2json.codec import Json
from p4lite.bmv2json.refs import Refs
from p4lite.bmv2json.where import Where


def expression(refs: Refs, node: Json, where: Where) -> None:
    """A value inside an expression tree (null allowed, as BMv2's build_expression)."""
    if node is None:
        return
    if not isinstance(node, dict):
        raise where.fail(f"expected an object with 'type', got {node!r}")
    if "op" in node and "type" not in node:
        _op(refs, node, where)
        return
    kind = node.get("type")
    if not isinstance(kind, str):
        raise where.fail("expected an object with 'type'")
    value = node.get("value")
    vw = where.key("value")
    if kind == "expression":
        if isinstance(value, dict) and "op" in value and "type" not in value:
            _op(refs, value, vw)
        else:
            expression(refs, value, vw)
    elif kind in ("field", "header", "header_stack", "stack_field", "hexstr", "bool",
                  "local", "register", "header_union", "header_union_stack", "string",
                  "lookahead"):
        _leaf(refs, kind, value, vw)
    else:
        raise where.fail(f"invalid 'type' in expression: '{kind}'")


def _op(refs: Refs, node: dict, where: Where) -> None:
    op = node.get("op")
    if not isinstance(op, str):
        raise where.fail("expected 'op' to be a string")
    for side in ("left", "right", "cond"):
        if side == "right" and op == "access_field":
            continue  # the field's offset, an integer
        if side in node:
            expression(refs, node[side], where.key(side))


def _leaf(refs: Refs, kind: str, value: Json, where: Where) -> None:
    if kind == "field":
        refs.field(value, where)
    elif kind == "header":
        refs.header(value, where)
    elif kind == "header_stack":
        refs.stack(value, where)
    elif kind == "stack_field":
        refs.stack_field(value, where)
    elif kind == "hexstr":
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise where.fail(f"expected a hex string, got {value!r}")
    elif kind == "bool":
        if not isinstance(value, bool):
            raise where.fail(f"expected true or false, got {value!r}")
    elif kind == "local":
        if isinstance(value, bool) or not isinstance(value, int):
            raise where.fail(f"expected an integer, got {value!r}")
    elif kind == "register":
        if not (isinstance(value, list) and len(value) == 2):
            raise where.fail(f"expected [register_array, index], got {value!r}")
        _named(refs.registers, "register_array", value[0], where.index(0))
        expression(refs, value[1], where.index(1))
    elif kind == "header_union":
        _named(refs.unions, "header union", value, where)
    elif kind == "header_union_stack":
        _named(refs.union_stacks, "header union stack", value, where)
    elif kind == "lookahead":
        if not (isinstance(value, list) and len(value) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
            raise where.fail(f"expected [offset, bitwidth], got {value!r}")


def _named(known: frozenset[str], what: str, name: Json, where: Where) -> None:
    if not isinstance(name, str) or name not in known:
        raise where.fail(f"unknown {what} {name!r}")


def parameter(refs: Refs, param: Json, nparams: int, where: Where) -> None:
    """One primitive parameter (BMv2's add_primitive_to_action): ``runtime_data`` must
    index the action's parameters, named objects must exist."""
    if not isinstance(param, dict) or not isinstance(param.get("type"), str):
        raise where.fail("expected an object with 'type'")
    kind, value, vw = param["type"], param.get("value"), where.key("value")
    if kind == "runtime_data":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise vw.fail(f"expected an integer, got {value!r}")
        if value >= nparams:
            raise where.fail(f"runtime_data {value} but the action has {nparams} "
                             "parameter(s) (BMv2: invalid 'runtime_data' parameter reference)")
    elif kind == "calculation":
        _named(refs.calculations, "calculation", value, vw)
    elif kind == "meter_array":
        _named(refs.meters, "meter_array", value, vw)
    elif kind == "counter_array":
        _named(refs.counters, "counter_array", value, vw)
    elif kind == "register_array":
        _named(refs.registers, "register_array", value, vw)
    elif kind == "extern":
        _named(refs.externs, "extern instance", value, vw)
    elif kind == "parameters_vector":  # log_msg's arguments (p4c writes none as {})
        if value == {}:
            return
        if not isinstance(value, list):
            raise vw.fail(f"expected an array, got {value!r}")
        for i, item in enumerate(value):
            parameter(refs, item, nparams, vw.index(i))
    elif kind in ("expression", "field", "header", "header_stack", "stack_field", "hexstr",
                  "register", "string", "bool", "local", "header_union",
                  "header_union_stack"):
        expression(refs, param, where)
    else:
        raise where.fail(f"parameter type '{kind}' not supported")
