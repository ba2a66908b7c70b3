"""The abstract syntax tree of p4lite's P4_16 subset.

Every node carries ``loc`` (its original ``file:line:col``, through #include and
macros), passed by keyword: ``Name("x", loc=loc)``. Declarations also carry
``annotations``. Nodes hold syntax only: names are not resolved, constants are
not folded and types are not checked; that is the back end's job.

Conventions:
- Widths, sizes and other compile-time numbers are kept as ``Expression``
  (usually an ``IntLiteral``) because P4 allows constant expressions there.
- ``Mask`` (``a &&& b``) and ``Range`` (``a .. b``) are ``Binary`` subclasses;
  they only appear in select cases and table entries.
- ``error.X`` is ``ErrorMember("X")``; an enum member ``E.A`` is
  ``Member(Name("E"), "A")`` (the parser does not know if a name is an enum).

``NodeVisitor`` dispatches to ``visit_<ClassName>`` like pycparser's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Any

from p4lite.compiler.errors import SourceLoc

# ---------------------------------------------------------------- base classes


@dataclass(slots=True)
class Node:
    """Base of every AST node; ``loc`` is where the node starts in the original source."""

    loc: SourceLoc = field(kw_only=True, compare=False, repr=False)

    def children(self) -> Iterator[Node]:
        """The direct child nodes, in field order (lists are flattened)."""
        for name in _child_fields(type(self)):
            value = getattr(self, name)
            if isinstance(value, Node):
                yield value
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, Node):
                        yield item


@dataclass(slots=True)
class Annotation(Node):
    """``@name`` or ``@name(args)``: args parsed as expressions when possible, raw text always."""

    name: str
    args: list[Expression] = field(default_factory=list)
    raw: str = ""


@dataclass(slots=True)
class Declaration(Node):
    """Base of declarations; every declaration carries its annotations."""

    annotations: list[Annotation] = field(default_factory=list, kw_only=True)

    def annotation(self, name: str) -> Annotation | None:
        """The first annotation called ``name``, or None."""
        for ann in self.annotations:
            if ann.name == name:
                return ann
        return None


@dataclass(slots=True)
class Type(Node):
    """Base of type expressions."""


@dataclass(slots=True)
class Expression(Node):
    """Base of expressions."""


@dataclass(slots=True)
class Statement(Node):
    """Base of statements (declarations inside blocks are Declaration nodes instead)."""


# ----------------------------------------------------------------------- types


@dataclass(slots=True)
class BitType(Type):
    """``bit<W>`` (signed=False) or ``int<W>`` (signed=True); plain ``bit`` has width 1."""

    width: Expression
    signed: bool = False


@dataclass(slots=True)
class VarbitType(Type):
    """``varbit<W>``: a variable-size bit string of at most W bits."""

    max_width: Expression


@dataclass(slots=True)
class IntType(Type):
    """``int``: the infinite-precision integer type of untyped constants."""


@dataclass(slots=True)
class BoolType(Type):
    """``bool``."""


@dataclass(slots=True)
class ErrorType(Type):
    """``error``: the type of error codes."""


@dataclass(slots=True)
class StringType(Type):
    """``string``: only for compile-time strings such as log_msg's format."""


@dataclass(slots=True)
class VoidType(Type):
    """``void``: the return type of methods and functions without a result."""


@dataclass(slots=True)
class MatchKindType(Type):
    """``match_kind``: the type of match-kind names."""


@dataclass(slots=True)
class DontCareType(Type):
    """``_`` as a type argument: let the compiler infer it."""


@dataclass(slots=True)
class TypeName(Type):
    """A named type: header, struct, typedef, enum, extern, parser/control type or type parameter."""

    name: str


@dataclass(slots=True)
class SpecializedType(Type):
    """A generic type with arguments, e.g. ``register<bit<32>>``."""

    base: TypeName
    args: list[Type]


@dataclass(slots=True)
class HeaderStackType(Type):
    """A header stack ``element[size]``, e.g. ``vlan_t[2]``."""

    element: Type
    size: Expression


@dataclass(slots=True)
class TupleType(Type):
    """``tuple<T1, T2, ...>``."""

    elements: list[Type]


# ----------------------------------------------------------------- expressions


@dataclass(slots=True)
class IntLiteral(Expression):
    """An integer literal: ``8w0x1f`` has width 8, ``4s3`` is signed, plain ints have width None."""

    value: int
    width: int | None = None
    signed: bool = False
    text: str = ""


@dataclass(slots=True)
class BoolLiteral(Expression):
    """``true`` or ``false``."""

    value: bool


