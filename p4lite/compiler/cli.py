"""``p4lite-c``: the compiler's command line, compatible with p4c-bm2-ss and p4c.

    p4lite-c --p4v 16 [-I DIR] [-D NAME[=VAL]] [--p4runtime-files OUT.p4info.txtpb]
             [--p4runtime-format text|json|binary] -o OUT.json PROG.p4
    p4lite-c --target bmv2 --arch v1model -o OUTDIR PROG.p4        (p4c driver form)
    p4lite-c -E [-I DIR] [-D NAME[=VAL]] PROG.p4                   (preprocess only)

The JSON is laid out like p4c's (the back end's ``bmv2_text()``; plain
``json.dumps(indent=2)`` for a result without it). When ``-o`` names a
directory (it exists, ends with '/', or has no suffix) the BMv2 JSON goes to
``OUTDIR/PROG.json``, as the p4c driver does. The P4Info format follows the
file extension unless ``--p4runtime-format`` is given.
Options p4c accepts but p4lite ignores get a one-line warning. ``#warning``
lines print ``file:line:col: warning: #warning text`` (as cpp does for p4c) and
compilation goes on; so do p4c's own warnings (``'x' is unused``, see target_checks). Errors print ``file:line:col: error: message`` and exit 1.
An exception other than ``CompileError`` is a bug in p4lite, not in the program:
it prints its traceback and ``p4lite-c: internal compiler error: ...`` and exits 1.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from p4lite.compiler.errors import CompileError
from p4lite.compiler.frontend.preprocess import Preprocessor, render_tokens

if TYPE_CHECKING:
    from p4lite.compiler.driver import CompileResult

_VERSION = "p4lite-c 0.1.0 (P4_16, target bmv2, arch v1model)"

# p4c options that p4lite accepts and ignores (with a warning): with a value...
_IGNORED_WITH_VALUE = (
    "--p4runtime-entries-files", "--p4runtime-entries-file", "--pp", "--toJSON", "--dump",
    "--top4", "--maxErrorCount", "-T", "--fromJSON", "--disable-annotations",
)  # fmt: skip
# ... without a value ...
_IGNORED_FLAGS = (
    "-g", "--ndebug", "-v", "--debug", "--nocpp", "-S", "--emit-externs",
    "--parser-inline-opt", "--loopsUnroll", "--testJson", "--preferSwitch",
)  # fmt: skip
# ... and diagnostics switches whose value is optional (only the --opt=value form).
_IGNORED_PREFIXES = ("--Wdisable", "--Wwarn", "--Werror", "--Winfo")

_TEXT_SUFFIXES = (".txt", ".txtpb", ".pb.txt", ".textproto", ".prototxt")
_BINARY_SUFFIXES = (".bin", ".pb")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the compiler; returns the process exit status."""
    parser = _build_arg_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    diagnostics = [a for a in argv if a.split("=", 1)[0] in _IGNORED_PREFIXES]
    argv = [a for a in argv if a not in diagnostics]
    try:
        args, unknown = parser.parse_known_args(argv)
    except SystemExit as exc:  # argparse already printed the reason
        return int(exc.code or 0)
    for option in unknown:
        if option.startswith("-"):
            _warn(f"ignoring unknown option {option}")
        else:
            _error(f"unexpected argument {option}")
            return 1
    try:
        _check_target(args)
        for option in [*diagnostics, *args.ignored]:
            _warn(f"ignoring option {option.split('=', 1)[0]} (not used by p4lite)")
        return _compile_and_write(args)
    except CompileError as exc:
        for warning in exc.warnings:
            print(warning, file=sys.stderr)
        print(str(exc), file=sys.stderr)
        return 1
    except _UsageError as exc:
        _error(str(exc))
        return 1
    except Exception as exc:  # a bug in p4lite: never dressed up as the user's error
        traceback.print_exc(file=sys.stderr)
        print(
            f"p4lite-c: internal compiler error: {type(exc).__name__}: {exc}\n"
            "p4lite-c: this is a bug in p4lite, not in the P4 program; please report it "
            "with the traceback above",
            file=sys.stderr,
        )
        return 1


class _UsageError(Exception):
    """A bad command line."""


def _build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="p4lite-c",
        description="Compile a P4_16 v1model program to BMv2 JSON and P4Info.",
        allow_abbrev=False,
    )
    parser.add_argument("program", nargs="?", help="the P4_16 source file")
    parser.add_argument("-o", "--output", help="output JSON file, or a directory for PROG.json")
    parser.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR")
    parser.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VAL]")
    parser.add_argument("-U", dest="undefines", action="append", default=[], metavar="NAME")
    parser.add_argument("--p4v", choices=["14", "16"], default="16", help="language version")
    parser.add_argument("--std", default="p4-16", help="p4-16 (p4-14 is not supported)")
    parser.add_argument("--target", default="bmv2")
    parser.add_argument("--arch", default="v1model")
    parser.add_argument("-b", dest="backend", default=None, help="p4c backend (bmv2 only)")
    parser.add_argument("--p4runtime-files", dest="p4runtime_files", default=None)
    parser.add_argument("--p4runtime-file", dest="p4runtime_file", default=None)
    parser.add_argument(
        "--p4runtime-format", dest="p4runtime_format", choices=["text", "json", "binary"]
    )
    parser.add_argument(
        "-E", dest="preprocess_only", action="store_true", help="preprocess only, to stdout"
    )
    parser.add_argument("--version", action="version", version=_VERSION)
    parser.set_defaults(ignored=[])
    for option in _IGNORED_WITH_VALUE:
        parser.add_argument(option, action=_RecordIgnored, dest="ignored", nargs=1)
    for option in _IGNORED_FLAGS:
        parser.add_argument(option, action=_RecordIgnored, dest="ignored", nargs=0)
    return parser


