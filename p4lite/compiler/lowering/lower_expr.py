"""Expressions to BMv2 JSON, with type/width inference and constant folding.

BMv2 evaluates expressions in infinite precision and truncates only on store,
so, like p4c, we wrap every unsigned ``+ - * << ~`` and negation in ``& mask``
and every signed one in ``two_comp_mod``. Booleans and bit strings never mix
implicitly in BMv2: a bool stored in a field is data (``b2d`` to store,
``d2b`` to test), a comparison is a boolean.

``ExprCompiler`` walks the expression, one ``_c_<Node>`` per kind; the values it
returns (``Val``), the operand builders and the bool/data, truncation and cast
conversions are in expr_values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from p4lite.compiler.checks.bindings import (
    Binding,
    FieldB,
    HeaderB,
    Scope,
    StackB,
    StructB,
    TypeB,
    UnionB,
)
from p4lite.compiler.checks.program_env import ProgramEnv
from p4lite.compiler.checks.target_checks import shift_diagnostics
from p4lite.compiler.checks.types import (
    BitT,
    BoolT,
    EnumT,
    ErrorT,
    HeaderT,
    IntT,
    P4Type,
    StringT,
    StructT,
    UnionT,
    VarbitT,
    same_type,
    width_of,
)
from p4lite.compiler.errors import CompileError, SourceLoc, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.lowering.expr_values import (
    DynElemB,
    DynFieldB,
    StackElemB,
    Val,
    as_bool,
    as_data,
    binding_val,
    bool_const,
    cast,
    describe,
    enum_member,
    expr_json,
    hexstr,
    wrap,
    wrap_const,
)

Json = dict[str, Any]


_ARITH = {"+", "-", "*", "<<"}
_BITWISE = {"&": "&", "|": "|", "^": "^"}
_COMPARE = {"==", "!=", "<", "<=", ">", ">="}
_LOGIC = {"&&": "and", "||": "or"}


class ExprCompiler:
    """Compiles expressions in one scope. ``in_action`` turns parameters into ``local``."""

    def __init__(self, env: ProgramEnv, scope: Scope, *, lookahead: Callable | None = None) -> None:
        self.env = env
        self.scope = scope
        self.lookahead = lookahead  # parser context: (type, loc) -> Json
        self.parser_mode = lookahead is not None

    # ------------------------------------------------------------ entry points
    def compile(self, e: ast.Expression, expected: P4Type | None = None) -> Val:
        method = getattr(self, "_c_" + type(e).__name__, None)
        if method is None:
            raise not_supported(f"expression {type(e).__name__}", e.loc)
        val: Val = method(e)
        if expected is not None:
            val = self.coerce(val, expected, e.loc)
        return val

    def rvalue(self, e: ast.Expression, expected: P4Type | None = None) -> Val:
        """A scalar value (bit, int, bool, error, enum) with JSON."""
        val = self.compile(e, expected)
        if val.json is None:
            if val.const is None:
                raise CompileError(f"{describe(val)} is not a value here", e.loc)
            val.json = self._const_json(val.const, val.type)
        return val

    def condition(self, e: ast.Expression) -> Json:
        """A boolean expression as JSON (``d2b`` around bool fields)."""
        val = self.rvalue(e)
        if not isinstance(val.type, BoolT):
            raise CompileError(f"condition must be bool, not {val.type}", e.loc)
        return as_bool(val)

    def const_value(self, e: ast.Expression, expected: P4Type | None = None) -> int | bool:
        val = self.compile(e, expected)
        if val.const is None:
            raise CompileError("expected a compile-time constant", e.loc)
        return val.const

    def coerce(self, val: Val, t: P4Type, loc) -> Val:
        """Give an untyped constant the type ``t``; check the others match."""
        if isinstance(val.type, IntT) and isinstance(t, BitT) and val.const is not None:
            value = wrap_const(int(val.const), t)
            return Val(t, hexstr(value, t.width), value)
        if isinstance(val.type, IntT) and isinstance(t, IntT):
            return val
        if not same_type(val.type, t):
            raise CompileError(f"type mismatch: expected {t}, got {val.type}", loc)
        return val

    # ----------------------------------------------------------------- leaves
    def _c_IntLiteral(self, e: ast.IntLiteral) -> Val:
        if e.width is None:
            return Val(IntT(), None, e.value)
        t = BitT(e.width, e.signed)
        value = wrap_const(e.value, t)
        return Val(t, hexstr(value, e.width), value)

    def _c_BoolLiteral(self, e: ast.BoolLiteral) -> Val:
        return Val(BoolT(), {"type": "bool", "value": e.value}, e.value, is_data=False)

    def _c_StringLiteral(self, e: ast.StringLiteral) -> Val:
        return Val(StringT(), {"type": "string", "value": e.value})

    def _c_ErrorMember(self, e: ast.ErrorMember) -> Val:
        code = self.env.error_value(e.member, e.loc)
        return Val(ErrorT(), hexstr(code, 32), code)

    def _c_Name(self, e: ast.Name) -> Val:
        binding = self.env.global_scope.lookup(e.name) if e.top_level else self.scope.lookup(e.name)
        if binding is None:
            if e.name in self.env.type_decls:
                t = self.env.resolve_named(ast.TypeName(e.name, loc=e.loc))
                return Val(t, None, None, TypeB(t))
            raise CompileError(f"unknown name {e.name}", e.loc)
        return binding_val(binding)

    def _c_Member(self, e: ast.Member) -> Val:
        base = self.compile(e.expr)
        return self.member_of(base, e.member, e.loc)

    def member_of(self, base: Val, member: str, loc) -> Val:
        binding = base.binding
        if isinstance(binding, TypeB):
            return enum_member(binding.type, member, loc)
        if isinstance(binding, HeaderB) and binding.type.members is not None:
            return binding_val(_flattened_member(binding, member, loc))
        if isinstance(binding, HeaderB):
            ftype = binding.type.field_type(member)
            if ftype is None:
                raise CompileError(f"header {binding.type.name} has no field {member}", loc)
            return binding_val(FieldB(binding.instance, member, ftype))
        if isinstance(binding, StructB):
            inner = binding.members.get(member)
            if inner is None:
                raise CompileError(f"struct {binding.type.name} has no field {member}", loc)
            return binding_val(inner)
        if isinstance(binding, UnionB):
            header = binding.members.get(member)
            if header is None:
                raise CompileError(f"header_union {binding.type.name} has no member {member}",
                                   loc)
            return binding_val(header)
        if isinstance(binding, StackB) and isinstance(binding.type.element, UnionT):
            return self._union_stack_member(binding, member, loc)
        if isinstance(binding, StackElemB) and isinstance(binding.stack.type.element, UnionT):
            # only `stack.next.member` in an extract (StackElemB.member says which)
            if binding.member is not None or binding.which != "next":
                raise not_supported(f"{binding.stack.name}.{binding.which} of a stack of "
                                    "header unions here (only .next.<member> in extract)", loc)
            mtype = binding.stack.type.element.field_type(member)
            if not isinstance(mtype, HeaderT):
                raise CompileError(f"header_union {binding.stack.type.element.name} has no "
                                   f"member {member}", loc)
            return Val(mtype, None, None, StackElemB(binding.stack, "next", member))
        if isinstance(binding, StackB):
            if member == "size":
                return Val(BitT(32), hexstr(binding.type.size, 32), binding.type.size)
            if member == "last" or (member == "next" and self.parser_mode):
                return Val(binding.type.element, None, None, StackElemB(binding, member))
            if member == "lastIndex":
                ref = {"type": "header_stack", "value": binding.name}
                return Val(BitT(32), expr_json("last_stack_index", None, ref))
            raise not_supported(f"header stack member .{member} here", loc)
        if isinstance(binding, DynElemB):
            ftype = binding.stack.type.element.field_type(member)
            if ftype is None:
                raise CompileError(f"header {binding.stack.type.element.name} has no field "
                                   f"{member}", loc)
            dyn = DynFieldB(binding, member, ftype)
            return Val(ftype, dyn.access(), None, dyn)
        if isinstance(binding, StackElemB):
            ftype = binding.stack.type.element.field_type(member)
            if ftype is None or binding.which != "last":
                raise not_supported(f"field {member} of {binding.stack.name}.{binding.which}", loc)
            json = {"type": "stack_field", "value": [binding.stack.name, member]}
            return Val(ftype, json)
        raise CompileError(f"{describe(base)} has no member {member}", loc)

    def _union_stack_member(self, stack: StackB, member: str, loc) -> Val:
        """``.size``, ``.lastIndex`` and (in parsers) ``.next`` of a stack of unions; p4c's
        JSON for ``.last`` of one does not load on simple_switch, so it is refused."""
        if member == "size":
            return Val(BitT(32), hexstr(stack.type.size, 32), stack.type.size)
        if member == "lastIndex" and self.parser_mode:  # p4c: "only in a parser"
            ref = {"type": "header_union_stack", "value": stack.name}
            return Val(BitT(32), expr_json("last_stack_index", None, ref))
        if member == "next" and self.parser_mode:
            return Val(stack.type.element, None, None, StackElemB(stack, member))
        raise not_supported(f"member .{member} of a stack of header unions here", loc)

    def _c_Index(self, e: ast.Index) -> Val:
        base = self.compile(e.expr)
        if isinstance(base.binding, StructB) and base.binding.type.name.startswith("tuple<"):
            # a tuple local (Storage.tuple_struct): a compile-time index names a field
            at = self.const_value(e.index, None)
            if not 0 <= int(at) < len(base.binding.type.fields):
                raise CompileError(f"index {at} out of range for {base.binding.type.name}",
                                   e.index.loc)
            return binding_val(base.binding.members[f"f{int(at)}"])
        if not isinstance(base.binding, StackB):
            raise CompileError(f"{describe(base)} cannot be indexed", e.loc)
        index = self.compile(e.index)
        stack = base.binding
        if isinstance(stack.type.element, UnionT):
            if index.const is None:
                raise not_supported("a run-time index into a stack of header unions", e.loc)
            if not 0 <= int(index.const) < stack.type.size:
                raise CompileError(f"index {index.const} out of range for "
                                   f"{stack.name}[{stack.type.size}]", e.loc)
            return binding_val(union_binding(f"{stack.name}[{index.const}]", stack.type.element))
        if index.const is None:
            # signed too, as p4c: a negative one is past the end (simple_switch aborts,
            # p4lite's switch drops the packet)
            if not isinstance(index.type, BitT):
                raise CompileError(f"a header stack index must be bit<N> or int<N>, not "
                                   f"{index.type}", e.index.loc)
            if stack.type.element.members is not None:
                raise not_supported("a run-time index into a stack of headers with struct "
                                    "fields", e.loc)
            return Val(stack.type.element, None, None, DynElemB(stack, index.operand))
        if not 0 <= int(index.const) < stack.type.size:
            raise CompileError(
                f"index {index.const} out of range for {stack.name}[{stack.type.size}]", e.loc
            )
        return binding_val(HeaderB(f"{stack.name}[{index.const}]", stack.type.element))

    # ------------------------------------------------------------- operators
    def _c_Slice(self, e: ast.Slice) -> Val:
        base = self.rvalue(e.expr)
        hi, lo = int(self.const_value(e.hi)), int(self.const_value(e.lo))
        if not isinstance(base.type, BitT):
            raise CompileError(f"cannot slice a value of type {base.type}", e.loc)
        if not base.type.width > hi >= lo >= 0:
            raise CompileError(f"slice [{hi}:{lo}] out of range for {base.type}", e.loc)
        t = BitT(hi - lo + 1)
        mask = (1 << t.width) - 1
        if base.const is not None:
            value = (int(base.const) >> lo) & mask
            return Val(t, hexstr(value, t.width), value)
        shifted = base.json if lo == 0 else expr_json(">>", base.json, hexstr(lo, 8))
        return Val(t, expr_json("&", shifted, hexstr(mask, t.width)))

    def _c_Unary(self, e: ast.Unary) -> Val:
        operand = self.rvalue(e.operand)
        if e.op == "!":
            if not isinstance(operand.type, BoolT):
                raise CompileError(f"! needs a bool operand, not {operand.type}", e.loc)
            if operand.const is not None:
                return bool_const(not operand.const)
            return Val(BoolT(), expr_json("not", None, as_bool(operand)), is_data=False)
        if not isinstance(operand.type, BitT | IntT):
            raise CompileError(f"{e.op} needs a numeric operand, not {operand.type}", e.loc)
        if e.op == "+":
            return operand
        if operand.const is not None:
            raw = -int(operand.const) if e.op == "-" else ~int(operand.const)
            if isinstance(operand.type, IntT):
                if e.op == "~":
                    raise CompileError("~ needs a value with a width", e.loc)
                return Val(IntT(), None, raw)
            value = wrap_const(raw, operand.type)
            return Val(operand.type, hexstr(value, operand.type.width), value)
        # Values of type int are compile-time constants (rvalue gives the others JSON).
        assert isinstance(operand.type, BitT), operand.type
        if e.op == "-":  # BMv2 has no unary minus: 0 - x
            json = expr_json("-", hexstr(0, operand.type.width), operand.json)
        else:
            json = expr_json("~", None, operand.json)
        return Val(operand.type, wrap(json, operand.type))

    def _c_Binary(self, e: ast.Binary) -> Val:
        if e.op in _LOGIC:
            return self._logic(e)
        if e.op in ("==", "!=") and (_is_aggregate_literal(e.left)
                                     or _is_aggregate_literal(e.right)):
            return self._aggregate_compare(e)
        first = self.compile(e.left)
        if e.op in ("==", "!=") and isinstance(first.binding, StackB) and isinstance(
                first.binding.type.element, HeaderT):
            return self._stack_compare(e, first.binding)
        if isinstance(first.type, UnionT) or isinstance(first.binding, StackB):
            raise not_supported(f"operator {e.op} on {describe(first)}", e.loc)
        if e.op in ("==", "!=") and isinstance(first.type, StructT | HeaderT):
            return self._aggregate_compare(e)
        left, right = self._filled(first, e.left), self.rvalue(e.right)
        if e.op == "++":
            return self._concat(left, right, e.loc, e.right.loc)
        if e.op in ("<<", ">>"):
            self._check_shift(e, left, right)
            return self._shift(e.op, left, right, e.loc)
        left, right = self._unify(left, right, e)
        if e.op in _COMPARE:
            return self._compare(e.op, left, right, e.loc)
        if e.op in ("|+|", "|-|"):
            return self._saturating(e.op, left, right, e.loc)
        if e.op in _ARITH or e.op in _BITWISE or e.op in ("/", "%"):
            return self._arith(e.op, left, right, e.loc)
        raise not_supported(f"operator {e.op}", e.loc)

    def _filled(self, val: Val, e: ast.Expression) -> Val:
        """``rvalue`` of an already compiled ``e``."""
        if val.json is None:
            if val.const is None:
                raise CompileError(f"{describe(val)} is not a value here", e.loc)
            val.json = self._const_json(val.const, val.type)
        return val

    # ------------------------------------------------- struct and header equality
    def _aggregate_compare(self, e: ast.Binary) -> Val:
        """``==``/``!=`` of structs, headers, and ``{...}`` list/struct expressions: every
        field pairwise; two headers are equal when both are invalid, or both are valid
        with equal fields (P4_16 8.16); a ``{...}`` stands for a valid header."""
        t: P4Type | None = None
        for side in (e.left, e.right):
            if not _is_aggregate_literal(side):
                t = self.compile(side).type
                break
        if not isinstance(t, StructT | HeaderT):
            raise CompileError(f"cannot compare {'these values' if t is None else t} with "
                               f"{e.op}", e.loc)
        equal = self._equal_parts(e.left, e.right, t, e.loc)
        if e.op == "!=":
            return Val(BoolT(), expr_json("not", None, equal), is_data=False)
        return Val(BoolT(), equal, is_data=False)

    def _stack_compare(self, e: ast.Binary, left: StackB) -> Val:
        """``==``/``!=`` of two header stacks of one type: every element pairwise, as a
        header (P4_16 8.18; the next index is not compared)."""
        right = self.compile(e.right).binding
        if not isinstance(right, StackB) or not same_type(left.type, right.type):
            raise CompileError(f"cannot compare header stack {left.name} with {e.op} to "
                               "anything but a stack of its type", e.loc)
        element = left.type.element
        assert isinstance(element, HeaderT)  # the caller checked it
        equal: Json | None = None
        for i in range(left.type.size):
            part = self._equal_parts(binding_val(HeaderB(f"{left.name}[{i}]", element)),
                                     binding_val(HeaderB(f"{right.name}[{i}]", element)),
                                     element, e.loc)
            equal = part if equal is None else expr_json("and", equal, part)
        assert equal is not None  # a stack has at least one element
        if e.op == "!=":
            return Val(BoolT(), expr_json("not", None, equal), is_data=False)
        return Val(BoolT(), equal, is_data=False)

    def _equal_parts(self, left: Any, right: Any, t: P4Type, loc) -> Json:
        """Equality of two operands of type ``t``; an operand is an AST expression or a
        compiled ``Val`` (members of a compiled struct or header)."""
        if isinstance(t, StructT | HeaderT):
            lv, rv = self._operand(left), self._operand(right)
            parts = [self._equal_parts(self._member(lv, f, i, loc), self._member(rv, f, i, loc),
                                       ft, loc) for i, (f, ft) in enumerate(t.fields)]
            fields = parts[0] if parts else {"type": "bool", "value": True}
            for part in parts[1:]:
                fields = expr_json("and", fields, part)
            if isinstance(t, StructT):
                return fields
            valid = [self._valid_of(v) for v in (lv, rv)]
            if valid[0] is None and valid[1] is None:
                return fields
            if valid[0] is None or valid[1] is None:  # a {...} is a valid header
                known = valid[0] if valid[0] is not None else valid[1]
                return expr_json("and", expr_json("d2b", None, known), fields)
            both = expr_json("==", valid[0], valid[1])
            return expr_json("and", both, expr_json(
                "or", expr_json("not", None, expr_json("d2b", None, valid[0])), fields))
        lval = left if isinstance(left, Val) else self.rvalue(left, t)
        rval = right if isinstance(right, Val) else self.rvalue(right, t)
        return self._compare("==", self._filled(lval, ast.Name("?", loc=loc)),
                             self._filled(rval, ast.Name("?", loc=loc)), loc).operand

    def _operand(self, side: Any) -> Any:
        if isinstance(side, Val) or _is_aggregate_literal(side):
            return side
        return self.compile(side)

    def _member(self, side: Any, fname: str, index: int, loc) -> Any:
        if isinstance(side, ast.StructExpr):
            given = {f.name: f.value for f in side.fields}
            if fname not in given:
                raise CompileError(f"the expression sets no field {fname}", side.loc)
            return given[fname]
        if isinstance(side, ast.ListExpr):
            if index >= len(side.items):
                raise CompileError("the list has too few elements for the comparison",
                                   side.loc)
            return side.items[index]
        assert isinstance(side, Val)
        return self.member_of(side, fname, loc)

    @staticmethod
    def _valid_of(side: Any) -> Json | None:
        if isinstance(side, Val) and isinstance(side.binding, HeaderB):
            return {"type": "field", "value": [side.binding.instance, "$valid$"]}
        return None

    def _unify(self, left: Val, right: Val, e: ast.Binary) -> tuple[Val, Val]:
        if isinstance(left.type, IntT) and not isinstance(right.type, IntT):
            left = self.coerce(left, right.type, e.left.loc)
        elif isinstance(right.type, IntT) and not isinstance(left.type, IntT):
            right = self.coerce(right, left.type, e.right.loc)
        if not same_type(left.type, right.type):
            raise CompileError(
                f"operands of {e.op} have different types: {left.type} and {right.type}", e.loc
            )
        return left, right

    def _logic(self, e: ast.Binary) -> Val:
        left, right = self.rvalue(e.left), self.rvalue(e.right)
        for side, val in (("left", left), ("right", right)):
            if not isinstance(val.type, BoolT):
                raise CompileError(f"{side} operand of {e.op} must be bool, not {val.type}", e.loc)
        if left.const is not None and right.const is not None:
            value = (left.const and right.const) if e.op == "&&" else (left.const or right.const)
            return bool_const(bool(value))
        return Val(BoolT(), expr_json(_LOGIC[e.op], as_bool(left), as_bool(right)), is_data=False)

    def _compare(self, op: str, left: Val, right: Val, loc) -> Val:
        if isinstance(left.type, VarbitT) and op in ("==", "!="):
            # BMv2 compares the values (not the lengths) of varbit fields
            return Val(BoolT(), expr_json(op, left.json, right.json), is_data=False)
        if not isinstance(left.type, BitT | IntT | BoolT | ErrorT | EnumT):
            raise not_supported(f"comparing values of type {left.type}", loc)
        if op not in ("==", "!=") and not isinstance(left.type, BitT | IntT):
            raise CompileError(f"{op} needs numeric operands, not {left.type}", loc)
        if left.const is not None and right.const is not None:
            return bool_const(_PY_COMPARE[op](left.const, right.const))
        lj: Json | None
        rj: Json | None
        if isinstance(left.type, BoolT):
            lj, rj = as_data(left), as_data(right)
        else:
            lj, rj = left.json, right.json
        return Val(BoolT(), expr_json(op, lj, rj), is_data=False)

    def _arith(self, op: str, left: Val, right: Val, loc) -> Val:
        if not isinstance(left.type, BitT | IntT):
            raise CompileError(f"{op} needs numeric operands, not {left.type}", loc)
        if op in ("/", "%") and right.const == 0:  # p4c's words
            raise CompileError("Division by zero" if op == "/" else "Modulo by zero", loc)
        if left.const is not None and right.const is not None:
            raw = _PY_ARITH[op](int(left.const), int(right.const))
            if isinstance(left.type, IntT):
                return Val(IntT(), None, raw)
            value = wrap_const(raw, left.type)
            return Val(left.type, hexstr(value, left.type.width), value)
        if op in ("/", "%"):
            return _divide(op, left, right, loc)
        json = expr_json(op, left.json, right.json)
        if op in _ARITH:
            json = wrap(json, left.type)
        return Val(left.type, json)

    def _check_shift(self, e: ast.Binary, left: Val, right: Val) -> None:
        """p4c's BMv2 limits on a shift amount (see target_checks)."""
        if left.const is not None and (right.const is not None or left.const == 0):
            # folded before the back end's check: both constant, or 0 shifted (p4c's
            # StrengthReduction, after SideEffectOrdering has lifted any call out of it)
            return
        if not isinstance(left.type, BitT | IntT) or not isinstance(right.type, BitT | IntT):
            return  # _shift reports it
        error, warn = shift_diagnostics(
            e, left.type.width if isinstance(left.type, BitT) else None,
            right.type.width if isinstance(right.type, BitT) else None,
            int(right.const) if right.const is not None else None, self._folded)
        if warn is not None and warn not in self.env.diagnostics:
            self.env.diagnostics.append(warn)
        if error is not None:
            raise error

    def _folded(self, e: ast.Expression) -> int | None:
        """The value of ``e`` when it is a compile-time integer, else None."""
        val = self.compile(e)
        return int(val.const) if isinstance(val.const, int) and not isinstance(
            val.const, bool) and isinstance(val.type, BitT | IntT) else None

    def _shift(self, op: str, left: Val, right: Val, loc) -> Val:
        if not isinstance(left.type, BitT | IntT) or not isinstance(right.type, BitT | IntT):
            raise CompileError(f"{op} needs numeric operands", loc)
        if isinstance(right.type, BitT) and right.type.signed or (
                right.const is not None and int(right.const) < 0):
            raise CompileError("a shift amount must be unsigned", loc)
        if left.const is not None and right.const is not None:
            raw = int(left.const) << int(right.const) if op == "<<" else int(left.const) >> int(
                right.const
            )
            if isinstance(left.type, IntT):
                return Val(IntT(), None, raw)
            value = wrap_const(raw, left.type)
            return Val(left.type, hexstr(value, left.type.width), value)
        if isinstance(left.type, IntT):
            raise CompileError(f"the left operand of {op} needs a width", loc)
        rj = right.operand  # an rvalue: constants have JSON too
        # p4c's ArithmeticFixup truncates every bit-typed binary result but & | ^.
        return Val(left.type, wrap(expr_json(op, left.json, rj), left.type))

    def _concat(self, left: Val, right: Val, loc, right_loc) -> Val:
        if not isinstance(left.type, BitT) or not isinstance(right.type, BitT):
            raise CompileError("++ needs bit<N> operands with known widths", loc)
        t = BitT(left.type.width + right.type.width, left.type.signed)
        if left.type.signed != right.type.signed:  # p4c 34b86e9 refuses it, in these words
            raise CompileError(f"Cannot unify type '{right.type}' with type '{t}'", right_loc)
        if left.const is not None and right.const is not None:
            lo_mask = (1 << right.type.width) - 1
            value = wrap_const((int(left.const) << right.type.width) | (int(right.const) & lo_mask), t)
            return Val(t, hexstr(value, t.width), value)
        shifted = expr_json("<<", left.json, hexstr(right.type.width, 8))
        # the right operand's bits, as p4c masks them: a signed one read from BMv2 is
        # sign-extended, which would set the left operand's bits too
        assert right.json is not None  # an rvalue
        low = wrap(right.json, BitT(right.type.width)) if right.type.signed else right.json
        json = expr_json("|", wrap(shifted, BitT(t.width)), low)
        return Val(t, wrap(json, t))

    def _saturating(self, op: str, left: Val, right: Val, loc) -> Val:
        t = left.type
        if not isinstance(t, BitT):
            raise CompileError(f"{op} needs bit<N> or int<N> operands", loc)
        lo, hi = ((-(1 << (t.width - 1)), (1 << (t.width - 1)) - 1) if t.signed else (0, (1 << t.width) - 1))
        if left.const is not None and right.const is not None:
            raw = left.const + right.const if op == "|+|" else left.const - right.const
            value = min(hi, max(lo, int(raw)))
            return Val(t, hexstr(value, t.width), value)
        # As p4c: (u)sat_cast of the infinite-precision sum/difference to the width.
        raw_json = expr_json("+" if op == "|+|" else "-", left.json, right.json)
        cast_op = "sat_cast" if t.signed else "usat_cast"
        return Val(t, expr_json(cast_op, raw_json, hexstr(t.width, None)))

    def _c_Ternary(self, e: ast.Ternary) -> Val:
        cond = self.rvalue(e.cond)
        if not isinstance(cond.type, BoolT):
            raise CompileError(f"?: condition must be bool, not {cond.type}", e.cond.loc)
        then, orelse = self.rvalue(e.then), self.rvalue(e.orelse)
        then, orelse = self._unify(then, orelse, ast.Binary("?:", e.then, e.orelse, loc=e.loc))
        if cond.const is not None:
            return then if cond.const else orelse
        if isinstance(then.type, IntT):
            raise CompileError("?: branches need a width (cast one of them)", e.loc)
        if isinstance(then.type, BoolT):
            json = expr_json("?", as_bool(then), as_bool(orelse), as_bool(cond))
            return Val(BoolT(), json, is_data=False)
        return Val(then.type, expr_json("?", then.json, orelse.json, as_bool(cond)))

    def _c_Cast(self, e: ast.Cast) -> Val:
        target = self.env.resolve(e.type)
        val = self.rvalue(e.expr)
        return cast(val, target, e.loc)

    def _c_Call(self, e: ast.Call) -> Val:
        func = e.func
        if isinstance(func, ast.Member) and func.member == "isValid" and not e.args:
            base = self.compile(func.expr)
            if isinstance(base.binding, DynElemB):
                # p4c's JSON for it makes simple_switch abort (Json::LogicError) at load
                raise not_supported("isValid() on a header stack element with a run-time "
                                    "index", e.loc)
            if isinstance(base.binding, UnionB):  # valid when one of its members is
                ref = {"type": "header_union", "value": base.binding.instance}
                return Val(BoolT(), expr_json("valid_union", None, ref), is_data=False)
            if not isinstance(base.binding, HeaderB):
                raise CompileError(f"isValid() needs a header, not {describe(base)}", e.loc)
            valid = {"type": "field", "value": [base.binding.instance, "$valid$"]}
            return Val(BoolT(), expr_json("d2b", None, valid), is_data=False)
        if isinstance(func, ast.Member) and func.member == "lookahead" and self.lookahead:
            if len(e.type_args) != 1:
                raise CompileError("lookahead needs one type argument", e.loc)
            t = self.env.resolve(e.type_args[0])
            return Val(t, self.lookahead(t, e.loc))
        raise not_supported("this call inside an expression", e.loc)

    def _c_StructExpr(self, e: ast.StructExpr) -> Val:
        raise not_supported("a struct expression here", e.loc)

    def _c_ListExpr(self, e: ast.ListExpr) -> Val:
        raise not_supported("a list expression here", e.loc)

    def _const_json(self, value: int | bool, t: P4Type) -> Json:
        if isinstance(value, bool):
            return {"type": "bool", "value": value}
        if isinstance(t, IntT):
            return hexstr(value, None)
        return hexstr(value, width_of(t))


