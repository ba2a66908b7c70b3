"""Target limits of p4c's BMv2 back end, and p4c's unused-declaration warnings.

p4lite-c stands in for ``p4c-bm2-ss``, so it rejects what that compiler rejects,
with its wording (p4c prints ``file(line): [--Werror=overlimit] error: ...``;
p4lite prints the same message as ``file:line:col: error: ...``):

* shift amounts (backends/bmv2/common/lower.cpp, ``LowerExpressions::shift``):
  the right operand of ``<<``/``>>`` may be at most 8 bits wide when it is not
  a constant (``E: shift amount limited to 8 bits on this target``), and an
  untyped constant amount at most 256 (``E: shift amount limited to 256 on this
  target``). Both are errors (``ERR_OVERLIMIT``). A constant amount at least as
  large as the left operand's width also gets the front end's warning
  ``E: shifting value with W bits by N``.
* one LPM key per table (backends/bmv2/common/control.cpp):
  ``multiple LPM keys in table C.t not supported`` (``ERR_UNSUPPORTED``), raised
  by lower_table.
* unused declarations (p4c's front end, ``--Wwarn=unused``): a warning
  ``'x' is unused`` (``table 't' is unused`` for tables) for a user-file
  constant, variable, instance, action, table or action parameter that nothing
  refers to; the back end adds ``Unused action parameter x`` for an unused
  parameter of an action that is itself used.

``E`` is the expression as p4c prints it after its front end: constant
sub-expressions folded to their decimal value, no parentheses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from p4lite.compiler.errors import CompileError, SourceLoc
from p4lite.compiler.frontend import ast
from p4lite.compiler.frontend.source_text import SourceText

MAX_SHIFT_WIDTH = 8  # LowerExpressions::maxShiftWidth
MAX_CONST_SHIFT = 1 << MAX_SHIFT_WIDTH


def warning(loc: SourceLoc | None, message: str) -> str:
    """A warning line in p4lite-c's format: ``file:line:col: warning: message``."""
    return f"{loc}: warning: {message}" if loc is not None else f"warning: {message}"


# ----------------------------------------------------------------- shifts


def shift_diagnostics(e: ast.Binary, left_width: int | None, right_width: int | None,
                      right_const: int | None, folded: Callable[[ast.Expression], int | None]
                      ) -> tuple[CompileError | None, str | None]:
    """The error (or None) and the warning (or None) p4c gives for the shift ``e``.

    ``left_width``: the left operand's width (None for an untyped integer);
    ``right_width``: the right operand's width (None for an untyped constant);
    ``right_const``: the amount when it is a compile-time constant;
    ``folded``: the constant value of a sub-expression, or None.
    """
    def text() -> str:
        return expr_text(e, folded)

    warn = None
    if right_const is not None and left_width is not None and right_const >= left_width:
        warn = warning(e.loc, f"{text()}: shifting value with {left_width} bits by {right_const}")
    if right_width is None:
        if right_const is not None and right_const > MAX_CONST_SHIFT:
            return CompileError(
                f"{text()}: shift amount limited to {MAX_CONST_SHIFT} on this target", e.loc), warn
    elif right_width > MAX_SHIFT_WIDTH:
        return CompileError(
            f"{text()}: shift amount limited to {MAX_SHIFT_WIDTH} bits on this target", e.loc), warn
    return None, warn


def expr_text(e: ast.Expression, folded: Callable[[ast.Expression], int | None],
              root: bool = True) -> str:
    """``e`` as p4c prints an expression: constant operands folded, no parentheses."""
    value = None if root else _safe_fold(folded, e)
    if value is not None:
        return str(value)
    if isinstance(e, ast.Name):
        return ("." if e.top_level else "") + e.name
    if isinstance(e, ast.Member):
        return f"{expr_text(e.expr, folded, False)}.{e.member}"
    if isinstance(e, ast.Binary):
        return f"{expr_text(e.left, folded, False)} {e.op} {expr_text(e.right, folded, False)}"
    if isinstance(e, ast.Unary):
        return f"{e.op}{expr_text(e.operand, folded, False)}"
    if isinstance(e, ast.Cast):
        return f"({type_text(e.type, folded)}){expr_text(e.expr, folded, False)}"
    if isinstance(e, ast.Index):
        return f"{expr_text(e.expr, folded, False)}[{expr_text(e.index, folded, False)}]"
    if isinstance(e, ast.Slice):
        return (f"{expr_text(e.expr, folded, False)}[{expr_text(e.hi, folded, False)}:"
                f"{expr_text(e.lo, folded, False)}]")
    if isinstance(e, ast.IntLiteral):
        return str(e.value)
    return type(e).__name__


