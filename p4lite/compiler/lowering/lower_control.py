"""Controls to BMv2 pipelines: actions, tables, conditionals and the apply graph.

The apply block is lowered forward into fragments (``pipeline_builder.Frag``);
straight-line statements become hidden actions in hidden keyless tables
(``PipelineBuilder``). Sub-controls are inlined with their instance name as prefix
(``MyIngress.sub.t``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
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
from p4lite.compiler.checks.types import BitT, BoolT, P4Type, width_of
from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.lowering.apply_hoist import nested_apply, split_applies
from p4lite.compiler.lowering.cpmodel import CpAction
from p4lite.compiler.lowering.ctor_args import ctor_bindings
from p4lite.compiler.lowering.expr_values import hexstr
from p4lite.compiler.lowering.externs import Externs, every_arg, match_args
from p4lite.compiler.lowering.hoist_calls import (
    Hoister,
    arg_directions,
    has_call,
    hoisted_type,
    is_bool_temp,
    is_branch_temp,
    scalar_test,
)
from p4lite.compiler.lowering.lower_expr import ExprCompiler, annotated_id
from p4lite.compiler.lowering.lower_stmt import StmtLowerer
from p4lite.compiler.lowering.lower_table import TableLowerer
from p4lite.compiler.lowering.pipeline_builder import (
    EXIT,
    PASS,
    RETURN,
    Frag,
    PipelineBuilder,
    Setter,
    dict_setter,
)

if TYPE_CHECKING:
    from p4lite.compiler.lowering.context import Lowering

Json = dict[str, Any]

class ControlLowerer:
    """One control instance (top-level or inlined) of a pipeline."""

    def __init__(self, lw: Lowering, externs: Externs, pipeline: PipelineBuilder,
                 decl: ast.ControlDecl, prefix: str, param_bindings: dict[str, Binding],
                 readonly: set[str] | None = None) -> None:
        self.lw = lw
        self.externs = externs
        self.pipeline = pipeline
        self.decl = decl
        self.prefix = prefix
        self.scope = Scope(lw.env.global_scope)
        for name, binding in param_bindings.items():
            self.scope.bind(name, binding)
        self.scope.readonly = set(readonly or ())
        self.signature = _signature(param_bindings)  # actions are lowered per binding
        self.return_exits: list[Setter] = []
        self.init_stmts: list[ast.Node] = []
        self.key_copy_stmts: set[int] = set()  # ids of the key_N copies _add_key_copies makes
        self.tables = TableLowerer(lw, self)
        self._declare_locals()

    def rebind(self, param_bindings: dict[str, Binding], readonly: set[str]) -> None:
        """Bind the parameters to another call's arguments."""
        for name, binding in param_bindings.items():
            self.scope.bind(name, binding)
        self.scope.readonly = set(readonly)
        self.signature = _signature(param_bindings)

    # --------------------------------------------------------------- names
    def cp_name(self, decl: ast.Declaration, local: str) -> str:
        """The control-plane name of a local declaration (``@name`` honoured)."""
        ann = decl.annotation("name")
        if ann is not None and ann.args and isinstance(ann.args[0], ast.StringLiteral):
            given = ann.args[0].value
            return given[1:] if given.startswith(".") else f"{self.prefix}.{given}"
        return f"{self.prefix}.{local}"

    # -------------------------------------------------------------- locals
    def _declare_locals(self) -> None:
        comp = ExprCompiler(self.lw.env, self.scope)
        for local in self.decl.locals:
            if isinstance(local, ast.ConstDecl):
                t = self.lw.env.resolve(local.type)
                self.scope.bind(local.name, ConstB(comp.const_value(local.value, t), t))
            elif isinstance(local, ast.VarDecl):
                t = self.lw.env.resolve(local.type)
                binding = self.lw.storage.bind_local(self._local_name(local.name), t, local.loc)
                self.scope.bind(local.name, binding)
                if local.init is not None:
                    self.init_stmts.append(
                        ast.Assign(ast.Name(local.name, loc=local.loc), local.init, loc=local.loc))
            elif isinstance(local, ast.ActionDecl):
                self.scope.bind(local.name, DeclB("action", local, self))
            elif isinstance(local, ast.TableDecl):
                self.scope.bind(local.name, DeclB("table", local, self))
            elif isinstance(local, ast.Instantiation):
                self._instantiate(local, comp)
            else:
                raise not_supported(f"{type(local).__name__} inside a control", local.loc)

    def _local_name(self, name: str) -> str:
        return name if self.prefix.count(".") == 0 else f"{self.prefix.split('.', 1)[1]}.{name}"

    def _instantiate(self, inst: ast.Instantiation, comp: ExprCompiler) -> None:
        type_name = inst.type.name if isinstance(inst.type, ast.TypeName) else None
        control = self.lw.env.controls.get(type_name) if type_name else None
        if control is not None:
            ctor_bindings(comp, control, inst.args, inst.loc)  # checked where declared
            self.scope.bind(inst.name, DeclB("control_instance", control, inst))
            return
        binding = self.externs.declare(inst, self.cp_name(inst, inst.name), comp)
        self.scope.bind(inst.name, binding)

    # ------------------------------------------------------------- actions
    def action_for(self, target: DeclB, loc, bound: list[ast.Argument] | tuple = ()
                   ) -> tuple[int, str, ast.ActionDecl]:
        """The JSON action (created once per binding) for a table or direct call of ``target``.

        ``bound`` are the arguments a table's action list gives to the leading
        (directional) parameters; the remaining parameters come from the control plane.
        """
        decl = target.action()
        owner_key = f"{self.prefix}|{target.owner.signature}" if target.owner is not None else ""
        key = id(decl), owner_key, repr(list(bound))
        cached = self.lw.action_cache.get(key)
        if cached is not None:
            return cached
        owner = target.owner
        scope = owner.scope.child() if owner is not None else self.lw.env.global_scope.child()
        name = owner.cp_name(decl, decl.name) if owner is not None else _global_name(decl)
        runtime_data: list[Json] = []
        params: list[tuple[str, int]] = []
        if len(bound) > len(decl.params):
            raise CompileError(f"too many arguments for action {decl.name}", loc)
        binder = StmtLowerer(self.lw, self.externs, self.scope)
        for arg in bound:
            if arg.name is not None:
                raise not_supported("named arguments in a table's action list", arg.loc)
        frame = binder.bind_call(decl.params[:len(bound)], [a.value for a in bound], scope, loc)
        if frame.pre:
            raise not_supported("an action-list argument that is not an l-value or constant", loc)
        for param in decl.params[len(bound):]:
            if param.direction:
                raise not_supported(f"directional parameter {param.name} without an argument "
                                    "in a table's action list", param.loc)
            t = self.lw.env.resolve(param.type)
            if not isinstance(t, BitT | BoolT):
                raise not_supported(f"action parameter of type {t}", param.loc)
            width = width_of(t)
            scope.bind(param.name, ParamB(len(runtime_data), t))
            runtime_data.append({"name": param.name, "bitwidth": width})
            params.append((param.name, width))
        lowerer = StmtLowerer(self.lw, self.externs, scope, in_action=True)
        prims = binder.finish_call(frame, lowerer.lower_body(decl.body.statements))
        action_id = self.lw.add_action(name, runtime_data, prims, decl.loc)
        fixed_id, id_loc = annotated_id(decl, ExprCompiler(self.lw.env, scope))
        annotations = [_annotation_text(a) for a in decl.annotations
                       if a.name not in _HIDDEN_ANNOTATIONS]
        self.lw.cp_actions[action_id] = CpAction(name, params, fixed_id, annotations, id_loc)
        self.lw.cp_positions[name] = decl.loc
        result = (action_id, name, decl)
        self.lw.action_cache[key] = result
        return result

    def resolve_action(self, name: str, loc) -> DeclB:
        binding = self.scope.lookup(name)
        if isinstance(binding, DeclB) and binding.kind == "action":
            return binding
        action = self.lw.env.actions.get(name)
        if action is not None:
            return DeclB("action", action, None)
        raise CompileError(f"unknown action {name}", loc)

    def action_data(self, decl: ast.ActionDecl, args: list[ast.Argument], loc,
                    skip: int = 0) -> list[str]:
        """Constant arguments of a default action or entry, as hex strings.

        ``skip`` leading parameters were bound in the table's action list; their
        arguments may be repeated here (as P4 requires for default actions) or left out.
        """
        comp = ExprCompiler(self.lw.env, self.scope)
        params = decl.params
        if len(args) == len(params) - skip:
            params = params[skip:]
        elif skip and len(args) == len(params):
            args, params = args[skip:], params[skip:]
        values = match_args(params, args, f"action {decl.name}", loc)
        data = []
        for param, arg in zip(params, values, strict=True):
            if arg is None:
                raise CompileError(f"missing argument for parameter {param.name}", loc)
            t = self.lw.env.resolve(param.type)
            value = comp.const_value(arg, t)
            data.append(hexstr(int(value), None)["value"])  # p4c: minimal digits
        return data

    # --------------------------------------------------------------- apply
    def lower(self) -> Frag:
        """The fragment of this control's apply block (init of locals first)."""
        body = self.decl.body.statements if self.decl.body else []
        frag = self.lower_stmts(self.init_stmts + list(body), self.scope)
        if frag.entry is RETURN:
            return Frag(PASS, [])
        # `return` leaves this control: it continues wherever the control's end does.
        frag.exits += self.return_exits
        self.return_exits = []
        return frag

    def lower_stmts(self, stmts: list[ast.Node], scope: Scope) -> Frag:
        result = Frag(PASS)
        group: list[ast.Node] = []
        inner = scope.child()

        def flush() -> None:
            nonlocal result
            if group:
                result = self.seq(result, self.pipeline.hidden_action(list(group), inner,
                                                                       self.key_copy_stmts))
                group.clear()

        def one(stmt: ast.Node) -> bool:
            """Adds ``stmt``; whether what follows it is unreachable."""
            nonlocal result
            if nested_apply(stmt):  # t.apply().hit inside an expression
                return any(one(part) for part in self._split_applies(stmt, inner))
            if self._is_straight_line(stmt, inner):
                group.append(stmt)
                if isinstance(stmt, ast.VarDecl | ast.ConstDecl):
                    self._declare_in_block(stmt, inner, group)
                return False
            if self.lw.env.functions and isinstance(stmt, ast.If | ast.Switch):
                stmt = self._hoist_calls(stmt, inner, group)
            self._add_key_copies(stmt, inner, group)
            flush()
            result = self.seq(result, self.lower_stmt(stmt, inner))
            return result.entry is not PASS and not result.exits

        for stmt in stmts:
            if one(stmt):
                break  # everything after exit/return is unreachable
        flush()
        return result

    def _split_applies(self, stmt: ast.Node, scope: Scope) -> list[ast.Node]:
        comp = ExprCompiler(self.lw.env, scope)

        def bind(name: str, t: P4Type, label: str, item: ast.Node) -> None:
            scope.bind(name, self.lw.storage.bind_local(label, t, item.loc))
        return split_applies(stmt, self._function_test(scope), comp.compile, self.lw.env,
                             lambda call: arg_directions(self.lw.env.functions, call), bind)

    def _function_test(self, scope: Scope) -> Callable[[ast.Call], bool]:
        def is_function(call: ast.Call) -> bool:
            name = call.func.name if isinstance(call.func, ast.Name) else ""
            return name in self.lw.env.functions and not isinstance(scope.lookup(name), DeclB)
        return is_function

    def _hoist_calls(self, stmt: ast.If | ast.Switch, scope: Scope, group: list[ast.Node]
                     ) -> ast.If | ast.Switch:
        """Function calls in a condition become assignments to temporaries before it."""
        if isinstance(stmt, ast.If):
            if _table_hit_condition(stmt.cond) is not None:
                return stmt
            return dataclasses.replace(stmt, cond=self._hoist_expr(stmt.cond, scope, group))
        return dataclasses.replace(stmt, expr=self._hoist_expr(stmt.expr, scope, group))

    def _hoist_expr(self, expr: ast.Expression, scope: Scope, group: list[ast.Node]
                    ) -> ast.Expression:
        """``expr`` with each function call replaced by a temporary assigned in ``group``."""
        comp = ExprCompiler(self.lw.env, scope)
        hoister = Hoister(self._function_test(scope), scalar_test(comp.compile),
                          lambda call: arg_directions(self.lw.env.functions, call))
        expr = hoister.expr(expr)
        for name, item in hoister.calls:
            if isinstance(item, ast.Statement):  # an inout argument's copy, a && f(x)
                group.append(item)
                continue
            t, label = hoisted_type(name, item, comp.compile, self.lw.env)
            scope.bind(name, self.lw.storage.bind_local(label, t, item.loc))
            if not (is_bool_temp(name) or is_branch_temp(name)):
                # a call's result or an operand read before a call
                assert isinstance(item, ast.Expression)
                group.append(ast.Assign(ast.Name(name, loc=item.loc), item, loc=item.loc))
        return expr

    def _add_key_copies(self, stmt: ast.Node, scope: Scope, group: list[ast.Node]) -> None:
        """Keys of the table ``stmt`` applies that are expressions, copied into ``key_N``.

        As p4c (midend SimplifyKey, which leaves only fields and isValid() as keys): a
        key that is a slice, an operation, a cast or a call is computed into a scalar
        ``key_N`` by a statement just before the one that applies the table, so it joins
        the straight-line statements before it in one hidden action, and the table
        matches on the copy (its P4Info width and entry values are the expression's).
        """
        decl = self._applied_table(stmt, scope)
        if decl is None:
            return
        comp = ExprCompiler(self.lw.env, scope)
        for index, element in enumerate(decl.keys or []):
            expr = element.expr
            if _is_valid_call(expr) or _is_path(expr):
                continue  # a field (or an error the table's lowering reports)
            if self.lw.env.functions and has_call(expr, self._function_test(scope)):
                expr = self._hoist_expr(expr, scope, group)
            elif not isinstance(expr, ast.Slice):
                try:
                    if isinstance(comp.compile(expr).binding, FieldB):
                        continue
                except CompileError:
                    continue  # the table's own lowering reports it
            name = f"key_{self.lw.key_copy_count}"
            self.lw.key_copy_count += 1
            t = comp.compile(expr).type
            binding = self.lw.storage.add_scalar(name, t)
            scope.bind("$" + name, binding)
            loc = element.expr.loc
            copy = ast.Assign(ast.Name("$" + name, loc=loc), expr, loc=loc)
            self.key_copy_stmts.add(id(copy))
            group.append(copy)
            self.tables.key_copies[(id(decl), index)] = binding

    def _applied_table(self, stmt: ast.Node, scope: Scope) -> ast.TableDecl | None:
        """The table that ``stmt`` applies (``t.apply();``, ``if (t.apply().hit)``,
        ``switch (t.apply().action_run)``), if any."""
        expr: ast.Expression | None = None
        if isinstance(stmt, ast.CallStmt):
            func = stmt.call.func
            if isinstance(func, ast.Member) and func.member == "apply":
                expr = func.expr
        elif isinstance(stmt, ast.If):
            hit = _table_hit_condition(stmt.cond)
            if hit is not None:
                expr = hit[0]
        elif isinstance(stmt, ast.Switch):
            sel = stmt.expr
            if (isinstance(sel, ast.Member) and isinstance(sel.expr, ast.Call)
                    and isinstance(sel.expr.func, ast.Member) and sel.expr.func.member == "apply"):
                expr = sel.expr.func.expr
        if expr is None:
            return None
        try:
            target = ExprCompiler(self.lw.env, scope).compile(expr).binding
        except CompileError:
            return None  # the real lowering reports it
        if isinstance(target, DeclB) and target.kind == "table":
            return target.table()
        return None

    def _declare_in_block(self, stmt, scope: Scope, group: list[ast.Node]) -> None:
        group.pop()
        if isinstance(stmt, ast.ConstDecl):
            t = self.lw.env.resolve(stmt.type)
            scope.bind(stmt.name, ConstB(ExprCompiler(self.lw.env, scope).const_value(
                stmt.value, t), t))
            return
        t = self.lw.env.resolve(stmt.type)
        scope.bind(stmt.name, self.lw.storage.bind_local(self._local_name(stmt.name), t, stmt.loc))
        if stmt.init is not None:
            group.append(ast.Assign(ast.Name(stmt.name, loc=stmt.loc), stmt.init, loc=stmt.loc))

    def _is_straight_line(self, stmt: ast.Node, scope: Scope) -> bool:
        if isinstance(stmt, ast.Assign | ast.VarDecl | ast.ConstDecl):
            return True
        if isinstance(stmt, ast.CallStmt):
            func = stmt.call.func
            if isinstance(func, ast.Member) and func.member == "apply":
                return False
            if isinstance(func, ast.Name):
                binding = scope.lookup(func.name)
                decl = binding.action() if isinstance(binding, DeclB) and (
                    binding.kind == "action") else self.lw.env.actions.get(func.name)
                # An action with directional parameters or run-time arguments is inlined
                # into a hidden action; otherwise it gets its own hidden table (as p4c).
                if decl is not None:
                    return any(p.direction for p in decl.params) or not self._constant_args(
                        stmt.call, scope)
            return True
        return False

    def _constant_args(self, call: ast.Call, scope: Scope) -> bool:
        comp = ExprCompiler(self.lw.env, scope)
        for arg in call.args:
            try:
                if comp.compile(arg.value).const is None:
                    return False
            except CompileError:
                return True  # let the real lowering report it
        return True

    def lower_stmt(self, stmt: ast.Node, scope: Scope) -> Frag:
        if isinstance(stmt, ast.Block):
            return self.lower_stmts(stmt.statements, scope)
        if self._is_straight_line(stmt, scope):  # a branch without braces: `else x = 1;`
            return self.lower_stmts([stmt], scope)
        if isinstance(stmt, ast.CallStmt):
            return self._call(stmt.call, scope)
        if isinstance(stmt, ast.If):
            return self._if(stmt, scope)
        if isinstance(stmt, ast.Switch):
            return self._switch(stmt, scope)
        if isinstance(stmt, ast.Exit):
            return Frag(EXIT)
        if isinstance(stmt, ast.Return):
            if stmt.value is not None:
                raise CompileError("a control cannot return a value", stmt.loc)
            return Frag(RETURN)
        if isinstance(stmt, ast.For):  # p4c 34b86e9 writes its body once, with no loop
            raise not_supported("a for loop in an apply block (p4c's BMv2 back end runs its "
                                "body once, without looping: move the loop into an action)",
                                stmt.loc)
        raise not_supported(f"statement {type(stmt).__name__} in an apply block", stmt.loc)

    def _call(self, call: ast.Call, scope: Scope) -> Frag:
        func = call.func
        if isinstance(func, ast.Member) and func.member == "apply":
            target: Binding | None = self._by_type_name(func.expr, scope)
            if target is None:
                target = ExprCompiler(self.lw.env, scope).compile(func.expr).binding
            if isinstance(target, DeclB) and target.kind == "table":
                node, exits = self.tables.apply(target.table(), call.loc)
                return Frag(node, exits)
            if isinstance(target, DeclB) and target.kind == "control_instance":
                return self._apply_subcontrol(target, call, scope)
            raise CompileError("only tables and controls can be applied", call.loc)
        if isinstance(func, ast.Name):
            action = self.resolve_action(func.name, call.loc)
            return self._direct_action(action, call)
        raise not_supported("this call in an apply block", call.loc)

    def _direct_action(self, action: DeclB, call: ast.Call) -> Frag:
        action_id, name, decl = self.action_for(action, call.loc)
        # `act(_)`: the parameter is a value nobody set; p4c's temporary for it is
        # metadata, which BMv2 zeroes for each packet, so 0 reads the same
        args = [dataclasses.replace(a, value=ast.IntLiteral(0, loc=a.loc))
                if isinstance(a.value, ast.DontCare) else a for a in call.args]
        data = self.action_data(decl, args, call.loc)
        return self.pipeline.hidden_table(f"tbl_{decl.name}", action_id, name, data, call.loc)

    def _by_type_name(self, expr: ast.Expression, scope: Scope) -> DeclB | None:
        """``C.apply(...)`` with C a control type: an instance named C, made here."""
        if not isinstance(expr, ast.Name) or scope.lookup(expr.name) is not None:
            return None
        control = self.lw.env.controls.get(expr.name)
        if control is None:
            return None
        if control.ctor_params:  # its constructor arguments are missing
            ctor_bindings(ExprCompiler(self.lw.env, scope), control, [], expr.loc)
        inst = ast.Instantiation(expr.name, ast.TypeName(expr.name, loc=expr.loc), [],
                                 loc=expr.loc)
        return DeclB("control_instance", control, inst)

    def _apply_subcontrol(self, target: DeclB, call: ast.Call, scope: Scope) -> Frag:
        decl = target.control()
        inst: ast.Instantiation = target.owner
        given = every_arg(decl.params, call.args, f"control {decl.name}", call.loc)
        binder = StmtLowerer(self.lw, self.externs, scope)
        bindings, copy_in, copy_out = binder.bind_block_args(decl.params, given, call.loc)
        bindings = {**bindings, **ctor_bindings(ExprCompiler(self.lw.env, self.scope), decl,
                                                inst.args, inst.loc)}
        name = self.cp_name(inst, inst.name)
        readonly = {p.name for p in decl.params if p.direction not in ("out", "inout")}
        sub = self.pipeline.applied_controls.get(name)
        if sub is None:
            sub = ControlLowerer(self.lw, self.externs, self.pipeline, decl, name, bindings,
                                 readonly)
            self.pipeline.applied_controls[name] = sub
        else:
            # applied again: the same instance (its externs and locals), with this call's
            # arguments; a table it applies is then applied twice, which is an error
            sub.rebind(bindings, readonly)
        # P4_16 6.8: arguments are copied in before the control runs, out after it returns
        frag = Frag(PASS)
        if copy_in:
            frag = self.pipeline.hidden_primitives(copy_in, call.loc)
        frag = self.seq(frag, sub.lower())
        if copy_out:
            frag = self.seq(frag, self.pipeline.hidden_primitives(copy_out, call.loc))
        return frag

    def _if(self, stmt: ast.If, scope: Scope) -> Frag:
        hit = _table_hit_condition(stmt.cond)
        if hit is not None:
            table_expr, want_hit = hit
            target = ExprCompiler(self.lw.env, scope).compile(table_expr).binding
            if not (isinstance(target, DeclB) and target.kind == "table"):
                raise CompileError(".hit/.miss need a table", stmt.cond.loc)
            then = self.lower_stmt(stmt.then, scope)
            orelse = self.lower_stmt(stmt.orelse, scope) if stmt.orelse else Frag(PASS)
            hit_frag, miss_frag = (then, orelse) if want_hit else (orelse, then)
            node, exits = self.tables.apply_hit_miss(target.table(), stmt.cond.loc)
            table = self.tables.json_of(target.table())
            out: list[Setter] = [exits]
            self.connect(dict_setter(table["next_tables"], "__HIT__"), hit_frag, out)
            self.connect(dict_setter(table["next_tables"], "__MISS__"), miss_frag, out)
            return Frag(node, out)
        comp = ExprCompiler(self.lw.env, scope)
        cond_val = comp.rvalue(stmt.cond)
        if not isinstance(cond_val.type, BoolT):
            raise CompileError(f"condition must be bool, not {cond_val.type}", stmt.cond.loc)
        if cond_val.const is not None and cond_val.binding is None:
            branch = stmt.then if cond_val.const else stmt.orelse
            return self.lower_stmt(branch, scope) if branch is not None else Frag(PASS)
        conditional = self.pipeline.conditional(comp.condition(stmt.cond), stmt.cond.loc)
        then = self.lower_stmt(stmt.then, scope)
        orelse = self.lower_stmt(stmt.orelse, scope) if stmt.orelse else Frag(PASS)
        out = []
        self.connect(dict_setter(conditional, "true_next"), then, out)
        self.connect(dict_setter(conditional, "false_next"), orelse, out)
        return Frag(conditional["name"], out)

    def _switch(self, stmt: ast.Switch, scope: Scope) -> Frag:
        expr = stmt.expr
        if not (isinstance(expr, ast.Member) and expr.member == "action_run"
                and isinstance(expr.expr, ast.Call) and isinstance(expr.expr.func, ast.Member)
                and expr.expr.func.member == "apply"):
            return self.lower_stmt(_switch_as_ifs(stmt), scope)
        target = ExprCompiler(self.lw.env, scope).compile(expr.expr.func.expr).binding
        if not (isinstance(target, DeclB) and target.kind == "table"):
            raise CompileError("switch needs table.apply().action_run", stmt.loc)
        node, base_exit = self.tables.apply(target.table(), stmt.loc, plain=False)
        table = self.tables.json_of(target.table())
        out: list[Setter] = [base_exit]
        pending: list[str] = []
        covered: set[str] = set()
        default_frag: Frag | None = None
        for case in stmt.cases:
            if isinstance(case.label, ast.Default):
                labels = None
            elif isinstance(case.label, ast.Name):
                labels = self.tables.action_name_in(target.table(), case.label.name, case.label.loc)
            else:
                raise CompileError("switch labels must be action names or default", case.loc)
            if case.body is None:
                if labels is None:
                    raise CompileError("default cannot fall through", case.loc)
                pending.append(labels)
                continue
            frag = self.lower_stmt(case.body, scope)
            if labels is None:
                default_frag = frag
                continue
            for name in pending + [labels]:
                if name in covered:
                    raise CompileError(f"action {name} appears twice in the switch", case.loc)
                covered.add(name)
                self.connect(dict_setter(table["next_tables"], name), frag, out)
            pending = []
        for name in list(table["next_tables"]):
            if name in covered:
                continue
            setter = dict_setter(table["next_tables"], name)
            if default_frag is not None:
                self.connect(setter, default_frag, out)
            else:
                out.append(setter)
        return Frag(node, out)

    # ------------------------------------------------------------ plumbing
    def target(self, setter: Setter, entry: Any) -> None:
        if entry is EXIT:
            setter(None)
        elif entry is RETURN:
            self.return_exits.append(setter)
        else:
            setter(entry)

    def connect(self, setter: Setter, frag: Frag, out: list[Setter]) -> None:
        """Point ``setter`` at ``frag``; what still falls through goes to ``out``."""
        if frag.entry is PASS:
            out.append(setter)
            return
        self.target(setter, frag.entry)
        out.extend(frag.exits)

    def seq(self, first: Frag, second: Frag) -> Frag:
        if first.entry is PASS:
            return second
        if not first.exits or second.entry is PASS:
            return first
        for setter in first.exits:
            self.target(setter, second.entry)
        return Frag(first.entry, second.exits)


