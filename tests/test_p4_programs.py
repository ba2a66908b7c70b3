"""Every tests/p4/NAME.p4 compiled by p4lite and run against NAME.stf in-process.

A failing case shows the runner's report: per port, expected vs got with the
differing nibbles marked, and the STF line of each failed expectation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from p4lite.stf.harness import compile_program, make_switch, run_stf_on_json
from p4lite.stf.parser import parse_stf_file

P4_DIR = Path(__file__).parent / "p4"
STF_FILES = sorted(P4_DIR.glob("*.stf"))


def test_suite_is_complete():
    # every .stf has its program and the suite keeps its promised size
    assert len(STF_FILES) >= 40
    missing = [p.name for p in STF_FILES if not p.with_suffix(".p4").exists()]
    assert not missing, f"STF files without a program: {missing}"


@pytest.mark.parametrize("stf_path", STF_FILES, ids=[p.stem for p in STF_FILES])
def test_p4_program(stf_path: Path):
    program = compile_program(str(stf_path.with_suffix(".p4")), include_dirs=[str(P4_DIR)])
    result = run_stf_on_json(program, parse_stf_file(str(stf_path)))
    if not result.ok:
        pytest.fail("\n" + result.report(), pytrace=False)
    assert result.passed > 0, "an STF file must check something"


def test_digest_program():
    """digest_learn.p4: the learn list carries (srcAddr, ingress_port) of each packet."""
    program = compile_program(str(P4_DIR / "digest_learn.p4"))
    switch = make_switch(program)
    out = switch.process(bytes.fromhex("ffffffffffff0000000000aa080001"), 7, 0)
    assert [port for port, _ in out] == [1]
    out = switch.process(bytes.fromhex("ffffffffffff0000000000bb0800"), 3, 1)
    assert [port for port, _ in out] == [1]
    digests = switch.take_digests()
    assert [d.values for d in digests] == [(0xAA, 7), (0xBB, 3)]
    assert all(d.list_id == digests[0].list_id for d in digests)
    assert switch.take_digests() == []
