"""Calls of P4 functions inside expressions, taken out before the expression.

BMv2 expressions cannot call anything, so (as p4c's SideEffectOrdering does)
``x = f(a) + g(b);`` becomes ``t0 = f(a); t1 = g(b); x = t0 + t1;``: every
call is replaced by a fresh name, left to right, innermost arguments first.
A call that would only be evaluated conditionally (the right side of ``&&`` /
``||``, a branch of ``?:``) is not supported: hoisting it would run it always.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

from p4lite.compiler.errors import not_supported
from p4lite.compiler.frontend import ast

_names = itertools.count()

IsFunction = Callable[[ast.Call], bool]


def has_call(node: ast.Node | None, is_function: IsFunction) -> bool:
    """Whether an expression (or statement part) holds a function call."""
    if node is None:
        return False
    if isinstance(node, ast.Call) and is_function(node):
        return True
    return any(has_call(child, is_function) for child in _children(node))


def _children(node: ast.Node) -> list[ast.Node]:
    out: list[ast.Node] = []
    for f in dataclasses.fields(node):
        if f.name in ("loc", "annotations", "type", "type_args"):
            continue
        value = getattr(node, f.name)
        if isinstance(value, ast.Node):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, ast.Node))
    return out


class Hoister:
    """Rewrites expressions, collecting ``(name, call)`` pairs in evaluation order."""

    def __init__(self, is_function: IsFunction) -> None:
        self.is_function = is_function
        self.calls: list[tuple[str, ast.Call]] = []

    def expr(self, e: ast.Expression) -> ast.Expression:
        if isinstance(e, ast.Call):
            args = [dataclasses.replace(a, value=self.expr(a.value)) for a in e.args]
            func = self.expr(e.func) if isinstance(e.func, ast.Member) else e.func
            call = dataclasses.replace(e, func=func, args=args)
            if not self.is_function(e):
                return call
            name = f"$call{next(_names)}"
            self.calls.append((name, call))
            return ast.Name(name, loc=e.loc)
        if isinstance(e, ast.Binary):
            left = self.expr(e.left)
            if e.op in ("&&", "||") and has_call(e.right, self.is_function):
                raise not_supported(f"a function call on the right of {e.op}", e.right.loc)
            return dataclasses.replace(e, left=left, right=self.expr(e.right))
        if isinstance(e, ast.Ternary):
            for branch in (e.then, e.orelse):
                if has_call(branch, self.is_function):
                    raise not_supported("a function call in a branch of ?:", branch.loc)
            return dataclasses.replace(e, cond=self.expr(e.cond))
        if isinstance(e, ast.Unary):
            return dataclasses.replace(e, operand=self.expr(e.operand))
        if isinstance(e, ast.Cast):
            return dataclasses.replace(e, expr=self.expr(e.expr))
        if isinstance(e, ast.Member):
            return dataclasses.replace(e, expr=self.expr(e.expr))
        if isinstance(e, ast.Index):
            return dataclasses.replace(e, expr=self.expr(e.expr), index=self.expr(e.index))
        if isinstance(e, ast.Slice):
            return dataclasses.replace(e, expr=self.expr(e.expr))
        if isinstance(e, ast.ListExpr):
            return dataclasses.replace(e, items=[self.expr(i) for i in e.items])
        if isinstance(e, ast.StructExpr):
            return dataclasses.replace(e, fields=[dataclasses.replace(f, value=self.expr(f.value))
                                                  for f in e.fields])
        return e


__all__ = ["Hoister", "has_call"]
