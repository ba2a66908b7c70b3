"""Calls of P4 functions inside expressions, taken out before the expression.

BMv2 expressions cannot call anything, so (as p4c's SideEffectOrdering does)
``x = f(a) + g(b);`` becomes ``t0 = f(a); t1 = g(b); x = t0 + t1;``: every
call is replaced by a fresh name, left to right, innermost arguments first.
A call on the right of ``&&``/``||`` runs only when the left side lets it: the
operator becomes a bool temporary and an ``if``. Likewise only the taken branch of
``c ? f(x) : g(y)`` runs its calls, as in p4c (SideEffectOrdering): the ``?:`` becomes a
temporary of its type set by ``if (c) { t = f(x); } else { t = g(y); }``.

P4_16 evaluates left to right (spec 8.1), so an operand left of a call is read
before the call runs: in ``x + f(x)`` with ``f(inout x)`` the left ``x`` is the old
value. Such an operand (and an ``in`` argument before a later argument holding a
call) is copied into a temporary before the call (a *snapshot*: a hoisted item
that is not a call), as p4c's SideEffectOrdering does.

In an apply block a table's ``t.apply().hit`` (or ``.miss``) counts as a call too
(``applies=True``, see apply_hoist): it becomes a bool temporary, in the same order.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

from p4lite.compiler.checks.types import BoolT, P4Type, is_scalar
from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast

_names = itertools.count()

IsFunction = Callable[[ast.Call], bool]
# whether an expression can be copied into a temporary (a scalar that is not constant)
CanSnapshot = Callable[[ast.Expression], bool]


def has_call(node: ast.Node | None, is_function: IsFunction) -> bool:
    """Whether an expression (or statement part) holds a function call."""
    if node is None:
        return False
    if isinstance(node, ast.Call) and is_function(node):
        return True
    return any(has_call(child, is_function) for child in _children(node))


def _reads_anything(e: ast.Node) -> bool:
    """Whether an expression reads a name (literals and their operations read nothing)."""
    if isinstance(e, ast.Name | ast.Member):
        return True
    return any(_reads_anything(c) for c in _children(e))


def scalar_test(compile_expr: Callable[[ast.Expression], Any]) -> CanSnapshot:
    """Whether an expression compiles (with ``compile_expr``) to a non-constant scalar."""
    def can_snapshot(e: ast.Expression) -> bool:
        try:
            val = compile_expr(e)
        except CompileError:
            return False  # it names a temporary not bound yet: Hoister takes its parts
        return is_scalar(val.type) and val.const is None
    return can_snapshot


def is_snapshot(name: str) -> bool:
    return name.startswith("$snap")


def arg_directions(functions: dict[str, ast.FunctionDecl], call: ast.Call) -> list[str]:
    """The direction of each positional argument of a call of a P4 function."""
    name = call.func.name if isinstance(call.func, ast.Name) else ""
    decl = functions.get(name)
    if decl is None or any(a.name is not None for a in call.args):
        return []
    return [p.direction for p in decl.params]


def hoisted_type(name: str, item: ast.Node, compile_expr: Callable[[ast.Expression], Any],
                 env: Any) -> tuple[P4Type, str]:
    """The type of the temporary a hoisted expression item needs, and a name for it."""
    if is_bool_temp(name):
        return BoolT(), "cond"
    if is_hit_temp(name):
        return BoolT(), "hit"
    if is_branch_temp(name):
        assert isinstance(item, ast.Ternary)
        return compile_expr(_typed_stand_ins(item, env)).type, "tmp"
    assert isinstance(item, ast.Expression)
    if is_snapshot(name):
        return compile_expr(item).type, "tmp"
    assert isinstance(item, ast.Call) and isinstance(item.func, ast.Name)
    decl = env.functions[item.func.name]
    return env.resolve(decl.return_type), f"{decl.name}_result"


def is_apply_call(node: ast.Node) -> bool:
    """``x.apply(...)``: a table's or a control's apply (which one, lowering decides)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Member)
            and node.func.member == "apply")


