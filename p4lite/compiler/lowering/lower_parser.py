"""The v1model parser to BMv2's ``parser`` object, and select keysets to value/mask.

A select case's value and mask are the key parts, each padded to whole bytes,
then concatenated (12-bit 0xaba and 2-bit 0x3 give ``0x0aba03``). Ranges are
expanded into value/mask pairs, ``_`` is mask 0, and ``accept`` (and, as in
p4c, ``reject``) is ``next_state: null``.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import TYPE_CHECKING, Any

from p4lite.compiler.checks.bindings import (
    ConstB,
    DeclB,
    ExternB,
    FieldB,
    HeaderB,
    Scope,
    StackB,
    StructB,
    UnionB,
)
from p4lite.compiler.checks.types import (
    BitT,
    BoolT,
    ErrorT,
    ExternT,
    HeaderT,
    P4Type,
    StructT,
    UnionT,
    VarbitT,
    width_of,
)
from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.lowering.ctor_args import ctor_bindings
from p4lite.compiler.lowering.expr_values import StackElemB, as_bool, as_data, hexstr, to_param
from p4lite.compiler.lowering.externs import Externs, every_arg
from p4lite.compiler.lowering.hoist_calls import has_call
from p4lite.compiler.lowering.lower_expr import ExprCompiler
from p4lite.compiler.lowering.lower_stmt import StmtLowerer

if TYPE_CHECKING:
    from p4lite.compiler.lowering.context import Lowering

Json = dict[str, Any]


def expand_range(low: int, high: int, width: int) -> list[tuple[int, int]]:
    """Cover [low, high] with aligned power-of-two blocks as (value, mask) pairs."""
    full = (1 << width) - 1
    pairs = []
    while low <= high:
        size = low & -low if low else 1 << width
        while size > high - low + 1:
            size >>= 1
        pairs.append((low, full ^ (size - 1)))
        low += size
    return pairs


def encode_keyset(parts: list[tuple[int, int]], widths: list[int]) -> tuple[str, str | None]:
    """Concatenate byte-padded parts into p4c's value and mask hex strings."""
    value_hex, mask_hex, all_exact = "", "", True
    for (value, mask), width in zip(parts, widths, strict=True):
        nbytes = (width + 7) // 8
        full = (1 << width) - 1
        value_hex += f"{value & mask & full:0{2 * nbytes}x}"
        mask_hex += f"{mask & full:0{2 * nbytes}x}"
        all_exact = all_exact and (mask & full) == full
    return "0x" + value_hex, (None if all_exact else "0x" + mask_hex)


_NOT_IN_PARSERS = {"register", "counter", "direct_counter", "meter", "direct_meter"}