def _switch_as_ifs(stmt: ast.Switch) -> ast.Statement:
    """``switch (e) { 1: A  2: 3: B  default: C }`` as ``if (e == 1) A else if ...``.

    p4c builds a table for this; an if-chain has the same meaning (expressions have
    no side effects in the subset) and needs no control plane.
    """
    branches: list[tuple[ast.Expression | None, ast.Statement]] = []
    pending: list[ast.Expression] = []
    for case in stmt.cases:
        if isinstance(case.label, ast.Default):
            if case.body is None:
                raise CompileError("default cannot fall through", case.loc)
            branches.append((None, case.body))
            continue
        pending.append(case.label)
        if case.body is None:
            continue
        cond: ast.Expression | None = None
        for label in pending:
            test = ast.Binary("==", stmt.expr, label, loc=label.loc)
            cond = test if cond is None else ast.Binary("||", cond, test, loc=label.loc)
        branches.append((cond, case.body))
        pending = []
    if pending:
        raise CompileError("the last switch case needs a body", stmt.cases[-1].loc)
    result: ast.Statement = ast.Block([], loc=stmt.loc)
    for cond, body in reversed(branches):
        result = body if cond is None else ast.If(cond, body, result, loc=stmt.loc)
    return result


def _signature(bindings: dict[str, Binding]) -> str:
    """What a control's parameters are bound to, as text (a cache key)."""
    return ";".join(f"{name}={_binding_text(b)}" for name, b in sorted(bindings.items()))


