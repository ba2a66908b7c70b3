"""Tables: keys, action lists, default actions, const entries, direct resources.

A table is lowered for the control that applies it. What the table needs of
that control is the ``TableOwner`` protocol below, so this module does not
import lower_control (which creates the ``TableLowerer``): no import circle.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from p4lite.compiler.checks.bindings import DeclB, ExternB, FieldB, Scope
from p4lite.compiler.checks.target_checks import name_loc
from p4lite.compiler.checks.types import BitT, width_of
from p4lite.compiler.errors import CompileError, not_supported
from p4lite.compiler.frontend import ast
from p4lite.compiler.lowering.cpmodel import (
    SCOPE_DEFAULT_ONLY,
    SCOPE_TABLE_AND_DEFAULT,
    SCOPE_TABLE_ONLY,
    CpKey,
    CpTable,
)
from p4lite.compiler.lowering.expr_values import hex_text
from p4lite.compiler.lowering.lower_expr import ExprCompiler, annotated_id

Json = dict[str, Any]
_MATCH_KINDS = ("exact", "lpm", "ternary", "range", "optional")
# p4c names an un-annotated ``h.isValid()`` key ``h.$valid$`` (JSON and P4Info); BMv2's STF
# runner and controllers look keys up by that name.
_VALID_CALL = re.compile(r"\.\s*isValid\s*\(\s*\)\s*$")
DEFAULT_SIZE = 1024


class TablePipeline(Protocol):
    """The pipeline a lowered table is appended to."""

    tables: list[Json]


class TableOwner(Protocol):
    """What a table needs of the control it is applied in (lower_control.ControlLowerer)."""

    @property
    def scope(self) -> Scope: ...

    @property
    def pipeline(self) -> TablePipeline: ...

    def cp_name(self, decl: ast.Declaration, local: str) -> str: ...

    def resolve_action(self, name: str, loc: Any) -> DeclB: ...

    def action_for(self, target: DeclB, loc: Any, bound: list[ast.Argument] | tuple = ()
                   ) -> tuple[int, str, ast.ActionDecl]: ...

    def action_data(self, decl: ast.ActionDecl, args: list[ast.Argument], loc: Any,
                    skip: int = 0) -> list[str]: ...


class TableLowerer:
    def __init__(self, lw, control: TableOwner) -> None:
        self.lw = lw
        self.control = control
        self._tables: dict[int, Json] = {}
        self._keys: dict[int, list[tuple[str, int]]] = {}
        self._bound: dict[int, tuple[int, str, int]] = {}
        # id(table decl) -> id(action decl) -> the JSON name of the table's (bound) action
        self._listed: dict[int, dict[int, str]] = {}
        # (id(table decl), key index) -> the scalar key_N a sliced key is copied into
        self.key_copies: dict[tuple[int, int], FieldB] = {}

    def json_of(self, decl: ast.TableDecl) -> Json:
        return self._tables[id(decl)]

    def action_name_in(self, decl: ast.TableDecl, name: str, loc) -> str:
        table = self._tables[id(decl)]
        action = self.control.resolve_action(name, loc)
        # the table's own version of the action: with the arguments its action list binds
        json_name = self._listed.get(id(decl), {}).get(id(action.decl))
        if json_name is None or json_name not in table["actions"]:
            raise CompileError(f"action {name} is not an action of table {decl.name}", loc)
        return json_name

    # --------------------------------------------------------------- apply
    def apply(self, decl: ast.TableDecl, loc, plain: bool = True):
        table = self._lower(decl, loc)
        base = _setter(table, "base_default_next")
        if not plain:
            return table["name"], base
        exits = [base] + [_setter(table["next_tables"], a) for a in table["actions"]]
        return table["name"], exits

    def apply_hit_miss(self, decl: ast.TableDecl, loc):
        table = self._lower(decl, loc)
        table["next_tables"] = {"__HIT__": None, "__MISS__": None}
        return table["name"], _setter(table, "base_default_next")

    def _lower(self, decl: ast.TableDecl, loc) -> Json:
        if id(decl) in self._tables:
            raise not_supported(f"applying table {decl.name} more than once", loc)
        lw, control = self.lw, self.control
        self._bound = {}  # per table: its action list's argument bindings
        name = control.cp_name(decl, decl.name)
        lw.node_names.reserve(name)
        lw.next_node_number()
        comp = ExprCompiler(lw.env, control.scope)
        keys, cp_keys = self._keys_of(decl, comp, name)
        actions, cp_actions = self._actions_of(decl)
        default_id, default_data, default_const, default_name = self._default_of(decl, actions)
        if default_name not in [a[1] for a in actions]:
            raise CompileError(f"default action {default_name} is not in the table's actions",
                               decl.loc)
        size = int(comp.const_value(decl.size)) if decl.size is not None else DEFAULT_SIZE
        table: Json = {
            "name": name, "id": lw.table_count,
            "source_info": lw.source_info(decl.loc, decl.name),
            "key": keys, "match_type": _table_match_type(keys), "type": "simple",
            "max_size": size, "with_counters": False, "support_timeout": False,
            "direct_meters": None,
            "action_ids": [a[0] for a in actions], "actions": [a[1] for a in actions],
            "base_default_next": None,
            "next_tables": {a[1]: None for a in actions},
            "default_entry": {"action_id": default_id, "action_const": default_const,
                              "action_data": default_data, "action_entry_const": default_const},
        }
        lw.table_count += 1
        fixed_id, id_loc = annotated_id(decl, comp)
        cp = CpTable(name, cp_keys, cp_actions, default_name,
                     [int(v, 16) for v in default_data], default_const, size,
                     decl.entries_const, bool(decl.entries), fixed_id=fixed_id,
                     default_explicit=decl.default_action is not None, id_loc=id_loc)
        self._properties(decl, table, cp, comp)
        if decl.entries:
            table["entries"] = self._entries(decl, keys, actions, comp)
        self._tables[id(decl)] = table
        control.pipeline.tables.append(table)
        if decl.annotation("hidden") is None:
            lw.cp.tables.append(cp)
            lw.cp_positions[name] = decl.loc
            for action_id, _, _ in actions:
                lw.cp_used_actions.add(action_id)
        return table

    # ----------------------------------------------------------------- keys
    def _keys_of(self, decl: ast.TableDecl, comp: ExprCompiler, name: str = ""
                 ) -> tuple[list[Json], list[CpKey]]:
        keys: list[Json] = []
        cp_keys: list[CpKey] = []
        widths: list[tuple[str, int]] = []
        for index, element in enumerate(decl.keys or []):
            if element.match_kind not in _MATCH_KINDS:
                raise not_supported(f"match kind {element.match_kind}", element.loc)
            copy = self.key_copies.get((id(decl), index))
            if copy is not None:
                target, mask, width = [copy.header, copy.field], None, width_of(copy.type)
            else:
                target, mask, width = self._key_target(element.expr, comp)
            ann = element.annotation("name")
            if ann is None and not _nameable(element.expr):
                # p4c's KeyNameGenerator (frontends/p4/tableKeyNames.cpp)
                raise CompileError(f"{element.text}: Complex key expression requires a @name "
                                   "annotation", element.expr.loc)
            key_name = (ann.args[0].value if ann and ann.args and isinstance(
                ann.args[0], ast.StringLiteral) else _VALID_CALL.sub(".$valid$", element.text))
            kind = "ternary" if element.match_kind == "optional" else element.match_kind
            keys.append({"match_type": kind, "name": key_name, "target": target, "mask": mask})
            cp_keys.append(CpKey(key_name, width, element.match_kind))
            widths.append((kind, width))
        if sum(1 for k in keys if k["match_type"] == "lpm") > 1:
            # p4c's BMv2 back end (control.cpp), at the table's name
            raise CompileError(f"multiple LPM keys in table {name or decl.name} not supported",
                               name_loc(decl, decl.name, self.lw.source))
        self._keys[id(decl)] = widths
        return keys, cp_keys

    def _key_target(self, expr: ast.Expression, comp: ExprCompiler):
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Member) and (
                expr.func.member == "isValid"):
            base = comp.compile(expr.func.expr)
            if base.binding is None or not hasattr(base.binding, "instance"):
                raise CompileError("isValid() needs a header", expr.loc)
            return [base.binding.instance, "$valid$"], None, 1
        if isinstance(expr, ast.Slice):
            base = comp.compile(expr.expr)
            if not isinstance(base.binding, FieldB):
                raise not_supported("a table key slice of something that is not a field", expr.loc)
            hi, lo = int(comp.const_value(expr.hi)), int(comp.const_value(expr.lo))
            full = width_of(base.type)
            if not full > hi >= lo >= 0:
                raise CompileError(f"slice [{hi}:{lo}] out of range for {base.type}", expr.loc)
            mask = ((1 << (hi - lo + 1)) - 1) << lo
            return [base.binding.header, base.binding.field], hex_text(mask, full), hi - lo + 1
        if self.lw.env.functions and any(isinstance(n, ast.Call) for n in ast.walk(expr)):
            # only a table that is never applied gets here (applied ones match on a key_N
            # copy): its output is dropped, its key only type-checked
            return ["scalars", "$unapplied"], None, 0
        val = comp.compile(expr)
        if not isinstance(val.binding, FieldB):
            # an expression key of a table that is never applied (see above)
            return ["scalars", "$unapplied"], None, width_of(val.type)
        return [val.binding.header, val.binding.field], None, width_of(val.type)

    # -------------------------------------------------------------- actions
    def _actions_of(self, decl: ast.TableDecl):
        actions: list[tuple[int, str, ast.ActionDecl]] = []
        cp_actions: list[tuple[str, str]] = []
        refs = list(decl.actions or [])
        if decl.default_action is None and not any(r.name == "NoAction" for r in refs):
            refs.append(ast.ActionRef("NoAction", loc=decl.loc,
                                      annotations=[ast.Annotation("defaultonly", loc=decl.loc)]))
        for ref in refs:
            action = self.control.resolve_action(ref.name, ref.loc)
            action_id, json_name, action_decl = self.control.action_for(action, ref.loc,
                                                                        ref.args)
            self._bound[id(action_decl)] = (action_id, json_name, len(ref.args))
            self._listed.setdefault(id(decl), {})[id(action_decl)] = json_name
            if any(a[0] == action_id for a in actions):
                raise CompileError(f"action {ref.name} listed twice", ref.loc)
            actions.append((action_id, json_name, action_decl))
            scope = SCOPE_TABLE_AND_DEFAULT
            if ref.annotation("defaultonly") or action_decl.annotation("defaultonly"):
                scope = SCOPE_DEFAULT_ONLY
            elif ref.annotation("tableonly") or action_decl.annotation("tableonly"):
                scope = SCOPE_TABLE_ONLY
            cp_actions.append((json_name, scope))
        return actions, cp_actions

    def _default_of(self, decl: ast.TableDecl, actions):
        ref = decl.default_action
        if ref is None:
            ref = ast.ActionRef("NoAction", loc=decl.loc, has_parens=True)
        action_id, json_name, action_decl, skip = self._listed_action(ref)
        data = self.control.action_data(action_decl, ref.args, ref.loc, skip)
        return action_id, data, bool(decl.default_action_const), json_name

    def _listed_action(self, ref: ast.ActionRef):
        """The table's own (possibly argument-bound) version of the action ``ref`` names."""
        action = self.control.resolve_action(ref.name, ref.loc)
        listed = self._bound.get(id(action.decl))
        if listed is not None:
            return listed[0], listed[1], action.decl, listed[2]
        action_id, json_name, action_decl = self.control.action_for(action, ref.loc)
        return action_id, json_name, action_decl, 0

    # ----------------------------------------------------------- properties
    def _properties(self, decl: ast.TableDecl, table: Json, cp: CpTable,
                    comp: ExprCompiler) -> None:
        for prop in decl.properties:
            if prop.name == "counters":
                counter = self._extern_prop(prop, comp, "direct_counter")
                counter.info["json"]["binding"] = table["name"]
                counter.info["json"]["size"] = table["max_size"]
                counter.info["cp"].direct_table = table["name"]
                table["with_counters"] = True
                cp.direct_counter = counter.name
            elif prop.name == "meters":
                meter = self._extern_prop(prop, comp, "direct_meter")
                meter.info["json"]["binding"] = table["name"]
                meter.info["json"]["size"] = table["max_size"]
                meter.info["cp"].direct_table = table["name"]
                table["direct_meters"] = meter.name
                cp.direct_meter = meter.name
            elif prop.name == "support_timeout":
                value = comp.const_value(prop.value)
                if not isinstance(value, bool):
                    raise CompileError("support_timeout must be true or false", prop.loc)
                table["support_timeout"] = value
                cp.support_timeout = value
            else:
                raise not_supported(f"table property {prop.name}", prop.loc)

    def _extern_prop(self, prop: ast.TableProperty, comp: ExprCompiler, kind: str) -> ExternB:
        val = comp.compile(prop.value)
        if not isinstance(val.binding, ExternB) or val.binding.kind != kind:
            raise CompileError(f"table property {prop.name} needs a {kind} instance", prop.loc)
        return val.binding

    # -------------------------------------------------------------- entries
    def _entries(self, decl: ast.TableDecl, keys: list[Json], actions, comp) -> list[Json]:
        widths = self._keys[id(decl)]
        kinds = [e.match_kind for e in decl.keys or []]
        out = []
        for index, entry in enumerate(decl.entries or []):
            if len(entry.keysets) != len(keys):
                raise CompileError(f"entry has {len(entry.keysets)} keys, the table has "
                                   f"{len(keys)}", entry.loc)
            match_key = [self._match(ks, kind, w, comp)
                         for ks, kind, (_, w) in zip(entry.keysets, kinds, widths, strict=True)]
            action_id, json_name, action_decl, skip = self._listed_action(entry.action)
            if all(action_id != a[0] for a in actions):
                raise CompileError(f"action {entry.action.name} is not in the table's actions",
                                   entry.action.loc)
            data = self.control.action_data(action_decl, entry.action.args, entry.action.loc,
                                            skip)
            priority = index + 1
            prio_expr = entry.priority
            ann = entry.annotation("priority")
            if prio_expr is None and ann is not None and ann.args:
                prio_expr = ann.args[0]
            if prio_expr is not None:
                priority = int(comp.const_value(prio_expr))
            out.append({"source_info": self.lw.source_info(entry.loc),
                        "match_key": match_key,
                        "action_entry": {"action_id": action_id, "action_data": data},
                        "priority": priority})
        return out

    def _match(self, ks: ast.Expression, kind: str, width: int, comp: ExprCompiler) -> Json:
        full = (1 << width) - 1
        t = BitT(width)
        json_kind = "ternary" if kind == "optional" else kind
        if isinstance(ks, ast.DontCare | ast.Default):
            if kind == "exact":
                raise CompileError("an exact key cannot be _", ks.loc)
            if kind == "lpm":
                return {"match_type": "lpm", "key": hex_text(0, width), "prefix_length": 0}
            if kind == "range":
                return {"match_type": "range", "start": hex_text(0, width),
                        "end": hex_text(full, width)}
            return {"match_type": json_kind, "key": hex_text(0, width), "mask": hex_text(0, width)}
        if isinstance(ks, ast.Mask):
            value, mask = _int(comp, ks.left, t), _int(comp, ks.right, t)
            if kind == "lpm":
                prefix = _prefix_len(mask, width, ks.loc)
                return {"match_type": "lpm", "key": hex_text(value & mask, width),
                        "prefix_length": prefix}
            if kind not in ("ternary", "optional"):
                raise CompileError(f"&&& is not allowed for a {kind} key", ks.loc)
            return {"match_type": json_kind, "key": hex_text(value & mask, width),
                    "mask": hex_text(mask, width)}
        if isinstance(ks, ast.Range):
            if kind != "range":
                raise CompileError(f".. is not allowed for a {kind} key", ks.loc)
            return {"match_type": "range", "start": hex_text(_int(comp, ks.left, t), width),
                    "end": hex_text(_int(comp, ks.right, t), width)}
        value = _int(comp, ks, t)
        if kind == "exact":
            return {"match_type": "exact", "key": hex_text(value, width)}
        if kind == "lpm":
            return {"match_type": "lpm", "key": hex_text(value, width), "prefix_length": width}
        if kind == "range":
            return {"match_type": "range", "start": hex_text(value, width),
                    "end": hex_text(value, width)}
        return {"match_type": json_kind, "key": hex_text(value, width),
                "mask": hex_text(full, width)}


