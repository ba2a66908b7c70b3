"""The nodes of one BMv2 pipeline: hidden actions and tables, conditionals, fragments.

A control's apply block is lowered into fragments ``(entry, exits)``: ``exits`` are
setters still waiting for the node that follows. Straight-line statements become
hidden actions in hidden keyless tables (``tbl_<name>``), as p4c's
SynthesizeActions/MoveActionsToTables do.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from p4lite.compiler.checks.bindings import Scope
from p4lite.compiler.frontend import ast
from p4lite.compiler.lowering.externs import Externs
from p4lite.compiler.lowering.lower_stmt import StmtLowerer

if TYPE_CHECKING:
    from p4lite.compiler.lowering.context import Lowering

Json = dict[str, Any]
Setter = Callable[[Any], None]

PASS = object()  # an empty fragment: falls through
EXIT = object()  # `exit`: the pipeline ends (next node null)
RETURN = object()  # `return`: the control ends


@dataclass(slots=True)
class Frag:
    entry: Any
    exits: list[Setter] = field(default_factory=list)


def dict_setter(obj: dict[str, Any], key: str) -> Setter:
    def setter(value: Any) -> None:
        obj[key] = value
    return setter


def synthesized_name(loc) -> str:
    """p4c's name for a synthesized action: file stem (alphanumerics) + 'l'? + line."""
    stem = loc.file.rsplit("/", 1)[-1]
    if stem.endswith(".p4"):
        stem = stem[:-3]
    stem = re.sub(r"[^A-Za-z0-9_]", "", stem) or "act"
    sep = "l" if stem[-1].isdigit() else ""
    return f"{stem}{sep}{loc.line}"


class PipelineBuilder:
    """Collects the tables and conditionals of one pipeline (ingress or egress)."""

    def __init__(self, lw: Lowering, externs: Externs, name: str) -> None:
        self.lw = lw
        self.externs = externs
        self.name = name
        self.tables: list[Json] = []
        self.conditionals: list[Json] = []
        # the ControlLowerer of each sub-control instance inlined here (Any: this module
        # sits below lower_control)
        self.applied_controls: dict[str, Any] = {}

    def conditional(self, expression: Json, loc) -> Json:
        name = f"node_{self.lw.next_node_number()}"
        cond = {"name": name, "id": self.lw.conditional_count,
                "source_info": self.lw.source_info(loc, self.lw.source.fragment(loc, ")")),
                "expression": expression, "true_next": None, "false_next": None}
        self.lw.conditional_count += 1
        self.conditionals.append(cond)
        return cond

    def hidden_action(self, stmts: list[ast.Node], scope: Scope, key_copy_stmts: set[int]
                      ) -> Frag:
        """Straight-line statements as a hidden action in a hidden keyless table
        (``key_copy_stmts``: ids of the statements that copy a table key)."""
        loc = stmts[0].loc
        if any(id(stmt) in key_copy_stmts for stmt in stmts):
            # p4c names the action after its statements' merged source position, the
            # earliest: a key copy's is the key's, in the table declaration
            locs = [stmt.loc for stmt in stmts
                    if stmt.loc is not None and stmt.loc.file == loc.file]
            loc = min(locs, key=lambda at: (at.line, at.col), default=loc)
        base = synthesized_name(loc)
        action_name = self.lw.action_names.fresh(base)
        lowerer = StmtLowerer(self.lw, self.externs, scope)
        prims = lowerer.lower_body(stmts)
        action_id = self.lw.add_action(action_name, [], prims, loc)
        return self.hidden_table(f"tbl_{base}", action_id, action_name, [], loc)

    def hidden_primitives(self, prims: list[Json], loc) -> Frag:
        """Primitives the compiler made (copies of arguments) as a hidden action."""
        base = synthesized_name(loc)
        action_name = self.lw.action_names.fresh(base)
        action_id = self.lw.add_action(action_name, [], prims, loc)
        return self.hidden_table(f"tbl_{base}", action_id, action_name, [], loc)

    def hidden_table(self, base: str, action_id: int, action_name: str, data: list[str],
                     loc) -> Frag:
        name = self.lw.node_names.fresh(base)
        self.lw.next_node_number()
        table: Json = {
            "name": name, "id": self.lw.table_count,
            "source_info": self.lw.source_info(loc),
            "key": [], "match_type": "exact", "type": "simple", "max_size": 1024,
            "with_counters": False, "support_timeout": False, "direct_meters": None,
            "action_ids": [action_id], "actions": [action_name], "base_default_next": None,
            "next_tables": {action_name: None},
            "default_entry": {"action_id": action_id, "action_const": True, "action_data": data,
                              "action_entry_const": True},
        }
        self.lw.table_count += 1
        self.tables.append(table)
        return Frag(name, [dict_setter(table, "base_default_next"),
                           dict_setter(table["next_tables"], action_name)])

    def to_json(self, pipeline_id: int, init: Any, loc) -> Json:
        init_table = None if init in (PASS, EXIT, RETURN) else init
        return {"name": self.name, "id": pipeline_id, "source_info": self.lw.source_info(loc, ""),
                "init_table": init_table, "tables": self.tables, "action_profiles": [],
                "conditionals": self.conditionals}


__all__ = ["EXIT", "PASS", "RETURN", "Frag", "PipelineBuilder", "Setter", "dict_setter",
           "synthesized_name"]