def _binding_text(b: Binding) -> str:
    if isinstance(b, FieldB):
        return f"{b.header}.{b.field}"
    if isinstance(b, HeaderB | UnionB):
        return b.instance
    if isinstance(b, StackB):
        return b.name
    if isinstance(b, StructB):
        return "{" + ",".join(_binding_text(m) for m in b.members.values()) + "}"
    if isinstance(b, ConstB):
        return repr(b.value)
    if isinstance(b, ExternB):
        return b.name
    return type(b).__name__


def _is_path(expr: ast.Expression) -> bool:
    """``a.b.c``: names and members only (no index that might be a run-time one)."""
    while isinstance(expr, ast.Member):
        expr = expr.expr
    return isinstance(expr, ast.Name)


def _is_valid_call(expr: ast.Expression) -> bool:
    return (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Member)
            and expr.func.member == "isValid" and not expr.args)


def _table_hit_condition(cond: ast.Expression) -> tuple[ast.Expression, bool] | None:
    """``t.apply().hit`` -> (t, True); ``.miss`` or ``!...hit`` -> (t, False)."""
    negate = False
    while isinstance(cond, ast.Unary) and cond.op == "!":
        negate = not negate
        cond = cond.operand
    if (isinstance(cond, ast.Member) and cond.member in ("hit", "miss")
            and isinstance(cond.expr, ast.Call) and isinstance(cond.expr.func, ast.Member)
            and cond.expr.func.member == "apply"):
        want_hit = (cond.member == "hit") != negate
        return cond.expr.func.expr, want_hit
    return None


