"""Constructor arguments of a control or parser instance (P4_16 14.1).

``control C(inout H h)(bit<8> k)`` instantiated as ``C(5) c;`` (or as a block of
``V1Switch``) sees ``k`` as a compile-time constant, as p4c's specialisation of the
instance does: each instance is lowered with its own values bound to the parameter
names. Only values of a scalar type (bits, ints, bools, enums) are taken.
"""

from __future__ import annotations

from p4lite.compiler.checks.bindings import ConstB
from p4lite.compiler.checks.types import IntT, is_scalar
from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.lowering.lower_expr import ExprCompiler


def ctor_bindings(comp: ExprCompiler, decl: ast.ParserDecl | ast.ControlDecl,
                  args: list[ast.Argument], loc) -> dict[str, ConstB]:
    """The constants an instance of ``decl`` made with ``args`` binds (evaluated in
    ``comp``'s scope, where the instance is declared)."""
    params = decl.ctor_params
    named = {a.name: a for a in args if a.name is not None}
    if len(args) != len(params) or (named and len(named) != len(args)):
        raise CompileError(f"{decl.name} takes {len(params)} constructor argument"
                           f"{'' if len(params) == 1 else 's'}, got {len(args)}", loc)
    out: dict[str, ConstB] = {}
    for index, param in enumerate(params):
        arg = named.get(param.name) if named else args[index]
        if arg is None:
            raise CompileError(f"no constructor argument for {param.name} of {decl.name}", loc)
        t = comp.env.resolve(param.type)
        if not (is_scalar(t) or isinstance(t, IntT)):
            raise not_supported(f"constructor parameter {param.name} of type {t}", param.loc)
        value = comp.const_value(arg.value, None if isinstance(t, IntT) else t)
        out[param.name] = ConstB(value, t)
    return out


__all__ = ["ctor_bindings"]