# ---------------------------------------------------------------- helpers


def union_binding(instance: str, t: UnionT) -> UnionB:
    """The binding of union instance ``instance`` (its members named as Storage names them)."""
    return UnionB(instance, t, {m: HeaderB(f"{instance}.{m}", mt) for m, mt in t.members()})


def _flattened_member(binding: HeaderB, member: str, loc) -> Binding:
    """A member of a header whose struct fields are stored flattened."""
    t = binding.type
    assert t.members is not None
    mtype = t.members.get(member)
    if mtype is None:
        raise CompileError(f"header {t.name} has no field {member}", loc)

    def view(path: str, vt: P4Type) -> Binding:
        if isinstance(vt, StructT):
            return StructB(vt, {f: view(f"{path}.{f}", ft) for f, ft in vt.fields})
        return FieldB(binding.instance, t.storage[path], vt)

    return view(member, mtype)


def _is_aggregate_literal(e: Any) -> bool:
    return isinstance(e, ast.StructExpr | ast.ListExpr)


def annotated_id(decl: ast.Declaration, comp: ExprCompiler) -> tuple[int | None, SourceLoc | None]:
    """A declaration's ``@id(N)``: (N, where the annotation is), or (None, None)."""
    ann = decl.annotation("id")
    if ann is None or not ann.args:
        return None, None
    return int(comp.const_value(ann.args[0])), ann.loc


_PY_COMPARE = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}

def _divide(op: str, left: Val, right: Val, loc) -> Val:
    """``/``/``%`` on a run-time value. BMv2 has no division, so p4c accepts only what it
    folds away (StrengthReduction): an unsigned value divided by a power of two (a
    shift; ``%``: a mask), and 0 divided by anything; anything else is refused in p4c's
    words."""
    if isinstance(left.type, BitT) and left.type.signed:
        raise CompileError("Cannot operate on signed values", loc)
    if left.const == 0 and isinstance(left.type, BitT):
        return Val(left.type, hexstr(0, left.type.width), 0)
    divisor = right.const
    if not isinstance(left.type, BitT) or not isinstance(divisor, int) or isinstance(
            divisor, bool) or divisor & (divisor - 1):
        raise CompileError("could not evaluate expression at compilation time", loc)
    k = divisor.bit_length() - 1
    if op == "/":
        return left if k == 0 else Val(left.type, expr_json(">>", left.json, hexstr(k, None)))
    return Val(left.type, expr_json("&", left.json, hexstr(divisor - 1, left.type.width)))


_PY_ARITH = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a // b,
    "%": lambda a, b: a % b,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
}