def _typed_stand_ins(e: ast.Ternary, env: Any) -> ast.Expression:
    """``e`` with each call of a P4 function replaced by a constant of its return type
    (and each ``t.apply().hit`` by ``true``): the same type, compiled without running
    anything."""
    def stand_in(node: Any) -> Any:
        if isinstance(node, ast.Member) and is_apply_call(node.expr):
            return ast.BoolLiteral(True, loc=node.loc)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                node.func.name in env.functions):
            decl = env.functions[node.func.name]
            rt = env.resolve(decl.return_type)
            if not is_scalar(rt):  # BMv2's ?: selects scalars only
                raise not_supported(f"a ?: of type {rt} with a function call in a branch",
                                    e.loc)
            if isinstance(rt, BoolT):
                return ast.BoolLiteral(True, loc=node.loc)
            return ast.Cast(decl.return_type, ast.IntLiteral(1, loc=node.loc), loc=node.loc)
        if not isinstance(node, ast.Node):
            return node
        return ast.rebuilt(node, stand_in)
    return stand_in(e)


def is_branch_temp(name: str) -> bool:
    return name.startswith("$tern")


def is_bool_temp(name: str) -> bool:
    return name.startswith("$cond")


def is_hit_temp(name: str) -> bool:
    return name.startswith("$hit")


def is_statement(name: str) -> bool:
    return name.startswith("$stmt")


