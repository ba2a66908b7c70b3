"""Every tests/p4/NAME.p4 compiled by p4lite and run against NAME.stf in-process.

A failing case shows the runner's report: per port, expected vs got with the
differing nibbles marked, and the STF line of each failed expectation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from p4lite import bmv2json
from p4lite.stf.harness import compile_program, make_switch, run_stf_on_json
from p4lite.stf.parser import parse_stf_file

P4_DIR = Path(__file__).parent / "p4"
P4SRC_DIR = Path(__file__).parents[1] / "p4src"  # the project's programs, STF beside them
STF_FILES = sorted(P4_DIR.glob("*.stf")) + sorted(P4SRC_DIR.glob("*.stf"))


def test_suite_is_complete():
    # every .stf has its program and the suite keeps its promised size
    assert len(STF_FILES) >= 40
    assert P4SRC_DIR / "aggregate.stf" in STF_FILES
    missing = [p.name for p in STF_FILES if not p.with_suffix(".p4").exists()]
    assert not missing, f"STF files without a program: {missing}"


@pytest.mark.parametrize("stf_path", STF_FILES, ids=[p.stem for p in STF_FILES])
def test_stf_is_p4c_dialect(stf_path: Path):
    """Every project STF file parses by p4c's grammar alone (no p4lite extensions)."""
    stf = parse_stf_file(str(stf_path), extensions=False)
    assert not stf.extended and stf.commands


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


def test_cli_runs_a_json_file_and_reports_failures(tmp_path, capsys):
    """`python -m p4lite.stf --json`: 0 on success, 1 with a diff on failure, 2 on bad input."""
    import json

    from p4lite.stf.__main__ import main

    program = compile_program(str(P4_DIR / "basic_exact.p4"))
    json_path = tmp_path / "basic_exact.json"
    json_path.write_text(json.dumps(bmv2json.dump(program)))
    stf = str(P4_DIR / "basic_exact.stf")
    assert main(["--json", str(json_path), stf]) == 0
    assert "3 passed, 0 failed" in capsys.readouterr().out

    wrong = tmp_path / "wrong.stf"
    wrong.write_text("add fwd dstAddr:2 set_port(port:2)\npacket 0 000000000002 000000000001 0800\n"
                     "expect 2 000000000002 000000000001 0801\n")
    assert main(["--json", str(json_path), str(wrong)]) == 1
    out = capsys.readouterr().out
    assert "wrong.stf:3: port 2, packet #1" in out and "0 passed, 1 failed" in out

    broken = tmp_path / "broken.stf"
    broken.write_text("packet 0 0a0\n")
    assert main(["--json", str(json_path), str(broken)]) == 2
    err = capsys.readouterr().err
    assert "broken.stf:1:" in err and "packet data has an odd number" in err


def test_cli_compiles_with_include_dirs_and_defines(tmp_path, capsys):
    from p4lite.stf.__main__ import main

    prog = tmp_path / "defs.p4"
    prog.write_text((P4_DIR / "log_msg.p4").read_text().replace(
        "sm.egress_spec = 3;", "sm.egress_spec = OUT_PORT;"))
    stf = str(P4_DIR / "log_msg.stf")
    assert main(["-I", str(P4_DIR), "-D", "OUT_PORT=3", str(prog), stf]) == 0
    assert main(["-D", "OUT_PORT=4", str(prog), stf]) == 1
    capsys.readouterr()
