"""The P4_16 parser's statement rules: blocks, statements, the local declarations
a block may hold (constants, variables, instances) and annotations.

``StatementParser`` extends ``parser_expr.ExpressionParser`` (tokens, types,
expressions) and is extended by ``parser.P4Parser`` (top-level, parser, control and
table declarations); one ``_parse_<rule>`` per grammar rule under a ``# BNF:``
comment, as there.
"""

from __future__ import annotations

from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.frontend.lexer import SOFT_KEYWORDS, Token, source_text
from p4lite.compiler.frontend.parser_expr import TYPE_KEYWORDS, ExpressionParser


class StatementParser(ExpressionParser):
    """Statements, blocks, local declarations and annotations, over the token stream
    and expressions of ``ExpressionParser``."""

    # ------------------------------------------------------ local declarations

    def _parse_declared_type(self, start: Token) -> ast.Type:
        """The type that starts a declaration; ``void`` only where a function follows."""
        if start.kind != "void":
            return self._parse_type()
        type_ = self._parse_type(allow_void=True)
        if not (self._is_name() and self._kind(1) in ("(", "<")):
            raise CompileError("'void' is only a return type", start.loc)
        return type_

    def _finish_instantiation(self, type_: ast.Type, start: Token) -> ast.Instantiation:
        args = self._parse_arguments()
        name = self._parse_name("an instance name")
        if self._kind() in ("{", "="):
            raise not_supported("instantiations with an initializer block", self._peek().loc)
        self._expect(";")
        return ast.Instantiation(name.value, type_, args, loc=start.loc)

    # BNF: const_decl : 'const' type name '=' expression ';'
    def _parse_const_decl(self) -> ast.ConstDecl:
        start = self._expect("const")
        type_ = self._parse_type()
        name = self._parse_name("a constant name")
        self._expect("=")
        value = self._parse_expression()
        self._expect(";")
        return ast.ConstDecl(name.value, type_, value, loc=start.loc)

    # BNF: variable_decl : type name ['=' expression] ';'
    # BNF: instantiation : type '(' args ')' name ';'
    def _parse_variable_or_instance(self) -> ast.Declaration:
        start = self._peek()
        type_ = self._parse_declared_type(start)
        if self._kind() == "(":
            return self._finish_instantiation(type_, start)
        name = self._parse_name("a variable name")
        init = self._parse_expression() if self._accept("=") else None
        self._expect(";")
        return ast.VarDecl(name.value, type_, init, loc=start.loc)

    # ------------------------------------------------------------- annotations

    # BNF: annotations : ( '@' name [ '(' token* ')' | '[' token* ']' ] )*
    def _parse_annotations(self) -> list[ast.Annotation]:
        annotations: list[ast.Annotation] = []
        while self._kind() == "@":
            annotations.append(self._parse_annotation())
        return annotations

    # BNF: annotation : '@' name [ '(' balanced_tokens ')' ] | '@pragma' tokens-to-end-of-line
    def _parse_annotation(self) -> ast.Annotation:
        at = self._advance()
        name = self._parse_name("an annotation name")
        if name.value == "pragma":  # @pragma runs to the end of the line
            body = []
            while not self._peek().bol:
                body.append(self._advance())
            return ast.Annotation("pragma", [], source_text(body), loc=at.loc)
        if self._kind() == "[":
            raise not_supported("structured annotations @name[...]", self._peek().loc)
        if self._kind() != "(":
            return ast.Annotation(name.value, loc=at.loc)
        body = self._balanced_body()
        return ast.Annotation(
            name.value, self._annotation_args(body), source_text(body), loc=at.loc
        )

    def _balanced_body(self) -> list[Token]:
        opening = self._expect("(")
        depth = 0
        body: list[Token] = []
        while True:
            tok = self._advance()
            if tok.kind == "EOF":
                raise CompileError("unterminated annotation: missing ')'", opening.loc)
            if tok.kind == "(":
                depth += 1
            elif tok.kind == ")":
                if depth == 0:
                    return body
                depth -= 1
            body.append(tok)

    def _annotation_args(self, body: list[Token]) -> list[ast.Expression]:
        """The annotation body as expressions, or [] when it is not an expression list."""
        if not body:
            return []
        end = Token("EOF", "", body[-1].loc, True)
        sub = type(self)([*body, end], self._types)
        try:
            return sub._parse_expression_list("EOF")
        except CompileError:
            return []

    # -------------------------------------------------------------- statements

    # BNF: block : '{' statement_or_decl* '}'
    def _parse_block(self) -> ast.Block:
        return self._parse_block_body(self._expect("{"))

    # BNF: block_body : statement_or_decl* '}'         (after the opening '{')
    def _parse_block_body(self, opening: Token) -> ast.Block:
        statements: list[ast.Node] = []
        while not self._accept("}"):
            if self._kind() == "EOF":
                raise CompileError("missing '}' for this '{'", opening.loc)
            statements.append(self._parse_statement_or_decl())
        return ast.Block(statements, loc=opening.loc)

    # BNF: statement_or_decl : annotations ( const_decl | variable_decl | instantiation | statement )
    def _parse_statement_or_decl(self) -> ast.Node:
        annotations = self._parse_annotations()
        kind = self._kind()
        if kind == "const":
            decl: ast.Declaration = self._parse_const_decl()
        elif self._is_declaration_start():
            decl = self._parse_variable_or_instance()
        else:
            if annotations and self._kind() != "{":
                raise not_supported(
                    "annotations on a statement other than a block", annotations[0].loc
                )
            stmt = self._parse_statement()
            if isinstance(stmt, ast.Block):  # e.g. @atomic { ... }
                stmt.annotations = annotations
            return stmt
        decl.annotations = annotations + decl.annotations
        return decl

    def _is_declaration_start(self) -> bool:
        tok = self._peek()
        if tok.kind in TYPE_KEYWORDS:
            return tok.kind != "error" or self._kind(1) != "."
        if tok.kind != "ID" and tok.kind not in SOFT_KEYWORDS:
            return False
        if self._is_type_name(tok.value):
            return self._kind(1) not in (".", "=")
        return self._is_name(1)  # an unknown type: `foo_t x;`

    # BNF: statement : block | if_statement | switch_statement | 'exit' ';'
    # BNF:           | 'return' [expression] ';' | ';' | assignment_or_call
    def _parse_statement(self) -> ast.Statement:
        tok = self._peek()
        kind = tok.kind
        if kind == "{":
            return self._parse_block()
        if kind == "if":
            return self._parse_if()
        if kind == "switch":
            return self._parse_switch()
        if kind == "exit":
            self._advance()
            self._expect(";")
            return ast.Exit(loc=tok.loc)
        if kind == "return":
            self._advance()
            value = None if self._kind() == ";" else self._parse_expression()
            self._expect(";")
            return ast.Return(value, loc=tok.loc)
        if kind == ";":
            self._advance()
            return ast.Block([], loc=tok.loc)
        if kind == "ID" and tok.value == "for" and self._kind(1) == "(":
            return self._parse_for()
        if kind == "ID" and tok.value in ("break", "continue") and self._kind(1) == ";":
            self._advance()
            self._advance()
            return ast.Break(loc=tok.loc) if tok.value == "break" else ast.Continue(loc=tok.loc)
        if kind == "ID" and tok.value in _UNSUPPORTED_STATEMENTS and self._kind(1) in ("(", ";"):
            raise not_supported(f"'{tok.value}' statements", tok.loc)
        return self._parse_assignment_or_call()

    # BNF: for_statement : 'for' '(' [init {',' init}] ';' [expression] ';'
    # BNF:                 [update {',' update}] ')' statement
    def _parse_for(self) -> ast.For:
        start = self._advance()
        self._expect("(")
        init: list[ast.Node] = []
        if self._is_declaration_start():
            first = self._peek()
            type_ = self._parse_declared_type(first)
            name = self._parse_name("a variable name")
            if self._kind() == "in":
                raise CompileError("BMV2 does not support for-in loops", start.loc)
            value = self._parse_expression() if self._accept("=") else None
            init.append(ast.VarDecl(name.value, type_, value, loc=first.loc))
            self._expect(";")
        elif self._kind(1) == "in":  # for (x in range): an existing variable
            raise CompileError("BMV2 does not support for-in loops", start.loc)
        else:
            while self._kind() != ";":
                init.append(self._parse_assignment_or_call(end=(",", ";")))
                if self._kind() == ",":
                    self._advance()
            self._expect(";")
        cond = None if self._kind() == ";" else self._parse_expression()
        self._expect(";")
        update: list[ast.Statement] = []
        while self._kind() != ")":
            update.append(self._parse_assignment_or_call(end=(",", ")")))
            if self._kind() == ",":
                self._advance()
        self._expect(")")
        return ast.For(init, cond, update, self._parse_statement(), loc=start.loc)

    # BNF: assignment_or_call : postfix '=' expression ';' | postfix_call ';'
    def _parse_assignment_or_call(self, end: tuple[str, ...] = ()) -> ast.Statement:
        """``end``: the tokens that may follow instead of ``;`` (left unread), in a
        ``for``'s header."""
        start = self._peek()
        if start.kind == "transition":
            raise CompileError("'transition' must be the last statement of a state", start.loc)
        target = self._parse_postfix()
        def finish() -> None:
            if not (end and self._kind() in end):
                self._expect(";")

        if self._accept("="):
            value = self._parse_expression()
            finish()
            return ast.Assign(target, value, loc=start.loc)
        compound = _COMPOUND_ASSIGN.get(self._kind())
        if compound is not None:  # a op= b is a = a op b (P4_16 v1.2.4)
            op = self._advance()
            value = self._parse_expression()
            finish()
            return ast.Assign(target, ast.Binary(compound, target, value, loc=op.loc),
                              compound=compound, loc=start.loc)
        if not isinstance(target, ast.Call):
            self._unexpected("'=' or '(' (a statement is an assignment or a call)")
        finish()
        return ast.CallStmt(target, loc=start.loc)

    # BNF: if_statement : 'if' '(' expression ')' statement ['else' statement]
    def _parse_if(self) -> ast.If:
        start = self._expect("if")
        self._expect("(")
        cond = self._parse_expression()
        self._expect(")")
        then = self._parse_statement_or_block_decl()
        orelse = self._parse_statement_or_block_decl() if self._accept("else") else None
        return ast.If(cond, then, orelse, loc=start.loc)

    # BNF: branch : statement_or_decl                 (a declaration is rejected)
    def _parse_statement_or_block_decl(self) -> ast.Statement:
        node = self._parse_statement_or_decl()
        if not isinstance(node, ast.Statement):
            raise CompileError("a declaration cannot be the body of if/else", node.loc)
        return node

    # BNF: switch_statement : 'switch' '(' expression ')' '{' switch_case* '}'
    # BNF: switch_case : ('default' | expression) ':' [block]
    def _parse_switch(self) -> ast.Switch:
        start = self._expect("switch")
        self._expect("(")
        expr = self._parse_expression()
        self._expect(")")
        self._expect("{")
        cases: list[ast.SwitchCase] = []
        while not self._accept("}"):
            tok = self._peek()
            if tok.kind == "default":
                self._advance()
                label: ast.Expression = ast.Default(loc=tok.loc)
            else:
                label = self._parse_expression()
            self._expect(":")
            body = self._parse_block() if self._kind() == "{" else None
            cases.append(ast.SwitchCase(label, body, loc=tok.loc))
        return ast.Switch(expr, cases, loc=start.loc)


_UNSUPPORTED_STATEMENTS = frozenset(["for", "while", "break", "continue"])

_COMPOUND_ASSIGN = {"+=": "+", "-=": "-", "*=": "*", "/=": "/", "%=": "%", "&=": "&", "|=": "|",
                    "^=": "^", "<<=": "<<", ">>=": ">>", "|+|=": "|+|", "|-|=": "|-|"}
