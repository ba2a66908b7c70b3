"""Statements inside actions (and straight-line code of controls) to BMv2 primitives.

``if`` inside an action becomes ``_jump_if_zero``/``_jump`` with absolute
primitive indices (as p4c has emitted since late 2024); calls of other actions
are inlined with their parameters bound to the arguments.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from p4lite.compiler.checks.bindings import (
    Binding,
    ConstB,
    DeclB,
    ExternB,
    FieldB,
    HeaderB,
    ParamB,
    Scope,
    StackB,
    StructB,
    UnionB,
)
from p4lite.compiler.checks.types import (
    BitT,
    BoolT,
    HeaderT,
    P4Type,
    StructT,
    UnionT,
    VarbitT,
    VoidT,
    same_type,
    width_of,
)
from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.lowering.call_args import (
    CallFrame,
    Passed,
    passed_stack_field,
    stack_field_copy,
)
from p4lite.compiler.lowering.copy_in_out import (
    Renames,
    binding_refs,
    json_refs,
    overlap,
    placeholder,
    relocate,
)
from p4lite.compiler.lowering.expr_values import (
    DynElemB,
    DynFieldB,
    Val,
    as_data,
    describe,
    expr_json,
    hexstr,
    to_param,
)
from p4lite.compiler.lowering.externs import Externs, every_arg
from p4lite.compiler.lowering.hoist_calls import (
    Hoister,
    arg_directions,
    has_call,
    hoisted_type,
    is_bool_temp,
    is_branch_temp,
    is_snapshot,
    is_statement,
    is_write_back,
    scalar_test,
)
from p4lite.compiler.lowering.lower_expr import ExprCompiler
from p4lite.compiler.lowering.lower_loop import lower_for
from p4lite.compiler.lowering.parser_rules import check_parser_call, no_if_in_parser
from p4lite.compiler.lowering.storage import STANDARD_METADATA

if TYPE_CHECKING:
    from p4lite.compiler.lowering.context import Lowering

Json = dict[str, Any]


class StmtLowerer:
    """Lowers statements in ``scope`` to a list of primitives."""

    def __init__(self, lw: Lowering, externs: Externs, scope: Scope, *, local_prefix: str = "",
                 lookahead=None, in_action: bool = False) -> None:
        self.lw = lw
        self.externs = externs
        self.scope = scope
        self.local_prefix = local_prefix
        self.comp = ExprCompiler(lw.env, scope, lookahead=lookahead)
        self._lookahead = lookahead
        self.in_parser = lookahead is not None  # statements of a parser state
        # the body of an action (or of a function it calls): where p4c loops (see _for)
        self.in_action = in_action
        self.loops: list[tuple[list[int], list[int]]] = []  # (breaks, continues) to patch
        self._returns: list[int] = []

    # -------------------------------------------------------------- blocks
    def lower_body(self, stmts: list[ast.Node]) -> list[Json]:
        """Primitives for a whole action body; ``return`` jumps to the end."""
        prims: list[Json] = []
        self._returns = []
        self.lower_block(stmts, prims)
        for index in self._returns:
            prims[index]["parameters"][0] = hexstr(len(prims), None)
        return prims

    def lower_block(self, stmts: list[ast.Node], prims: list[Json]) -> None:
        outer = self.scope
        self.scope = outer.child()
        self.comp.scope = self.scope
        try:
            for stmt in stmts:
                self.lower_stmt(stmt, prims)
        finally:
            self.scope = outer
            self.comp.scope = outer

    def lower_stmt(self, stmt: ast.Node, prims: list[Json]) -> None:
        if self.lw.env.functions and not isinstance(stmt, ast.Block | ast.If):
            stmt, backs = self._hoist(stmt, prims)
            self._lower_one(stmt, prims)
            for back in backs:  # inout arguments passed as snapshots, written back
                self._emit(prims, self.assign(back.lhs, back.rhs, back.loc), back.loc)
            return
        self._lower_one(stmt, prims)

    def _lower_one(self, stmt: ast.Node, prims: list[Json]) -> None:
        if isinstance(stmt, ast.Block):
            self.lower_block(stmt.statements, prims)
        elif isinstance(stmt, ast.Assign):
            self._emit(prims, self.assign(stmt.lhs, stmt.rhs, stmt.loc), stmt.loc)
        elif isinstance(stmt, ast.CallStmt):
            self._emit(prims, self.call(stmt.call), stmt.loc, spliced=True)
        elif isinstance(stmt, ast.VarDecl):
            self.declare_var(stmt, prims)
        elif isinstance(stmt, ast.ConstDecl):
            t = self.lw.env.resolve(stmt.type)
            value = self.comp.const_value(stmt.value, t)
            self.scope.bind(stmt.name, ConstB(value, t))
        elif isinstance(stmt, ast.If):
            self._if(stmt, prims)
        elif isinstance(stmt, ast.For):
            lower_for(self, stmt, prims)
        elif isinstance(stmt, ast.Break | ast.Continue):
            word = "break" if isinstance(stmt, ast.Break) else "continue"
            if not self.loops:
                raise CompileError(f"{word} outside a for loop", stmt.loc)
            self.loops[-1][0 if word == "break" else 1].append(len(prims))
            self._emit(prims, [{"op": "_jump", "parameters": [None]}], stmt.loc, word)
        elif isinstance(stmt, ast.Exit):
            self._emit(prims, [{"op": "exit", "parameters": []}], stmt.loc, "exit")
        elif isinstance(stmt, ast.Return):
            if stmt.value is not None:
                if self.scope.lookup(_RETURN) is None:
                    raise CompileError("an action cannot return a value", stmt.loc)
                self._emit(prims, self.assign(ast.Name(_RETURN, loc=stmt.loc), stmt.value,
                                              stmt.loc), stmt.loc)
            elif self.scope.lookup(_RETURN) is not None:
                raise CompileError("a function that returns a value needs return <value>",
                                   stmt.loc)
            self._returns.append(len(prims))
            self._emit(prims, [{"op": "_jump", "parameters": [None]}], stmt.loc, "return")
        else:
            raise not_supported(f"statement {type(stmt).__name__} here", stmt.loc)

    def _emit(self, prims: list[Json], new: list[Json], loc, fragment: str | None = None,
              *, spliced: bool = False) -> None:
        info = self.lw.source_info(loc, fragment)
        if spliced:  # a lowered body (inlined call): its jump targets count from its start
            relocate(new, len(prims))
        for prim in new:
            if "source_info" not in prim and info is not None:
                prim["source_info"] = info
            prims.append(prim)

    def emit(self, prims: list[Json], new: list[Json], loc, fragment: str | None = None) -> None:
        self._emit(prims, new, loc, fragment)

    def declare_var(self, stmt: ast.VarDecl, prims: list[Json]) -> None:
        t = self.lw.env.resolve(stmt.type)
        binding = self.lw.storage.bind_local(self.local_prefix + stmt.name, t, stmt.loc)
        self.scope.bind(stmt.name, binding)
        if stmt.init is not None:
            self._emit(prims, self.assign(ast.Name(stmt.name, loc=stmt.loc), stmt.init, stmt.loc),
                       stmt.loc)

    def _hoist(self, stmt: ast.Node, prims: list[Json]) -> tuple[ast.Node, list[ast.Assign]]:
        """Function calls inside the expressions of ``stmt`` run first, into temporaries;
        also the write-backs to emit after ``stmt`` (see ``Hoister.call_args``)."""
        hoister = self.hoister()
        if isinstance(stmt, ast.Assign) and stmt.compound and isinstance(stmt.rhs, ast.Binary):
            lhs = hoister.expr(stmt.lhs)  # once: its index may call a function
            # the value of lhs is read after the right side's calls have run, as p4c
            # does (fuzzer seed 5238): `a *= f(a)` multiplies f's result by the new a
            rhs = dataclasses.replace(stmt.rhs, left=lhs, right=hoister.expr(stmt.rhs.right))
            stmt = dataclasses.replace(stmt, lhs=lhs, rhs=rhs)
        elif isinstance(stmt, ast.Assign):
            if isinstance(stmt.rhs, ast.Call) and self.is_function_call(stmt.rhs):
                call = stmt.rhs  # x = f(a): f's arguments first, then f itself below
                stmt = dataclasses.replace(stmt, lhs=hoister.expr(stmt.lhs),
                                           rhs=hoister.expr(call))
            else:
                stmt = dataclasses.replace(stmt, lhs=hoister.expr(stmt.lhs),
                                           rhs=hoister.expr(stmt.rhs))
        elif isinstance(stmt, ast.CallStmt):
            stmt = dataclasses.replace(stmt, call=hoister.call_args(stmt.call))
        elif isinstance(stmt, ast.VarDecl) and stmt.init is not None:
            stmt = dataclasses.replace(stmt, init=hoister.expr(stmt.init))
        elif isinstance(stmt, ast.Return) and stmt.value is not None:
            stmt = dataclasses.replace(stmt, value=hoister.expr(stmt.value))
        self.run_hoisted(hoister, prims)
        return stmt, hoister.after

    def hoister(self) -> Hoister:
        return Hoister(self.is_function_call, scalar_test(self.comp.compile),
                       lambda call: arg_directions(self.lw.env.functions, call))

    def run_hoisted(self, hoister: Hoister, prims: list[Json]) -> None:
        """The hoisted calls and snapshots, in order, each bound to its temporary's name."""
        for name, item in hoister.calls:
            if is_snapshot(name):
                assert isinstance(item, ast.Expression)
                val = self.comp.rvalue(item)
                temp = self.lw.storage.bind_local("tmp", val.type, item.loc)
                assert isinstance(temp, FieldB)  # a scalar (is_scalar checked it)
                self._emit(prims, [_assign_prim(temp, val)], item.loc)
                self.scope.bind(name, temp)
                continue
            if is_write_back(name):
                assert isinstance(item, ast.Assign)
                self._emit(prims, self.assign(item.lhs, item.rhs, item.loc), item.loc)
                continue
            if is_bool_temp(name) or is_branch_temp(name):  # a && f(x), c ? f(x) : y:
                # the value the statements below compute
                t, label = hoisted_type(name, item, self.comp.compile, self.lw.env)
                self.scope.bind(name, self.lw.storage.bind_local(label, t, item.loc))
                continue
            if is_statement(name):
                self.lower_stmt(item, prims)
                continue
            assert isinstance(item, ast.Call)
            decl = self.lw.env.functions[_func_name(item)]
            new, result = self.inline_function(decl, item)
            self._emit(prims, new, item.loc, spliced=True)
            if result is None:
                raise CompileError(f"function {decl.name} returns no value", item.loc)
            self.scope.bind(name, result)

    def is_function_call(self, call: ast.Call) -> bool:
        """A call of a P4 function declared at top level (not shadowed by an action)."""
        name = _func_name(call)
        return (name in self.lw.env.functions and
                not isinstance(self.scope.lookup(name), DeclB))

    def inline_function(self, decl: ast.FunctionDecl, call: ast.Call
                        ) -> tuple[list[Json], Binding | None]:
        """A function's body, parameters copied in and out; its result's storage."""
        inner = self.lw.env.global_scope.child()
        args = every_arg(decl.params, call.args, f"function {decl.name}", call.loc)
        frame = self.bind_call(decl.params, args, inner, call.loc)
        result_t = self.lw.env.resolve(decl.return_type)
        result: Binding | None = None
        if not isinstance(result_t, VoidT):
            result = self.lw.storage.bind_local(f"{decl.name}_retval", result_t, decl.loc)
            inner.bind(_RETURN, result)
        if self.in_parser:
            no_if_in_parser(decl.body)
        sub = StmtLowerer(self.lw, self.externs, inner.child(), local_prefix=self.local_prefix,
                          lookahead=self._lookahead, in_action=self.in_action)
        return self.finish_call(frame, sub.lower_body(decl.body.statements)), result

    def _if(self, stmt: ast.If, prims: list[Json]) -> None:
        if self.lw.env.functions and has_call(stmt.cond, self.is_function_call):
            hoister = self.hoister()
            new_cond = hoister.expr(stmt.cond)
            self.run_hoisted(hoister, prims)
            stmt = dataclasses.replace(stmt, cond=new_cond)
        cond = self.comp.rvalue(stmt.cond)
        if not isinstance(cond.type, BoolT):
            raise CompileError(f"condition must be bool, not {cond.type}", stmt.cond.loc)
        if cond.const is not None and cond.binding is None:
            branch = stmt.then if cond.const else stmt.orelse
            if branch is not None:
                self.lower_stmt(branch, prims)
            return
        jz: Json = {"op": "_jump_if_zero", "parameters": [as_data(cond), None]}
        self._emit(prims, [jz], stmt.cond.loc, self.lw.source.fragment(stmt.cond.loc, ")"))
        self.lower_stmt(stmt.then, prims)
        if stmt.orelse is None:
            jz["parameters"][1] = hexstr(len(prims), None)
            return
        jump: Json = {"op": "_jump", "parameters": [None]}
        self._emit(prims, [jump], stmt.loc, "else")
        jz["parameters"][1] = hexstr(len(prims), None)
        self.lower_stmt(stmt.orelse, prims)
        jump["parameters"][0] = hexstr(len(prims), None)

    # ---------------------------------------------------------- assignment
    def check_writable(self, target: ast.Expression) -> None:
        """`in` parameters (and their fields) cannot be written."""
        root = target
        while isinstance(root, ast.Member | ast.Index | ast.Slice):
            root = root.expr
        if isinstance(root, ast.Name) and self.scope.is_readonly(root.name):
            raise CompileError(f"cannot write to in parameter {root.name}", target.loc)

    def assign(self, lhs: ast.Expression, rhs: ast.Expression, loc) -> list[Json]:
        self.check_writable(lhs)
        if isinstance(lhs, ast.Slice):
            return self._assign_slice(lhs, rhs, loc)
        target = self.comp.compile(lhs)
        binding = target.binding
        if isinstance(binding, FieldB) and isinstance(binding.type, VarbitT):
            # BMv2 would copy the value but not the length; whole headers copy both
            raise not_supported("assigning a varbit field (assign the whole header)", lhs.loc)
        if isinstance(binding, FieldB):
            value = self.comp.rvalue(rhs, target.type)
            return [_assign_prim(binding, value)]
        if isinstance(binding, DynFieldB):  # stack[i].f = v: the l-value is an expression
            value = self.comp.rvalue(rhs, binding.type)
            return [{"op": "assign", "parameters": [binding.access(), to_param(as_data(value))]}]
        if isinstance(binding, DynElemB):
            raise not_supported("assigning a whole header stack element with a run-time "
                                "index", lhs.loc)
        if isinstance(binding, HeaderB):
            if isinstance(rhs, ast.StructExpr | ast.ListExpr):
                return self._assign_fields(binding, rhs, loc)
            source = self.comp.compile(rhs)
            if not isinstance(source.binding, HeaderB) or source.binding.type is not binding.type:
                raise CompileError(f"cannot assign {describe(source)} to header {binding.instance}",
                                   loc)
            return [{"op": "assign_header", "parameters": [
                {"type": "header", "value": binding.instance},
                {"type": "header", "value": source.binding.instance}]}]
        if isinstance(binding, StructB):
            return self._assign_struct(binding, rhs, loc)
        if isinstance(binding, UnionB):
            if isinstance(rhs, ast.StructExpr | ast.ListExpr):
                raise not_supported("a {...} expression for a header union", rhs.loc)
            source = self.comp.compile(rhs)
            if not isinstance(source.binding, UnionB) or source.binding.type is not binding.type:
                raise CompileError(f"cannot assign {describe(source)} to header union "
                                   f"{binding.instance}", loc)
            return self._copy_binding(binding, source.binding, loc)
        if isinstance(binding, StackB) and isinstance(binding.type.element, UnionT):
            raise not_supported("assigning a whole stack of header unions", lhs.loc)
        if isinstance(binding, StackB):
            source = self.comp.compile(rhs)
            if not isinstance(source.binding, StackB) or not same_type(source.type, target.type):
                raise CompileError("header stacks must have the same type to be assigned", loc)
            return [{"op": "assign_header_stack", "parameters": [
                {"type": "header_stack", "value": binding.name},
                {"type": "header_stack", "value": source.binding.name}]}]
        if isinstance(binding, ConstB):
            raise CompileError("cannot assign to a constant", lhs.loc)
        if isinstance(binding, ParamB):
            raise CompileError("cannot assign to a directionless action parameter", lhs.loc)
        raise CompileError(f"cannot assign to {describe(target)}", lhs.loc)

    def _assign_struct(self, target: StructB, rhs: ast.Expression, loc) -> list[Json]:
        prims: list[Json] = []
        if isinstance(rhs, ast.StructExpr | ast.ListExpr):
            return self._assign_fields(target, rhs, loc)
        source = self.comp.compile(rhs)
        if not isinstance(source.binding, StructB) or source.binding.type is not target.type:
            raise CompileError(f"cannot assign {describe(source)} to struct {target.type.name}", loc)
        for fname, _ in target.type.fields:
            prims += self._copy_binding(target.members[fname], source.binding.members[fname], loc)
        return prims

    def _assign_fields(self, target: StructB | HeaderB, rhs: ast.StructExpr | ast.ListExpr,
                       loc) -> list[Json]:
        """``x = {f = a, g = b}`` or ``x = {a, b}``: every field in declaration order; a
        header becomes valid (P4_16 8.13)."""
        t = target.type
        if isinstance(t, HeaderT) and t.members is not None:
            raise not_supported("a {...} expression for a header with struct fields", rhs.loc)
        names = [f for f, _ in t.fields]
        if isinstance(rhs, ast.StructExpr):
            given = {f.name: f.value for f in rhs.fields}
            if set(given) != set(names):
                raise CompileError(f"the initializer must set every field of {t.name}", rhs.loc)
            values = [given[f] for f in names]
        else:
            if len(rhs.items) != len(names):
                raise CompileError(f"{t.name} has {len(names)} fields, the list has "
                                   f"{len(rhs.items)}", rhs.loc)
            values = list(rhs.items)
        prims: list[Json] = []
        if isinstance(target, HeaderB):
            prims.append({"op": "add_header", "parameters": [
                {"type": "header", "value": target.instance}]})
            for (fname, ftype), value in zip(t.fields, values, strict=True):
                member = FieldB(target.instance, fname, ftype)
                prims.append(_assign_prim(member, self.comp.rvalue(value, ftype)))
            return prims
        for fname, value in zip(names, values, strict=True):
            prims += self._assign_binding(target.members[fname], value, loc)
        return prims

    def _assign_binding(self, binding, rhs: ast.Expression, loc) -> list[Json]:
        if isinstance(binding, FieldB):
            return [_assign_prim(binding, self.comp.rvalue(rhs, binding.type))]
        if isinstance(binding, StructB):
            return self._assign_struct(binding, rhs, loc)
        if isinstance(binding, HeaderB):
            if isinstance(rhs, ast.StructExpr | ast.ListExpr):
                return self._assign_fields(binding, rhs, loc)
            return self._copy_binding(binding, self._storage_of(rhs), loc)
        raise not_supported("initializing a header stack inside a struct initializer", loc)

    def _storage_of(self, e: ast.Expression):
        val = self.comp.compile(e)
        if val.binding is None:
            raise CompileError(f"expected a header, not {describe(val)}", e.loc)
        return val.binding

    def _copy_binding(self, dst, src, loc) -> list[Json]:
        if isinstance(dst, FieldB) and isinstance(src, FieldB):
            return [{"op": "assign", "parameters": [_field(dst), _field(src)]}]
        if isinstance(dst, HeaderB) and isinstance(src, HeaderB):
            return [{"op": "assign_header", "parameters": [
                {"type": "header", "value": dst.instance}, {"type": "header", "value": src.instance}]}]
        if isinstance(dst, UnionB) and isinstance(src, UnionB):
            # member by member, as p4c: BMv2's assign_header keeps at most one valid
            return [prim for m, header in dst.members.items()
                    for prim in self._copy_binding(header, src.members[m], loc)]
        if (isinstance(dst, StackB) and isinstance(src, StackB)
                and isinstance(dst.type.element, HeaderT)):
            return [{"op": "assign_header_stack", "parameters": [
                {"type": "header_stack", "value": dst.name},
                {"type": "header_stack", "value": src.name}]}]
        if isinstance(dst, StackB) and isinstance(src, StackB):
            raise not_supported("copying a stack of header unions (here a copy-in/copy-out "
                                "that cannot alias its argument)", loc)
        if isinstance(dst, StructB) and isinstance(src, StructB):
            out: list[Json] = []
            for fname, _ in dst.type.fields:
                out += self._copy_binding(dst.members[fname], src.members[fname], loc)
            return out
        raise not_supported("copying this struct member", loc)

    def _flatten_slice(self, lhs: ast.Slice) -> ast.Slice:
        """``x[7:4][1:0]`` as ``x[5:4]``: a slice of a slice is a slice of the field."""
        while isinstance(lhs.expr, ast.Slice):
            inner = lhs.expr
            inner_hi = int(self.comp.const_value(inner.hi))
            inner_lo = int(self.comp.const_value(inner.lo))
            hi, lo = int(self.comp.const_value(lhs.hi)), int(self.comp.const_value(lhs.lo))
            if not inner_hi - inner_lo >= hi >= lo >= 0:
                raise CompileError(f"slice [{hi}:{lo}] out of range for "
                                   f"bit<{inner_hi - inner_lo + 1}>", lhs.loc)
            lhs = ast.Slice(inner.expr, ast.IntLiteral(inner_lo + hi, loc=lhs.hi.loc),
                            ast.IntLiteral(inner_lo + lo, loc=lhs.lo.loc), loc=lhs.loc)
        return lhs

    def _assign_slice(self, lhs: ast.Slice, rhs: ast.Expression, loc) -> list[Json]:
        lhs = self._flatten_slice(lhs)
        target = self.comp.compile(lhs.expr)
        if not isinstance(target.binding, FieldB) or not isinstance(target.type, BitT):
            raise not_supported("assigning to a slice of something that is not a field", lhs.loc)
        hi, lo = int(self.comp.const_value(lhs.hi)), int(self.comp.const_value(lhs.lo))
        width = target.type.width
        if not width > hi >= lo >= 0:
            raise CompileError(f"slice [{hi}:{lo}] out of range for {target.type}", lhs.loc)
        return [self._store_slice(lhs, self.comp.rvalue(rhs, BitT(hi - lo + 1)))]

    def _store_slice(self, lhs: ast.Slice, value: Val) -> Json:
        target = self.comp.compile(lhs.expr)
        assert isinstance(target.binding, FieldB) and isinstance(target.type, BitT)
        hi, lo = int(self.comp.const_value(lhs.hi)), int(self.comp.const_value(lhs.lo))
        width = target.type.width
        mask = ((1 << (hi - lo + 1)) - 1) << lo
        keep = expr_json("&", target.json, hexstr(((1 << width) - 1) ^ mask, width))
        shifted = value.json if lo == 0 else expr_json("<<", value.json, hexstr(lo, 8))
        new = expr_json("|", keep, expr_json("&", shifted, hexstr(mask, width)))
        return {"op": "assign", "parameters": [_field(target.binding), new]}

    # --------------------------------------------------------------- calls
    def call(self, call: ast.Call) -> list[Json]:
        func = call.func
        if isinstance(func, ast.Member):
            if func.member in ("setValid", "setInvalid", "push_front", "pop_front"):
                self.check_writable(func.expr)
            base = self.comp.compile(func.expr)
            return self._method(base, func.member, call)
        if isinstance(func, ast.Name):
            binding = self.scope.lookup(func.name)
            if self.in_parser:
                check_parser_call(self.lw, func.name, binding, call)
            if isinstance(binding, DeclB) and binding.kind == "action":
                return self.inline_action(binding, call)
            function = self.lw.env.functions.get(func.name)
            if function is not None and binding is None:
                return self.inline_function(function, call)[0]
            if func.name in self.lw.env.extern_functions:
                return self.externs.function_call(func.name, call, self.comp, "")
            action = self.lw.env.actions.get(func.name)
            if action is not None:
                return self.inline_action(DeclB("action", action, None), call)
            if func.name == "verify":
                raise not_supported("verify() outside a parser", call.loc)
            if binding is None:
                raise CompileError(f"unknown action or function {func.name}", func.loc)
        raise not_supported("this call", call.loc)

    def _method(self, base: Val, method: str, call: ast.Call) -> list[Json]:
        binding = base.binding
        if isinstance(binding, HeaderB) and method in ("setValid", "setInvalid"):
            op = "add_header" if method == "setValid" else "remove_header"
            return [{"op": op, "parameters": [{"type": "header", "value": binding.instance}]}]
        if isinstance(binding, StackB) and method in ("push_front", "pop_front"):
            count = int(self.comp.const_value(call.args[0].value)) if call.args else 1
            op = "push" if method == "push_front" else "pop"
            kind = ("header_union_stack" if isinstance(binding.type.element, UnionT)
                    else "header_stack")
            return [{"op": op, "parameters": [{"type": kind, "value": binding.name},
                                               hexstr(count, None)]}]
        if isinstance(binding, ExternB):
            if self.in_parser and binding.kind != "packet_in":
                text = self.lw.source.fragment(call.loc)
                raise CompileError(f"{text}: not supported in parser on this target", call.loc)
            return self.externs.method_call(binding, method, call, self.comp)
        if isinstance(binding, DynElemB) and method in ("setValid", "setInvalid"):
            # p4c's JSON for it makes simple_switch abort (Json::LogicError) at load
            raise not_supported(f"{method}() on a header stack element with a run-time index",
                                call.loc)
        if isinstance(binding, DeclB) and method == "apply":
            raise not_supported(f"applying a {binding.kind} inside an action", call.loc)
        raise not_supported(f"method {method} of {describe(base)}", call.loc)

    def inline_action(self, target: DeclB, call: ast.Call) -> list[Json]:
        """The primitives of an action called from another action, parameters copied in
        and out (P4_16 6.8; copies are elided where aliasing gives the same result)."""
        decl = target.action()
        scope = (target.owner.scope if target.owner is not None else self.lw.env.global_scope)
        inner = scope.child()
        args = every_arg(decl.params, call.args, f"action {decl.name}", call.loc)
        frame = self.bind_call(decl.params, args, inner, call.loc)
        sub = StmtLowerer(self.lw, self.externs, inner, local_prefix=self.local_prefix,
                          in_action=True)
        return self.finish_call(frame, sub.lower_body(decl.body.statements))

    # ------------------------------------------------------ copy-in/copy-out
    def bind_call(self, params: list[ast.Param], args: list[ast.Expression], inner: Scope,
                  loc) -> CallFrame:
        """Bind a callee's parameters in ``inner``: storage arguments to placeholders
        (decided by ``finish_call``), constants and control-plane values directly,
        other ``in`` expressions through a temporary."""
        frame = CallFrame(self._side_marks())
        for param, arg in zip(params, args, strict=True):
            t = self.lw.env.resolve(param.type)
            if isinstance(arg, ast.DontCare):
                if param.direction in ("in", "inout"):  # p4c's TypeInference refuses it
                    raise CompileError("don't care argument is only allowed for out "
                                       "parameters", arg.loc)
                # `_`: an out value nobody reads, or (for an action's directionless
                # parameter) a value nobody set
                inner.bind(param.name, self.lw.storage.bind_local(param.name, t, arg.loc))
                continue
            passed = self._passed(param, t, arg, frame.pre)
            if passed is None:
                inner.bind(param.name, self.bind_argument(param, arg, frame.pre))
            else:
                frame.passed.append(passed)
                inner.bind(param.name, passed.holder)
            if param.direction not in ("out", "inout"):
                inner.readonly.add(param.name)
        return frame

    def _passed(self, param: ast.Param, t, arg: ast.Expression, pre: list[Json]) -> Passed | None:
        writes = param.direction in ("out", "inout")
        if writes and isinstance(arg, ast.Slice):
            self.check_writable(arg)
            arg = self._flatten_slice(arg)
            if not isinstance(self.comp.compile(arg.expr).binding, FieldB):
                raise not_supported("a slice of something that is not a field as an "
                                    f"{param.direction} argument", arg.loc)
            self.comp.rvalue(arg, t)  # range and width checks
            holder = placeholder(t)
            assert holder is not None  # a slice is a bit<N>
            return Passed(param, t, arg, None, holder, writes)
        if writes:
            self.check_writable(arg)
            val = self.comp.compile(arg)
            if isinstance(val.binding, DynFieldB | DynElemB):  # h.s[i].f
                return passed_stack_field(self.comp, self.lw.storage, param, t, arg,
                                          val.binding, pre)
            if not isinstance(val.binding, FieldB | HeaderB | UnionB | StructB | StackB):
                raise CompileError(f"argument for {param.direction} parameter {param.name} "
                                   "must be an l-value", arg.loc)
        else:
            if isinstance(arg, ast.StructExpr | ast.ListExpr) and isinstance(t, StructT | HeaderT):
                temp = self.lw.storage.bind_local(param.name, t, arg.loc)
                assert isinstance(temp, StructB | HeaderB)
                pre += self._assign_fields(temp, arg, arg.loc)
                holder = placeholder(t)
                assert holder is not None
                return Passed(param, t, arg, temp, holder, writes)
            val = self.comp.compile(arg, t if isinstance(t, BitT) else None)
            if not isinstance(val.binding, FieldB | HeaderB | UnionB | StructB | StackB):
                return None
        if _is_standard_metadata(val.binding, t):
            t = val.type  # stored as the header instance standard_metadata (storage.py)
        if not same_type(val.type, t):
            raise CompileError(f"type mismatch: parameter {param.name} is {t}, the argument "
                               f"is {val.type}", arg.loc)
        holder = placeholder(t)
        if holder is None:
            raise not_supported(f"a parameter of type {t}", param.loc)
        return Passed(param, t, arg, val.binding, holder, writes)

    def finish_call(self, frame: CallFrame, body: list[Json]) -> list[Json]:
        """Decide alias or copy per parameter, rename the placeholders, add the copies."""
        if not frame.passed:
            return frame.pre + relocate(body, len(frame.pre))
        side = self._side_entries(frame.side_marks)
        used, marked = json_refs([body, side], self._stack_elements)
        renames = Renames()
        copy_in: list[Json] = []
        copy_out: list[Json] = []
        for passed in frame.passed:
            dyn = isinstance(passed.real, DynFieldB)
            if dyn and binding_refs(passed.holder).isdisjoint(used):
                continue  # never touched: p4c's copies of it are dead
            refs = binding_refs(passed.real) if passed.real is not None else set()
            clash = passed.real is None or dyn or overlap(refs, used) or any(
                overlap(refs, binding_refs(other.real)) for other in frame.passed
                if other is not passed and other.real is not None
                and (passed.writes or other.writes))
            if not clash:
                assert passed.real is not None
                renames.pair(passed.holder, passed.real)
                continue
            temp = self.lw.storage.bind_local(passed.param.name, passed.type, passed.param.loc)
            renames.pair(passed.holder, temp)
            if passed.param.direction != "out":
                copy_in += self._copy_to(temp, passed)
            if passed.writes:
                copy_out += self._copy_from(temp, passed)
        renames.apply_to(marked)
        head = frame.pre + copy_in
        return head + relocate(body, len(head)) + copy_out

    def bind_block_args(self, params: list[ast.Param], args: list[ast.Expression], loc
                        ) -> tuple[dict[str, Binding], list[Json], list[Json]]:
        """Parameters of a sub-control (or sub-parser) applied here: (bindings, copy-in
        primitives, copy-out primitives).

        A control reaches no storage but its parameters', so an argument is aliased
        unless another argument of the same call overlaps it (one of them written).
        """
        scope = Scope()
        frame = self.bind_call(params, args, scope, loc)
        copy_in: list[Json] = list(frame.pre)
        copy_out: list[Json] = []
        bindings: dict[str, Binding] = {}
        for param, arg in zip(params, args, strict=True):
            passed = next((p for p in frame.passed if p.param is param), None)
            if passed is not None and isinstance(passed.real, DynFieldB):
                raise not_supported("a field of a header stack element with a run-time "
                                    "index as a control's or parser's argument", arg.loc)
            if passed is None:
                found = scope.lookup(param.name) if isinstance(arg, ast.DontCare) else None
                bindings[param.name] = (found if found is not None
                                        else self.bind_argument(param, arg, copy_in))
                continue
            refs = binding_refs(passed.real) if passed.real is not None else set()
            clash = passed.real is None or any(
                overlap(refs, binding_refs(other.real)) for other in frame.passed
                if other is not passed and other.real is not None
                and (passed.writes or other.writes))
            if not clash:
                assert passed.real is not None
                bindings[param.name] = passed.real
                continue
            temp = self.lw.storage.bind_local(param.name, passed.type, param.loc)
            bindings[param.name] = temp
            if param.direction != "out":
                copy_in += self._copy_to(temp, passed)
            if passed.writes:
                copy_out += self._copy_from(temp, passed)
        return bindings, copy_in, copy_out

    def _copy_to(self, temp, passed: Passed) -> list[Json]:
        if isinstance(passed.real, DynFieldB):
            return stack_field_copy(temp, passed.real)
        if passed.real is None:
            assert isinstance(temp, FieldB)
            return [_assign_prim(temp, self.comp.rvalue(passed.arg, passed.type))]
        return self._copy_binding(temp, passed.real, passed.arg.loc)

    def _copy_from(self, temp, passed: Passed) -> list[Json]:
        if isinstance(passed.real, DynFieldB):
            return stack_field_copy(passed.real, temp)
        if passed.real is None:
            assert isinstance(passed.arg, ast.Slice) and isinstance(temp, FieldB)
            value = Val(temp.type, _field(temp), None, temp)
            return [self._store_slice(passed.arg, value)]
        return self._copy_binding(passed.real, temp, passed.arg.loc)

    def _side_marks(self) -> tuple[int, int, int]:
        return len(self.lw.calculations), len(self.lw.learn_lists), len(self.lw.field_lists)

    def _side_entries(self, marks: tuple[int, int, int]) -> list[Json]:
        """Calculations and lists made while lowering a callee: they may name placeholders."""
        return (self.lw.calculations[marks[0]:] + self.lw.learn_lists[marks[1]:]
                + self.lw.field_lists[marks[2]:])

    def _stack_elements(self, name: str) -> list[str]:
        """The headers a stack, a union or a stack of unions covers."""
        storage = self.lw.storage
        for stack, _, elements in storage.stacks:
            if stack == name:
                return elements
        for union, _, members in storage.unions:
            if union == name:
                return members
        for ustack, _, unions in storage.union_stacks:
            if ustack == name:
                return unions + [h for u in unions for h in self._stack_elements(u)]
        return []

    def bind_argument(self, param: ast.Param, arg: ast.Expression, prims: list[Json]):
        """Bind an argument: out/inout alias the l-value, in values go through a temporary."""
        t = self.lw.env.resolve(param.type)
        if param.direction in ("out", "inout"):
            val = self.comp.compile(arg)
            if val.binding is None or isinstance(val.binding, ConstB | ParamB):
                raise CompileError(f"argument for {param.direction} parameter {param.name} "
                                   "must be an l-value", arg.loc)
            return val.binding
        val = self.comp.compile(arg, t if isinstance(t, BitT) else None)
        if val.const is not None and val.binding is None or isinstance(val.binding, ConstB):
            assert val.const is not None  # a constant's value always carries it
            return ConstB(val.const, t)
        if isinstance(val.binding, FieldB | HeaderB | StructB | StackB | ParamB | ExternB):
            return val.binding
        temp = self.lw.storage.add_scalar(f"{param.name}_tmp", t)
        prims.append(_assign_prim(temp, self.comp.rvalue(arg, t)))
        return temp


_RETURN = "$return"  # the result of the function being inlined


def _func_name(call: ast.Call) -> str:
    return call.func.name if isinstance(call.func, ast.Name) else ""


def _field(binding: FieldB) -> Json:
    return {"type": "field", "value": [binding.header, binding.field]}


def _is_standard_metadata(binding: Binding | None, t: P4Type) -> bool:
    """``standard_metadata`` passed for a ``standard_metadata_t`` parameter."""
    return (isinstance(binding, HeaderB) and binding.instance == STANDARD_METADATA
            and isinstance(t, StructT) and t.name == "standard_metadata_t")


def _assign_prim(binding: FieldB, value: Val) -> Json:
    if isinstance(binding.type, BoolT) != isinstance(value.type, BoolT):
        raise CompileError(f"cannot assign a {value.type} to a {binding.type}", None)
    json = to_param(as_data(value))
    if json.get("type") == "hexstr" and isinstance(binding.type, BitT):
        json = hexstr(int(value.const), width_of(binding.type)) if value.const is not None else json
    return {"op": "assign", "parameters": [_field(binding), json]}