def is_write_back(name: str) -> bool:
    return name.startswith("$back")


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

    def __init__(self, is_function: IsFunction, can_snapshot: CanSnapshot | None = None,
                 directions: Callable[[ast.Call], list[str]] | None = None,
                 *, applies: bool = False) -> None:
        # with ``applies``, a table apply is a call too ($hit temporaries)
        self.is_function: IsFunction = (
            (lambda c: is_function(c) or is_apply_call(c)) if applies else is_function)
        self.applies = applies
        self.can_snapshot = can_snapshot or (lambda e: False)
        self.directions = directions  # per argument of a function call: "", in, out, inout
        # in evaluation order: (name, call) for a call, (name, expression) for a snapshot,
        # ($back..., Assign) for the write-back of an inout argument passed as a snapshot
        self.calls: list[tuple[str, ast.Node]] = []
        # write-backs for the arguments of the statement's own call (``call_args``)
        self.after: list[ast.Assign] = []

    def snapshot(self, e: ast.Expression, later: list[ast.Expression]) -> ast.Expression:
        """``e`` itself, or ``e`` with what it reads copied into temporaries first, when
        a later operand calls a function (which may write what ``e`` reads)."""
        if not any(has_call(x, self.is_function) for x in later):
            return e
        return self._freeze(e)

    def _freeze(self, e: ast.Expression) -> ast.Expression:
        if isinstance(e, ast.Name) and e.name.startswith("$"):
            return e  # a temporary already: nothing else writes it
        if not _reads_anything(e):
            return e
        if self.can_snapshot(e):
            name = f"$snap{next(_names)}"
            self.calls.append((name, e))
            return ast.Name(name, loc=e.loc)
        # not compilable yet (it holds an earlier call's temporary): its parts, one by one
        if isinstance(e, ast.Binary):
            return dataclasses.replace(e, left=self._freeze(e.left), right=self._freeze(e.right))
        if isinstance(e, ast.Unary):
            return dataclasses.replace(e, operand=self._freeze(e.operand))
        if isinstance(e, ast.Cast | ast.Slice):
            return dataclasses.replace(e, expr=self._freeze(e.expr))
        return e

    def expr(self, e: ast.Expression) -> ast.Expression:
        if self.applies and isinstance(e, ast.Member) and is_apply_call(e.expr):
            if e.member not in ("hit", "miss"):
                raise not_supported(f"apply().{e.member} inside an expression (only "
                                    "hit and miss)", e.loc)
            name = f"$hit{next(_names)}"
            self.calls.append((name, e))
            return ast.Name(name, loc=e.loc)
        if self.applies and is_apply_call(e):
            raise not_supported("an apply() inside an expression (only its hit and miss)",
                                e.loc)
        if isinstance(e, ast.Call):
            return self._call(e)
        if isinstance(e, ast.Binary):
            left = self.expr(e.left)
            if e.op in ("&&", "||") and has_call(e.right, self.is_function):
                return self._short_circuit(e, left)
            left = self.snapshot(left, [e.right])
            return dataclasses.replace(e, left=left, right=self.expr(e.right))
        if isinstance(e, ast.Ternary):
            cond = self.expr(e.cond)
            if has_call(e.then, self.is_function) or has_call(e.orelse, self.is_function):
                return self._branches(dataclasses.replace(e, cond=cond))
            return dataclasses.replace(e, cond=cond)
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

    def _short_circuit(self, e: ast.Binary, left: ast.Expression) -> ast.Expression:
        """``a && f(x)``: ``t = a; if (t) { t = f(x); }`` (``||``: ``if (!t)``), so the
        call runs only when P4 evaluates it; the right side's own calls are hoisted
        when that assignment is lowered."""
        name = f"$cond{next(_names)}"
        self.calls.append((name, e))  # a bool temporary
        t = ast.Name(name, loc=e.loc)
        self.calls.append((f"$stmt{next(_names)}", ast.Assign(t, left, loc=e.loc)))
        cond: ast.Expression = t if e.op == "&&" else ast.Unary("!", t, loc=e.loc)
        body = ast.Block([ast.Assign(t, e.right, loc=e.right.loc)], loc=e.right.loc)
        self.calls.append((f"$stmt{next(_names)}", ast.If(cond, body, loc=e.loc)))
        return t

    def _branches(self, e: ast.Ternary) -> ast.Expression:
        """``c ? f(x) : y``: ``if (c) { t = f(x); } else { t = y; }`` (``c`` hoisted
        already), so only the taken branch's calls run; each branch's own calls are
        hoisted when its assignment is lowered."""
        name = f"$tern{next(_names)}"
        self.calls.append((name, e))  # a temporary of the ?:'s type
        t = ast.Name(name, loc=e.loc)
        then = ast.Block([ast.Assign(t, e.then, loc=e.then.loc)], loc=e.then.loc)
        orelse = ast.Block([ast.Assign(t, e.orelse, loc=e.orelse.loc)], loc=e.orelse.loc)
        self.calls.append((f"$stmt{next(_names)}", ast.If(e.cond, then, orelse, loc=e.loc)))
        return t

    def call_args(self, e: ast.Call) -> ast.Call:
        """The statement ``e(...);`` itself: its arguments hoisted, the call left in place
        (write-backs of snapshotted inout arguments go to ``after``)."""
        call, backs = self._args(e)
        self.after.extend(backs)
        return call

    def _args(self, e: ast.Call) -> tuple[ast.Call, list[ast.Assign]]:
        """Arguments left to right. An ``in`` argument read before a later argument's
        call is snapshotted; so is an ``inout`` one (its copy-in happens then), passed as
        the snapshot and written back after the call."""
        dirs = self.directions(e) if self.directions and self.is_function(e) else []
        args: list[ast.Argument] = []
        backs: list[ast.Assign] = []
        for i, a in enumerate(e.args):
            value = self.expr(a.value)
            direction = dirs[i] if i < len(dirs) else None
            if direction in ("", "in", "inout"):
                frozen = self.snapshot(value, [b.value for b in e.args[i + 1:]])
                if direction == "inout" and frozen is not value:
                    if not isinstance(frozen, ast.Name):
                        frozen = value  # only a whole l-value can be passed as a copy
                    else:
                        backs.append(ast.Assign(value, frozen, loc=a.loc))
                value = frozen
            args.append(dataclasses.replace(a, value=value))
        func = self.expr(e.func) if isinstance(e.func, ast.Member) else e.func
        return dataclasses.replace(e, func=func, args=args), backs

    def _call(self, e: ast.Call) -> ast.Expression:
        call, backs = self._args(e)
        if not self.is_function(e):
            return call
        name = f"$call{next(_names)}"
        self.calls.append((name, call))
        self.calls.extend((f"$back{next(_names)}", b) for b in backs)
        return ast.Name(name, loc=e.loc)


__all__ = ["Hoister", "arg_directions", "has_call", "hoisted_type", "is_apply_call",
           "is_bool_temp", "is_branch_temp", "is_hit_temp", "is_snapshot", "is_statement",
           "is_write_back", "scalar_test"]
