"""P4_16 types and expressions: the token stream the whole parser shares, plus
the type and expression rules.

``ExpressionParser`` owns the token list, the cursor and the set of known type
names; ``parser.P4Parser`` subclasses it with the declaration, parser, control,
table and statement rules. Binary operators are parsed by precedence climbing
over ``_BINARY_PRECEDENCE`` (P4's table, where ``& ^ |`` bind tighter than
comparisons, unlike C).

Which names are types decides ``(T) e`` versus ``(e)``, so casts consult the
recorded type names. ``<`` after a name starts type arguments only when a type
follows and the list is closed by ``>`` then ``(``; otherwise it is less-than.
Two adjacent ``>`` tokens are a right shift.
"""

from __future__ import annotations

from typing import NoReturn

from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.frontend.lexer import SOFT_KEYWORDS, Token, parse_int, unquote


class ExpressionParser:
    """Token-stream access, type names in scope, and the type and expression rules."""

    def __init__(self, tokens: list[Token], type_names: set[str] | None = None) -> None:
        self._toks = tokens
        self._pos = 0
        self._last = len(tokens) - 1
        self._types: set[str] = type_names if type_names is not None else set()
        self._type_params: list[str] = []  # type variables in scope, innermost last

    # ------------------------------------------------------------ token access

    def _peek(self, k: int = 0) -> Token:
        return self._toks[min(self._pos + k, self._last)]

    def _kind(self, k: int = 0) -> str:
        return self._toks[min(self._pos + k, self._last)].kind

    def _advance(self) -> Token:
        tok = self._toks[self._pos]
        if self._pos < self._last:
            self._pos += 1
        return tok

    def _accept(self, kind: str) -> Token | None:
        if self._toks[self._pos].kind == kind:
            return self._advance()
        return None

    def _expect(self, kind: str, what: str | None = None) -> Token:
        if self._toks[self._pos].kind == kind:
            return self._advance()
        self._unexpected(what or f"'{kind}'")

    def _unexpected(self, expected: str) -> NoReturn:
        tok = self._peek()
        if tok.kind == "UNKNOWN":
            raise CompileError(f"unexpected character '{tok.value}'", tok.loc)
        found = "end of input" if tok.kind == "EOF" else f"'{tok.value}'"
        raise CompileError(f"expected {expected}, found {found}", tok.loc)

    def _is_name(self, k: int = 0) -> bool:
        kind = self._kind(k)
        return kind == "ID" or kind in SOFT_KEYWORDS

    # BNF: name : ID | 'apply' | 'key' | 'actions' | 'state' | 'entries' | 'type' | 'priority'
    def _parse_name(self, what: str = "a name") -> Token:
        if self._is_name():
            return self._advance()
        self._unexpected(what)

    def _is_type_name(self, name: str) -> bool:
        return name in self._types or name in self._type_params

    def _starts_type(self, k: int = 0) -> bool:
        tok = self._peek(k)
        if tok.kind in TYPE_KEYWORDS:
            return tok.kind != "error" or self._kind(k + 1) != "."
        return tok.kind == "ID" and self._is_type_name(tok.value)

    def _declare_type(self, name: str) -> None:
        self._types.add(name)

    # ------------------------------------------------------------------- types

    # BNF: type : base_type | name ['<' type_arg (',' type_arg)* '>'] | 'tuple' '<' ... '>'
    # BNF:        followed by ['[' expression ']'] for a header stack
    def _parse_type(self, allow_void: bool = False) -> ast.Type:
        tok = self._peek()
        kind = tok.kind
        if kind == "void" and not allow_void:
            raise CompileError("'void' is only a return type", tok.loc)
        simple = _SIMPLE_TYPES.get(kind)
        if simple is not None:
            self._advance()
            type_: ast.Type = simple(loc=tok.loc)
        elif kind in ("bit", "int", "varbit"):
            type_ = self._parse_sized_type()
        elif kind == "tuple":
            self._advance()
            type_ = ast.TupleType(self._parse_type_args(), loc=tok.loc)
        elif kind == "ID" or kind in SOFT_KEYWORDS:
            self._advance()
            type_ = ast.TypeName(tok.value, loc=tok.loc)
            if self._kind() == "<":
                type_ = ast.SpecializedType(type_, self._parse_type_args(), loc=tok.loc)
        else:
            self._unexpected("a type")
        if self._kind() == "[":
            self._advance()
            size = self._parse_expression()
            self._expect("]")
            type_ = ast.HeaderStackType(type_, size, loc=tok.loc)
        return type_

    # BNF: sized_type : ('bit' | 'int' | 'varbit') ['<' (INT | name | '(' expression ')') '>']
    def _parse_sized_type(self) -> ast.Type:
        tok = self._advance()
        if not self._accept("<"):
            if tok.kind == "bit":
                return ast.BitType(ast.IntLiteral(1, loc=tok.loc), loc=tok.loc)
            if tok.kind == "int":
                return ast.IntType(loc=tok.loc)
            self._unexpected("'<' after varbit")
        width_tok = self._peek()
        if width_tok.kind == "INT":
            width: ast.Expression = self._parse_int(self._advance())
        elif width_tok.kind == "(":
            self._advance()
            width = self._parse_expression()
            self._expect(")")
        elif self._is_name():
            self._advance()
            width = ast.Name(width_tok.value, loc=width_tok.loc)
        else:
            self._unexpected("a width")
        self._expect(">")
        if tok.kind == "varbit":
            return ast.VarbitType(width, loc=tok.loc)
        return ast.BitType(width, tok.kind == "int", loc=tok.loc)

    # BNF: type_args : '<' (type | '_') (',' (type | '_'))* '>'
    def _parse_type_args(self) -> list[ast.Type]:
        self._expect("<")
        args: list[ast.Type] = []
        while True:
            tok = self._peek()
            if tok.kind == "ID" and tok.value == "_":
                self._advance()
                args.append(ast.DontCareType(loc=tok.loc))
            else:
                args.append(self._parse_type())
            if not self._accept(","):
                self._expect(">", "',' or '>'")
                return args

    # ------------------------------------------------------------- expressions

    # BNF: expression : binary ['?' expression ':' expression]
    def _parse_expression(self) -> ast.Expression:
        cond = self._parse_binary(1)
        if self._kind() != "?":
            return cond
        self._advance()
        then = self._parse_expression()
        self._expect(":")
        orelse = self._parse_expression()
        return ast.Ternary(cond, then, orelse, loc=cond.loc)

    # BNF: expression_list(close) : [expression (',' expression)*] close
    def _parse_expression_list(self, closing: str) -> list[ast.Expression]:
        items: list[ast.Expression] = []
        if self._accept(closing):
            return items
        while True:
            items.append(self._parse_expression())
            if not self._accept(","):
                self._expect(closing, f"',' or '{closing}'")
                return items

    # BNF: binary : unary (binary_op unary)*      (precedence climbing, _BINARY_PRECEDENCE)
    def _parse_binary(self, min_prec: int) -> ast.Expression:
        left = self._parse_unary()
        while True:
            tok = self._toks[self._pos]
            op = tok.kind
            if op == ">" and self._kind(1) == ">" and not self._peek(1).space:
                op = ">>"
            prec = _BINARY_PRECEDENCE.get(op)
            if prec is None or prec < min_prec:
                return left
            self._advance()
            if op == ">>":
                self._advance()
            right = self._parse_binary(prec + 1)
            left = ast.Binary(op, left, right, loc=left.loc)

    # BNF: unary : ('!' | '~' | '-' | '+') unary | '(' type ')' unary | postfix
    def _parse_unary(self) -> ast.Expression:
        tok = self._toks[self._pos]
        if tok.kind in _UNARY_OPS:
            self._advance()
            return ast.Unary(tok.kind, self._parse_unary(), loc=tok.loc)
        if tok.kind == "(" and self._starts_type(1):
            cast = self._try_parse_cast()
            if cast is not None:
                return cast
        return self._parse_postfix()

    def _try_parse_cast(self) -> ast.Expression | None:
        mark = self._pos
        start = self._advance()
        if self._kind() in TYPE_KEYWORDS:  # `(bit<8> ...` cannot be a parenthesized value
            type_ = self._parse_type()
            self._expect(")", "')' after the cast type")
            return ast.Cast(type_, self._parse_unary(), loc=start.loc)
        try:
            type_ = self._parse_type()
            self._expect(")")
        except CompileError:
            self._pos = mark
            return None
        return ast.Cast(type_, self._parse_unary(), loc=start.loc)

    # BNF: postfix : primary ( '.' name | '[' expression [':' expression] ']'
    # BNF:                   | [type_args] '(' args ')' )*
    def _parse_postfix(self) -> ast.Expression:
        expr = self._parse_primary()
        while True:
            kind = self._toks[self._pos].kind
            if kind == ".":
                self._advance()
                member = self._peek()
                if not (member.kind == "ID" or member.value.isidentifier()):
                    self._unexpected("a member name")
                self._advance()
                expr = ast.Member(expr, member.value, loc=expr.loc)
            elif kind == "[":
                expr = self._parse_index_or_slice(expr)
            elif kind == "(":
                expr = ast.Call(expr, self._parse_arguments(), loc=expr.loc)
            elif kind == "<" and self._starts_type_args():
                type_args = self._parse_type_args()
                expr = ast.Call(expr, self._parse_arguments(), type_args, loc=expr.loc)
            else:
                return expr

    # BNF: index_or_slice : '[' expression [':' expression] ']'
    def _parse_index_or_slice(self, expr: ast.Expression) -> ast.Expression:
        self._expect("[")
        index = self._parse_expression()
        if self._accept(":"):
            lo = self._parse_expression()
            self._expect("]")
            return ast.Slice(expr, index, lo, loc=expr.loc)
        self._expect("]")
        return ast.Index(expr, index, loc=expr.loc)

    def _starts_type_args(self) -> bool:
        """After a name: is this '<' a type-argument list followed by '(' (not less-than)?"""
        nxt = self._peek(1)
        if not (
            self._starts_type(1) or nxt.kind == "tuple" or (nxt.kind == "ID" and nxt.value == "_")
        ):
            return False
        mark = self._pos
        try:
            self._parse_type_args()
            return self._kind() == "("
        except CompileError:
            return False
        finally:
            self._pos = mark

    # BNF: args : '(' [argument (',' argument)*] ')'
    # BNF: argument : [name '='] (expression | '_')
    def _parse_arguments(self) -> list[ast.Argument]:
        self._expect("(")
        args: list[ast.Argument] = []
        if self._accept(")"):
            return args
        while True:
            start = self._peek()
            name = None
            if self._is_name() and self._kind(1) == "=":
                name = self._advance().value
                self._advance()
            tok = self._peek()
            if tok.kind == "ID" and tok.value == "_" and self._kind(1) in (",", ")"):
                self._advance()
                value: ast.Expression = ast.DontCare(loc=tok.loc)
            else:
                value = self._parse_expression()
            args.append(ast.Argument(value, name, loc=start.loc))
            if not self._accept(","):
                self._expect(")", "',' or ')'")
                return args

    # BNF: primary : INT | STRING | 'true' | 'false' | name | '.' name | 'error' '.' name
    # BNF:         | '(' expression ')' | '{' [expression_list | kv_list] '}' | type_name
    def _parse_primary(self) -> ast.Expression:
        tok = self._advance()
        kind = tok.kind
        if kind == "ID" or kind in SOFT_KEYWORDS:
            if tok.value == "_":
                return ast.DontCare(loc=tok.loc)
            return ast.Name(tok.value, loc=tok.loc)
        if kind == "INT":
            return self._parse_int(tok)
        if kind == "(":
            expr = self._parse_expression()
            self._expect(")")
            return expr
        if kind == "true" or kind == "false":
            return ast.BoolLiteral(kind == "true", loc=tok.loc)
        if kind == "STRING":
            return ast.StringLiteral(unquote(tok.value), loc=tok.loc)
        if kind == "error":
            self._expect(".", "'.' after error")
            return ast.ErrorMember(self._parse_name("an error name").value, loc=tok.loc)
        if kind == "{":
            return self._parse_brace_expression(tok)
        if kind == ".":
            name = self._parse_name()
            return ast.Name(name.value, top_level=True, loc=tok.loc)
        if kind == "this":
            raise not_supported("'this'", tok.loc)
        if kind in ("bit", "int", "varbit", "bool", "tuple"):
            raise CompileError(
                f"type '{tok.value}' used as a value (missing parentheses for a cast?)", tok.loc
            )
        self._pos -= 1
        self._unexpected("an expression")

    # BNF: brace_expression : [expression_list | name '=' expression (',' name '=' expression)*] '}'
    def _parse_brace_expression(self, opening: Token) -> ast.Expression:
        if self._is_name() and self._kind(1) == "=":
            fields: list[ast.NamedExpr] = []
            while True:
                name = self._parse_name("a field name")
                self._expect("=")
                fields.append(ast.NamedExpr(name.value, self._parse_expression(), loc=name.loc))
                if not self._accept(","):
                    self._expect("}", "',' or '}'")
                    return ast.StructExpr(fields, loc=opening.loc)
        items = self._parse_expression_list("}")
        return ast.ListExpr(items, loc=opening.loc)

    # BNF: integer : INT  (value, width and signedness from the literal's text)
    def _parse_int(self, tok: Token) -> ast.IntLiteral:
        value, width, signed = parse_int(tok.value, tok.loc)
        return ast.IntLiteral(value, width, signed, tok.value, loc=tok.loc)

    # ---------------------------------------------------------------- keysets

    # BNF: keyset : '(' simple_keyset (',' simple_keyset)* ')' ':' | simple_keyset
    def _parse_keyset(self) -> list[ast.Expression]:
        if self._kind() == "(":
            mark = self._pos
            self._advance()
            is_tuple = False  # a ',' at the top level settles it: report errors inside
            try:
                items = [self._parse_simple_keyset()]
                while self._accept(","):
                    is_tuple = True
                    items.append(self._parse_simple_keyset())
                self._expect(")", "',' or ')'")
                if self._kind() == ":":
                    return items
            except CompileError:
                if is_tuple:
                    raise
            self._pos = mark
        return [self._parse_simple_keyset()]

    # BNF: simple_keyset : 'default' | '_' | expression ['&&&' expression | '..' expression]
    def _parse_simple_keyset(self) -> ast.Expression:
        tok = self._peek()
        if tok.kind == "default":
            self._advance()
            return ast.Default(loc=tok.loc)
        if tok.kind == "ID" and tok.value == "_" and self._kind(1) in (",", ")", ":"):
            self._advance()
            return ast.DontCare(loc=tok.loc)
        value = self._parse_expression()
        if self._accept("&&&"):
            return ast.Mask("&&&", value, self._parse_expression(), loc=tok.loc)
        if self._accept(".."):
            return ast.Range("..", value, self._parse_expression(), loc=tok.loc)
        return value

    # BNF: control_decl : 'control' name [type_params] params


# P4_16 binary operators, loosest first (p4c's p4parser.ypp / the P4_16 spec, section 8).
_BINARY_PRECEDENCE = {
    "||": 1,
    "&&": 2,
    "==": 3, "!=": 3,
    "<": 4, ">": 4, "<=": 4, ">=": 4,
    "|": 5,
    "^": 6,
    "&": 7,
    "<<": 8, ">>": 8,
    "++": 9, "+": 9, "-": 9, "|+|": 9, "|-|": 9,
    "*": 10, "/": 10, "%": 10,
}  # fmt: skip

_UNARY_OPS = frozenset("! ~ - +".split())

TYPE_KEYWORDS = frozenset("bit int varbit bool error string void tuple match_kind".split())

_SIMPLE_TYPES: dict[str, type[ast.Type]] = {
    "bool": ast.BoolType,
    "error": ast.ErrorType,
    "string": ast.StringType,
    "void": ast.VoidType,
    "match_kind": ast.MatchKindType,
}
