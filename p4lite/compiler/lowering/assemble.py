"""Assembly of the BMv2 JSON object, with top-level keys in p4c's order."""

from __future__ import annotations

from typing import Any

from p4lite.compiler.lowering.context import Lowering

Json = dict[str, Any]

FORMAT_VERSION = [2, 23]
COMPILER = "p4lite (p4c-compatible BMv2 back end)"


def assemble(lw: Lowering, *, program: str, parser: Json, deparser: Json,
             pipelines: list[Json], field_aliases: list[list[Any]]) -> Json:
    storage = lw.storage
    errors = [[name, lw.env.error_value(name, None)] for name in lw.env.errors]
    return {
        "header_types": storage.header_types_json(),
        "headers": storage.headers_json(),
        "header_stacks": storage.header_stacks_json(),
        "header_union_types": storage.header_union_types_json(),
        "header_unions": storage.header_unions_json(),
        "header_union_stacks": storage.header_union_stacks_json(),
        "field_lists": lw.field_lists,
        "errors": errors,
        "enums": lw.enums,
        "parsers": [parser],
        "parse_vsets": [],
        "deparsers": [deparser],
        "meter_arrays": lw.meter_arrays,
        "counter_arrays": lw.counter_arrays,
        "register_arrays": lw.register_arrays,
        "calculations": lw.calculations,
        "learn_lists": lw.learn_lists,
        "actions": lw.actions,
        "pipelines": pipelines,
        "checksums": lw.checksums,
        "force_arith": [],
        "extern_instances": lw.extern_instances,
        "field_aliases": field_aliases,
        "program": program,
        "__meta__": {"version": list(FORMAT_VERSION), "compiler": COMPILER},
    }
