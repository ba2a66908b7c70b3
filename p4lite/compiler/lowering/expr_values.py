"""Compiled expression values and the conversions between their BMv2 JSON forms.

A ``Val`` is what the expression compiler (lower_expr) gives back: a type, a JSON
operand, a constant value if known and the binding it came from. Here are the
operand builders (``hexstr``, ``expr_json``), the bindings only expressions make
(stack elements, run-time indexed elements and fields), and the conversions every
lowering pass applies: bool/data (``as_bool``, ``as_data``: BMv2 keeps booleans and
bit strings apart), truncation (``wrap``, ``wrap_const``) and casts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from p4lite.compiler.checks.bindings import (
    Binding,
    ConstB,
    DeclB,
    ExternB,
    FieldB,
    HeaderB,
    ParamB,
    StackB,
    StructB,
    TypeB,
    UnionB,
)
from p4lite.compiler.checks.types import (
    BitT,
    BoolT,
    EnumT,
    ErrorT,
    HeaderT,
    IntT,
    P4Type,
    StackT,
    StructT,
    same_type,
    width_of,
)
from p4lite.compiler.errors import CompileError, not_supported

Json = dict[str, Any]


@dataclass(slots=True)
class Val:
    """A compiled expression: its type, its JSON operand, its constant value if known."""

    type: P4Type
    json: Json | None = None
    const: int | bool | None = None
    binding: Binding | None = None
    is_data: bool = True  # for bool: json is a 1-bit data value (a field), not a boolean

    @property
    def is_const(self) -> bool:
        return self.const is not None

    @property
    def operand(self) -> Json:
        """``json`` of a value known to have one: every result of ``ExprCompiler.rvalue``."""
        assert self.json is not None, f"a value of type {self.type} without JSON"
        return self.json


def hex_text(value: int, width: int | None) -> str:
    """p4c's hexstr text: big-endian, zero-padded to whole bytes of ``width``.

    Without a width the digits are minimal (p4c's ``stringRepr(v, 0)``: ``0x3``).
    """
    sign = "-" if value < 0 else ""
    magnitude = -value if value < 0 else value
    if width is None:
        return f"{sign}0x{magnitude:x}"
    nbytes = max(1, (width + 7) // 8)
    digits = f"{magnitude:x}".rjust(2 * nbytes, "0")
    return f"{sign}0x{digits}"


def hexstr(value: int, width: int | None) -> Json:
    return {"type": "hexstr", "value": hex_text(value, width)}


def expr_json(op: str, left: Json | None, right: Json | None, cond: Json | None = None) -> Json:
    value: Json = {"op": op, "left": left, "right": right}
    if cond is not None:
        value["cond"] = cond
    return {"type": "expression", "value": value}


def wrap_const(value: int, t: P4Type) -> int:
    """Truncate an infinite-precision value to ``t`` (two's complement when signed)."""
    if not isinstance(t, BitT):
        return value
    value &= (1 << t.width) - 1
    if t.signed and value >> (t.width - 1):
        value -= 1 << t.width
    return value


def to_param(json: Json) -> Json:
    """An operand as a primitive parameter: action parameters become runtime_data."""
    if json.get("type") == "local":
        return {"type": "runtime_data", "value": json["value"]}
    return json


@dataclass(slots=True)
class StackElemB(Binding):
    """``stack.next`` / ``stack.last`` inside a parser; ``member`` is the union member of
    ``stack.next.<member>`` for a stack of header unions."""

    stack: StackB
    which: str
    member: str | None = None


@dataclass(slots=True)
class DynElemB(Binding):
    """``stack[i]`` with ``i`` known only at run time (p4c: dereference_header_stack)."""

    stack: StackB
    index: Json

    def deref(self) -> Json:
        return expr_json("dereference_header_stack",
                         {"type": "header_stack", "value": self.stack.name}, self.index)


@dataclass(slots=True)
class DynFieldB(Binding):
    """A field of ``stack[i]``, ``i`` known at run time: BMv2's access_field."""

    elem: DynElemB
    field: str
    type: P4Type

    def access(self) -> Json:
        offset = [f for f, _ in self.elem.stack.type.element.fields].index(self.field)
        return {"type": "expression", "value": {"op": "access_field",
                                                "left": self.elem.deref(), "right": offset}}


def binding_val(binding: Binding) -> Val:
    if isinstance(binding, ConstB):
        t = binding.type
        if isinstance(binding.value, bool):
            return bool_const(binding.value)
        json = None if isinstance(t, IntT) else hexstr(binding.value, width_of(t))
        return Val(t, json, binding.value, binding)
    if isinstance(binding, FieldB):
        return Val(binding.type, {"type": "field", "value": [binding.header, binding.field]},
                   None, binding)
    if isinstance(binding, ParamB):
        return Val(binding.type, {"type": "local", "value": binding.index}, None, binding)
    if isinstance(binding, HeaderB):
        return Val(binding.type, None, None, binding)
    if isinstance(binding, StackB):
        return Val(binding.type, None, None, binding)
    if isinstance(binding, StructB | UnionB):
        return Val(binding.type, None, None, binding)
    if isinstance(binding, ExternB):
        return Val(binding.type, None, None, binding)
    if isinstance(binding, TypeB):
        return Val(binding.type, None, None, binding)
    if isinstance(binding, DeclB):
        return Val(IntT(), None, None, binding)
    if isinstance(binding, StackElemB):
        element = binding.stack.type.element
        if binding.member is not None:
            return Val(element.field_type(binding.member) or element, None, None, binding)
        return Val(element, None, None, binding)
    if isinstance(binding, DynElemB):
        return Val(binding.stack.type.element, None, None, binding)
    if isinstance(binding, DynFieldB):
        return Val(binding.type, binding.access(), None, binding)
    raise TypeError(binding)


def describe(val: Val) -> str:
    b = val.binding
    if isinstance(b, HeaderB):
        return f"header {b.instance}"
    if isinstance(b, StructB):
        return f"struct of type {b.type.name}"
    if isinstance(b, StackB):
        return f"header stack {b.name}"
    if isinstance(b, UnionB):
        return f"header union {b.instance}"
    if isinstance(b, ExternB):
        return f"extern {b.name}"
    if isinstance(b, TypeB):
        return f"type {b.type}"
    if isinstance(b, DeclB):
        return f"{b.kind} {getattr(b.decl, 'name', '')}"
    return f"a value of type {val.type}"


def enum_member(t: P4Type, member: str, loc) -> Val:
    if not isinstance(t, EnumT):
        raise CompileError(f"type {t} has no member {member}", loc)
    if member not in t.members:
        raise CompileError(f"enum {t.name} has no member {member}", loc)
    if t.underlying is not None:
        value = t.values[member]
        return Val(t.underlying, hexstr(value, t.underlying.width), value)
    index = t.members.index(member)
    return Val(t, hexstr(index, 32), index)


def bool_const(value: bool) -> Val:
    return Val(BoolT(), {"type": "bool", "value": value}, value, is_data=False)


def as_bool(val: Val) -> Json:
    """A bool value as a boolean expression."""
    if val.const is not None and val.binding is None:
        return {"type": "bool", "value": bool(val.const)}
    if val.is_data:
        return expr_json("d2b", None, val.json)
    return val.operand


def as_data(val: Val) -> Json:
    """A value as data to store in a field (bools become 0/1 with ``b2d``)."""
    if isinstance(val.type, BoolT):
        if val.const is not None and val.binding is None:
            return hexstr(int(bool(val.const)), 1)
        if not val.is_data:
            return expr_json("b2d", None, val.json)
    return val.operand


def wrap(json: Json, t: P4Type) -> Json:
    """Truncate an infinite-precision result to ``t`` as p4c does."""
    if not isinstance(t, BitT):
        return json
    if t.signed:
        return expr_json("two_comp_mod", json, hexstr(t.width, None))
    return expr_json("&", json, hexstr((1 << t.width) - 1, t.width))


def cast(val: Val, target: P4Type, loc) -> Val:
    source = val.type
    if isinstance(target, BoolT):
        if isinstance(source, BoolT):
            return val
        if isinstance(source, BitT) and source.width == 1 and not source.signed:
            if val.const is not None:
                return bool_const(bool(val.const))
            return Val(BoolT(), expr_json("d2b", None, val.json), is_data=False)
        raise CompileError(f"cannot cast {source} to bool", loc)
    if isinstance(target, BitT):
        if isinstance(source, BoolT):
            if target.width != 1:
                raise CompileError(f"cannot cast bool to {target}", loc)
            if val.const is not None:
                return Val(target, hexstr(int(bool(val.const)), 1), int(bool(val.const)))
            return Val(target, as_data(val))
        if isinstance(source, EnumT) and source.underlying is None:
            raise CompileError(f"cannot cast enum {source.name} to {target}", loc)
        if not isinstance(source, BitT | IntT | EnumT):
            raise CompileError(f"cannot cast {source} to {target}", loc)
        if val.const is not None:
            value = wrap_const(int(val.const), target)
            return Val(target, hexstr(value, target.width), value)
        # As p4c's ArithmeticFixup: every cast to bit<N>/int<N> is truncated.
        return Val(target, wrap(val.operand, target))
    if isinstance(target, EnumT) and target.underlying is not None:
        return cast(val, target.underlying, loc)
    if isinstance(target, EnumT | ErrorT | StructT | HeaderT | StackT):
        if same_type(source, target):
            return val
    raise not_supported(f"cast from {source} to {target}", loc)
