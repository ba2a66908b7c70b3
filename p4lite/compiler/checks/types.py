"""Semantic types of the back end (resolved, unlike the syntactic ``ast.Type``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from p4lite.compiler.frontend import ast


class P4Type:
    """Base of semantic types."""


class _KeywordT(P4Type):
    """A type without parameters, printed as its P4 keyword."""

    keyword: ClassVar[str]

    def __str__(self) -> str:
        return self.keyword


class _NamedT(P4Type):
    """A user-declared type, printed as its name."""

    name: str

    def __str__(self) -> str:
        return self.name


class _FieldsT(_NamedT):
    """A header or struct: named, with an ordered list of typed fields."""

    fields: list[tuple[str, P4Type]]

    def field_type(self, name: str) -> P4Type | None:
        for fname, ftype in self.fields:
            if fname == name:
                return ftype
        return None


@dataclass(frozen=True, slots=True)
class BitT(P4Type):
    width: int
    signed: bool = False

    def __str__(self) -> str:
        return f"{'int' if self.signed else 'bit'}<{self.width}>"


@dataclass(frozen=True, slots=True)
class VarbitT(P4Type):
    """``varbit<N>``: a header field of at most N bits whose length is set per packet by
    a two-argument extract (BMv2 ``extract_VL``)."""

    width: int

    def __str__(self) -> str:
        return f"varbit<{self.width}>"


@dataclass(frozen=True, slots=True)
class IntT(_KeywordT):
    """The infinite-precision type of untyped integer constants."""

    keyword = "int"


@dataclass(frozen=True, slots=True)
class BoolT(_KeywordT):
    keyword = "bool"


@dataclass(frozen=True, slots=True)
class ErrorT(_KeywordT):
    keyword = "error"


@dataclass(frozen=True, slots=True)
class StringT(_KeywordT):
    keyword = "string"


@dataclass(frozen=True, slots=True)
class VoidT(_KeywordT):
    keyword = "void"


@dataclass(frozen=True, slots=True)
class MatchKindT(_KeywordT):
    keyword = "match_kind"


@dataclass(eq=False, slots=True)
class EnumT(_NamedT):
    """An enum; serializable enums have ``underlying`` and explicit member values."""

    name: str
    members: list[str]
    underlying: BitT | None = None
    values: dict[str, int] = field(default_factory=dict)
    from_user_file: bool = True


@dataclass(eq=False, slots=True)
class HeaderT(_FieldsT):
    """``fields`` are the stored (wire) fields. A header with struct-typed fields keeps
    its P4 view in ``members`` (name -> type) and stores the leaves flattened, named as
    p4c's FlattenHeaders does (``storage``: dotted P4 path -> stored field name)."""

    name: str
    fields: list[tuple[str, P4Type]]
    decl: ast.HeaderDecl | None = None
    members: dict[str, P4Type] | None = None
    storage: dict[str, str] = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class StructT(_FieldsT):
    name: str
    fields: list[tuple[str, P4Type]]
    decl: ast.StructDecl | None = None


@dataclass(eq=False, slots=True)
class UnionT(_FieldsT):
    """A ``header_union``: its members are headers, at most one of them valid (P4_16 8.20)."""

    name: str
    fields: list[tuple[str, P4Type]]  # every type a HeaderT
    decl: ast.HeaderUnionDecl | None = None

    def members(self) -> list[tuple[str, HeaderT]]:
        return [(n, t) for n, t in self.fields if isinstance(t, HeaderT)]


@dataclass(eq=False, slots=True)
class StackT(P4Type):
    element: HeaderT | UnionT
    size: int

    def __str__(self) -> str:
        return f"{self.element.name}[{self.size}]"


@dataclass(eq=False, slots=True)
class TupleT(P4Type):
    elements: list[P4Type]

    def __str__(self) -> str:
        return "tuple<" + ", ".join(str(e) for e in self.elements) + ">"


@dataclass(eq=False, slots=True)
class ExternT(_NamedT):
    """An extern type (``register``, ``packet_in`` ...), possibly specialized."""

    name: str
    decl: ast.ExternDecl
    type_args: list[P4Type] = field(default_factory=list)


def is_scalar(t: P4Type) -> bool:
    """True for types stored as one BMv2 field (bit/int/bool/error/enum)."""
    return isinstance(t, BitT | BoolT | ErrorT | EnumT)


def width_of(t: P4Type) -> int:
    """The width in bits of a scalar type as stored in BMv2 (bool 1, error/enum 32)."""
    if isinstance(t, BitT | VarbitT):
        return t.width
    if isinstance(t, BoolT):
        return 1
    if isinstance(t, EnumT):
        return t.underlying.width if t.underlying else 32
    if isinstance(t, ErrorT):
        return 32
    raise TypeError(f"{t} has no bit width")


def same_type(a: P4Type, b: P4Type) -> bool:
    if isinstance(a, BitT | BoolT | ErrorT | StringT | IntT | VoidT | VarbitT):
        return a == b
    if isinstance(a, StackT) and isinstance(b, StackT):  # T[N] is built at each use
        return a.element is b.element and a.size == b.size
    return a is b
