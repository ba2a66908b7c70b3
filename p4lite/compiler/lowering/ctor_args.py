"""Constructor arguments of a control or parser instance (P4_16 14.1).

``control C(inout H h)(bit<8> k)`` instantiated as ``C(5) c;`` (or as a block of
``V1Switch``) sees ``k`` as a compile-time constant, as p4c's specialisation of the
instance does: each instance is lowered with its own values bound to the parameter
names. Values of a scalar type (bits, ints, bools, enums) are taken, and extern
instances (``C(regs) c;`` with ``register<bit<8>> r``): the parameter names the
instance itself, shared with every other instance given it, as in p4c's specialised
copies.
"""

from __future__ import annotations

from p4lite.compiler.checks.bindings import Binding, ConstB, ExternB
from p4lite.compiler.checks.types import ExternT, IntT, is_scalar
from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.lowering.lower_expr import ExprCompiler


def ctor_bindings(comp: ExprCompiler, decl: ast.ParserDecl | ast.ControlDecl,
                  args: list[ast.Argument], loc) -> dict[str, Binding]:
    """The constants (and extern instances) an instance of ``decl`` made with ``args``
    binds (evaluated in ``comp``'s scope, where the instance is declared)."""
    params = decl.ctor_params
    named = {a.name: a for a in args if a.name is not None}
    if len(args) != len(params) or (named and len(named) != len(args)):
        raise CompileError(f"{decl.name} takes {len(params)} constructor argument"
                           f"{'' if len(params) == 1 else 's'}, got {len(args)}", loc)
    out: dict[str, Binding] = {}
    for index, param in enumerate(params):
        arg = named.get(param.name) if named else args[index]
        if arg is None:
            raise CompileError(f"no constructor argument for {param.name} of {decl.name}", loc)
        type_name = param.type.name if isinstance(param.type, ast.TypeName) else ""
        if type_name in comp.env.controls or type_name in comp.env.parsers:
            kind = "control" if type_name in comp.env.controls else "parser"
            raise not_supported(f"constructor parameter {param.name} of type {type_name} "
                                f"(a {kind})", param.loc)
        t = comp.env.resolve(param.type)
        if isinstance(t, ExternT):
            out[param.name] = _extern_arg(comp, decl, param, t, arg)
            continue
        if not (is_scalar(t) or isinstance(t, IntT)):
            raise not_supported(f"constructor parameter {param.name} of type {t}", param.loc)
        value = comp.const_value(arg.value, None if isinstance(t, IntT) else t)
        out[param.name] = ConstB(value, t)
    return out


def _extern_arg(comp: ExprCompiler, decl: ast.ParserDecl | ast.ControlDecl, param: ast.Param,
                t: ExternT, arg: ast.Argument) -> ExternB:
    """The extern instance an argument names, of the parameter's type."""
    binding = comp.compile(arg.value).binding
    if (not isinstance(binding, ExternB) or not isinstance(binding.type, ExternT)
            or binding.kind in ("packet_in", "packet_out")):
        raise CompileError(f"constructor argument for {param.name} of {decl.name} must be "
                           f"an instance of {_text(t)}", arg.value.loc)
    if _text(binding.type) != _text(t):
        raise CompileError(f"type mismatch: constructor parameter {param.name} of "
                           f"{decl.name} is {_text(t)}, the argument is "
                           f"{_text(binding.type)}", arg.value.loc)
    return binding


def _text(t: ExternT) -> str:
    """``register<bit<8>>``: the name with its type arguments (str gives the name)."""
    args = ", ".join(str(a) for a in t.type_args)
    return f"{t.name}<{args}>" if args else t.name


__all__ = ["ctor_bindings"]
