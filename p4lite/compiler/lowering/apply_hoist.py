"""Table applies inside expressions, taken out into statements the apply block lowers.

BMv2 can apply a table only from the control graph, so ``t.apply().hit`` in ``?:``,
``&&``/``||``, an argument or any other expression becomes, as in p4c
(SideEffectOrdering, then TableHit): ``if (t.apply().hit) { tmp = true; } else
{ tmp = false; }`` before the statement, which then reads ``tmp``. The hoisting
keeps evaluation order and short-circuiting (hoist_calls.Hoister with ``applies``):
``a || t.apply().hit`` applies the table only when ``a`` is false, ``c ? (t.apply().hit
? 1 : 2) : 3`` only when ``c`` holds, and an operand read left of the apply is
copied before it (the table's action may write it). Function calls in the same
statement are hoisted with it, in order.

The forms the apply block takes directly are left alone: ``t.apply();``,
``if (t.apply().hit)`` (``.miss``, ``!``) and ``switch (t.apply().action_run)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from p4lite.compiler.frontend import ast
from p4lite.compiler.lowering.hoist_calls import (
    Hoister,
    has_call,
    hoisted_type,
    is_apply_call,
    is_bool_temp,
    is_branch_temp,
    is_hit_temp,
    is_statement,
    is_write_back,
    scalar_test,
)


def _holds_apply(node: ast.Node | None) -> bool:
    return has_call(node, is_apply_call)


def _is_hit(cond: ast.Expression) -> bool:
    while isinstance(cond, ast.Unary) and cond.op == "!":
        cond = cond.operand
    return (isinstance(cond, ast.Member) and cond.member in ("hit", "miss")
            and is_apply_call(cond.expr))


def nested_apply(stmt: ast.Node) -> bool:
    """Whether ``stmt``'s own expressions (not its branches) apply a table in a place
    the control graph cannot take as it is."""
    if isinstance(stmt, ast.CallStmt):  # t.apply(); itself is direct
        return any(_holds_apply(a.value) for a in stmt.call.args)
    if isinstance(stmt, ast.If):
        return not _is_hit(stmt.cond) and _holds_apply(stmt.cond)
    if isinstance(stmt, ast.Switch):
        sel = stmt.expr
        direct = (isinstance(sel, ast.Member) and sel.member == "action_run"
                  and is_apply_call(sel.expr))
        return not direct and _holds_apply(sel)
    if isinstance(stmt, ast.Assign):
        return _holds_apply(stmt.lhs) or _holds_apply(stmt.rhs)
    if isinstance(stmt, ast.VarDecl):
        return _holds_apply(stmt.init)
    return False


def split_applies(stmt: ast.Node, is_function: Callable[[ast.Call], bool],
                  compile_expr: Callable[[ast.Expression], Any], env: Any,
                  directions: Callable[[ast.Call], list[str]],
                  bind: Callable[[str, Any, str, ast.Node], None]) -> list[ast.Node]:
    """``stmt`` as statements that apply its tables (and call its functions) first.

    ``bind(name, type, label, item)`` makes the temporary ``name`` in the block's scope;
    the statements returned are lowered in order by the apply block (each may need
    splitting again: a branch's assignment ``t = u.apply().hit`` does).
    """
    hoister = Hoister(is_function, scalar_test(compile_expr), directions, applies=True)
    head: list[ast.Node] = []
    if isinstance(stmt, ast.Assign) and stmt.compound and isinstance(stmt.rhs, ast.Binary):
        lhs = hoister.expr(stmt.lhs)  # once, as in StmtLowerer._hoist
        rhs = dataclasses.replace(stmt.rhs, left=lhs, right=hoister.expr(stmt.rhs.right))
        stmt = dataclasses.replace(stmt, lhs=lhs, rhs=rhs)
    elif isinstance(stmt, ast.Assign):
        lhs = hoister.expr(stmt.lhs)
        stmt = dataclasses.replace(stmt, lhs=lhs, rhs=hoister.expr(stmt.rhs))
    elif isinstance(stmt, ast.VarDecl) and stmt.init is not None:
        head.append(dataclasses.replace(stmt, init=None))  # declared, then assigned
        stmt = ast.Assign(ast.Name(stmt.name, loc=stmt.loc), hoister.expr(stmt.init),
                          loc=stmt.loc)
    elif isinstance(stmt, ast.CallStmt):
        stmt = dataclasses.replace(stmt, call=hoister.call_args(stmt.call))
    elif isinstance(stmt, ast.If):
        stmt = dataclasses.replace(stmt, cond=hoister.expr(stmt.cond))
    elif isinstance(stmt, ast.Switch):
        stmt = dataclasses.replace(stmt, expr=hoister.expr(stmt.expr))
    out = head
    for name, item in hoister.calls:
        if is_statement(name) or is_write_back(name):
            out.append(item)
            continue
        t, label = hoisted_type(name, item, compile_expr, env)
        bind(name, t, label, item)
        loc = item.loc
        temp = ast.Name(name, loc=loc)
        if is_hit_temp(name):  # if (t.apply().hit) { temp = true; } else { temp = false; }
            assert isinstance(item, ast.Expression)
            out.append(ast.If(item, ast.Block([ast.Assign(temp, ast.BoolLiteral(True, loc=loc),
                                                          loc=loc)], loc=loc),
                              ast.Block([ast.Assign(temp, ast.BoolLiteral(False, loc=loc),
                                                    loc=loc)], loc=loc), loc=loc))
        elif not (is_bool_temp(name) or is_branch_temp(name)):
            assert isinstance(item, ast.Expression)  # a call's result, an operand's copy
            out.append(ast.Assign(temp, item, loc=loc))
    out.append(stmt)
    out.extend(hoister.after)
    return out


__all__ = ["nested_apply", "split_applies"]