def _global_name(decl: ast.ActionDecl) -> str:
    ann = decl.annotation("name")
    if ann is not None and ann.args and isinstance(ann.args[0], ast.StringLiteral):
        return ann.args[0].value.lstrip(".")
    return decl.name


_HIDDEN_ANNOTATIONS = {"name", "id", "hidden", "defaultonly", "tableonly"}


def _annotation_text(ann: ast.Annotation) -> str:
    return f"@{ann.name}({ann.raw})" if ann.raw else f"@{ann.name}"


def pipeline_from_control(lw: Lowering, externs: Externs, name: str, decl: ast.ControlDecl,
                          bindings: dict[str, Binding], pipeline_id: int,
                          instance: str | None = None) -> Json:
    """``instance``: the control's name when it is not its type's (p4c's MoveConstructors
    names a block made with constructor arguments ``<Type>_0``)."""
    builder = PipelineBuilder(lw, externs, name)
    readonly = {p.name for p in decl.params if p.direction == "in"}
    control = ControlLowerer(lw, externs, builder, decl, instance or decl.name, bindings,
                             readonly)
    frag = control.lower()
    for setter in frag.exits:
        setter(None)
    info_loc = decl.loc
    result = builder.to_json(pipeline_id, frag.entry, info_loc)
    result["source_info"] = lw.source_info(info_loc, decl.name)
    return result


def check_unused(lw: Lowering, decl: ast.ControlDecl, bindings: dict[str, Binding]) -> None:
    """Type-check the control's tables and actions that the apply block never reaches.

    p4c reports errors in unused declarations before removing them; here they are
    lowered into a scratch copy of the state, whose output is thrown away.
    """
    from p4lite.compiler.lowering.context import Lowering as ScratchLowering

    scratch = ScratchLowering(lw.env, lw.source)
    externs = Externs(scratch)
    builder = PipelineBuilder(scratch, externs, "scratch")
    control = ControlLowerer(scratch, externs, builder, decl, decl.name, bindings)
    for local in decl.locals:
        if isinstance(local, ast.TableDecl):
            control.tables.apply(local, local.loc)
        elif isinstance(local, ast.ActionDecl) and not any(p.direction for p in local.params):
            control.action_for(DeclB("action", local, control), local.loc)


__all__ = ["ExternB", "pipeline_from_control", "ControlLowerer", "PipelineBuilder",
           "check_unused"]
