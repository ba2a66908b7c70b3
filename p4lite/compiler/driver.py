"""The compiler's API: P4_16 source in, BMv2 JSON and P4Info out.

``compile_file`` and ``compile_text`` are what the CLI, the STF runner and
the tests call; both raise ``CompileError`` (with ``file:line:col``) on bad input.
That is the only exception they raise on purpose: anything else is a bug in
p4lite and is left to propagate as it is (the CLI reports it as an internal error).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from p4lite import bmv2json
from p4lite.compiler.checks.declarations import check_declarations
from p4lite.compiler.checks.target_checks import unused_warnings
from p4lite.compiler.emitters.bmv2_json import to_text, with_p4c_nesting
from p4lite.compiler.emitters.p4info import build_p4info
from p4lite.compiler.errors import CompileError
from p4lite.compiler.frontend import ast
from p4lite.compiler.frontend.parser import parse_file, parse_text
from p4lite.compiler.frontend.source_text import SourceText
from p4lite.compiler.lowering.lower_program import lower_program


@dataclass(slots=True)
class CompileResult:
    bmv2: dict[str, Any]  # the JSON document, as written (bmv2json.dump of bmv2_program)
    p4info: p4info_pb2.P4Info
    program: ast.Program
    diagnostics: list[str] = field(default_factory=list)
    # the same document as the typed model (set by the compiler; the switch loads it as is)
    bmv2_program: bmv2json.Program | None = None

    @property
    def warnings(self) -> list[str]:
        """Every warning, each ``file:line:col: warning: text``: the ``#warning`` lines,
        then p4c's (unused declarations, shifts; see target_checks)."""
        return [*self.program.warnings, *self.diagnostics]

    def bmv2_text(self) -> str:
        """The BMv2 JSON as p4c-style indented text."""
        return to_text(self.bmv2)

    def p4info_text(self) -> str:
        """The P4Info in protobuf text format (what p4c writes to ``.p4info.txtpb``)."""
        header = "# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n"
        return header + text_format.MessageToString(self.p4info)


def compile_file(path: str | Path, include_dirs=(), defines: dict[str, str] | None = None, *,
                 p4c_nesting: bool = True) -> CompileResult:
    """Compile a P4 file. ``p4c_nesting`` (the default) wraps expression parameters of
    primitives twice, exactly as p4c does and real BMv2 requires (see
    bmv2_json.with_p4c_nesting); False gives the single wrapping, which p4lite's switch
    also reads but real BMv2 rejects."""
    program = parse_file(path, include_dirs, defines)
    return _compile(program, str(path), SourceText(), p4c_nesting)


def compile_text(text: str, filename: str = "<string>", include_dirs=(),
                 defines: dict[str, str] | None = None, *, p4c_nesting: bool = True
                 ) -> CompileResult:
    program = parse_text(text, filename, include_dirs, defines)
    return _compile(program, filename, SourceText({filename: text}), p4c_nesting)


def _compile(program: ast.Program, main_file: str, source: SourceText,
             p4c_nesting: bool) -> CompileResult:
    check_declarations(program)  # p4c's front end, before its warnings
    diagnostics, backend_warnings = unused_warnings(program, main_file, source)
    try:
        bmv2, model = lower_program(program, main_file, source, diagnostics)
        info = build_p4info(model)
    except RecursionError as exc:
        raise CompileError("program too deeply nested") from exc
    except CompileError as exc:
        # p4c prints the warnings it found before the error: the CLI does the same
        exc.warnings = [*program.warnings, *diagnostics]
        raise
    if p4c_nesting:
        with_p4c_nesting(bmv2)
    # The emission boundary: the document goes through the model, so what is written is
    # what BMv2 (and p4lite's switch) will load; a Bmv2JsonError here is a compiler bug
    # and surfaces as an internal compiler error.
    emitted = bmv2json.load(bmv2)
    return CompileResult(bmv2json.dump(emitted), info, program,
                         [*diagnostics, *backend_warnings], emitted)