class ParserLowerer:
    """One parser; a sub-parser it applies is inlined: its states are added with the
    instance name as prefix, and its ``accept`` continues the calling state after the
    ``apply`` (as p4c's inliner does)."""

    def __init__(self, lw: Lowering, externs: Externs, decl: ast.ParserDecl,
                 bindings: dict[str, Any], *, prefix: str = "", accept: str | None = None,
                 states: list[Json] | None = None) -> None:
        self.lw = lw
        self.externs = externs
        self.decl = decl
        self.scope = Scope(lw.env.global_scope)
        for name, binding in bindings.items():
            self.scope.bind(name, binding)
        self.state_names = [s.name for s in decl.states]
        self.comp = ExprCompiler(lw.env, self.scope, lookahead=self._lookahead)
        self._lookahead_offset = 0
        self.prefix = prefix
        self.accept = accept  # where `accept` goes: None ends the parse
        self.states: list[Json] = states if states is not None else []
        self._continuations = 0
        self._applied: dict[str, int] = {}
        self._lookaheads = 0

    def lower(self) -> Json:
        self.lower_states()
        for index, state in enumerate(self.states):
            state["id"] = index
        return {"name": "parser", "id": 0, "init_state": "start", "parse_states": self.states}

    def lower_states(self) -> None:
        if "start" not in self.state_names:
            raise CompileError(f"parser {self.decl.name} has no start state", self.decl.loc)
        init_ops, init_stmts = self._locals()
        for state in self.decl.states:
            if state.name in ("accept", "reject"):
                raise CompileError(f"a state cannot be named {state.name}", state.loc)
            ops = init_ops if state.name == "start" else []
            if state.name == "start" and init_stmts:
                state = dataclasses.replace(state, statements=init_stmts + state.statements)
            self._state(state, 0, list(ops))

    def state_name(self, name: str) -> str:
        return self.prefix + name

    def _locals(self) -> tuple[list[Json], list[ast.Node]]:
        """The parser's locals bound; the ops that set their initial values, or (when an
        initialiser calls a function) the assignments that do, in order, to lower as the
        first statements of the start state (where p4c puts them too)."""
        ops: list[Json] = []
        stmts: list[ast.Node] = []
        as_stmts = any(isinstance(local, ast.VarDecl) and self._has_call(local.init)
                       for local in self.decl.locals)
        for local in self.decl.locals:
            if isinstance(local, ast.ConstDecl):
                t = self.lw.env.resolve(local.type)
                self.scope.bind(local.name, ConstB(self.comp.const_value(local.value, t), t))
            elif isinstance(local, ast.VarDecl):
                t = self.lw.env.resolve(local.type)
                binding = self.lw.storage.bind_local(local.name, t, local.loc)
                self.scope.bind(local.name, binding)
                if local.init is not None and as_stmts:
                    stmts.append(ast.Assign(ast.Name(local.name, loc=local.loc), local.init,
                                            loc=local.loc))
                elif local.init is not None:
                    ops += self._set(ast.Name(local.name, loc=local.loc), local.init, local.loc)
            elif isinstance(local, ast.Instantiation):
                type_name = local.type.name if isinstance(local.type, ast.TypeName) else ""
                sub = self.lw.env.parsers.get(type_name)
                if sub is not None:
                    ctor_bindings(self.comp, sub, local.args, local.loc)  # checked here
                    self.scope.bind(local.name, DeclB("parser_instance", sub, local))
                elif isinstance(self.lw.env.resolve(local.type), ExternT):
                    # an extern used by the states' statements (register, counter, ...)
                    name = f"{self.decl.name}.{local.name}"
                    self.scope.bind(local.name, self.externs.declare(local, name, self.comp))
                else:
                    raise not_supported(f"instance of {type_name or 'this type'} inside a "
                                        "parser", local.loc)
            else:
                raise not_supported(f"{type(local).__name__} inside a parser", local.loc)
        return ops, stmts

    # --------------------------------------------------------------- states
    def _state(self, state: ast.ParserState, index: int, ops: list[Json],
               name: str | None = None) -> None:
        self._lookahead_offset = 0
        name = name if name is not None else self.state_name(state.name)
        self._cur = self._add_state(name, ops)
        self._cur["id"] = index
        for stmt in state.statements:
            self._statement(stmt)
        key, transitions = self._transition(state)
        self._cur["transitions"], self._cur["transition_key"] = transitions, key

    def _add_state(self, name: str, ops: list[Json] | None = None) -> Json:
        entry: Json = {"name": name, "id": 0, "parser_ops": ops if ops is not None else [],
                       "transitions": [], "transition_key": []}
        self.states.append(entry)
        return entry

    def _fresh_state(self, base: str) -> Json:
        """A new state, named after ``base`` and unlike every other state's name (p4c
        splits a state at an ``if`` into ``<state>_true``/``_false``/``_join``)."""
        taken = {s["name"] for s in self.states} | {self.state_name(n) for n in self.state_names}
        name, n = base, 0
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        return self._add_state(name)

    def _ops(self, ops: list[Json]) -> None:
        self._cur["parser_ops"].extend(ops)

    def _sub_parser_apply(self, stmt: ast.Node
                          ) -> tuple[ast.ParserDecl, ast.Call, str, list[ast.Argument]] | None:
        if not (isinstance(stmt, ast.CallStmt) and isinstance(stmt.call.func, ast.Member)
                and stmt.call.func.member == "apply"
                and isinstance(stmt.call.func.expr, ast.Name)):
            return None
        name = stmt.call.func.expr.name
        found = self.scope.lookup(name)
        if isinstance(found, DeclB) and found.kind == "parser_instance":
            assert isinstance(found.decl, ast.ParserDecl)
            assert isinstance(found.owner, ast.Instantiation)
            return found.decl, stmt.call, name, found.owner.args
        if found is None and name in self.lw.env.parsers:  # P.apply(...) by type name
            return self.lw.env.parsers[name], stmt.call, name, []
        return None

    def _inline(self, sub: tuple[ast.ParserDecl, ast.Call, str, list[ast.Argument]],
                stmt: ast.Node, cont: str) -> str:
        """Add the states of the applied sub-parser; the name of its start state."""
        decl, call, inst, ctor_args = sub
        # `_` for an out parameter: a local nobody reads, as for a sub-control
        given = every_arg(decl.params, call.args, f"parser {decl.name}", call.loc)
        binder = StmtLowerer(self.lw, self.externs, self.scope, lookahead=self._lookahead)
        bindings, copy_in, copy_out = binder.bind_block_args(decl.params, given, call.loc)
        bindings = {**bindings, **ctor_bindings(self.comp, decl, ctor_args, call.loc)}
        if copy_in or copy_out:
            raise not_supported("sub-parser arguments that overlap or are not l-values",
                                call.loc)
        count = self._applied.get(inst, 0)
        self._applied[inst] = count + 1
        prefix = f"{self.prefix}{inst}{'' if count == 0 else count}_"
        lowerer = ParserLowerer(self.lw, self.externs, decl, bindings, prefix=prefix,
                                accept=cont, states=self.states)
        lowerer.lower_states()
        return lowerer.state_name("start")

    def _statement(self, stmt: ast.Node) -> None:
        """Parser ops of one statement into the current state; an ``if`` (also one that
        a call on the right of ``&&``/``||`` or in a branch of ``?:`` needs) splits it."""
        sub = self._sub_parser_apply(stmt)
        if sub is not None:
            # the rest of this state continues in a state of its own, after the sub-parser
            self._continuations += 1
            cont = f"{self._cur['name']}_{self._continuations}"
            entry = self._cur
            entry["transitions"] = [_default(self._inline(sub, stmt, cont))]
            self._cur = self._add_state(cont)
            return
        if isinstance(stmt, ast.If):
            self._if(stmt)
            return
        if isinstance(stmt, ast.Assign | ast.VarDecl | ast.CallStmt):
            stmt = self._take_lookaheads(stmt)
        if isinstance(stmt, ast.Assign | ast.VarDecl) and self._has_call(stmt):
            # p4c's SideEffectOrdering: the statement lowers as in an action, calls first
            if isinstance(stmt, ast.VarDecl):
                t = self.lw.env.resolve(stmt.type)
                self.scope.bind(stmt.name, self.lw.storage.bind_local(stmt.name, t, stmt.loc))
                assert stmt.init is not None
                stmt = ast.Assign(ast.Name(stmt.name, loc=stmt.loc), stmt.init, loc=stmt.loc)
            self._add_prims(self._lowerer().lower_body([stmt]), stmt.loc)
            return
        if isinstance(stmt, ast.Assign):
            self._ops(self._set(stmt.lhs, stmt.rhs, stmt.loc))
        elif isinstance(stmt, ast.VarDecl):
            t = self.lw.env.resolve(stmt.type)
            self.scope.bind(stmt.name, self.lw.storage.bind_local(stmt.name, t, stmt.loc))
            if stmt.init is not None:
                self._ops(self._set(ast.Name(stmt.name, loc=stmt.loc), stmt.init, stmt.loc))
        elif isinstance(stmt, ast.ConstDecl):
            t = self.lw.env.resolve(stmt.type)
            self.scope.bind(stmt.name, ConstB(self.comp.const_value(stmt.value, t), t))
        elif isinstance(stmt, ast.Block):
            for inner in stmt.statements:
                self._statement(inner)
        elif isinstance(stmt, ast.CallStmt):
            self._call(stmt.call, stmt.loc)
        else:
            raise not_supported(f"statement {type(stmt).__name__} in a parser state", stmt.loc)

    def _lowerer(self) -> StmtLowerer:
        return StmtLowerer(self.lw, self.externs, self.scope, lookahead=self._lookahead)

    def _has_call(self, node: ast.Node | None) -> bool:
        lowerer = self._lowerer()
        return bool(self.lw.env.functions) and has_call(node, lowerer.is_function_call)

    def _hoist(self, exprs: list[ast.Expression], loc) -> list[ast.Expression]:
        """``exprs`` (left to right) with their function calls run first, into
        temporaries bound in the parser's scope; an operand left of a call is read
        before it (P4_16 8.1)."""
        lowerer = self._lowerer()
        hoister = lowerer.hoister()
        out = []
        for i, e in enumerate(exprs):
            out.append(hoister.snapshot(hoister.expr(e), exprs[i + 1:]))
        prims: list[Json] = []
        lowerer.run_hoisted(hoister, prims)
        self._add_prims(prims, loc)
        return out

    def _if(self, stmt: ast.If) -> None:
        """``if`` in a parser state, as p4c's RemoveParserIfs: the state ends with a
        ``select`` on the condition, each branch is a state of its own, and the rest
        of the statements continue in a join state."""
        cond_expr = self._take_lookaheads(stmt.cond)
        if self._has_call(cond_expr):
            cond_expr = self._hoist([cond_expr], stmt.loc)[0]
        cond = self.comp.rvalue(cond_expr)
        if not isinstance(cond.type, BoolT):
            raise CompileError(f"condition must be bool, not {cond.type}", stmt.cond.loc)
        if cond.const is not None and cond.binding is None:
            branch = stmt.then if cond.const else stmt.orelse
            if branch is not None:
                self._statement(branch)
            return
        base = self._cur["name"]
        then_state = self._fresh_state(f"{base}_true")
        else_state = self._fresh_state(f"{base}_false") if stmt.orelse is not None else None
        join = self._fresh_state(f"{base}_join")
        self._branch(as_data(cond), then_state["name"],
                     (else_state or join)["name"])
        self._cur = then_state
        self._statement(stmt.then)
        self._cur["transitions"] = [_default(join["name"])]
        if else_state is not None:
            assert stmt.orelse is not None
            self._cur = else_state
            self._statement(stmt.orelse)
            self._cur["transitions"] = [_default(join["name"])]
        self._cur = join

    def _branch(self, data: Json, if_true: str, if_false: str) -> None:
        """End the current state with a select on ``data`` (0 or 1)."""
        temp = self.lw.storage.add_scalar("tmp", BitT(1))
        key = {"type": "field", "value": [temp.header, temp.field]}
        self._ops([{"op": "set", "parameters": [key, to_param(data)]}])
        self._cur["transition_key"] = [key]
        self._cur["transitions"] = [
            {"type": "hexstr", "value": "0x01", "mask": None, "next_state": if_true},
            _default(if_false)]

    def _add_prims(self, prims: list[Json], loc) -> None:
        """Primitives as ``primitive`` parser ops. Their ``_jump_if_zero``/``_jump``s
        (from a call's ``if``: ``a && f(x)``, ``c ? f(x) : y``) become states: each
        straight run of primitives is a state, a conditional jump a select on a bit."""
        for prim in prims:
            if prim["op"] == "exit":
                raise not_supported("exit inside a parser state", loc)

        def target(i: int) -> int | None:
            op = prims[i]["op"]
            if op not in ("_jump", "_jump_if_zero"):
                return None
            param = prims[i]["parameters"][0 if op == "_jump" else 1]
            to = int(param["value"], 16)
            return None if op == "_jump" and to == i + 1 else to  # to the next: nothing

        jumps = {i: to for i in range(len(prims)) if (to := target(i)) is not None}
        if not jumps:
            self._ops([{"op": "primitive", "parameters": [p]} for p in prims
                       if p["op"] != "_jump"])
            return
        end = len(prims)
        leaders = sorted({0} | set(jumps.values()) | {i + 1 for i in jumps})
        base = self._cur["name"]
        states = {0: self._cur}
        for leader in leaders[1:]:
            states[leader] = self._fresh_state(f"{base}_{'join' if leader == end else 'b'}")
        bounds = leaders if leaders[-1] == end else [*leaders, end]
        for start, stop in itertools.pairwise(bounds):
            self._cur = states[start]
            last = stop - 1
            for i in range(start, stop):
                if prims[i]["op"] not in ("_jump", "_jump_if_zero"):
                    self._ops([{"op": "primitive", "parameters": [prims[i]]}])
            if last in jumps and prims[last]["op"] == "_jump":
                self._cur["transitions"] = [_default(states[jumps[last]]["name"])]
            elif last in jumps:  # _jump_if_zero: to the target when the data is 0
                self._branch(prims[last]["parameters"][0], states[stop]["name"],
                             states[jumps[last]]["name"])
            elif stop in states:
                self._cur["transitions"] = [_default(states[stop]["name"])]
        # the statements after these continue in the last state
        self._cur = states.get(end, self._cur)

    def _set(self, lhs: ast.Expression, rhs: ast.Expression, loc) -> list[Json]:
        target = self.comp.compile(lhs)
        if not isinstance(target.binding, FieldB):
            return self._primitives([ast.Assign(lhs, rhs, loc=loc)])
        value = self.comp.rvalue(rhs, target.type)
        return [{"op": "set", "parameters": [
            {"type": "field", "value": [target.binding.header, target.binding.field]},
            to_param(as_data(value))]}]

    def _call(self, call: ast.Call, loc) -> None:
        if self._has_call(call):
            lowerer = self._lowerer()
            if lowerer.is_function_call(call):  # f(x); as in an action
                self._add_prims(lowerer.lower_body([ast.CallStmt(call, loc=loc)]), loc)
                return
            # a call in an argument (verify, extract, advance) runs first
            hoister = lowerer.hoister()
            call = hoister.call_args(call)
            prims: list[Json] = []
            lowerer.run_hoisted(hoister, prims)
            self._add_prims(prims, loc)
        func = call.func
        if isinstance(func, ast.Name) and func.name == "verify":
            if len(call.args) != 2:
                raise CompileError("verify takes 2 arguments", call.loc)
            cond = self.comp.condition(call.args[0].value)
            err = self.comp.rvalue(call.args[1].value)
            if not isinstance(err.type, ErrorT):
                raise CompileError(f"verify needs an error code, not {err.type}",
                                   call.args[1].value.loc)
            if not isinstance(err.json, dict) or err.const is None:
                raise not_supported("verify with an error that is not a constant", call.loc)
            self._ops([{"op": "verify", "parameters": [cond, err.json]}])
            return
        if isinstance(func, ast.Member):
            base = self.comp.compile(func.expr)
            if isinstance(base.binding, ExternB) and base.binding.kind == "packet_in":
                self._ops(self._packet_method(func.member, call))
                return
            if isinstance(base.binding, ExternB) and base.binding.kind in _NOT_IN_PARSERS:
                # p4c's BMv2 back end (ParserConverter) has no parser op for them
                text = self.lw.source.fragment(call.loc)
                raise CompileError(f"{text}: not supported in parser on this target", call.loc)
        self._ops(self._primitives([ast.CallStmt(call, loc=loc)]))

    def _primitives(self, stmts: list[ast.Node]) -> list[Json]:
        prims = self._lowerer().lower_body(stmts)
        for prim in prims:
            if prim["op"].startswith("_jump") or prim["op"] == "exit":
                raise not_supported("control flow inside a parser state", stmts[0].loc)
        return [{"op": "primitive", "parameters": [p]} for p in prims]

    def _packet_method(self, method: str, call: ast.Call) -> list[Json]:
        if method == "extract":
            if len(call.args) not in (1, 2):
                raise CompileError("extract takes a header and, for a header with a varbit "
                                   "field, its length in bits", call.loc)
            target = self.comp.compile(call.args[0].value)
            binding = target.binding
            if len(call.args) == 2 or _has_varbit(target.type):
                return self._extract_vl(call, binding)
            if isinstance(binding, HeaderB):
                self._lookahead_offset = 0
                return [{"op": "extract", "parameters": [
                    {"type": "regular", "value": binding.instance}]}]
            if (isinstance(binding, StackElemB) and binding.which == "next"
                    and binding.member is not None):  # a member of a stack of unions
                return [{"op": "extract", "parameters": [
                    {"type": "union_stack", "value": [binding.stack.name, binding.member]}]}]
            if (isinstance(binding, StackElemB) and binding.which == "next"
                    and isinstance(binding.stack.type.element, HeaderT)):
                return [{"op": "extract", "parameters": [
                    {"type": "stack", "value": binding.stack.name}]}]
            raise CompileError("extract needs a header or stack.next", call.args[0].loc)
        if method == "advance":
            if len(call.args) != 1:
                raise CompileError("advance takes 1 argument", call.loc)
            bits = self.comp.rvalue(call.args[0].value, BitT(32))
            return [{"op": "advance", "parameters": [to_param(bits.operand)]}]
        if method == "lookahead":
            # the value is not used: nothing to do (BMv2's lookahead never fails)
            if len(call.type_args) != 1 or call.args:
                raise CompileError("lookahead takes one type argument and no arguments",
                                   call.loc)
            t = self.lw.env.resolve(call.type_args[0])
            if not isinstance(t, HeaderT | StructT):
                self._lookahead(t, call.loc)
            return []
        raise not_supported(f"packet_in.{method} as a statement", call.loc)

    def _extract_vl(self, call: ast.Call, binding: Any) -> list[Json]:
        """``pkt.extract(h, len)``: BMv2's extract_VL, the varbit field ``len`` bits long."""
        arg = call.args[0].value
        target: Json = {"type": "regular", "value": getattr(binding, "instance", None)}
        if (isinstance(binding, StackElemB) and binding.which == "next"
                and binding.member is None and isinstance(binding.stack.type.element, HeaderT)):
            target = {"type": "stack", "value": binding.stack.name}  # as p4c: stack.next
            binding = HeaderB(binding.stack.name, binding.stack.type.element)
        elif not isinstance(binding, HeaderB):
            raise not_supported("extract with a length into anything but a header or a "
                                "stack's .next", arg.loc)
        if not _has_varbit(binding.type):
            raise CompileError(f"header {binding.type.name} has no varbit field: extract it "
                               "without a length", call.loc)
        if len(call.args) != 2:
            raise CompileError(f"header {binding.type.name} has a varbit field: extract needs "
                               "its length in bits as a second argument", call.loc)
        length = self.comp.rvalue(call.args[1].value, BitT(32))
        self._lookahead_offset = 0
        # p4c's form: the length as an "expression" parameter around its expression
        return [{"op": "extract_VL", "parameters": [
            target, {"type": "expression", "value": length.operand}]}]

    def _lookahead(self, t: P4Type, loc) -> Json:
        if not isinstance(t, BitT | BoolT):
            raise not_supported(f"lookahead of type {t} here", loc)
        return {"type": "lookahead", "value": [0, width_of(t)]}

    def _take_lookaheads(self, node: Any) -> Any:
        """``node`` with each ``pkt.lookahead<T>()`` of a header or struct type ``T``
        replaced by a temporary of type ``T``, filled now as p4c does: the next
        bits into one scalar, each field a slice of it (a header becomes valid)."""
        if isinstance(node, ast.CallStmt):  # `pkt.lookahead<H>();` itself reads nothing
            call = node.call
            return dataclasses.replace(node, call=dataclasses.replace(
                call, args=[self._take_lookaheads(a) for a in call.args]))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Member)
                and node.func.member == "lookahead" and len(node.type_args) == 1
                and not node.args):
            t = self.lw.env.resolve(node.type_args[0])
            if isinstance(t, HeaderT | StructT):
                return ast.Name(self._fill_lookahead(t, node.loc), loc=node.loc)
            return node
        if not isinstance(node, ast.Node):
            return node
        return ast.rebuilt(node, self._take_lookaheads)

    def _fill_lookahead(self, t: HeaderT | StructT, loc) -> str:
        binding = self.lw.storage.bind_local("tmp", t, loc)
        leaves: list[FieldB] = []
        _leaf_fields(binding, leaves, t, loc)
        total = sum(width_of(leaf.type) for leaf in leaves)
        bits = self.lw.storage.add_scalar("tmp", BitT(total))
        self._lookaheads += 1
        bits_name, name = f"$lab{self._lookaheads}", f"$la{self._lookaheads}"
        self.scope.bind(bits_name, bits)
        self.scope.bind(name, binding)
        ops: list[Json] = [{"op": "set", "parameters": [
            {"type": "field", "value": [bits.header, bits.field]},
            {"type": "lookahead", "value": [0, total]}]}]
        if isinstance(binding, HeaderB):
            ops.append({"op": "primitive", "parameters": [{"op": "add_header", "parameters": [
                {"type": "header", "value": binding.instance}]}]})
        low = total
        for leaf in leaves:
            high, low = low - 1, low - width_of(leaf.type)
            part = ast.Slice(ast.Name(bits_name, loc=loc), ast.IntLiteral(high, loc=loc),
                             ast.IntLiteral(low, loc=loc), loc=loc)
            ops.append({"op": "set", "parameters": [
                {"type": "field", "value": [leaf.header, leaf.field]},
                to_param(as_data(self.comp.rvalue(part)))]})
        self._ops(ops)
        return name

    # ---------------------------------------------------------- transitions
    def _transition(self, state: ast.ParserState):
        trans = state.transition
        if trans is None:
            return [], [_default(None)]
        if isinstance(trans, ast.Name):
            return [], [_default(self._next(trans.name, trans.loc))]
        if not isinstance(trans, ast.SelectExpr):
            raise not_supported("this transition", trans.loc)
        key_exprs = [self._take_lookaheads(k) for k in trans.keys]
        if self._has_call(trans):  # select(f(x)): the calls run first, in this state
            key_exprs = self._hoist(key_exprs, trans.loc)
        keys, widths = [], []
        for key_expr in key_exprs:
            key_json, width = self._select_key(key_expr, self._cur["parser_ops"])
            keys.append(key_json)
            widths.append(width)
        transitions = []
        for case in trans.cases:
            target = self._next(case.next_state, case.loc)
            keysets = case.keysets
            if len(keysets) == 1 and isinstance(keysets[0], ast.Default | ast.DontCare) and (
                    len(widths) != 1 or isinstance(keysets[0], ast.Default)):
                transitions.append(_default(target))
                continue
            if len(keysets) != len(widths):
                raise CompileError(f"select has {len(widths)} keys, case has {len(keysets)}",
                                   case.loc)
            options = [self._keyset_options(ks, w) for ks, w in zip(keysets, widths, strict=True)]
            for parts in itertools.product(*options):
                if all(m == 0 for _, m in parts):
                    transitions.append(_default(target))
                    continue
                value, mask = encode_keyset(list(parts), widths)
                transitions.append({"type": "hexstr", "value": value, "mask": mask,
                                    "next_state": target})
        return keys, transitions

    def _next(self, name: str, loc) -> str | None:
        if name == "accept":
            return self.accept
        if name == "reject":
            return None  # p4c: BMv2 has no explicit reject transition
        if name not in self.state_names:
            raise CompileError(f"unknown parser state {name}", loc)
        return self.state_name(name)

    def _select_key(self, e: ast.Expression, ops: list[Json]) -> tuple[Json, int]:
        val = self.comp.rvalue(e)
        if isinstance(val.type, BoolT):
            width = 1
        else:
            if not isinstance(val.type, BitT):
                raise not_supported(f"select on a value of type {val.type}", e.loc)
            width = val.type.width
        json = val.operand
        if json.get("type") in ("field", "stack_field", "lookahead"):
            return json, width
        # p4c evaluates other key expressions into a temporary first.
        temp = self.lw.storage.add_scalar("tmp", val.type if width != 1 else BitT(1))
        value = as_data(val) if isinstance(val.type, BoolT) else val.operand
        ops.append({"op": "set", "parameters": [
            {"type": "field", "value": [temp.header, temp.field]}, to_param(value)]})
        return {"type": "field", "value": [temp.header, temp.field]}, width

    def _keyset_options(self, ks: ast.Expression, width: int) -> list[tuple[int, int]]:
        full = (1 << width) - 1
        t = BitT(width)
        if isinstance(ks, ast.DontCare | ast.Default):
            return [(0, 0)]
        if isinstance(ks, ast.Mask):
            return [(self._int(ks.left, t), self._int(ks.right, t))]
        if isinstance(ks, ast.Range):
            low, high = self._int(ks.left, t), self._int(ks.right, t)
            if low > high:
                return []
            return expand_range(low, high, width)
        return [(self._int(ks, t), full)]

    def _int(self, e: ast.Expression, t: BitT) -> int:
        val = self.comp.compile(e)
        if val.const is None:
            raise CompileError("select case values must be compile-time constants", e.loc)
        if isinstance(val.type, BitT) and val.type.width != t.width:
            raise CompileError(f"case value has type {val.type}, the select key is {t}", e.loc)
        return int(val.const) & ((1 << t.width) - 1)