def _int(comp: ExprCompiler, e: ast.Expression, t: BitT) -> int:
    """A keyset value: an int constant of the key's width (bools, errors, enums as data)."""
    val = comp.compile(e)
    if val.const is None:
        raise CompileError("expected a compile-time constant", e.loc)
    if isinstance(val.type, BitT) and val.type.width != t.width:
        raise CompileError(f"entry value has type {val.type}, the key is {t}", e.loc)
    return int(val.const) & ((1 << t.width) - 1)


def _nameable(expr: ast.Expression) -> bool:
    """Whether p4c can name a key after its text: paths, members, constant indices and
    constants, slices and ``&`` of those, ``isValid()``."""
    if isinstance(expr, ast.Name | ast.IntLiteral):
        return True
    if isinstance(expr, ast.Member):
        return _nameable(expr.expr)
    if isinstance(expr, ast.Index):
        return _nameable(expr.expr) and _nameable(expr.index)
    if isinstance(expr, ast.Slice):
        return _nameable(expr.expr) and _nameable(expr.hi) and _nameable(expr.lo)
    if isinstance(expr, ast.Binary) and expr.op == "&":
        return _nameable(expr.left) and _nameable(expr.right)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Member):
        return expr.func.member == "isValid" and not expr.args and _nameable(expr.func.expr)
    return False


def _prefix_len(mask: int, width: int, loc) -> int:
    for prefix in range(width + 1):
        if mask == ((1 << width) - 1) ^ ((1 << (width - prefix)) - 1):
            return prefix
    raise CompileError("an lpm mask must be a prefix", loc)


def _table_match_type(keys: list[Json]) -> str:
    kinds = {k["match_type"] for k in keys}
    for kind in ("range", "ternary", "lpm"):
        if kind in kinds:
            return kind
    return "exact"


def _setter(obj: dict, key: str):
    def setter(value: Any) -> None:
        obj[key] = value
    return setter

