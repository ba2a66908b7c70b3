"""Glue: compile (or load) a program, build a switch, run an STF file on it."""

from __future__ import annotations

from collections.abc import Iterable

from p4lite import bmv2json
from p4lite.stf.commands import StfFile
from p4lite.stf.parser import parse_stf_file
from p4lite.stf.program import ProgramInfo
from p4lite.stf.runner import StfResult, StfRunner

DROP_PORT = 511


def make_switch(program: dict | bmv2json.Program, drop_port: int = DROP_PORT):
    # Imported here so the parser and its tests do not need the switch core.
    from p4lite.switch.core.switch import Switch

    return Switch(program, drop_port=drop_port)


def run_stf_on_json(program: dict | bmv2json.Program, stf: StfFile | str,
                    switch=None) -> StfResult:
    """Run ``stf`` (a parsed file or a path) on a fresh switch loaded with ``program``
    (a JSON dict is loaded through the model once, here: raises Bmv2JsonError)."""
    if isinstance(stf, str):
        stf = parse_stf_file(stf)
    model = program if isinstance(program, bmv2json.Program) else bmv2json.load(program)
    if switch is None:
        switch = make_switch(model)
    return StfRunner(switch, ProgramInfo(model), stf.filename).run(stf)


def compile_program(p4_path: str, include_dirs: Iterable[str] = (),
                    defines: dict[str, str] | None = None) -> bmv2json.Program:
    """The BMv2 JSON model of ``p4_path`` from p4lite's compiler (raises CompileError)."""
    from p4lite.compiler.driver import compile_file

    result = compile_file(p4_path, include_dirs=tuple(include_dirs), defines=defines)
    assert result.bmv2_program is not None  # the compiler always sets it
    return result.bmv2_program


def run_stf_on_program(p4_path: str, stf_path: str, include_dirs: Iterable[str] = (),
                       defines: dict[str, str] | None = None) -> StfResult:
    stf = parse_stf_file(stf_path)  # syntax errors first: they are cheaper to find
    return run_stf_on_json(compile_program(p4_path, include_dirs, defines), stf)
