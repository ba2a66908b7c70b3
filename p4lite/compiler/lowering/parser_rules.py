"""What p4c's BMv2 back end refuses in a parser state, in its words.

A parser state calls functions, ``verify`` and ``log_msg`` only: an action call is
p4c's type error "Action calls are not allowed within parsers", any other extern
(function or method) its ParserConverter's "not supported in parser on this target";
and since p4c inlines functions after its RemoveParserIfs, an ``if`` in the body of a
function called there is "IfStatement: not supported in parser on this target".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from p4lite.compiler.checks.bindings import Binding, DeclB
from p4lite.compiler.errors import CompileError
from p4lite.compiler.frontend import ast

if TYPE_CHECKING:
    from p4lite.compiler.lowering.context import Lowering


def check_parser_call(lw: Lowering, name: str, binding: Binding | None, call: ast.Call) -> None:
    """In a parser state, p4c calls functions and ``log_msg`` only (its wording)."""
    text = lw.source.fragment(call.loc)
    if (isinstance(binding, DeclB) and binding.kind == "action") or (
            binding is None and name not in lw.env.functions
            and name in lw.env.actions):
        raise CompileError(f"{text}: Action calls are not allowed within parsers", call.loc)
    if binding is None and name in lw.env.extern_functions and name != "log_msg":
        # p4c's BMv2 ParserConverter has no parser op for them
        raise CompileError(f"{text}: not supported in parser on this target", call.loc)


def no_if_in_parser(node: ast.Node) -> None:
    """p4c inlines a function called in a parser state after it has removed the
    parser's ``if``s, so an ``if`` in its body is refused there (p4c's wording)."""
    if isinstance(node, ast.If):
        raise CompileError("IfStatement: not supported in parser on this target", node.loc)
    if isinstance(node, ast.Block):
        for inner in node.statements:
            no_if_in_parser(inner)


__all__ = ["check_parser_call", "no_if_in_parser"]
