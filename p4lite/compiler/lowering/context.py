"""State shared by the lowering passes: the program, storage and the JSON being built."""

from __future__ import annotations

from typing import Any

from p4lite.compiler.checks.program_env import ProgramEnv
from p4lite.compiler.errors import SourceLoc
from p4lite.compiler.frontend import ast
from p4lite.compiler.frontend.source_text import SourceText
from p4lite.compiler.lowering.cpmodel import ControlPlaneModel, CpAction
from p4lite.compiler.lowering.names import NameGen
from p4lite.compiler.lowering.storage import Storage

Json = dict[str, Any]


class Lowering:
    """Everything the lowering passes share."""

    def __init__(self, env: ProgramEnv, source: SourceText) -> None:
        self.env = env
        self.source = source
        self.storage = Storage()
        self.cp = ControlPlaneModel()
        self.actions: list[Json] = []
        self.action_ids: dict[int, int] = {}  # id(key object) -> action id
        self.calculations: list[Json] = []
        self.register_arrays: list[Json] = []
        self.counter_arrays: list[Json] = []
        self.meter_arrays: list[Json] = []
        self.learn_lists: list[Json] = []
        self.field_lists: list[Json] = []
        self.checksums: list[Json] = []
        self.extern_instances: list[Json] = []
        self.enums: list[Json] = []
        self.node_names = NameGen()  # tables and conditionals share one id space in p4c
        self.action_names = NameGen()
        self.calc_names = NameGen()
        self.checksum_names = NameGen()
        self.table_count = 0
        self.key_copy_count = 0  # p4c's key_N scalars for sliced table keys
        self.conditional_count = 0
        self.node_counter = 0
        # (id(action decl), control prefix, bound arguments) -> (action id, name, decl)
        self.action_cache: dict[tuple[int, str, str], tuple[int, str, ast.ActionDecl]] = {}
        self.cp_actions: dict[int, CpAction] = {}
        self.cp_used_actions: set[int] = set()
        self.meta_field_lists: dict[int, list[tuple[str, str]]] = {}
        self.cp_positions: dict[str, SourceLoc] = {}
        self.action_locs: list[SourceLoc | None] = []
        self.direct_meters: list[tuple[Json, ast.Instantiation]] = []
        self.direct_counters: list[tuple[Json, ast.Instantiation]] = []

    def next_node_number(self) -> int:
        """p4c numbers control-flow nodes (tables and conditionals) in one sequence."""
        number = self.node_counter
        self.node_counter += 1
        return number

    def meta_field_list(self, index: int) -> list[tuple[str, str]]:
        return self.meta_field_lists.get(index, [])

    def source_info(self, loc: SourceLoc | None, fragment: str | None = None) -> Json | None:
        if loc is None:
            return None
        text = fragment if fragment is not None else self.source.fragment(loc)
        return {"filename": loc.file, "line": loc.line, "column": loc.col,
                "source_fragment": text}

    def add_action(self, name: str, runtime_data: list[Json], primitives: list[Json],
                   loc: SourceLoc | None = None) -> int:
        action_id = len(self.actions)
        entry: Json = {"name": name, "id": action_id, "runtime_data": runtime_data,
                       "primitives": primitives}
        self.actions.append(entry)
        self.action_locs.append(loc)
        return action_id

    def user_file(self, node: ast.Node) -> bool:
        return self.env.is_user_decl(node)
