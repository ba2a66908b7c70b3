"""A C-style preprocessor working on P4 tokens, so every token keeps its origin.

Supported: ``#include "f"`` / ``<f>`` (the including file's directory, then -I
directories, then the bundled ``p4lite/p4include``; ``<>`` skips the first),
``#define`` (object-like and function-like, with ``#`` and ``##``), ``#undef``,
``#ifdef`` / ``#ifndef`` / ``#if`` / ``#elif`` / ``#else`` / ``#endif`` with
``defined``, integer arithmetic, ``&& || !`` and comparisons, ``#error``,
``#warning``, ``#line``, ``#pragma once`` (other pragmas are ignored like cpp
ignores unknown ones), ``__FILE__`` and ``__LINE__``.

Locations: tokens from a file keep their own ``file:line:col``; tokens produced
by a macro body take the location of the macro's use (where gcc points too),
while macro arguments keep theirs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from p4lite.compiler.errors import CompileError, SourceLoc
from p4lite.compiler.frontend.lexer import Token, parse_int, source_text, tokenize, unquote

_BUILTINS = ("__LINE__", "__FILE__")
_CONDITIONALS = frozenset(["if", "ifdef", "ifndef", "elif", "else", "endif"])
BUNDLED_INCLUDE_DIR = Path(__file__).resolve().parents[2] / "p4include"  # p4lite/p4include
_MAX_INCLUDE_DEPTH = 200


@dataclass(slots=True)
class Macro:
    """A #define: params is None for an object-like macro."""

    name: str
    body: list[Token]
    params: list[str] | None = None
    variadic: bool = False


@dataclass(slots=True)
class _Cond:
    """One level of #if nesting."""

    parent_active: bool
    active: bool
    taken: bool  # some branch of this #if chain was already taken
    loc: SourceLoc
    seen_else: bool = False


