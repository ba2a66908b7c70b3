"""Byte-identity of the compiler's output against tests/golden/.

Each program (p4src/*.p4, bench/programs/*.p4, tests/p4/*.p4) is compiled by the
real ``p4lite-c`` and its BMv2 JSON and text P4Info are compared byte for byte
with the stored golden files. A failure shows the first differing line. After a
deliberate output change, run ``python -m tests.golden.regenerate`` and review
``git diff tests/golden``.
"""

from __future__ import annotations

import pytest

from tests.golden import GOLDEN_DIR, GoldenProgram, compile_outputs, first_difference, programs

PROGRAMS = programs()


def test_every_program_has_golden_files():
    assert len(PROGRAMS) >= 40
    missing = [
        str(path.relative_to(GOLDEN_DIR))
        for program in PROGRAMS
        for path in (program.golden_json, program.golden_p4info)
        if not path.is_file()
    ]
    assert not missing, f"missing golden files (python -m tests.golden.regenerate): {missing}"


def test_no_orphaned_golden_files():
    expected = {path for p in PROGRAMS for path in (p.golden_json, p.golden_p4info)}
    stored = {p for p in GOLDEN_DIR.rglob("*") if p.suffix in (".json", ".txt") and p.is_file()}
    orphans = sorted(str(p.relative_to(GOLDEN_DIR)) for p in stored - expected)
    assert not orphans, f"golden files without a program: {orphans}"


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_output_matches_golden(program: GoldenProgram):
    if not program.golden_json.is_file():
        pytest.skip("no golden files yet (see test_every_program_has_golden_files)")
    json_bytes, p4info_bytes, _ = compile_outputs(program)
    problems = []
    for path, got in ((program.golden_json, json_bytes), (program.golden_p4info, p4info_bytes)):
        expected = path.read_bytes()
        if got != expected:
            where = path.relative_to(GOLDEN_DIR.parents[1])
            problems.append(f"{where} differs at {first_difference(expected, got)}")
    if problems:
        hint = "\n(if the change is deliberate: python -m tests.golden.regenerate)"
        pytest.fail("\n".join(problems) + hint, pytrace=False)