class _RecordIgnored(argparse.Action):
    """Remembers an accepted-but-ignored option so main can warn about it."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        namespace.ignored = [*namespace.ignored, option]


def _check_target(args: argparse.Namespace) -> None:
    if args.program is None:
        raise _UsageError("no input file (usage: p4lite-c [options] -o OUT.json PROG.p4)")
    if args.p4v != "16" or args.std.replace("_", "-").lower() not in ("p4-16", "p416"):
        raise _UsageError("only P4_16 is supported (--p4v 16 / --std p4-16)")
    if args.target != "bmv2":
        raise _UsageError(f"target '{args.target}' is not supported: p4lite compiles for bmv2")
    if args.arch not in ("v1model", "v1model.p4"):
        raise _UsageError(f"architecture '{args.arch}' is not supported: p4lite has v1model only")
    if args.backend is not None and not args.backend.startswith("bmv2"):
        raise _UsageError(f"backend '{args.backend}' is not supported: p4lite has bmv2 only")


def parse_defines(defines: Sequence[str], undefines: Sequence[str] = ()) -> dict[str, str]:
    """``-D NAME[=VAL]`` options as a macro table (a bare NAME is 1, as in cpp)."""
    table: dict[str, str] = {}
    for item in defines:
        name, sep, value = item.partition("=")
        if not name.isidentifier():
            raise _UsageError(f"-D {item}: '{name}' is not a macro name")
        table[name] = value if sep else "1"
    for name in undefines:
        table.pop(name, None)
    return table


def _compile_and_write(args: argparse.Namespace) -> int:
    program = Path(args.program)
    if not program.is_file():
        raise _UsageError(f"cannot open input file {program}")
    defines = parse_defines(args.defines, args.undefines)
    if args.preprocess_only:
        tokens = Preprocessor(args.include_dirs, defines).run_file(program).tokens
        sys.stdout.write(render_tokens(tokens))
        return 0
    result = _compile(str(program), tuple(args.include_dirs), defines)
    for warning in result.warnings:
        print(warning, file=sys.stderr)
    json_path = output_json_path(args.output, program)
    _write(json_path, lambda f: f.write(bmv2_json_text(result)), "w")
    for path in _p4info_paths(args):
        fmt = args.p4runtime_format or p4info_format(path)
        data = serialize_p4info(result.p4info, fmt)
        _write(path, lambda f, data=data: f.write(data), "wb" if isinstance(data, bytes) else "w")
    return 0


def _compile(path: str, include_dirs: tuple[str, ...], defines: dict[str, str]) -> CompileResult:
    """Calls the back end (imported here so the CLI's option handling stands alone)."""
    from p4lite.compiler import driver

    return driver.compile_file(path, include_dirs=include_dirs, defines=defines)


def output_json_path(output: str | None, program: Path) -> Path:
    """Where the BMv2 JSON goes: the -o file, or PROG.json in the -o directory (or cwd)."""
    if output is None:
        return Path(program.stem + ".json")
    out = Path(output)
    if out.is_dir() or output.endswith(("/", "\\")) or (not out.exists() and out.suffix == ""):
        return out / (program.stem + ".json")
    return out


def _p4info_paths(args: argparse.Namespace) -> list[Path]:
    names: list[str] = []
    for value in (args.p4runtime_files, args.p4runtime_file):
        if value:
            names.extend(part for part in value.split(",") if part)
    return [Path(name) for name in names]


def p4info_format(path: Path) -> str:
    """The P4Info format a file name asks for: text, json or binary."""
    name = path.name.lower()
    if name.endswith(".json"):
        return "json"
    if name.endswith(_BINARY_SUFFIXES):
        return "binary"
    if not name.endswith(_TEXT_SUFFIXES):
        _warn(f"unknown P4Info extension for {path}; writing protobuf text format")
    return "text"


def serialize_p4info(p4info: Any, fmt: str) -> str | bytes:
    """The P4Info message in text, json or binary protobuf encoding."""
    from google.protobuf import json_format, text_format

    if fmt == "text":
        return text_format.MessageToString(p4info)
    if fmt == "json":
        return json_format.MessageToJson(p4info) + "\n"
    return p4info.SerializeToString()


def bmv2_json_text(result: CompileResult) -> str:
    """The BMv2 JSON text in the back end's p4c-style layout, ending with a newline."""
    text = result.bmv2_text()
    return text if text.endswith("\n") else text + "\n"


def _write(path: Path, writer: Any, mode: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        encoding = None if "b" in mode else "utf-8"
        with open(path, mode, encoding=encoding) as stream:
            writer(stream)
    except OSError as exc:
        raise _UsageError(f"cannot write {path}: {exc.strerror}") from None


def _warn(message: str) -> None:
    print(f"p4lite-c: warning: {message}", file=sys.stderr)


def _error(message: str) -> None:
    print(f"p4lite-c: error: {message}", file=sys.stderr)