@dataclass
class PreprocessResult:
    """The tokens to parse (ending with EOF), the files read, and #warning texts."""

    tokens: list[Token]
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class Preprocessor:
    """Runs directives and expands macros over the tokens of a file and its includes."""

    def __init__(
        self, include_dirs: tuple[str, ...] | list[str] = (), defines: dict[str, str] | None = None
    ) -> None:
        self.include_dirs = [Path(d) for d in include_dirs]
        self.macros: dict[str, Macro] = {}
        self.files: list[str] = []
        self.warnings: list[str] = []
        self._once: set[Path] = set()
        self._depth = 0
        cmdline = SourceLoc("<command-line>", 1, 1)
        for name, value in (defines or {}).items():
            body = tokenize(value, "<command-line>")[:-1]
            self.macros[name] = Macro(name, [t.copy(cmdline) for t in body])

    # ------------------------------------------------------------- entry points

    def run_file(self, path: str | Path) -> PreprocessResult:
        """Preprocess a file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise CompileError(f"cannot read {path}: {exc.strerror}") from None
        return self.run_text(text, str(path))

    def run_text(self, text: str, filename: str) -> PreprocessResult:
        """Preprocess source text that came from ``filename``."""
        out: list[Token] = []
        eof = self._process(text, filename, out)
        out.append(eof)
        return PreprocessResult(out, self.files, self.warnings)

    # ---------------------------------------------------------------- one file

    def _process(self, text: str, filename: str, out: list[Token]) -> Token:
        """Append the file's expanded tokens to ``out``; returns its EOF token."""
        self.files.append(filename)
        tokens = tokenize(text.removeprefix("\ufeff"), filename)  # editors may add a BOM
        conds: list[_Cond] = []
        chunk: list[Token] = []  # active text between directives, expanded in one go
        line_map: tuple[int, int, str] | None = None  # (physical line, #line number, file)
        i = 0
        n = len(tokens) - 1  # the last token is EOF
        while i < n:
            tok = tokens[i]
            if not (tok.kind == "#" and tok.bol):
                if not conds or conds[-1].active:
                    chunk.append(tok if line_map is None else _remap(tok, line_map))
                i += 1
                continue
            j = i + 1
            while j < n and not tokens[j].bol:
                j += 1
            directive = tokens[i + 1 : j]
            if line_map is not None:  # diagnostics after #line use the mapped lines
                directive = [_remap(t, line_map) for t in directive]
            # Conditionals do not change macros, so text around them is expanded in one
            # piece: a macro call may span #if/#else/#endif lines, as gcc allows.
            if chunk and (not directive or directive[0].value not in _CONDITIONALS):
                out.extend(self._expand(chunk))
                chunk = []
            mapped = self._directive(directive, conds, out, filename)
            if mapped is not None:  # relative to physical lines: the next one gets `number`
                number, mapped_file = mapped
                line_map = (tok.loc.line + 1, number, mapped_file)
            i = j
        if chunk:
            out.extend(self._expand(chunk))
        if conds:
            raise CompileError("unterminated conditional directive", conds[-1].loc)
        return tokens[-1] if line_map is None else _remap(tokens[-1], line_map)

    def _directive(
        self,
        line: list[Token],
        conds: list[_Cond],
        out: list[Token],
        filename: str,
    ) -> tuple[int, str] | None:
        """Run one directive line; returns (line number, file) when it is a #line."""
        active = not conds or conds[-1].active
        if not line:
            return None  # the null directive
        name_tok = line[0]
        name = name_tok.value
        args = line[1:]
        if name in ("if", "ifdef", "ifndef"):
            value = active and self._condition(name, name_tok, args)
            conds.append(_Cond(active, value, value, name_tok.loc))
        elif name in ("elif", "else", "endif"):
            self._branch(name, name_tok, args, conds)
        elif not active:
            return None
        elif name == "define":
            self._define(name_tok, args)
        elif name == "undef":
            self.macros.pop(self._macro_name(name_tok, args), None)
        elif name == "include":
            self._include(name_tok, args, out, filename)
        elif name == "error":
            raise CompileError(f"#error {source_text(args)}".rstrip(), name_tok.loc)
        elif name == "warning":
            self.warnings.append(f"{name_tok.loc}: warning: #warning {source_text(args)}".rstrip())
        elif name == "pragma":
            if [t.value for t in args] == ["once"]:
                self._once.add(Path(filename).resolve())
        elif name == "line" or name_tok.kind == "INT":
            return self._line(name_tok, args if name == "line" else line)
        else:
            raise CompileError(f"invalid preprocessing directive #{name}", name_tok.loc)
        return None

    def _branch(self, name: str, tok: Token, args: list[Token], conds: list[_Cond]) -> None:
        if not conds:
            raise CompileError(f"#{name} without #if", tok.loc)
        cond = conds[-1]
        if name == "endif":
            conds.pop()
            return
        if cond.seen_else:
            raise CompileError(f"#{name} after #else", tok.loc)
        if name == "else":
            cond.seen_else = True
            cond.active = cond.parent_active and not cond.taken
        else:
            cond.active = cond.parent_active and not cond.taken and self._condition("if", tok, args)
        cond.taken = cond.taken or cond.active

    # ------------------------------------------------------------- directives

    def _macro_name(self, directive: Token, args: list[Token]) -> str:
        if not args or not args[0].value.isidentifier():
            raise CompileError(f"#{directive.value} needs a macro name", directive.loc)
        return args[0].value

    def _define(self, directive: Token, args: list[Token]) -> None:
        name = self._macro_name(directive, args)
        rest = args[1:]
        if rest and rest[0].kind == "(" and not rest[0].space:
            params, variadic, body = self._macro_params(rest)
            self.macros[name] = Macro(name, body, params, variadic)
        else:
            self.macros[name] = Macro(name, rest)

    def _macro_params(self, rest: list[Token]) -> tuple[list[str], bool, list[Token]]:
        params: list[str] = []
        variadic = False
        k = 1
        while k < len(rest) and rest[k].kind != ")":
            tok = rest[k]
            if tok.kind == ".." and k + 1 < len(rest) and rest[k + 1].kind == ".":
                variadic = True
                params.append("__VA_ARGS__")
                k += 2
            elif tok.kind == "ID" or tok.value.isidentifier():
                params.append(tok.value)
                k += 1
            elif tok.kind == "," and params:
                k += 1
            else:
                raise CompileError("malformed macro parameter list", tok.loc)
        if k >= len(rest):
            raise CompileError("missing ')' in macro parameter list", rest[0].loc)
        return params, variadic, rest[k + 1 :]

    def _include(self, directive: Token, args: list[Token], out: list[Token], current: str) -> None:
        if args and args[0].kind not in ("STRING", "<"):
            args = self._expand(args)
        if args and args[0].kind == "STRING":
            target, quoted = args[0].value[1:-1], True
        elif args and args[0].kind == "<" and args[-1].kind == ">":
            target, quoted = "".join(t.value for t in args[1:-1]), False
        else:
            raise CompileError('#include expects "FILE" or <FILE>', directive.loc)
        path = self._find_include(target, quoted, current)
        if path is None:
            raise CompileError(f"cannot find include file '{target}'", directive.loc)
        if path.resolve() in self._once:
            return
        if self._depth >= _MAX_INCLUDE_DEPTH:
            raise CompileError("#include nested too deeply", directive.loc)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise CompileError(f"cannot read {path}: {exc.strerror}", directive.loc) from None
        self._depth += 1
        try:
            self._process(text, str(path), out)
        finally:
            self._depth -= 1

    def _find_include(self, target: str, quoted: bool, current: str) -> Path | None:
        if os.path.isabs(target):
            return Path(target) if os.path.isfile(target) else None
        dirs: list[Path] = []
        if quoted:
            dirs.append(Path(current).parent)
        dirs.extend(self.include_dirs)
        dirs.append(BUNDLED_INCLUDE_DIR)
        for directory in dirs:
            candidate = directory / target
            if candidate.is_file():
                return candidate
        return None

    def _line(self, tok: Token, args: list[Token]) -> tuple[int, str]:
        if not args or args[0].kind != "INT":
            raise CompileError("#line expects a line number", tok.loc)
        number = parse_int(args[0].value, args[0].loc)[0]
        filename = tok.loc.file
        if len(args) > 1 and args[1].kind == "STRING":
            filename = unquote(args[1].value)
        return number, filename

    # ------------------------------------------------------------ conditions

    def _condition(self, kind: str, tok: Token, args: list[Token]) -> bool:
        if kind in ("ifdef", "ifndef"):
            defined = self._macro_name(tok, args) in self.macros
            return defined if kind == "ifdef" else not defined
        if not args:
            raise CompileError("#if with no expression", tok.loc)
        tokens = self._expand(self._replace_defined(args))
        return _CondEvaluator(tokens, tok.loc).evaluate() != 0

    def _replace_defined(self, args: list[Token]) -> list[Token]:
        out: list[Token] = []
        k = 0
        while k < len(args):
            tok = args[k]
            if tok.value != "defined":
                out.append(tok)
                k += 1
                continue
            if k + 1 < len(args) and args[k + 1].kind == "(":
                if k + 3 >= len(args) or args[k + 3].kind != ")":
                    raise CompileError("malformed defined(NAME)", tok.loc)
                name_tok = args[k + 2]
                k += 4
            elif k + 1 < len(args):
                name_tok = args[k + 1]
                k += 2
            else:
                raise CompileError("defined needs a macro name", tok.loc)
            value = "1" if name_tok.value in self.macros else "0"
            out.append(Token("INT", value, tok.loc))
        return out

    # ------------------------------------------------------------- expansion

    def _expand(self, tokens: list[Token]) -> list[Token]:
        """Macro-expand a token list (rescanning results, never re-expanding a macro in itself)."""
        macros = self.macros
        out: list[Token] = []
        pending = tokens[::-1]  # a stack: the next token is pending[-1]
        while pending:
            tok = pending.pop()
            name = tok.value
            macro = macros.get(name)  # keywords may be macro names too, as in cpp
            if macro is None or (tok.hide is not None and name in tok.hide):
                out.append(_builtin(tok) if name in _BUILTINS else tok)
                continue
            hide = (tok.hide or frozenset()) | {name}
            if macro.params is None:
                body = self._substitute(macro, {}, tok.loc, hide)
            elif pending and pending[-1].kind == "(":
                pending.pop()
                args = self._collect_args(macro, tok, pending)
                body = self._substitute(macro, args, tok.loc, hide)
            else:
                out.append(tok)  # a function-like macro's name without arguments
                continue
            if body:
                body[0].bol, body[0].space = tok.bol, tok.space
            pending.extend(reversed(body))
        return out

    def _collect_args(
        self, macro: Macro, use: Token, pending: list[Token]
    ) -> dict[str, list[Token]]:
        args: list[list[Token]] = [[]]
        depth = 0
        while True:
            if not pending:
                raise CompileError(f"unterminated call of macro '{macro.name}'", use.loc)
            tok = pending.pop()
            if tok.kind == "(":
                depth += 1
            elif tok.kind == ")":
                if depth == 0:
                    break
                depth -= 1
            elif (
                tok.kind == ","
                and depth == 0
                and not (macro.variadic and len(args) == len(macro.params or []))
            ):
                args.append([])
                continue
            args[-1].append(tok)
        params = macro.params or []
        if len(args) == 1 and not args[0] and not params:
            args = []
        if macro.variadic and len(args) == len(params) - 1:
            args.append([])
        if len(args) != len(params):
            raise CompileError(
                f"macro '{macro.name}' takes {len(params)} argument(s), {len(args)} given",
                use.loc,
            )
        return dict(zip(params, args, strict=True))

    def _substitute(
        self, macro: Macro, args: dict[str, list[Token]], loc: SourceLoc, hide: frozenset[str]
    ) -> list[Token]:
        body = macro.body
        result: list[Token] = []
        k = 0
        while k < len(body):
            tok = body[k]
            if tok.kind == "#" and macro.params is not None and k + 1 < len(body):
                param = body[k + 1].value
                if param in args:
                    result.append(Token("STRING", _stringify(args[param]), loc))
                    k += 2
                    continue
            pasting = (k + 1 < len(body) and body[k + 1].kind == "##") or (
                k > 0 and body[k - 1].kind == "##"
            )
            if tok.kind == "##" and result and k + 1 < len(body):
                right = body[k + 1]
                right_tokens = args.get(right.value, [right]) if right.kind == "ID" else [right]
                self._paste(result, right_tokens, loc)
                k += 2
                continue
            if tok.kind == "ID" and tok.value in args:
                arg = args[tok.value]
                result.extend(t.copy() for t in (arg if pasting else self._expand(arg)))
            else:
                result.append(tok.copy(loc))
            k += 1
        for item in result:
            item.hide = hide if item.hide is None else item.hide | hide
        return result

    def _paste(self, result: list[Token], right: list[Token], loc: SourceLoc) -> None:
        if not right:
            return
        left = result.pop()
        pasted = tokenize(left.value + right[0].value, loc.file)[:-1]
        if len(pasted) != 1:
            raise CompileError(
                f"pasting '{left.value}' and '{right[0].value}' does not give a valid token", loc
            )
        result.append(pasted[0].copy(loc))
        result.extend(right[1:])