@dataclass(slots=True)
class StringLiteral(Expression):
    """A string literal, with escapes resolved."""

    value: str


@dataclass(slots=True)
class Name(Expression):
    """A reference to a named thing; ``.x`` (top-level scope) sets ``top_level``."""

    name: str
    top_level: bool = False


@dataclass(slots=True)
class Member(Expression):
    """Member access ``expr.member`` (fields, methods, enum members, ``t.apply().hit``)."""

    expr: Expression
    member: str


@dataclass(slots=True)
class ErrorMember(Expression):
    """``error.X``: an error code."""

    member: str


@dataclass(slots=True)
class Index(Expression):
    """Array / header-stack index ``expr[index]``."""

    expr: Expression
    index: Expression


@dataclass(slots=True)
class Slice(Expression):
    """Bit slice ``expr[hi:lo]`` (both ends included)."""

    expr: Expression
    hi: Expression
    lo: Expression


@dataclass(slots=True)
class Unary(Expression):
    """Unary operation; op is one of ``- + ! ~``."""

    op: str
    operand: Expression


@dataclass(slots=True)
class Binary(Expression):
    """Binary operation; op is the P4 operator text (``+ |+| ++ && == << >>`` ...)."""

    op: str
    left: Expression
    right: Expression


@dataclass(slots=True)
class Mask(Binary):
    """Keyset ``value &&& mask`` (op is always ``&&&``)."""


@dataclass(slots=True)
class Range(Binary):
    """Keyset ``low .. high``, both ends included (op is always ``..``)."""


@dataclass(slots=True)
class Ternary(Expression):
    """``cond ? then : orelse``."""

    cond: Expression
    then: Expression
    orelse: Expression


@dataclass(slots=True)
class Cast(Expression):
    """``(type) expr``."""

    type: Type
    expr: Expression


@dataclass(slots=True)
class Argument(Node):
    """A call argument, positional (name None) or named ``name = value``; value may be DontCare."""

    value: Expression
    name: str | None = None


@dataclass(slots=True)
class Call(Expression):
    """Function, method, action or constructor call ``func<type_args>(args)``."""

    func: Expression
    args: list[Argument] = field(default_factory=list)
    type_args: list[Type] = field(default_factory=list)


@dataclass(slots=True)
class ListExpr(Expression):
    """``{a, b, c}``: a list / tuple expression (e.g. hash or checksum inputs)."""

    items: list[Expression]


@dataclass(slots=True)
class NamedExpr(Node):
    """``name = value`` inside a struct initializer."""

    name: str
    value: Expression


@dataclass(slots=True)
class StructExpr(Expression):
    """``{f1 = e1, f2 = e2}``: a struct-valued initializer."""

    fields: list[NamedExpr]


@dataclass(slots=True)
class DontCare(Expression):
    """``_``: wildcard in keysets, don't-care out argument."""


@dataclass(slots=True)
class Default(Expression):
    """``default``: the catch-all keyset / switch label."""


# ------------------------------------------------------------------ statements


@dataclass(slots=True)
class Block(Statement):
    """``{ statements }``; statements may include VarDecl, ConstDecl and Instantiation."""

    statements: list[Node] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list, kw_only=True)


@dataclass(slots=True)
class Assign(Statement):
    """``lhs = rhs;`` (lhs may be a Slice, Member, Index or Name).

    ``lhs op= x`` is ``Assign(lhs, Binary(op, lhs, x), compound=op)``: lowering must
    evaluate ``lhs`` once (P4_16 v1.2.4), which matters when its index calls a function.
    """

    lhs: Expression
    rhs: Expression
    compound: str = ""


@dataclass(slots=True)
class CallStmt(Statement):
    """A call used as a statement: ``t.apply();``, ``mark_to_drop(sm);``, ``a();``."""

    call: Call


@dataclass(slots=True)
class If(Statement):
    """``if (cond) then else orelse``; orelse is None without an else."""

    cond: Expression
    then: Statement
    orelse: Statement | None = None


@dataclass(slots=True)
class SwitchCase(Node):
    """One ``label: body`` of a switch; body None means fall through to the next case."""

    label: Expression
    body: Block | None = None


@dataclass(slots=True)
class Switch(Statement):
    """``switch (expr) { cases }``: on ``t.apply().action_run`` or on a value."""

    expr: Expression
    cases: list[SwitchCase]


@dataclass(slots=True)
class Exit(Statement):
    """``exit;``."""


