"""State shared by the lowering passes: the program, storage and the JSON being built."""

from __future__ import annotations

from typing import Any

from p4lite.compiler import ast
from p4lite.compiler.cpmodel import ControlPlaneModel, CpAction
from p4lite.compiler.errors import SourceLoc
from p4lite.compiler.names import NameGen
from p4lite.compiler.program_env import ProgramEnv
from p4lite.compiler.storage import Storage

Json = dict[str, Any]


class SourceText:
    """Reads original source lines to fill ``source_info.source_fragment``."""

    def __init__(self, texts: dict[str, str] | None = None) -> None:
        self._lines: dict[str, list[str]] = {}
        for name, text in (texts or {}).items():
            self._lines[name] = text.splitlines()

    def lines(self, file: str) -> list[str]:
        lines = self._lines.get(file)
        if lines is None:
            try:
                with open(file, encoding="utf-8", errors="replace") as fh:
                    lines = fh.read().splitlines()
            except OSError:
                lines = []
            self._lines[file] = lines
        return lines

    def fragment(self, loc: SourceLoc, stop: str = ";") -> str:
        """The text from ``loc`` up to (not including) ``stop``, on at most 4 lines."""
        lines = self.lines(loc.file)
        if not 0 < loc.line <= len(lines):
            return ""
        parts: list[str] = []
        text = lines[loc.line - 1][loc.col - 1:]
        for extra in range(4):
            cut = _find_stop(text, stop)
            if cut >= 0:
                parts.append(text[:cut])
                break
            parts.append(text)
            next_line = loc.line + extra
            if next_line >= len(lines):
                break
            text = lines[next_line].strip()
        return " ".join(p.strip() for p in parts if p.strip())


def _find_stop(text: str, stop: str) -> int:
    depth = 0
    for i, ch in enumerate(text):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            if depth == 0 and stop in ")}]":
                return i
            depth -= 1
        elif ch == stop and depth == 0:
            return i
    return -1


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
