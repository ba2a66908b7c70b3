"""Declarations p4c's front end refuses by name: duplicates in one scope, and locals
that shadow a parameter.

What p4c 34b86e9 reports (each probed with p4c-bm2-ss), in its words:
* two declarations of one name in one block (an apply block, an action or function
  body, a parser state, a nested block, a ``switch`` case; a ``for`` loop's variable
  counts in the block around the loop): "Duplicate declaration of x";
* two of a control's or parser's own declarations (locals, actions, tables,
  instances) with one name: "x: Duplicates declaration x" (actions cannot be
  overloaded);
* a declaration in any block of an action, function, apply block or parser state that
  names a parameter of the action or function, or of the control or parser around it:
  "declaration of 'x' shadows a parameter 'x'".

Without these, p4lite would take the later declaration (or the local) and compile a
program p4c refuses. A local that shadows another local, or a control's local that
shadows the control's parameter, is only a warning in p4c, and accepted here.
"""

from __future__ import annotations

from p4lite.compiler.errors import CompileError
from p4lite.compiler.frontend import ast


def check_declarations(program: ast.Program) -> None:
    for decl in program.declarations:
        if isinstance(decl, ast.ControlDecl):
            params = _names(decl.params)
            _unique_members(decl.locals)
            for local in decl.locals:
                _declaration(local, params)
            if decl.body is not None:
                _block(decl.body.statements, params)
        elif isinstance(decl, ast.ParserDecl):
            params = _names(decl.params)
            _unique_members(decl.locals)
            for local in decl.locals:
                _declaration(local, params)
            for state in decl.states:
                _block(state.statements, params)
        else:
            _declaration(decl, set())


def _names(params: list[ast.Param]) -> set[str]:
    return {p.name for p in params}


def _declaration(decl: ast.Node, outer_params: set[str]) -> None:
    """An action or function (top level or a control's): its body's blocks."""
    if isinstance(decl, ast.ActionDecl | ast.FunctionDecl):
        _block(decl.body.statements, outer_params | _names(decl.params))


def _unique_members(decls: list[ast.Declaration]) -> None:
    seen: set[str] = set()
    for decl in decls:
        name = getattr(decl, "name", None)
        if not isinstance(name, str):
            continue
        if name in seen:
            raise CompileError(f"{name}: Duplicates declaration {name}", decl.loc)
        seen.add(name)


def _block(stmts: list[ast.Node], params: set[str]) -> None:
    """One scope: its declarations unique and none named as a parameter."""
    seen: set[str] = set()

    def declare(decl: ast.VarDecl | ast.ConstDecl | ast.Instantiation) -> None:
        if decl.name in params:
            raise CompileError(f"declaration of '{decl.name}' shadows a parameter "
                               f"'{decl.name}'", decl.loc)
        if decl.name in seen:
            raise CompileError(f"Duplicate declaration of {decl.name}", decl.loc)
        seen.add(decl.name)

    for stmt in stmts:
        if isinstance(stmt, ast.VarDecl | ast.ConstDecl | ast.Instantiation):
            declare(stmt)
        elif isinstance(stmt, ast.For):
            for init in stmt.init:
                if isinstance(init, ast.VarDecl | ast.ConstDecl):
                    declare(init)
            _nested(stmt.body, params)
        else:
            _nested(stmt, params)


def _nested(stmt: ast.Node | None, params: set[str]) -> None:
    """The scopes a statement opens."""
    if isinstance(stmt, ast.Block):
        _block(stmt.statements, params)
    elif isinstance(stmt, ast.If):
        _nested(stmt.then, params)
        _nested(stmt.orelse, params)
    elif isinstance(stmt, ast.Switch):
        for case in stmt.cases:
            _nested(case.body, params)
    elif isinstance(stmt, ast.For):
        _block([stmt], params)


__all__ = ["check_declarations"]
