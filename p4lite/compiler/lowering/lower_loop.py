"""``for`` loops (P4_16 v1.2.5, 12.9) in actions, as p4c's BMv2 back end writes them.

p4c writes a loop in an action body with ``_jump_if_zero``/``_jump`` primitives (its
testdata ``forloop-bmv2.p4``); in an apply block p4c 34b86e9 writes the body once,
without the loop, so p4lite refuses a loop there rather than copy that.
"""

from __future__ import annotations

from typing import Any, Protocol

from p4lite.compiler.checks.types import BoolT
from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.lowering.expr_values import as_data, hexstr
from p4lite.compiler.lowering.hoist_calls import has_call

Json = dict[str, Any]


class Lowerer(Protocol):
    """What of ``lower_stmt.StmtLowerer`` a loop needs."""

    lw: Any
    comp: Any
    in_action: bool
    loops: list[tuple[list[int], list[int]]]  # per open loop: (breaks, continues)

    def lower_stmt(self, stmt: ast.Node, prims: list[Json]) -> None: ...
    def hoister(self) -> Any: ...
    def run_hoisted(self, hoister: Any, prims: list[Json]) -> None: ...
    def is_function_call(self, call: ast.Call) -> bool: ...
    def emit(self, prims: list[Json], new: list[Json], loc: Any,
             fragment: str | None = None) -> None: ...


def lower_for(sl: Lowerer, stmt: ast.For, prims: list[Json]) -> None:
    """``for (init; cond; update) body`` in an action, as p4c's BMv2 back end writes
    it: ``cond``'s ``_jump_if_zero`` past the loop, the body, the update, and a
    ``_jump`` back to ``cond``; ``break`` jumps past the loop, ``continue`` to the
    update. p4c (34b86e9) writes a loop in an apply block as its body once, with no
    loop and the loop variable never set, so p4lite refuses that instead."""
    if not sl.in_action:
        raise not_supported("a for loop outside an action (p4c's BMv2 back end "
                            "runs the body of one in an apply block once, without "
                            "looping: move the loop into an action)", stmt.loc)
    for init in stmt.init:  # in the enclosing scope, as p4c declares it
        sl.lower_stmt(init, prims)
    top = len(prims)
    jz: Json | None = None
    if stmt.cond is not None:
        cond_expr = stmt.cond
        if sl.lw.env.functions and has_call(cond_expr, sl.is_function_call):
            hoister = sl.hoister()
            cond_expr = hoister.expr(cond_expr)
            sl.run_hoisted(hoister, prims)
        cond = sl.comp.rvalue(cond_expr)
        if not isinstance(cond.type, BoolT):
            raise CompileError(f"condition must be bool, not {cond.type}", stmt.cond.loc)
        jz = {"op": "_jump_if_zero", "parameters": [as_data(cond), None]}
        sl.emit(prims, [jz], stmt.cond.loc, sl.lw.source.fragment(stmt.cond.loc, ";"))
    sl.loops.append(([], []))
    try:
        sl.lower_stmt(stmt.body, prims)
    finally:
        breaks, continues = sl.loops.pop()
    update_at = len(prims)
    for update in stmt.update:
        sl.lower_stmt(update, prims)
    sl.emit(prims, [{"op": "_jump", "parameters": [hexstr(top, None)]}], stmt.loc, "for")
    end = hexstr(len(prims), None)
    if jz is not None:
        jz["parameters"][1] = end
    for index in breaks:
        prims[index]["parameters"][0] = end
    for index in continues:
        prims[index]["parameters"][0] = hexstr(update_at, None)


__all__ = ["lower_for"]
