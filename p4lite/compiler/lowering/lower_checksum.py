"""verify_checksum / update_checksum controls to BMv2 ``checksums`` and ``calculations``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from p4lite.compiler.checks.bindings import FieldB, Scope
from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.lowering.externs import Externs, _algo
from p4lite.compiler.lowering.lower_expr import ExprCompiler

if TYPE_CHECKING:
    from p4lite.compiler.lowering.context import Lowering

Json = dict[str, Any]
_CALLS = {
    "verify_checksum": (True, False),
    "verify_checksum_with_payload": (True, True),
    "update_checksum": (False, False),
    "update_checksum_with_payload": (False, True),
}


def lower_checksums(lw: Lowering, externs: Externs, decl: ast.ControlDecl,
                    bindings: dict[str, Any], verify_block: bool) -> None:
    scope = Scope(lw.env.global_scope)
    for param_name, binding in bindings.items():
        scope.bind(param_name, binding)
    comp = ExprCompiler(lw.env, scope)
    if decl.locals:
        raise not_supported("declarations inside a checksum control", decl.locals[0].loc)
    for stmt in _statements(decl.body.statements if decl.body else []):
        if not (isinstance(stmt, ast.CallStmt) and isinstance(stmt.call.func, ast.Name)
                and stmt.call.func.name in _CALLS):
            raise not_supported("statements other than verify_checksum/update_checksum calls in "
                                "a checksum control", stmt.loc)
        call = stmt.call
        name = stmt.call.func.name
        is_verify, with_payload = _CALLS[name]
        if is_verify != verify_block:
            where = "the verifyChecksum" if is_verify else "the computeChecksum"
            raise CompileError(f"{name} belongs in {where} control", stmt.loc)
        _one(lw, externs, comp, call, is_verify, with_payload)


def _statements(stmts: list[ast.Node]) -> list[ast.Node]:
    out: list[ast.Node] = []
    for stmt in stmts:
        out += _statements(stmt.statements) if isinstance(stmt, ast.Block) else [stmt]
    return out


def _one(lw: Lowering, externs: Externs, comp: ExprCompiler, call: ast.Call, is_verify: bool,
         with_payload: bool) -> None:
    if len(call.args) != 4:
        raise CompileError("checksum calls take 4 arguments", call.loc)
    cond_expr, data, target_expr, algo_expr = (a.value for a in call.args)
    cond = comp.condition(cond_expr)
    algo = _algo(comp, algo_expr, algo_expr.loc)
    calc = externs.calculation(algo, data, comp, call.loc)
    if with_payload:
        lw.calculations[-1]["input"].append({"type": "payload", "value": None})
    target = comp.compile(target_expr)
    if not isinstance(target.binding, FieldB):
        raise CompileError("the checksum must be a field", target_expr.loc)
    lw.checksums.append({
        "name": lw.checksum_names.fresh("cksum"), "id": len(lw.checksums),
        "source_info": lw.source_info(call.loc), "target": [target.binding.header,
                                                           target.binding.field],
        "type": "generic", "calculation": calc, "verify": is_verify, "update": not is_verify,
        "if_cond": cond,
    })
