"""``python -m p4lite.stf [--strict] [-I DIR] [-D NAME[=VAL]] (PROG.p4 | --json PROG.json) TEST.stf``.

Exit status: 0 when every expectation holds, 1 on a failed expectation, 2 on
bad input (a compile error, a malformed STF line, an unreadable file).
"""

from __future__ import annotations

import argparse
import json
import sys

from p4lite import bmv2json
from p4lite.stf.commands import StfSyntaxError
from p4lite.stf.harness import compile_program, run_stf_on_json
from p4lite.stf.parser import parse_stf_file


def _defines(items: list[str]) -> dict[str, str]:
    result = {}
    for item in items:
        name, _, value = item.partition("=")
        result[name] = value or "1"
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m p4lite.stf", description=__doc__.splitlines()[0])
    ap.add_argument("program", nargs="?", help="P4_16 source to compile with p4lite")
    ap.add_argument("stf", help="the STF test")
    ap.add_argument("--json", dest="json_path", help="run this BMv2 JSON instead of compiling")
    ap.add_argument("-I", dest="include_dirs", action="append", default=[], help="include dir")
    ap.add_argument("--strict", action="store_true",
                    help="p4c's STF grammar only, even if the file opts into p4lite's extensions")
    ap.add_argument("-D", dest="defines", action="append", default=[], help="NAME[=VALUE]")
    args = ap.parse_args(argv)
    if (args.program is None) == (args.json_path is None):
        ap.error("give either PROG.p4 or --json PROG.json")
    try:
        stf = parse_stf_file(args.stf, extensions=False if args.strict else None)
        if args.json_path:
            with open(args.json_path, encoding="utf-8") as f:
                program = json.load(f)
        else:
            program = compile_program(args.program, args.include_dirs, _defines(args.defines))
        program = bmv2json.load(program) if isinstance(program, dict) else program
    except (OSError, ValueError, StfSyntaxError, bmv2json.Bmv2JsonError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # CompileError and friends: one clear line, no traceback
        if type(exc).__name__ != "CompileError":
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = run_stf_on_json(program, stf)
    for line in result.log + result.failures:
        print(line)
    print(result.summary())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
