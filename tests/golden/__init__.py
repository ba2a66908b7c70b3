"""Golden BMv2 JSON and P4Info for every P4 program in the repository.

``programs()`` lists the programs and ``compile_outputs()`` produces exactly the
bytes that ``p4lite-c -o OUT.json --p4runtime-files OUT.p4info.txt PROG.p4`` writes,
compiled from the repository root so the ``source_info`` file names are
repository-relative (``p4src/aggregate.p4``), whatever the caller's cwd.

tests/unit/test_golden.py compares against the stored files; ``python -m
tests.golden.regenerate`` rewrites them after a deliberate output change.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_DIR = Path(__file__).resolve().parent

# (source folder relative to ROOT, golden sub-folder) in a fixed order.
_SOURCES = (
    ("p4src", "p4src"),
    ("bench/programs", "bench"),
    ("tests/p4", "p4"),
)


@dataclass(frozen=True, slots=True)
class GoldenProgram:
    source: str  # repository-relative path of the .p4 file, with '/'
    golden_json: Path
    golden_p4info: Path

    @property
    def name(self) -> str:
        return self.source


def programs() -> list[GoldenProgram]:
    """Every program that has golden files, in a stable order."""
    found: list[GoldenProgram] = []
    for folder, golden_sub in _SOURCES:
        for path in sorted((ROOT / folder).glob("*.p4")):
            stem = GOLDEN_DIR / golden_sub / path.stem
            found.append(
                GoldenProgram(
                    source=f"{folder}/{path.name}",
                    golden_json=stem.with_name(path.stem + ".json"),
                    golden_p4info=stem.with_name(path.stem + ".p4info.txt"),
                )
            )
    return found


@contextlib.contextmanager
def _in_root() -> Iterator[None]:
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(old)


def compile_outputs(program: GoldenProgram) -> tuple[bytes, bytes, str]:
    """Run the real ``p4lite-c`` on one program: (JSON bytes, P4Info bytes, stderr).

    Raises AssertionError when the command fails."""
    from p4lite.compiler.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        json_out = Path(tmp) / "out.json"
        p4info_out = Path(tmp) / "out.p4info.txt"
        stderr = io.StringIO()
        with _in_root(), contextlib.redirect_stderr(stderr):
            status = main(
                ["-o", str(json_out), "--p4runtime-files", str(p4info_out), program.source]
            )
        if status != 0:
            raise AssertionError(f"p4lite-c {program.source} exited {status}:\n{stderr.getvalue()}")
        return json_out.read_bytes(), p4info_out.read_bytes(), stderr.getvalue()


def first_difference(expected: bytes, got: bytes) -> str:
    """A one-paragraph description of the first line where two outputs differ."""
    exp_lines = expected.decode("utf-8", "replace").splitlines(keepends=True)
    got_lines = got.decode("utf-8", "replace").splitlines(keepends=True)
    for number, (want, have) in enumerate(zip(exp_lines, got_lines, strict=False), start=1):
        if want != have:
            return f"line {number}:\n  golden: {want!r}\n  now:    {have!r}"
    number = min(len(exp_lines), len(got_lines)) + 1
    if len(exp_lines) > len(got_lines):
        return f"line {number}: output ends early; golden has {exp_lines[number - 1]!r}"
    if len(got_lines) > len(exp_lines):
        return f"line {number}: output has extra {got_lines[number - 1]!r}; golden ends"
    return "same lines, different bytes (line endings?)"