def type_text(t: ast.Type, folded: Callable[[ast.Expression], int | None]) -> str:
    if isinstance(t, ast.BitType):
        return f"{'int' if t.signed else 'bit'}<{expr_text(t.width, folded, False)}>"
    if isinstance(t, ast.TypeName):
        return t.name
    return type(t).__name__


def _safe_fold(folded: Callable[[ast.Expression], int | None], e: ast.Expression) -> int | None:
    if any(isinstance(node, ast.Call) for node in ast.walk(e)):
        return None  # compiling a call again could have effects (a table applied twice)
    try:
        return folded(e)
    except CompileError:
        return None


# ------------------------------------------------------- unused declarations


_WARNED = (ast.ConstDecl, ast.VarDecl, ast.Instantiation, ast.ActionDecl, ast.TableDecl)


def unused_warnings(program: ast.Program, main_file: str, source: SourceText
                    ) -> tuple[list[str], list[str]]:
    """p4c's front-end ``'x' is unused`` warnings for the declarations of ``main_file``,
    and its back end's ``Unused action parameter x`` (printed only when the program
    compiles), each in source order."""
    frontend: list[tuple[SourceLoc, str]] = []
    backend: list[tuple[SourceLoc, str]] = []
    user = [d for d in program.declarations if d.loc is not None and d.loc.file == main_file]
    everything = _references(program.declarations)
    for decl in user:
        if isinstance(decl, _WARNED) and not (
                isinstance(decl, ast.Instantiation) and decl.name == "main"):
            _check(decl, everything, frontend, backend, source)
        if isinstance(decl, ast.ActionDecl):
            _block_locals(decl.body, frontend, backend, source)
        if isinstance(decl, ast.ControlDecl | ast.ParserDecl):
            inner = [*decl.locals, *(decl.states if isinstance(decl, ast.ParserDecl) else []),
                     *([decl.body] if isinstance(decl, ast.ControlDecl) and decl.body else [])]
            refs = _references(inner)
            for local in decl.locals:
                if isinstance(local, _WARNED):
                    _check(local, refs, frontend, backend, source)
            for node in inner:
                _block_locals(node, frontend, backend, source)
    frontend.sort(key=lambda item: (item[0].line, item[0].col))
    backend.sort(key=lambda item: (item[0].line, item[0].col))
    return ([warning(loc, msg) for loc, msg in frontend],
            [warning(loc, msg) for loc, msg in backend])


def _check(decl: ast.Declaration, refs: dict[str, int], frontend: list, backend: list,
           source: SourceText) -> None:
    name = getattr(decl, "name", "")
    used = refs.get(name, 0) > 0
    if not used:
        what = f"table '{name}'" if isinstance(decl, ast.TableDecl) else f"'{name}'"
        frontend.append((name_loc(decl, name, source), f"{what} is unused"))
    if isinstance(decl, ast.ActionDecl):
        body_refs = _references([decl.body])
        for param in decl.params:
            if body_refs.get(param.name, 0) == 0:
                loc = name_loc(param, param.name, source)
                frontend.append((loc, f"'{param.name}' is unused"))
                if used:
                    backend.append((loc, f"Unused action parameter {param.name}"))


def _block_locals(node: ast.Node, frontend: list, backend: list, source: SourceText) -> None:
    """Variables and constants declared in the blocks under ``node`` (apply, actions)."""
    for block in ast.walk(node):
        if not isinstance(block, ast.Block):
            continue
        refs = _references(block.statements)
        for stmt in block.statements:
            if isinstance(stmt, ast.VarDecl | ast.ConstDecl | ast.Instantiation):
                _check(stmt, refs, frontend, backend, source)


def _references(nodes: Iterable[ast.Node]) -> dict[str, int]:
    """How often each name is referred to under ``nodes``."""
    counts: dict[str, int] = {}
    for root in nodes:
        for node in ast.walk(root):
            for name in _names_in(node):
                counts[name] = counts.get(name, 0) + 1
    return counts


def _names_in(node: ast.Node) -> Iterator[str]:
    if isinstance(node, ast.Name):
        yield node.name
    elif isinstance(node, ast.ActionRef):
        yield node.name
    elif isinstance(node, ast.TypeName):
        yield node.name


def name_loc(decl: ast.Node, name: str, source: SourceText) -> SourceLoc:
    """Where ``name`` is written in ``decl`` (p4c points its warnings there), else decl.loc."""
    loc = decl.loc
    lines = source.lines(loc.file)
    pattern = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])")
    for offset in range(4):
        index = loc.line - 1 + offset
        if not 0 <= index < len(lines):
            break
        start = loc.col - 1 if offset == 0 else 0
        match = pattern.search(lines[index], start)
        if match:
            return SourceLoc(loc.file, index + 1, match.start() + 1)
    return loc