def _default(target: str | None) -> Json:
    return {"type": "default", "value": None, "mask": None, "next_state": target}


def deparser_order(lw: Lowering, decl: ast.ControlDecl, bindings: dict[str, Any]) -> list[str]:
    """Header instances in the order the deparser emits them."""
    scope = Scope(lw.env.global_scope)
    for name, binding in bindings.items():
        scope.bind(name, binding)
    comp = ExprCompiler(lw.env, scope)
    order: list[str] = []
    for stmt in _flatten(decl.body.statements if decl.body else []):
        if not (isinstance(stmt, ast.CallStmt) and isinstance(stmt.call.func, ast.Member)
                and stmt.call.func.member == "emit"):
            raise not_supported("deparser statements other than packet.emit(...)", stmt.loc)
        packet = comp.compile(stmt.call.func.expr).binding
        if not (isinstance(packet, ExternB) and packet.kind == "packet_out"):
            raise CompileError("emit needs the packet_out parameter", stmt.loc)
        if len(stmt.call.args) != 1:
            raise CompileError("emit takes 1 argument", stmt.loc)
        _emit_binding(comp.compile(stmt.call.args[0].value).binding, order, stmt.loc)
    return order


def _emit_binding(binding: Any, order: list[str], loc) -> None:
    if isinstance(binding, HeaderB):
        order.append(binding.instance)
    elif isinstance(binding, UnionB):  # BMv2 emits the valid member, if any
        order.extend(h.instance for h in binding.members.values())
    elif isinstance(binding, StackB) and isinstance(binding.type.element, UnionT):
        for i in range(binding.type.size):
            order.extend(f"{binding.name}[{i}].{m}" for m, _ in binding.type.element.members())
    elif isinstance(binding, StackB):
        order.extend(f"{binding.name}[{i}]" for i in range(binding.type.size))
    elif isinstance(binding, StructB):
        for fname, _ in binding.type.fields:
            member = binding.members[fname]
            if isinstance(member, HeaderB | UnionB | StackB | StructB):
                _emit_binding(member, order, loc)
    else:
        raise CompileError("emit needs a header, a header union, a header stack or a struct "
                           "of headers", loc)