@dataclass(slots=True)
class For(Statement):
    """``for (init; cond; update) body``: ``init`` declarations or statements,
    ``cond`` None when omitted (P4_16 v1.2.5, 12.9)."""

    init: list[Node]
    cond: Expression | None
    update: list[Statement]
    body: Statement


@dataclass(slots=True)
class Break(Statement):
    """``break;`` inside a ``for``."""


@dataclass(slots=True)
class Continue(Statement):
    """``continue;`` inside a ``for``."""


@dataclass(slots=True)
class Return(Statement):
    """``return;`` or ``return value;``."""

    value: Expression | None = None


# ---------------------------------------------------------------- declarations


@dataclass(slots=True)
class StructField(Declaration):
    """A field ``type name;`` of a header, header_union or struct."""

    name: str
    type: Type


@dataclass(slots=True)
class HeaderDecl(Declaration):
    """``header name { fields }``."""

    name: str
    fields: list[StructField]


@dataclass(slots=True)
class HeaderUnionDecl(Declaration):
    """``header_union name { fields }``."""

    name: str
    fields: list[StructField]


@dataclass(slots=True)
class StructDecl(Declaration):
    """``struct name { fields }``."""

    name: str
    fields: list[StructField]


@dataclass(slots=True)
class EnumMember(Declaration):
    """A member of an enum, error or match_kind declaration; value only in serializable enums."""

    name: str
    value: Expression | None = None


@dataclass(slots=True)
class EnumDecl(Declaration):
    """``enum [underlying] name { members }``; underlying is e.g. ``bit<8>`` for serializable enums."""

    name: str
    members: list[EnumMember]
    underlying: Type | None = None


@dataclass(slots=True)
class ErrorDecl(Declaration):
    """``error { members }``: adds error codes (declarations accumulate)."""

    members: list[EnumMember]


@dataclass(slots=True)
class MatchKindDecl(Declaration):
    """``match_kind { members }``: adds match kinds (declarations accumulate)."""

    members: list[EnumMember]


@dataclass(slots=True)
class TypedefDecl(Declaration):
    """``typedef type name;``."""

    name: str
    type: Type


@dataclass(slots=True)
class NewTypeDecl(Declaration):
    """``type type name;``: a new type distinct from its base."""

    name: str
    type: Type


@dataclass(slots=True)
class ConstDecl(Declaration):
    """``const type name = value;`` at top level, in controls, parsers or blocks."""

    name: str
    type: Type
    value: Expression


@dataclass(slots=True)
class VarDecl(Declaration):
    """``type name [= init];``: a local variable."""

    name: str
    type: Type
    init: Expression | None = None


@dataclass(slots=True)
class Instantiation(Declaration):
    """``type(args) name;``: an extern, parser, control or package instance."""

    name: str
    type: Type
    args: list[Argument] = field(default_factory=list)


@dataclass(slots=True)
class Param(Declaration):
    """A parameter ``[direction] type name [= default]``; direction is in/out/inout or "" for none."""

    name: str
    type: Type
    direction: str = ""
    default: Expression | None = None


@dataclass(slots=True)
class MethodDecl(Declaration):
    """An extern method prototype; constructors have return_type None; abstract methods set abstract."""

    name: str
    return_type: Type | None
    params: list[Param] = field(default_factory=list)
    type_params: list[str] = field(default_factory=list)
    abstract: bool = False


@dataclass(slots=True)
class ExternDecl(Declaration):
    """``extern name<type_params> { constructors and methods }``."""

    name: str
    methods: list[MethodDecl] = field(default_factory=list)
    type_params: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ExternFunctionDecl(Declaration):
    """``extern ret name<type_params>(params);``: an extern function."""

    name: str
    return_type: Type
    params: list[Param] = field(default_factory=list)
    type_params: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ParserTypeDecl(Declaration):
    """``parser name<type_params>(params);``: a parser type (used by packages)."""

    name: str
    params: list[Param] = field(default_factory=list)
    type_params: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ControlTypeDecl(Declaration):
    """``control name<type_params>(params);``: a control type (used by packages)."""

    name: str
    params: list[Param] = field(default_factory=list)
    type_params: list[str] = field(default_factory=list)


@dataclass(slots=True)
class PackageTypeDecl(Declaration):
    """``package name<type_params>(params);``: e.g. V1Switch."""

    name: str
    params: list[Param] = field(default_factory=list)
    type_params: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SelectCase(Node):
    """``keysets: next_state`` in a select; one keyset per select key, or one Default/DontCare for all."""

    keysets: list[Expression]
    next_state: str


