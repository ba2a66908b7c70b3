"""Compiling BMv2 expressions and primitives into Python source.

The generated code works on three locals: ``F`` (the packet's field-slot list,
see program.py), ``P`` (the packet's life-cycle record, runtime.Pkt) and ``A``
(the action's runtime data tuple). Everything else a primitive touches is a
global of the generated code under a generated name, so the hot path never
looks up a JSON name: immutable objects (slot tuples, structs, calculations)
are bound into ``ns`` at load time (``bind``); per-switch state (register
lists, counters, meters, table lookup structures) is only named here
(``bind_state`` records a reference such as ``("reg", name)``), and each
runtime binds its own objects under those names before it executes the code
(runtime.py). Sources are compiled once, at load time (``define``). Stores mask to the destination width; signed fields hold signed
values (two's complement wrap on store), as BMv2's Data does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import CodeType, ModuleType
from typing import Any

from p4lite.bmv2json.model import Primitive
from p4lite.switch.core.laneviews import LaneView
from p4lite.switch.core.program import MAX_FIELD_WIDTH, Layout, fail, need, parse_hexstr

# BMv2 binary operator -> the Python operator of the generated ``(left OP right)``
_BINARY = {"+": "+", "-": "-", "*": "*", "<<": "<<", ">>": ">>", "&": "&", "|": "|",
           "^": "^", "/": "//", "%": "%",
           "==": "==", "!=": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<=",
           "and": "and", "or": "or"}


_INT_LITERAL = re.compile(r"^-?\d+$")
MAX_SHIFT = 1 << 17  # bits; wider than any field (program.MAX_FIELD_WIDTH is 2**16)


class PacketExit(Exception):
    """Raised by the ``exit`` primitive; ends the current pipeline (control)."""


class PacketAssertion(Exception):
    """An ``assert``/``assume`` primitive failed; the packet is dropped."""


class TooShort(Exception):
    """A parser lookahead ran past the end of the packet."""


def unwrap(v: Any) -> Any:
    """A value object with p4c's extra ``expression`` wrappers removed.

    BMv2 builds an ``expression``-typed primitive parameter (and the source of a
    parser ``set``/``advance``) from its ``value``, which is itself a typed node, so
    p4c writes ``{"type": "expression", "value": {"type": "expression", "value":
    {"op": ...}}}`` there (and wraps ``stack_field`` the same way). Conditionals and
    operands carry one wrapper. Both forms are accepted everywhere: a wrapper whose
    value is a typed node (no ``op``) is dropped.
    """
    while isinstance(v, dict) and v.get("type") == "expression":
        inner = v.get("value")
        if not isinstance(inner, dict) or "type" not in inner or "op" in inner:
            break
        v = inner
    return v


def prim_params(prim: Primitive) -> list:
    """A primitive's parameters with p4c's double expression wrapping removed (shared by
    primitives.py and vectorize.py, which no longer import each other)."""
    return [unwrap(p) for p in prim.parameters]


@dataclass(slots=True)
class Lvalue:
    index: str  # Python source of the index into F
    width: int
    signed: bool


StateRef = tuple[str, Any]  # (kind, name): what a runtime binds under a bind_state name


class CodeGen:
    """Emits and compiles Python source for one program; binds the immutable objects
    it needs into ``ns`` and records the per-switch state it needs in ``state_refs``."""

    def __init__(self, layout: Layout, ns: dict[str, Any], drop_port: int) -> None:
        self.layout = layout
        self.ns = ns
        self.drop_port = drop_port
        self.registers: dict[str, Any] = {}  # name -> state.RegisterSpec (MeterSpec, ...)
        self.counters: dict[str, Any] = {}
        self.meters: dict[str, Any] = {}
        self.calcs: dict[str, str] = {}  # calculation name -> bound function name
        self.field_lists: dict[int, tuple[int, ...]] = {}
        self.learn_lists: dict[int, Any] = {}
        self._count = 0
        self.sources: dict[str, str] = {}  # generated function name -> source (for debugging)
        self.code: list[tuple[str, CodeType]] = []  # compiled sources, in definition order
        self.state_refs: dict[str, StateRef] = {}  # global name -> per-switch object
        self.params: list[int] | None = None  # widths of the action's runtime data
        self.in_parser = False
        self.views: dict[str, LaneView] = {}  # header -> lane view (laneviews.py)
        self.native: ModuleType | None = None  # vecops.KERNEL: runs over views in C

    # -- namespace -------------------------------------------------------------------

    def bind(self, obj: Any, prefix: str) -> str:
        self._count += 1
        name = f"_{prefix}{self._count}"
        self.ns[name] = obj
        return name

    def bind_state(self, ref: StateRef, prefix: str) -> str:
        """A global name for a per-switch object (``ref``), bound by each runtime."""
        self._count += 1
        name = f"_{prefix}{self._count}"
        self.state_refs[name] = ref
        return name

    def define(self, source: str, name: str) -> str:
        """Compile ``source`` (which defines ``name``); runtimes execute it in their
        own namespace (runtime.py). Returns ``name``."""
        try:
            code = compile(source, f"<p4lite:{name}>", "exec")
        except SyntaxError as exc:  # a bug in the generator, not in the JSON
            raise fail(name, f"internal code generation error: {exc}\n{source}") from exc
        self.code.append((name, code))
        self.sources[name] = source
        return name

    # -- expressions -----------------------------------------------------------------

    def width_of(self, v: Any) -> int | None:
        """The width of an unsigned value whose range is known at load time, else None."""
        v = unwrap(v)
        if not isinstance(v, dict):
            return None
        t = v.get("type")
        if t == "field":
            slot = self.layout.field_slot(v["value"], "field")
            return None if self.layout.signed[slot] else self.layout.width[slot]
        if t == "expression":
            e = v.get("value") or {}
            if e.get("op") == "&":  # p4c's mask after arithmetic bounds the width
                for side in (e.get("right"), e.get("left")):
                    if isinstance(side, dict) and side.get("type") == "hexstr":
                        const = parse_hexstr(side.get("value"), "mask")
                        if const >= 0:
                            return const.bit_length()
            return None
        if t in ("runtime_data", "local") and self.params is not None:
            i = v.get("value")
            if isinstance(i, int) and 0 <= i < len(self.params):
                return self.params[i]
        return None

    def expr(self, v: Any, where: str) -> str:
        v = unwrap(v)
        if not isinstance(v, dict) or "type" not in v:
            raise fail(where, f"bad value {v!r}")
        t, val = v["type"], v.get("value")
        if t == "field":
            return f"F[{self.layout.field_slot(val, where)}]"
        if t == "hexstr":
            return repr(parse_hexstr(val, where))
        if t == "bool":
            return "True" if val else "False"
        if t in ("runtime_data", "local"):
            if self.params is None or not isinstance(val, int) or not 0 <= val < len(self.params):
                raise fail(where, f"{t} index {val!r} outside the action's parameters")
            return f"A[{val}]"
        if t == "expression":
            return self._op(val, where)
        if t == "string":
            return repr(str(val))
        if t == "lookahead":
            if not self.in_parser:
                raise fail(where, "lookahead outside the parser")
            if not (isinstance(val, list) and len(val) == 2):
                raise fail(where, f"bad lookahead value {val!r}: need [offset, width]")
            off, width = val
            return f"_lookahead(B, pos, {int(off)}, {int(width)})"
        if t == "stack_field":
            if not (isinstance(val, list) and len(val) >= 2):
                raise fail(where, f"bad stack_field value {val!r}: need [stack, field]")
            stack = self.layout.stack(val[0], where)
            slots = tuple(self.layout.field_slot([h, val[1]], where) for h in stack.headers)
            return f"F[{self.bind(slots, 'sf')}[F[{stack.next_slot}] - 1]]"
        raise fail(where, f"value of type '{t}' is not supported here")

    def cond(self, v: Any, where: str) -> str:
        return self.expr(v, where)

    def _op(self, e: Any, where: str) -> str:
        op = need(e, "op", where, str)
        left, right = e.get("left"), e.get("right")
        if op in ("+", "-") and left is None:  # unary + / - (BMv2 loads 0 on the left)
            left = {"type": "hexstr", "value": "0x0"}
        if op == "<<":
            return self._shift_left(left, right, where)
        if op in _BINARY:
            return f"({self.expr(left, where)} {_BINARY[op]} {self.expr(right, where)})"
        if op == "not":
            return f"(not {self.expr(right, where)})"
        if op == "~":
            return f"(~{self.expr(right, where)})"
        if op == "d2b":
            return f"({self.expr(right, where)} != 0)"
        if op == "b2d":
            return f"(1 if {self.expr(right, where)} else 0)"
        if op == "?":
            c = self.expr(need(e, "cond", where), where)
            return f"({self.expr(left, where)} if {c} else {self.expr(right, where)})"
        if op == "valid":
            return f"(F[{self._valid_index(right, where)}] == 1)"
        if op == "valid_union":  # one of the union's members is valid
            members = self._union_of(right, where)
            return "(" + " or ".join(f"F[{self.layout.headers[h].valid_slot}] == 1"
                                     for h in members) + ")"
        if op in ("two_comp_mod", "sat_cast", "usat_cast"):
            return self._cast(op, left, right, where)
        if op == "access_field":
            return f"F[{self._field_index(left, right, where)}]"
        if op == "last_stack_index":
            return f"(F[{self._stack_of(right, where).next_slot}] - 1)"
        if op == "size_stack":
            return f"F[{self._stack_of(right, where).next_slot}]"
        raise fail(where, f"expression operator '{op}' is not supported by p4lite")

    def _shift_left(self, left: Any, right: Any, where: str) -> str:
        """``left << right``, with a run-time amount capped so a packet cannot make the
        switch build a gigabit integer; any amount past the cap already exceeds every
        field, so stores (masked) and comparisons come out the same."""
        x, n = self.expr(left, where), self.expr(right, where)
        width = self.width_of(right)
        if _INT_LITERAL.match(n) or (width is not None and (1 << width) <= MAX_SHIFT):
            return f"({x} << {n})"
        return f"({x} << min({n}, {MAX_SHIFT}))"

    def _cast(self, op: str, left: Any, right: Any, where: str) -> str:
        width = parse_hexstr(need(right, "value", where), where)
        x = self.expr(left, where)
        if width <= 0 or width > MAX_FIELD_WIDTH:
            raise fail(where, f"{op} to width {width}")
        half, mask = 1 << (width - 1), (1 << width) - 1
        if op == "two_comp_mod":
            return f"(((({x}) + {half}) & {mask}) - {half})"
        if op == "sat_cast":
            return f"min(max({x}, {-half}), {half - 1})"
        return f"min(max({x}, 0), {mask})"

    def _stack_of(self, v: Any, where: str) -> Any:
        """A header stack or a header union stack (both have ``next_slot``)."""
        v = unwrap(v)
        if isinstance(v, dict) and v.get("type") == "header_union_stack":
            return self.layout.union_stack(v.get("value"), where)
        if not isinstance(v, dict) or v.get("type") != "header_stack":
            raise fail(where, f"expected a header stack, got {v!r}")
        return self.layout.stack(v.get("value"), where)

    def _union_of(self, v: Any, where: str) -> list[str]:
        v = unwrap(v)
        name = v.get("value") if isinstance(v, dict) else None
        if not (isinstance(v, dict) and v.get("type") == "header_union"
                and name in self.layout.unions):
            raise fail(where, f"expected a header union, got {v!r}")
        return self.layout.unions[name]

    def _header_ref(self, v: Any, where: str) -> tuple[list, str | None]:
        """([HeaderInfo...], index source or None) for a header-valued operand."""
        v = unwrap(v)
        if isinstance(v, dict) and v.get("type") == "header":
            return [self.layout.header(v.get("value"), where)], None
        if isinstance(v, dict) and v.get("type") == "expression":
            e = v.get("value") or {}
            if e.get("op") == "dereference_header_stack":
                stack = self._stack_of(e.get("left"), where)
                # a negative index (a signed field in p4c's JSON) is past the stack as
                # for BMv2, not Python's count from the end
                index = f"{self.bind(_stack_index, 'ix')}({self.expr(e.get('right'), where)})"
                return [self.layout.header(h, where) for h in stack.headers], index
        raise fail(where, f"expected a header, got {v!r}")

    def _valid_index(self, v: Any, where: str) -> str:
        headers, index = self._header_ref(v, where)
        if index is None:
            return str(headers[0].valid_slot)
        return f"{self.bind(tuple(h.valid_slot for h in headers), 'vs')}[{index}]"

    def _field_index(self, hdr: Any, offset: Any, where: str) -> str:
        headers, index = self._header_ref(hdr, where)
        pos = offset if isinstance(offset, int) else parse_hexstr(need(offset, "value", where), where)
        if not 0 <= pos < len(headers[0].slots):
            raise fail(where, f"field offset {pos} outside header '{headers[0].name}'")
        if index is None:
            return str(headers[0].slots[pos])
        return f"{self.bind(tuple(h.slots[pos] for h in headers), 'fs')}[{index}]"

    # -- stores ----------------------------------------------------------------------

    def lvalue(self, v: Any, where: str) -> Lvalue:
        v = unwrap(v)
        if isinstance(v, dict) and v.get("type") == "field":
            slot = self.layout.field_slot(v.get("value"), where)
            if slot in self.layout.varbit_slots:  # its length would have to follow
                raise fail(where, "assigning a varbit field is not supported by p4lite")
            return Lvalue(str(slot), self.layout.width[slot], self.layout.signed[slot])
        if isinstance(v, dict) and v.get("type") == "expression":
            e = v.get("value") or {}
            if e.get("op") == "access_field":
                headers, _ = self._header_ref(e.get("left"), where)
                index = self._field_index(e.get("left"), e.get("right"), where)
                pos = e.get("right") if isinstance(e.get("right"), int) else parse_hexstr(
                    e["right"]["value"], where)
                h = headers[0]
                return Lvalue(index, h.widths[pos], h.signed[pos])
        raise fail(where, f"cannot assign to {v!r}")

    def store_code(self, lv: Lvalue, src: str, src_width: int | None = None) -> str:
        """``F[i] = src`` wrapped to the destination's width and signedness."""
        mask = (1 << lv.width) - 1
        if lv.signed:
            half = 1 << (lv.width - 1)
            return f"F[{lv.index}] = ((({src}) + {half}) & {mask}) - {half}"
        if src_width is not None and src_width <= lv.width:
            return f"F[{lv.index}] = {src}"
        if _INT_LITERAL.match(src):  # fold a constant at load time
            return f"F[{lv.index}] = {int(src) & mask}"
        return f"F[{lv.index}] = ({src}) & {mask}"

    def assign(self, dst: Any, src: Any, where: str) -> str:
        lv = self.lvalue(dst, where)
        return self.store_code(lv, self.expr(src, where), self.width_of(src))


def _stack_index(i: int) -> int:
    """A run-time stack index: a negative one fails as one past the end does (the
    packet is dropped and counted; simple_switch aborts on either)."""
    if i < 0:
        raise IndexError(f"header stack index {i}")
    return i