class _CondEvaluator:
    """Evaluates a #if expression over already expanded tokens (unknown names are 0)."""

    _BINARY = {
        "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
        "<": 7, ">": 7, "<=": 7, ">=": 7, "<<": 8, ">>": 8,
        "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
    }  # fmt: skip

    def __init__(self, tokens: list[Token], loc: SourceLoc) -> None:
        self.tokens = tokens
        self.pos = 0
        self.loc = loc

    def evaluate(self) -> int:
        value = self._ternary()
        if self.pos < len(self.tokens):
            raise CompileError("junk at the end of #if expression", self.tokens[self.pos].loc)
        return value

    def _peek_op(self) -> str | None:
        if self.pos >= len(self.tokens):
            return None
        tok = self.tokens[self.pos]
        nxt = self.tokens[self.pos + 1] if self.pos + 1 < len(self.tokens) else None
        if tok.kind == ">" and nxt is not None and nxt.kind == ">" and not nxt.space:
            return ">>"
        return tok.kind

    def _ternary(self) -> int:
        cond = self._binary(1)
        if self._peek_op() == "?":
            self.pos += 1
            then = self._ternary()
            self._expect(":")
            orelse = self._ternary()
            return then if cond else orelse
        return cond

    def _binary(self, min_prec: int) -> int:
        left = self._unary()
        while True:
            op = self._peek_op()
            prec = self._BINARY.get(op or "")
            if prec is None or prec < min_prec:
                return left
            self.pos += 2 if op == ">>" else 1
            right = self._binary(prec + 1)
            left = self._apply(op or "", left, right)

    def _apply(self, op: str, a: int, b: int) -> int:
        if op in ("/", "%") and b == 0:
            raise CompileError("division by zero in #if", self.loc)
        ops = {
            "||": lambda: int(bool(a) or bool(b)), "&&": lambda: int(bool(a) and bool(b)),
            "|": lambda: a | b, "^": lambda: a ^ b, "&": lambda: a & b,
            "==": lambda: int(a == b), "!=": lambda: int(a != b), "<": lambda: int(a < b),
            ">": lambda: int(a > b), "<=": lambda: int(a <= b), ">=": lambda: int(a >= b),
            "<<": lambda: a << b, ">>": lambda: a >> b, "+": lambda: a + b, "-": lambda: a - b,
            "*": lambda: a * b, "/": lambda: int(a / b), "%": lambda: a - b * int(a / b),
        }  # fmt: skip
        return ops[op]()

    def _unary(self) -> int:
        if self.pos >= len(self.tokens):
            raise CompileError("#if expression ends too early", self.loc)
        tok = self.tokens[self.pos]
        self.pos += 1
        if tok.kind == "!":
            return int(not self._unary())
        if tok.kind == "-":
            return -self._unary()
        if tok.kind == "+":
            return self._unary()
        if tok.kind == "~":
            return ~self._unary()
        if tok.kind == "(":
            value = self._ternary()
            self._expect(")")
            return value
        if tok.kind == "INT":
            return parse_int(tok.value.rstrip("uUlL") or "0", tok.loc)[0]
        if tok.kind == "true":
            return 1
        if tok.kind in ("ID", "false") or tok.value.isidentifier():
            return 0
        raise CompileError(f"unexpected '{tok.value}' in #if expression", tok.loc)

    def _expect(self, kind: str) -> None:
        if self.pos >= len(self.tokens) or self.tokens[self.pos].kind != kind:
            raise CompileError(f"expected '{kind}' in #if expression", self.loc)
        self.pos += 1