def _leaf_fields(binding: Any, out: list[FieldB], t: P4Type, loc) -> None:
    """The scalar fields of a lookahead's header or struct, in wire order."""
    if isinstance(binding, HeaderB):
        for fname, ft in binding.type.fields:
            if isinstance(ft, VarbitT):
                raise not_supported(f"lookahead of a header with a varbit field ({t})", loc)
            out.append(FieldB(binding.instance, fname, ft))
    elif isinstance(binding, StructB):
        for fname, _ in binding.type.fields:
            _leaf_fields(binding.members[fname], out, t, loc)
    elif isinstance(binding, FieldB):
        out.append(binding)
    else:
        raise not_supported(f"lookahead of {t}: a struct holding anything but bits, bools, "
                            "enums and structs", loc)


def _has_varbit(t: Any) -> bool:
    return isinstance(t, HeaderT) and any(isinstance(ft, VarbitT) for _, ft in t.fields)


def _flatten(stmts: list[ast.Node]) -> list[ast.Node]:
    out: list[ast.Node] = []
    for stmt in stmts:
        if isinstance(stmt, ast.Block):
            out += _flatten(stmt.statements)
        else:
            out.append(stmt)
    return out


__all__ = ["ParserLowerer", "deparser_order", "expand_range", "encode_keyset", "as_bool",
           "hexstr"]
