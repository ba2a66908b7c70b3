"""The P4_16 parser: preprocessed tokens to an ``ast.Program``.

Hand-written recursive descent, one ``_parse_<rule>`` per grammar rule under a
``# BNF:`` comment. This module has the top-level declaration, parser, control and
table rules and the entry points ``parse_file`` / ``parse_text``; statements, local
declarations and annotations are in ``parser_stmt.StatementParser``, which
``P4Parser`` extends, and the token stream, types, expressions and keysets in
``parser_expr.ExpressionParser``, which that extends.

P4's grammar needs to know which names are types (``T x;`` versus ``f(x);``,
``(T) e`` versus ``(e)``), so the parser records every type it declares, as
p4c's parser driver does.

Valid P4_16 outside p4lite's subset raises ``not_supported`` at its location.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.frontend.lexer import Token, source_text
from p4lite.compiler.frontend.parser_stmt import StatementParser
from p4lite.compiler.frontend.preprocess import Preprocessor


def parse_text(
    text: str,
    filename: str = "<string>",
    include_dirs: tuple[str, ...] | list[str] = (),
    defines: dict[str, str] | None = None,
) -> ast.Program:
    """Preprocess and parse P4 source text; errors name the original file:line:col."""
    result = Preprocessor(include_dirs, defines).run_text(text, filename)
    program = P4Parser(result.tokens).parse_program()
    program.files = list(dict.fromkeys(result.files))
    program.warnings = result.warnings
    return program


def parse_file(
    path: str | Path,
    include_dirs: tuple[str, ...] | list[str] = (),
    defines: dict[str, str] | None = None,
) -> ast.Program:
    """Preprocess and parse a P4 file."""
    result = Preprocessor(include_dirs, defines).run_file(path)
    program = P4Parser(result.tokens).parse_program()
    program.files = list(dict.fromkeys(result.files))
    program.warnings = result.warnings
    return program


class P4Parser(StatementParser):
    """Recursive-descent parser over a token list ending with EOF: declarations,
    parsers, controls and tables (statements come from ``StatementParser``, types and
    expressions from ``ExpressionParser``)."""

    # ------------------------------------------------------------ declarations

    # BNF: program : declaration* EOF
    def parse_program(self) -> ast.Program:
        """Parse the whole token list."""
        start = self._peek().loc
        decls: list[ast.Declaration] = []
        try:
            while self._kind() != "EOF":
                decl = self._parse_declaration()
                if decl is not None:
                    decls.append(decl)
        except RecursionError:
            raise CompileError("nested too deeply for p4lite's parser", self._peek().loc) from None
        return ast.Program(decls, loc=start)

    # BNF: declaration : annotations ( const_decl | header_decl | struct_decl | header_union_decl
    # BNF:   | enum_decl | error_decl | match_kind_decl | typedef_decl | newtype_decl | extern_decl
    # BNF:   | parser_decl | control_decl | package_decl | action_decl | instantiation ) | ';'
    def _parse_declaration(self) -> ast.Declaration | None:
        annotations = self._parse_annotations()
        kind = self._kind()
        if kind == ";" and not annotations:
            self._advance()
            return None
        method = _TOP_LEVEL.get(kind)
        if method is None and kind == "type" and not self._kind(1) == "(":
            method = P4Parser._parse_newtype_decl
        if method is not None:
            decl = method(self)
        elif kind == "value_set":
            raise not_supported("value_set declarations", self._peek().loc)
        elif self._starts_type() or self._is_name():
            decl = self._parse_top_level_instantiation()
        else:
            self._unexpected("a declaration")
        decl.annotations = annotations + decl.annotations
        return decl

    # BNF: instantiation : type '(' args ')' name ';'
    def _parse_top_level_instantiation(self) -> ast.Declaration:
        start = self._peek()
        type_ = self._parse_declared_type(start)
        if self._kind() == "(":
            return self._finish_instantiation(type_, start)
        if self._is_name() and self._kind(1) == "<":
            raise not_supported("generic function declarations", start.loc)
        if self._is_name() and self._kind(1) == "(":
            return self._finish_function_decl(type_, start)
        raise CompileError(
            "only constants, types, externs, actions, parsers, controls and instantiations "
            "may be declared at top level",
            start.loc,
        )

    # BNF: function_decl : type name '(' params ')' block
    def _finish_function_decl(self, return_type: ast.Type, start: Token) -> ast.FunctionDecl:
        name = self._parse_name("a function name")
        params = self._parse_params()
        body = self._parse_block()
        return ast.FunctionDecl(name.value, return_type, params, body, loc=start.loc)

    # BNF: struct_like : ('header' | 'header_union' | 'struct') name '{' struct_field* '}'
    # BNF: struct_field : annotations type name ';'
    def _parse_struct_like(self) -> ast.Declaration:
        start = self._advance()
        name = self._parse_name(f"a {start.kind} name")
        if self._kind() == "<":
            raise not_supported(f"generic {start.kind} types", self._peek().loc)
        self._declare_type(name.value)
        self._expect("{")
        fields: list[ast.StructField] = []
        while not self._accept("}"):
            annotations = self._parse_annotations()
            field_start = self._peek()
            type_ = self._parse_type()
            field_name = self._parse_name("a field name")
            self._expect(";")
            fields.append(
                ast.StructField(
                    field_name.value, type_, annotations=annotations, loc=field_start.loc
                )
            )
        node_class = _STRUCT_LIKE[start.kind]
        return node_class(name.value, fields, loc=start.loc)

    # BNF: enum_decl : 'enum' [type] name '{' enum_member (',' enum_member)* [','] '}'
    # BNF: enum_member : annotations name ['=' expression]
    def _parse_enum_decl(self) -> ast.EnumDecl:
        start = self._expect("enum")
        underlying = None
        if not (self._is_name() and self._kind(1) == "{"):
            underlying = self._parse_type()
        name = self._parse_name("an enum name")
        self._declare_type(name.value)
        members = self._parse_member_list(allow_values=underlying is not None)
        return ast.EnumDecl(name.value, members, underlying, loc=start.loc)

    # BNF: member_list : '{' enum_member (',' enum_member)* [','] '}'
    def _parse_member_list(self, allow_values: bool) -> list[ast.EnumMember]:
        self._expect("{")
        members: list[ast.EnumMember] = []
        while not self._accept("}"):
            annotations = self._parse_annotations()
            tok = self._parse_name("a member name")
            value = None
            if allow_values and self._accept("="):
                value = self._parse_expression()
            members.append(ast.EnumMember(tok.value, value, annotations=annotations, loc=tok.loc))
            if not self._accept(","):
                self._expect("}", "',' or '}'")
                break
        return members

    # BNF: error_decl : 'error' '{' name (',' name)* '}'
    def _parse_error_decl(self) -> ast.ErrorDecl:
        start = self._expect("error")
        return ast.ErrorDecl(self._parse_member_list(allow_values=False), loc=start.loc)

    # BNF: match_kind_decl : 'match_kind' '{' name (',' name)* '}'
    def _parse_match_kind_decl(self) -> ast.MatchKindDecl:
        start = self._expect("match_kind")
        return ast.MatchKindDecl(self._parse_member_list(allow_values=False), loc=start.loc)

    # BNF: typedef_decl : 'typedef' type name ';'
    def _parse_typedef_decl(self) -> ast.TypedefDecl:
        start = self._expect("typedef")
        if self._kind() in _STRUCT_LIKE or self._kind() == "enum":
            raise not_supported("typedef of an inline type declaration", self._peek().loc)
        type_ = self._parse_type()
        name = self._parse_name("a type name")
        self._expect(";")
        self._declare_type(name.value)
        return ast.TypedefDecl(name.value, type_, loc=start.loc)

    # BNF: newtype_decl : 'type' type name ';'
    def _parse_newtype_decl(self) -> ast.NewTypeDecl:
        start = self._expect("type")
        type_ = self._parse_type()
        name = self._parse_name("a type name")
        self._expect(";")
        self._declare_type(name.value)
        return ast.NewTypeDecl(name.value, type_, loc=start.loc)

    # BNF: extern_decl : 'extern' name [type_params] '{' method_proto* '}'
    # BNF:             | 'extern' type name [type_params] params ';'
    def _parse_extern_decl(self) -> ast.Declaration:
        start = self._expect("extern")
        if self._is_name() and (
            self._kind(1) == "{" or (self._kind(1) == "<" and self._kind(3) in (",", ">"))
        ):
            return self._parse_extern_object(start)
        return_type = self._parse_type(allow_void=True)
        name = self._parse_name("an extern function name")
        with _TypeParamScope(self, self._parse_type_params()) as type_params:
            params = self._parse_params()
        self._expect(";")
        return ast.ExternFunctionDecl(name.value, return_type, params, type_params, loc=start.loc)

    # BNF: extern_object : name [type_params] '{' method_proto* '}'
    def _parse_extern_object(self, start: Token) -> ast.ExternDecl:
        name = self._advance()
        self._declare_type(name.value)
        with _TypeParamScope(self, self._parse_type_params()) as type_params:
            self._expect("{")
            methods: list[ast.MethodDecl] = []
            while not self._accept("}"):
                methods.append(self._parse_method_proto(name.value))
        return ast.ExternDecl(name.value, methods, type_params, loc=start.loc)

    # BNF: method_proto : annotations ( name params ';'
    # BNF:              | ['abstract'] type name [type_params] params ';' )
    def _parse_method_proto(self, extern_name: str) -> ast.MethodDecl:
        annotations = self._parse_annotations()
        start = self._peek()
        if start.kind == "ID" and start.value == extern_name and self._kind(1) == "(":
            self._advance()
            params = self._parse_params()
            self._expect(";")
            return ast.MethodDecl(start.value, None, params, annotations=annotations, loc=start.loc)
        abstract = self._accept("abstract") is not None
        return_type = self._parse_type(allow_void=True)
        name = self._parse_name("a method name")
        with _TypeParamScope(self, self._parse_type_params()) as type_params:
            params = self._parse_params()
        self._expect(";")
        return ast.MethodDecl(
            name.value, return_type, params, type_params, abstract,
            annotations=annotations, loc=start.loc,
        )  # fmt: skip

    # BNF: type_params : '<' name (',' name)* '>'
    def _parse_type_params(self) -> list[str]:
        if not self._accept("<"):
            return []
        names = [self._parse_name("a type parameter").value]
        while self._accept(","):
            names.append(self._parse_name("a type parameter").value)
        self._expect(">")
        return names

    # BNF: params : '(' [param (',' param)*] ')'
    # BNF: param : annotations ['in' | 'out' | 'inout'] type name ['=' expression]
    def _parse_params(self) -> list[ast.Param]:
        self._expect("(")
        params: list[ast.Param] = []
        if self._accept(")"):
            return params
        while True:
            annotations = self._parse_annotations()
            start = self._peek()
            direction = ""
            if start.kind in ("in", "out", "inout"):
                direction = self._advance().kind
            type_ = self._parse_type()
            name = self._parse_name("a parameter name")
            default = self._parse_expression() if self._accept("=") else None
            params.append(
                ast.Param(
                    name.value, type_, direction, default, annotations=annotations, loc=start.loc
                )
            )
            if not self._accept(","):
                self._expect(")", "',' or ')'")
                return params

    # BNF: parser_decl : 'parser' name [type_params] params
    # BNF:               ( ';' | [params] '{' parser_local* parser_state* '}' )
    def _parse_parser_decl(self) -> ast.Declaration:
        start = self._expect("parser")
        name = self._parse_name("a parser name")
        self._declare_type(name.value)
        with _TypeParamScope(self, self._parse_type_params()) as type_params:
            params = self._parse_params()
            if self._accept(";"):
                return ast.ParserTypeDecl(name.value, params, type_params, loc=start.loc)
            ctor_params = self._parse_params() if self._kind() == "(" else []
            self._expect("{", "'{' or ';'")
            locals_: list[ast.Declaration] = []
            states: list[ast.ParserState] = []
            while not self._accept("}"):
                annotations = self._parse_annotations()
                if self._kind() == "state":
                    states.append(self._parse_parser_state(annotations))
                elif states:
                    self._unexpected("'state' or '}'")
                else:
                    local = self._parse_local_declaration("a parser local or 'state'")
                    local.annotations = annotations + local.annotations
                    locals_.append(local)
        return ast.ParserDecl(
            name.value, params, ctor_params, locals_, states, type_params, loc=start.loc
        )

    # BNF: parser_state : annotations 'state' name '{' statement_or_decl* [transition] '}'
    def _parse_parser_state(self, annotations: list[ast.Annotation]) -> ast.ParserState:
        start = self._expect("state")
        name = self._parse_name("a state name")
        self._expect("{")
        statements: list[ast.Node] = []
        transition: ast.Expression | None = None
        while not self._accept("}"):
            if self._kind() == "transition":
                transition = self._parse_transition()
                self._expect("}", "'}' after the transition")
                break
            statements.append(self._parse_statement_or_decl())
        return ast.ParserState(
            name.value, statements, transition, annotations=annotations, loc=start.loc
        )

    # BNF: transition : 'transition' ( name ';' | select_expr )
    def _parse_transition(self) -> ast.Expression:
        self._expect("transition")
        if self._kind() == "select":
            return self._parse_select()
        target = self._parse_name("a state name or 'select'")
        self._expect(";")
        return ast.Name(target.value, loc=target.loc)

    # BNF: select_expr : 'select' '(' expression (',' expression)* ')' '{' select_case* '}'
    # BNF: select_case : keyset ':' name ';'
    def _parse_select(self) -> ast.SelectExpr:
        start = self._expect("select")
        self._expect("(")
        keys = self._parse_expression_list(")")
        self._expect("{")
        cases: list[ast.SelectCase] = []
        while not self._accept("}"):
            case_start = self._peek()
            keysets = self._parse_keyset()
            self._expect(":")
            target = self._parse_name("a state name")
            self._expect(";")
            cases.append(ast.SelectCase(keysets, target.value, loc=case_start.loc))
        return ast.SelectExpr(keys, cases, loc=start.loc)

    # BNF:                ( ';' | [params] '{' control_local* 'apply' block '}' )
    def _parse_control_decl(self) -> ast.Declaration:
        start = self._expect("control")
        name = self._parse_name("a control name")
        self._declare_type(name.value)
        with _TypeParamScope(self, self._parse_type_params()) as type_params:
            params = self._parse_params()
            if self._accept(";"):
                return ast.ControlTypeDecl(name.value, params, type_params, loc=start.loc)
            ctor_params = self._parse_params() if self._kind() == "(" else []
            self._expect("{", "'{' or ';'")
            locals_: list[ast.Declaration] = []
            while not (self._kind() == "apply" and self._kind(1) == "{"):
                locals_.append(self._parse_control_local())
            self._advance()
            body = self._parse_block()
            self._expect("}", "'}' after the apply block")
        return ast.ControlDecl(
            name.value, params, ctor_params, locals_, body, type_params, loc=start.loc
        )

    # BNF: control_local : annotations ( const_decl | action_decl | table_decl
    # BNF:                | variable_decl | instantiation )
    def _parse_control_local(self) -> ast.Declaration:
        annotations = self._parse_annotations()
        kind = self._kind()
        if kind == "action":
            decl: ast.Declaration = self._parse_action_decl()
        elif kind == "table":
            decl = self._parse_table_decl()
        else:
            decl = self._parse_local_declaration("a control local or 'apply'")
        decl.annotations = annotations + decl.annotations
        return decl

    # BNF: local_declaration : const_decl | variable_decl | instantiation
    def _parse_local_declaration(self, what: str) -> ast.Declaration:
        if self._kind() == "value_set":
            raise not_supported("value_set declarations", self._peek().loc)
        if self._kind() == "const":
            return self._parse_const_decl()
        if not (self._starts_type() or (self._is_name() and self._is_name(1))):
            self._unexpected(what)
        return self._parse_variable_or_instance()

    # BNF: action_decl : 'action' name params block
    def _parse_action_decl(self) -> ast.ActionDecl:
        start = self._expect("action")
        name = self._parse_name("an action name")
        params = self._parse_params()
        body = self._parse_block()
        return ast.ActionDecl(name.value, params, body, loc=start.loc)

    # BNF: table_decl : 'table' name '{' table_property* '}'
    # BNF: table_property : annotations ( 'key' '=' '{' key_element* '}'
    # BNF:   | 'actions' '=' '{' (action_ref ';')* '}' | ['const'] 'entries' '=' '{' entry* '}'
    # BNF:   | ['const'] name '=' expression ';' )
    def _parse_table_decl(self) -> ast.TableDecl:
        start = self._expect("table")
        name = self._parse_name("a table name")
        table = ast.TableDecl(name.value, loc=start.loc)
        self._expect("{")
        seen: set[str] = set()
        while not self._accept("}"):
            annotations = self._parse_annotations()
            is_const = self._accept("const") is not None
            prop = self._parse_name("a table property")
            if prop.value in seen:
                raise CompileError(f"duplicate table property '{prop.value}'", prop.loc)
            seen.add(prop.value)
            self._expect("=")
            self._parse_table_property(table, prop, is_const, annotations)
        return table

    # BNF: table_property_value : (see table_property): fills the TableDecl field it names
    def _parse_table_property(
        self, table: ast.TableDecl, prop: Token, is_const: bool, annotations: list[ast.Annotation]
    ) -> None:
        name = prop.value
        if name == "key":
            table.keys = self._parse_braced(self._parse_key_element)
        elif name == "actions":
            table.actions = self._parse_braced(self._parse_action_list_element)
        elif name == "entries":
            table.entries = self._parse_braced(self._parse_entry)
            table.entries_const = is_const
        elif name == "default_action":
            table.default_action = self._parse_action_ref()
            table.default_action_const = is_const
            self._expect(";")
        elif name == "size":
            table.size = self._parse_expression()
            self._expect(";")
        else:
            value = self._parse_expression()
            self._expect(";")
            table.properties.append(
                ast.TableProperty(name, value, is_const, annotations=annotations, loc=prop.loc)
            )
            return
        if is_const and name not in ("entries", "default_action"):
            raise CompileError(f"table property '{name}' cannot be const", prop.loc)
        if annotations:
            raise not_supported(f"annotations on table property '{name}'", annotations[0].loc)

    # BNF: braced_list(item) : '{' item* '}'
    def _parse_braced(self, parse_item: Callable[[], ast.Declaration]) -> list:
        self._expect("{")
        items = []
        while not self._accept("}"):
            items.append(parse_item())
        return items

    # BNF: key_element : annotations expression ':' name annotations ';'
    def _parse_key_element(self) -> ast.KeyElement:
        annotations = self._parse_annotations()
        start_pos = self._pos
        start = self._peek()
        expr = self._parse_expression()
        text = source_text(self._toks[start_pos : self._pos])
        self._expect(":")
        match_kind = self._parse_name("a match kind")
        annotations += self._parse_annotations()
        self._expect(";")
        return ast.KeyElement(expr, match_kind.value, text, annotations=annotations, loc=start.loc)

    # BNF: action_list_element : action_ref ';'
    def _parse_action_list_element(self) -> ast.ActionRef:
        ref = self._parse_action_ref()
        self._expect(";")
        return ref

    # BNF: action_ref : annotations ['.'] name ['(' args ')']
    def _parse_action_ref(self) -> ast.ActionRef:
        annotations = self._parse_annotations()
        start = self._peek()
        self._accept(".")
        name = self._parse_name("an action name")
        has_parens = self._kind() == "("
        args = self._parse_arguments() if has_parens else []
        return ast.ActionRef(name.value, args, has_parens, annotations=annotations, loc=start.loc)

    # BNF: entry : annotations ['priority' '=' expression ':'] keyset ':' action_ref annotations ';'
    def _parse_entry(self) -> ast.Entry:
        annotations = self._parse_annotations()
        start = self._peek()
        priority = None
        if start.kind == "priority" and self._kind(1) == "=":
            self._advance()
            self._advance()
            priority = self._parse_expression()
            self._expect(":")
        keysets = self._parse_keyset()
        self._expect(":")
        action = self._parse_action_ref()
        annotations += self._parse_annotations()
        self._expect(";")
        return ast.Entry(keysets, action, priority, annotations=annotations, loc=start.loc)

    # BNF: package_decl : 'package' name [type_params] params ';'
    def _parse_package_decl(self) -> ast.PackageTypeDecl:
        start = self._expect("package")
        name = self._parse_name("a package name")
        self._declare_type(name.value)
        with _TypeParamScope(self, self._parse_type_params()) as type_params:
            params = self._parse_params()
        self._expect(";")
        return ast.PackageTypeDecl(name.value, params, type_params, loc=start.loc)











class _TypeParamScope:
    """Makes type parameters count as type names while a generic declaration is parsed."""

    def __init__(self, parser: P4Parser, names: list[str]) -> None:
        self.parser = parser
        self.names = names

    def __enter__(self) -> list[str]:
        self.parser._type_params.extend(self.names)
        return self.names

    def __exit__(self, *exc: object) -> None:
        if self.names:
            del self.parser._type_params[-len(self.names) :]


_STRUCT_LIKE: dict[str, type] = {
    "header": ast.HeaderDecl,
    "header_union": ast.HeaderUnionDecl,
    "struct": ast.StructDecl,
}

_TOP_LEVEL: dict[str, Callable[[P4Parser], ast.Declaration]] = {
    "const": P4Parser._parse_const_decl,
    "header": P4Parser._parse_struct_like,
    "header_union": P4Parser._parse_struct_like,
    "struct": P4Parser._parse_struct_like,
    "enum": P4Parser._parse_enum_decl,
    "match_kind": P4Parser._parse_match_kind_decl,
    "typedef": P4Parser._parse_typedef_decl,
    "extern": P4Parser._parse_extern_decl,
    "parser": P4Parser._parse_parser_decl,
    "control": P4Parser._parse_control_decl,
    "package": P4Parser._parse_package_decl,
    "action": P4Parser._parse_action_decl,
}


def _top_level_error(parser: P4Parser) -> ast.Declaration:
    if parser._kind(1) == "{":
        return parser._parse_error_decl()
    return parser._parse_top_level_instantiation()


_TOP_LEVEL["error"] = _top_level_error