def _remap(tok: Token, line_map: tuple[int, int, str]) -> Token:
    physical, number, filename = line_map
    return tok.copy(SourceLoc(filename, number + tok.loc.line - physical, tok.loc.col))


def _builtin(tok: Token) -> Token:
    if tok.value == "__LINE__":
        return Token("INT", str(tok.loc.line), tok.loc, tok.bol, tok.space)
    return Token(
        "STRING", '"' + tok.loc.file.replace('"', '\\"') + '"', tok.loc, tok.bol, tok.space
    )


def _stringify(tokens: list[Token]) -> str:
    text = source_text(tokens).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def render_tokens(tokens: list[Token]) -> str:
    """Preprocessed tokens as source text with gcc-style ``# LINE "FILE"`` markers,
    so that preprocessing the text again puts every token on its original line."""
    out: list[str] = []
    file, line, column = None, 0, 1
    prev: Token | None = None
    for tok in tokens:
        if tok.kind == "EOF":
            break
        loc = tok.loc
        if loc.file != file or loc.line < line or loc.line > line + 8:
            if out:
                out.append("\n")
            out.append(f'# {loc.line} "{_escape(loc.file)}"\n')
            file, line, column, prev = loc.file, loc.line, 1, None
        elif loc.line > line:
            out.append("\n" * (loc.line - line))
            line, column, prev = loc.line, 1, None
        if loc.col > column or prev is None:
            pad = max(loc.col - column, 0)  # back to the token's own column
        elif tok.space or (prev is not None and _would_merge(prev, tok)):
            pad = 1  # macro output shares one location: keep tokens apart
        else:
            pad = 0
        out.append(" " * pad + tok.value)
        column += pad + len(tok.value)
        prev = tok
    out.append("\n")
    return "".join(out)


def _would_merge(left: Token, right: Token) -> bool:
    """Would writing the two tokens without a space lex differently?"""
    return len(tokenize(left.value + right.value, "<render>")) != 3


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
