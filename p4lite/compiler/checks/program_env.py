"""Top-level declarations of a program: types, constants, errors, externs, blocks.

``ProgramEnv`` indexes the top level once and resolves syntactic types to
semantic ones (types.py); constants are folded through the expression compiler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from p4lite.compiler.checks.bindings import ConstB, Scope, TypeB
from p4lite.compiler.checks.types import (
    BitT,
    BoolT,
    EnumT,
    ErrorT,
    ExternT,
    HeaderT,
    IntT,
    MatchKindT,
    P4Type,
    StackT,
    StringT,
    StructT,
    TupleT,
    UnionT,
    VarbitT,
    VoidT,
)
from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast

# Declarations that name a type (the values of ``ProgramEnv.type_decls``).
TypeDecl: TypeAlias = (
    ast.HeaderDecl
    | ast.StructDecl
    | ast.TypedefDecl
    | ast.NewTypeDecl
    | ast.EnumDecl
    | ast.ExternDecl
    | ast.HeaderUnionDecl
    | ast.ParserTypeDecl
    | ast.ControlTypeDecl
    | ast.PackageTypeDecl
)


def _flat_bits(t: StructT) -> bool:
    """A struct that may sit in a header: bit<N>, int<N>, bool and such structs."""
    return all(isinstance(ft, BitT | BoolT) or (isinstance(ft, StructT) and _flat_bits(ft))
               for _, ft in t.fields)


class ProgramEnv:
    """Index of a program's top level, with type resolution."""

    def __init__(self, program: ast.Program, main_file: str) -> None:
        self.program = program
        self.main_file = main_file
        self.type_decls: dict[str, TypeDecl] = {}
        self.errors: list[str] = []
        self.match_kinds: list[str] = []
        self.actions: dict[str, ast.ActionDecl] = {}
        self.parsers: dict[str, ast.ParserDecl] = {}
        self.controls: dict[str, ast.ControlDecl] = {}
        self.extern_functions: dict[str, ast.ExternFunctionDecl] = {}
        self.functions: dict[str, ast.FunctionDecl] = {}
        self.instantiations: list[ast.Instantiation] = []
        self.diagnostics: list[str] = []  # warnings found while lowering (target_checks)
        self.global_scope = Scope()
        self._resolved: dict[str, P4Type] = {}
        self._resolving: set[str] = set()
        self._index(program)

    # ------------------------------------------------------------ indexing
    def _index(self, program: ast.Program) -> None:
        for decl in program.declarations:
            if isinstance(decl, TypeDecl):
                self.type_decls[decl.name] = decl
            elif isinstance(decl, ast.ErrorDecl):
                self.errors.extend(m.name for m in decl.members if m.name not in self.errors)
            elif isinstance(decl, ast.MatchKindDecl):
                self.match_kinds.extend(m.name for m in decl.members)
            elif isinstance(decl, ast.ActionDecl):
                self.actions[decl.name] = decl
            elif isinstance(decl, ast.ParserDecl):
                self.parsers[decl.name] = decl
            elif isinstance(decl, ast.ControlDecl):
                self.controls[decl.name] = decl
            elif isinstance(decl, ast.ExternFunctionDecl):
                self.extern_functions[decl.name] = decl
            elif isinstance(decl, ast.FunctionDecl):
                self.functions[decl.name] = decl
            elif isinstance(decl, ast.Instantiation):
                self.instantiations.append(decl)
            elif isinstance(decl, ast.ConstDecl):
                pass  # evaluated in order by bind_constants()
            else:
                raise not_supported(f"top-level {type(decl).__name__}", decl.loc)

    def bind_constants(self, fold: Callable[[ast.Expression, P4Type], ConstB]) -> None:
        """Evaluate top-level constants in order; ``fold(expr, type) -> ConstB``."""
        for name, type_decl in self.type_decls.items():
            if isinstance(type_decl, ast.EnumDecl):
                self.global_scope.bind(name, TypeB(self._resolve_named(
                    ast.TypeName(name, loc=type_decl.loc))))
        for decl in self.program.declarations:
            if isinstance(decl, ast.ConstDecl):
                self.global_scope.bind(decl.name, fold(decl.value, self.resolve(decl.type)))

    def error_value(self, name: str, loc) -> int:
        """The numeric code p4c gives error ``name`` (declaration order, from 1)."""
        if name not in self.errors:
            raise CompileError(f"unknown error code error.{name}", loc)
        return self.errors.index(name) + 1

    def is_user_decl(self, decl: ast.Node) -> bool:
        return decl.loc.file == self.main_file if decl.loc else False

    # ------------------------------------------------------- type resolution
    def resolve(self, t: ast.Type, type_params: dict[str, P4Type] | None = None) -> P4Type:
        """Resolve a syntactic type to a semantic type."""
        if isinstance(t, ast.BitType):
            width = self.const_int(t.width)
            if width <= 0:
                raise CompileError(f"bit width must be positive, got {width}", t.loc)
            return BitT(width, t.signed)
        simple = _SIMPLE_TYPES.get(type(t))
        if simple is not None:
            return simple
        if isinstance(t, ast.TypeName):
            if type_params and t.name in type_params:
                return type_params[t.name]
            named = self._resolve_named(t)
            # Serializable enum values are their underlying bits (as in BMv2).
            if isinstance(named, EnumT) and named.underlying is not None:
                return named.underlying
            return named
        if isinstance(t, ast.SpecializedType):
            base = self._resolve_named(t.base)
            if not isinstance(base, ExternT):
                raise not_supported(f"generic type {t.base.name}", t.loc)
            args = [self.resolve(a, type_params) for a in t.args]
            return ExternT(base.name, base.decl, args)
        if isinstance(t, ast.HeaderStackType):
            element = self.resolve(t.element, type_params)
            if not isinstance(element, HeaderT | UnionT):
                raise not_supported("a stack of non-header elements", t.loc)
            return StackT(element, self.const_int(t.size))
        if isinstance(t, ast.TupleType):
            return TupleT([self.resolve(e, type_params) for e in t.elements])
        if isinstance(t, ast.VarbitType):
            return VarbitT(self.const_int(t.max_width))
        raise not_supported(f"type {type(t).__name__}", t.loc)

    def resolve_named(self, t: ast.TypeName) -> P4Type:
        """A named type as declared (serializable enums stay enums)."""
        return self._resolve_named(t)

    def _resolve_named(self, t: ast.TypeName) -> P4Type:
        cached = self._resolved.get(t.name)
        if cached is not None:
            return cached
        decl = self.type_decls.get(t.name)
        if decl is None:
            raise CompileError(f"unknown type {t.name}", t.loc)
        if t.name in self._resolving:
            raise CompileError(f"type {t.name} refers to itself", t.loc)
        self._resolving.add(t.name)
        try:
            result = self._build_named(decl)
        finally:
            self._resolving.discard(t.name)
        self._resolved[t.name] = result
        return result

    def _build_named(self, decl: TypeDecl) -> P4Type:
        if isinstance(decl, ast.HeaderDecl):
            fields = [(f.name, self.resolve(f.type)) for f in decl.fields]
            varbits = [f for (_, ftype), f in zip(fields, decl.fields, strict=True)
                       if isinstance(ftype, VarbitT)]
            if len(varbits) > 1:  # BMv2 headers have at most one variable-length field
                raise not_supported("a header with more than one varbit field", varbits[1].loc)
            for (fname, ftype), f in zip(fields, decl.fields, strict=True):
                if isinstance(ftype, VarbitT):
                    if ftype.width <= 0:
                        raise CompileError(f"varbit field {fname} needs a width above 0", f.loc)
                    continue
                if not isinstance(ftype, BitT | BoolT | StructT) or (
                        isinstance(ftype, StructT) and not _flat_bits(ftype)):
                    raise not_supported(f"header field {fname} of type {ftype}", f.loc)
            if not any(isinstance(ft, StructT) for _, ft in fields):
                return HeaderT(decl.name, fields, decl)
            # as p4c's FlattenHeaders: every leaf becomes _<path><n>
            flat: list[tuple[str, P4Type]] = []
            storage: dict[str, str] = {}

            def flatten(path: list[str], t: P4Type) -> None:
                if isinstance(t, StructT):
                    for sub_name, sub_t in t.fields:
                        flatten(path + [sub_name], sub_t)
                    return
                name = f"_{'_'.join(path)}{len(flat)}"
                flat.append((name, t))
                storage[".".join(path)] = name

            for fname, ftype in fields:
                flatten([fname], ftype)
            return HeaderT(decl.name, flat, decl, dict(fields), storage)
        if isinstance(decl, ast.StructDecl):
            return StructT(decl.name, [(f.name, self.resolve(f.type)) for f in decl.fields], decl)
        if isinstance(decl, ast.TypedefDecl | ast.NewTypeDecl):
            return self.resolve(decl.type)
        if isinstance(decl, ast.EnumDecl):
            return self._build_enum(decl)
        if isinstance(decl, ast.ExternDecl):
            return ExternT(decl.name, decl)
        if isinstance(decl, ast.HeaderUnionDecl):
            members: list[tuple[str, P4Type]] = []
            for f in decl.fields:
                ftype = self.resolve(f.type)
                if not isinstance(ftype, HeaderT):
                    raise CompileError(f"header_union {decl.name}: member {f.name} must be a "
                                       f"header, not {ftype}", f.loc)
                if ftype.members is not None:
                    raise not_supported(f"a header with struct fields in header_union "
                                        f"{decl.name}", f.loc)
                members.append((f.name, ftype))
            if not members:
                raise not_supported(f"an empty header_union {decl.name}", decl.loc)
            return UnionT(decl.name, members, decl)
        raise not_supported(f"{decl.name} used as a type", decl.loc)

    def _build_enum(self, decl: ast.EnumDecl) -> EnumT:
        members = [m.name for m in decl.members]
        if decl.underlying is None:
            return EnumT(decl.name, members, None, {}, self.is_user_decl(decl))
        underlying = self.resolve(decl.underlying)
        if not isinstance(underlying, BitT):
            raise CompileError("an enum's underlying type must be bit<N> or int<N>", decl.loc)
        values = {}
        for m in decl.members:
            if m.value is None:
                raise CompileError(f"serializable enum member {m.name} needs a value", m.loc)
            values[m.name] = self.const_int(m.value)
        return EnumT(decl.name, members, underlying, values, self.is_user_decl(decl))

    # --------------------------------------------------------- constants
    # Set by the driver: folds (expr, scope) to a constant (int | bool in practice).
    const_folder: Callable[[ast.Expression, Scope], object] | None = None

    def const_int(self, expr: ast.Expression) -> int:
        if isinstance(expr, ast.IntLiteral):
            return expr.value
        if self.const_folder is None:
            raise CompileError("expected an integer constant", expr.loc)
        value = self.const_folder(expr, self.global_scope)
        if isinstance(value, bool) or not isinstance(value, int):
            raise CompileError("expected an integer constant", expr.loc)
        return value

    def const_binding(self, name: str) -> ConstB | None:
        found = self.global_scope.lookup(name)
        return found if isinstance(found, ConstB) else None


_SIMPLE_TYPES: dict[type, P4Type] = {
    ast.BoolType: BoolT(),
    ast.ErrorType: ErrorT(),
    ast.StringType: StringT(),
    ast.VoidType: VoidT(),
    ast.IntType: IntT(),
    ast.MatchKindType: MatchKindT(),
}
