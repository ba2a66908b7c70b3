"""Rewrite the golden BMv2 JSON and P4Info files: ``python -m tests.golden.regenerate``.

Run it only after a deliberate change of the compiler's output, and review the
diff (``git diff tests/golden``) before committing it. ``--check`` writes nothing
and exits 1 when any golden file is stale or missing. Stale golden files of
programs that no longer exist are removed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

if not __package__:  # run as a script: python tests/golden/regenerate.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.golden import GOLDEN_DIR, compile_outputs, programs  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden.regenerate")
    parser.add_argument("--check", action="store_true", help="report stale files, write none")
    args = parser.parse_args(argv)
    stale: list[str] = []
    keep = set()
    for program in programs():
        json_bytes, p4info_bytes, _ = compile_outputs(program)
        for path, data in (
            (program.golden_json, json_bytes),
            (program.golden_p4info, p4info_bytes),
        ):
            keep.add(path)
            if path.is_file() and path.read_bytes() == data:
                continue
            stale.append(str(path.relative_to(GOLDEN_DIR)))
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    for path in sorted(GOLDEN_DIR.rglob("*")):
        if path.suffix in (".json", ".txt") and path.is_file() and path not in keep:
            stale.append(f"{path.relative_to(GOLDEN_DIR)} (no program)")
            if not args.check:
                path.unlink()
    verb = "stale" if args.check else "rewritten"
    for name in stale:
        print(f"{verb}: {name}")
    print(f"{len(keep)} golden files, {len(stale)} {verb}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
