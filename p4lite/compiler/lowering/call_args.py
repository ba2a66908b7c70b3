"""Arguments bound to an inlined callee's parameters, and stack elements indexed at run
time passed to ``out``/``inout`` parameters.

``act(h.s[i].f)`` with ``inout`` ``f``: as p4c does, the index is evaluated once, into
a temporary, before the call (the callee may write what ``i`` reads); the element's
field is copied in before the body and out after it through that saved index. A
parameter the body never touches is not copied at all (p4c's copies of it are dead
and go away), so a call like that reads nothing, whatever the index.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import TYPE_CHECKING, Any

from p4lite.compiler.checks.bindings import Binding, FieldB
from p4lite.compiler.checks.types import P4Type, same_type
from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.lowering.copy_in_out import placeholder
from p4lite.compiler.lowering.expr_values import DynElemB, DynFieldB, as_data, to_param

if TYPE_CHECKING:
    from p4lite.compiler.lowering.lower_expr import ExprCompiler
    from p4lite.compiler.lowering.storage import Storage

Json = dict[str, Any]


@dataclass(slots=True)
class Passed:
    """A parameter whose argument is storage (or a slice of it): aliased or copied."""

    param: ast.Param
    type: P4Type
    arg: ast.Expression
    # the argument's storage; None for a slice, a DynFieldB for a stack element indexed
    # at run time (both always copied)
    real: Binding | None
    holder: Binding  # the placeholder the callee's body sees
    writes: bool  # out or inout


@dataclass(slots=True)
class CallFrame:
    side_marks: tuple[int, int, int]
    passed: list[Passed] = dc_field(default_factory=list)
    pre: list[Json] = dc_field(default_factory=list)  # temporaries of `in` expressions


def passed_stack_field(comp: ExprCompiler, storage: Storage, param: ast.Param, t: P4Type,
                       arg: ast.Expression, binding: DynFieldB | DynElemB, pre: list[Json]
                       ) -> Passed:
    """``h.s[i].f`` for an ``out``/``inout`` parameter: its index saved in ``pre``."""
    if isinstance(binding, DynElemB) or not (
            isinstance(arg, ast.Member) and isinstance(arg.expr, ast.Index)):
        raise not_supported(f"a header stack element with a run-time index as an "
                            f"{param.direction} argument (pass one of its fields)", arg.loc)
    if not same_type(binding.type, t):
        raise CompileError(f"type mismatch: parameter {param.name} is {t}, the argument "
                           f"is {binding.type}", arg.loc)
    index = comp.rvalue(arg.expr.index)
    saved = storage.bind_local("index", index.type, arg.loc)
    assert isinstance(saved, FieldB)  # the index is a bit<N> (ExprCompiler checked it)
    pre.append({"op": "assign",
                "parameters": [_field(saved), to_param(as_data(index))]})
    elem = DynElemB(binding.elem.stack, _field(saved))
    holder = placeholder(t)
    assert holder is not None  # a field of a header is a scalar
    return Passed(param, t, arg, DynFieldB(elem, binding.field, binding.type), holder, True)


def stack_field_copy(dst: Binding, src: Binding) -> list[Json]:
    """A field of a run-time-indexed element to or from the temporary that stands for it."""
    if isinstance(dst, DynFieldB):
        assert isinstance(src, FieldB)
        return [{"op": "assign", "parameters": [dst.access(), _field(src)]}]
    assert isinstance(dst, FieldB) and isinstance(src, DynFieldB)
    return [{"op": "assign", "parameters": [_field(dst), src.access()]}]


def _field(binding: FieldB) -> Json:
    return {"type": "field", "value": [binding.header, binding.field]}


__all__ = ["CallFrame", "Passed", "passed_stack_field", "stack_field_copy"]