@dataclass(slots=True)
class SelectExpr(Expression):
    """``select (keys) { cases }`` as a transition target."""

    keys: list[Expression]
    cases: list[SelectCase]


@dataclass(slots=True)
class ParserState(Declaration):
    """``state name { statements transition }``; transition is a Name, a SelectExpr or None (reject)."""

    name: str
    statements: list[Node] = field(default_factory=list)
    transition: Expression | None = None


@dataclass(slots=True)
class ParserDecl(Declaration):
    """``parser name(params)(ctor_params) { locals states }``."""

    name: str
    params: list[Param] = field(default_factory=list)
    ctor_params: list[Param] = field(default_factory=list)
    locals: list[Declaration] = field(default_factory=list)
    states: list[ParserState] = field(default_factory=list)
    type_params: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ActionDecl(Declaration):
    """``action name(params) { body }``: directional params first, then control-plane ones."""

    name: str
    params: list[Param]
    body: Block


@dataclass(slots=True)
class FunctionDecl(Declaration):
    """``T name(params) { body }`` at top level; p4c inlines every call."""

    name: str
    return_type: Type
    params: list[Param]
    body: Block


@dataclass(slots=True)
class KeyElement(Declaration):
    """``expr : match_kind;`` in a table key; the key's name is ``@name`` or the expression text."""

    expr: Expression
    match_kind: str
    text: str = ""


@dataclass(slots=True)
class ActionRef(Declaration):
    """An action in ``actions``/``default_action``/an entry: ``name`` or ``name(args)`` (no ``.``)."""

    name: str
    args: list[Argument] = field(default_factory=list)
    has_parens: bool = False


@dataclass(slots=True)
class Entry(Declaration):
    """A table entry ``[priority = N:] keysets : action;``; ``@priority(N)`` stays an annotation."""

    keysets: list[Expression]
    action: ActionRef
    priority: Expression | None = None


@dataclass(slots=True)
class TableProperty(Declaration):
    """A table property other than key/actions/default_action/size/entries, kept generically."""

    name: str
    value: Expression
    is_const: bool = False


@dataclass(slots=True)
class TableDecl(Declaration):
    """``table name { ... }``: the standard properties as fields, the rest in ``properties``."""

    name: str
    keys: list[KeyElement] | None = None
    actions: list[ActionRef] | None = None
    default_action: ActionRef | None = None
    default_action_const: bool = False
    size: Expression | None = None
    entries: list[Entry] | None = None
    entries_const: bool = False
    properties: list[TableProperty] = field(default_factory=list)


@dataclass(slots=True)
class ControlDecl(Declaration):
    """``control name(params)(ctor_params) { locals apply body }``."""

    name: str
    params: list[Param] = field(default_factory=list)
    ctor_params: list[Param] = field(default_factory=list)
    locals: list[Declaration] = field(default_factory=list)
    body: Block | None = None
    type_params: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Program(Node):
    """The root: every top-level declaration, those of included files first, in source order."""

    declarations: list[Declaration] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


# --------------------------------------------------------------------- visitor


class NodeVisitor:
    """Walks an AST: ``visit`` calls ``visit_<ClassName>`` or ``generic_visit``."""

    def visit(self, node: Node) -> object:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            self.generic_visit(node)
            return None
        return method(node)

    def generic_visit(self, node: Node) -> None:
        for child in node.children():
            self.visit(child)


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(cls: type) -> tuple[str, ...]:
    """Names of the fields of ``cls`` that may hold nodes (everything except loc)."""
    names = _CHILD_FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in fields(cls) if f.name != "loc")
        _CHILD_FIELDS[cls] = names
    return names


def walk(node: Node) -> Iterator[Node]:
    """Every node of the tree under ``node`` (included), depth first, in field order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(current.children())))


_NOT_REWRITTEN = ("loc", "annotations", "type", "type_args")


def rebuilt(node: Node, fn: Callable[[Any], Any]) -> Node:
    """``node`` with ``fn`` applied to each child (a node field, or each item of a list
    field), leaving its location, annotations and types alone; ``node`` itself when
    ``fn`` returned every child unchanged."""
    changes: dict[str, Any] = {}
    for f in fields(node):
        if f.name in _NOT_REWRITTEN:
            continue
        value = getattr(node, f.name)
        if isinstance(value, Node):
            new = fn(value)
            if new is not value:
                changes[f.name] = new
        elif isinstance(value, list):
            items = [fn(v) for v in value]
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[f.name] = items
    return replace(node, **changes) if changes else node
