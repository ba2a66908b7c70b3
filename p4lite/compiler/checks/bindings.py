"""What a name means during lowering: a constant, a field, a header, a struct ...

Scopes map P4 names to bindings. Storage bindings carry their BMv2 names, so
the expression compiler turns ``hdr.ipv4.ttl`` straight into
``{"type": "field", "value": ["ipv4", "ttl"]}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from p4lite.compiler.checks.types import HeaderT, P4Type, StackT, StructT, UnionT
from p4lite.compiler.frontend import ast


class Binding:
    """Base of bindings."""


@dataclass(slots=True)
class ConstB(Binding):
    value: int | bool
    type: P4Type


@dataclass(slots=True)
class FieldB(Binding):
    """A scalar stored in a BMv2 field: ``[header, field]``."""

    header: str
    field: str
    type: P4Type


@dataclass(slots=True)
class HeaderB(Binding):
    instance: str
    type: HeaderT
    metadata: bool = False


@dataclass(slots=True)
class UnionB(Binding):
    """A header union instance: BMv2's ``header_unions`` entry, its members header
    instances named ``<union>.<member>`` (as p4c names them)."""

    instance: str
    type: UnionT
    members: dict[str, HeaderB]


@dataclass(slots=True)
class StackB(Binding):
    name: str
    type: StackT


@dataclass(slots=True)
class StructB(Binding):
    type: StructT
    members: dict[str, Binding]


@dataclass(slots=True)
class ParamB(Binding):
    """A control-plane (directionless) action parameter: runtime_data index."""

    index: int
    type: P4Type


@dataclass(slots=True)
class ExternB(Binding):
    """An extern instance (register, counter ...) or packet_in/packet_out."""

    kind: str
    name: str
    type: P4Type
    decl: ast.Node | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class TypeB(Binding):
    """A type name used in an expression (``HashAlgorithm.crc16``, ``E.A``)."""

    type: P4Type


@dataclass(slots=True)
class DeclB(Binding):
    """A declaration resolved later by the caller (action, table, sub-control instance)."""

    kind: str  # "action" | "table" | "control_instance"
    decl: ast.Node
    owner: Any = None

    # The kind fixes the declaration's class; these check that invariant for the type checker.
    def action(self) -> ast.ActionDecl:
        assert isinstance(self.decl, ast.ActionDecl), self.kind
        return self.decl

    def table(self) -> ast.TableDecl:
        assert isinstance(self.decl, ast.TableDecl), self.kind
        return self.decl

    def control(self) -> ast.ControlDecl:
        assert isinstance(self.decl, ast.ControlDecl), self.kind
        return self.decl


class Scope:
    """Nested name scopes."""

    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.names: dict[str, Binding] = {}
        self.readonly: set[str] = set()  # `in` parameters bound to the caller's storage

    def is_readonly(self, name: str) -> bool:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                return name in scope.readonly
            scope = scope.parent
        return False

    def lookup(self, name: str) -> Binding | None:
        scope: Scope | None = self
        while scope is not None:
            found = scope.names.get(name)
            if found is not None:
                return found
            scope = scope.parent
        return None

    def bind(self, name: str, binding: Binding) -> None:
        self.names[name] = binding

    def child(self) -> Scope:
        return Scope(self)
