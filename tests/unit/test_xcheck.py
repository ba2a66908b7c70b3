"""p4lite.xcheck without the real tools: discovery, the known-failures file, the table and
summary, and single runs with tiny stub scripts standing in for p4c, BMv2 and p4c's runner."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from p4lite.xcheck import __main__ as xcheck_main
from p4lite.xcheck import report, runs
from p4lite.xcheck.tools import Tools, ToolsMissing, find_tools

ROOT = Path(__file__).resolve().parents[2]
PAIR = runs.Pair("action_if", ROOT / "tests/p4/action_if.p4", ROOT / "tests/p4/action_if.stf")
TOOL_VARS = ("P4REF", "P4C_SRC", "REF_PY", "BM_PYTHONPATH")


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _fake_install(base: Path) -> dict[str, str]:
    """A fake p4c/BMv2 install: stub binaries in base/bin and a p4c tree with the runner."""
    for name in ("p4c-bm2-ss", "simple_switch", "simple_switch_CLI"):
        _script(base / "bin" / name, "exit 0")
    _script(base / "p4c" / "backends/bmv2/run-bmv2-test.py", "exit 0")
    return {"PATH": str(base / "bin"), "P4C_SRC": str(base / "p4c"), "REF_PY": sys.executable}


def _tools(tmp_path: Path, p4c: Path | None = None, runner: Path | None = None) -> Tools:
    p4c_src = tmp_path / "p4c"
    (p4c_src / "build").mkdir(parents=True, exist_ok=True)
    (p4c_src / "build" / "config.h").write_text("/* #undef HAVE_SIMPLE_SWITCH */\n")
    return Tools(
        p4c=p4c or _script(tmp_path / "bin" / "p4c-bm2-ss", "exit 0"),
        simple_switch=_script(tmp_path / "bin" / "simple_switch", "exit 0"),
        runner=runner or _script(tmp_path / "run.sh", "exit 0"),
        p4c_src=p4c_src,
        ref_py=Path("/bin/sh"),  # the stub runner is a shell script
        bm_pythonpath="",
        env=dict(os.environ),
    )


# -- discovery -----------------------------------------------------------------------


def test_nothing_found_lists_every_missing_tool(tmp_path: Path) -> None:
    with pytest.raises(ToolsMissing) as info:
        find_tools({"PATH": str(tmp_path)}, check_python=False)
    text = info.value.message()
    for name in ("p4c-bm2-ss", "simple_switch", "simple_switch_CLI", "STF runner", "P4C_SRC"):
        assert name in text
    assert "env.sh" in text and "PATH" in text


def test_found_on_path_and_p4c_src(tmp_path: Path) -> None:
    env = _fake_install(tmp_path)
    tools = find_tools(env, check_python=False)
    assert tools.p4c == tmp_path / "bin" / "p4c-bm2-ss"
    assert tools.runner == tmp_path / "p4c" / "backends/bmv2/run-bmv2-test.py"
    assert tools.ref_py == Path(sys.executable)


def test_found_through_p4ref_alone(tmp_path: Path) -> None:
    _fake_install(tmp_path)
    (tmp_path / "lib" / "bmv2-python").mkdir(parents=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    tools = find_tools({"PATH": str(empty), "P4REF": str(tmp_path), "REF_PY": sys.executable},
                       check_python=False)  # fmt: skip
    assert tools.simple_switch == tmp_path / "bin" / "simple_switch"
    assert tools.bm_pythonpath == str(tmp_path / "lib" / "bmv2-python")
    # the runner starts simple_switch by name: its folder goes on the children's PATH
    assert tools.env["PATH"].split(os.pathsep)[0] == str(tmp_path / "bin")
    assert tools.runner_env()["PYTHONPATH"] == tools.bm_pythonpath


def test_runner_python_lacking_modules_is_missing(tmp_path: Path) -> None:
    env = _fake_install(tmp_path)
    env["REF_PY"] = str(_script(tmp_path / "nopython", "exit 1"))
    with pytest.raises(ToolsMissing) as info:
        find_tools(env)
    assert "ptf" in str(info.value) and "runtime_CLI" in str(info.value)


def test_main_exits_2_without_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in TOOL_VARS:
        monkeypatch.delenv(name, raising=False)
    assert xcheck_main.main(["--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "missing: p4c-bm2-ss" in err and "missing: simple_switch" in err and "env.sh" in err


# -- the known-failures file ------------------------------------------------------------

GOOD = """
[[known]]
pair = "basic_exact"
way = "p4c+bmv2"
reason = "a race in the runner"
source = "p4c backends/bmv2/bmv2stf.py"

[[known]]
pair = "clone_i2e"
way = "*"
reason = "r"
source = "s"
"""


def test_known_file_parses() -> None:
    known = report.parse_known(GOOD)
    assert [(k.pair, k.way) for k in known] == [("basic_exact", "p4c+bmv2"), ("clone_i2e", "*")]
    assert report.find_known(known, "clone_i2e", runs.WAY_P4C_LITE) is known[1]
    assert report.find_known(known, "basic_exact", runs.WAY_P4C_LITE) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[known]]\npair = "a"\nway = "bmv2"\nreason = "r"\nsource = "s"\n', "not one of"),
        ('[[known]]\npair = "a"\nway = "*"\nreason = "r"\n', "'source' must be"),
        ('[[known]]\npair = "a"\nway = "*"\nreason = ""\nsource = "s"\n', "'reason' must be"),
        ('[[known]]\npair = "a"\nway = "*"\nreason = "r"\nsource = "s"\nwhy = 1\n', "unknown key"),
        ('known = "x"\n', "array of tables"),
        ("other = 1\n", "top-level"),
        ("[[known]\n", "known-failures file"),
        (GOOD + GOOD, "listed twice"),
    ],
)
def test_known_file_errors(text: str, message: str) -> None:
    with pytest.raises(report.KnownFileError, match=message):
        report.parse_known(text)


def test_repository_known_file_is_valid_and_empty() -> None:
    assert report.load_known(xcheck_main.KNOWN_FILE) == []
    assert report.load_known(None) == []


# -- table and summary -------------------------------------------------------------------


def _results() -> tuple[dict[str, dict[str, runs.Outcome]], dict[str, runs.Outcome]]:
    ok = runs.Outcome(runs.PASS)
    results = {
        "a": {w: ok for w in runs.WAYS},
        "b": {runs.WAY_REF: ok, runs.WAY_LITEC_BMV2: runs.Outcome(runs.FAIL, "Expected 1 got 2"),
              runs.WAY_P4C_LITE: runs.Outcome(runs.ERROR, "p4c: error: x")},
    }  # fmt: skip
    compiles = {"p4src/x.p4": runs.Outcome(runs.PASS, "1 warning", warnings=1)}
    return results, compiles


def test_summary_line_and_exit_decision() -> None:
    results, compiles = _results()
    assert report.summary_line(results, [], compiles) == (
        "xcheck: 2 pairs: p4c+bmv2 2/2, p4lite-c json on bmv2 1/2, p4c json on p4lite 1/2; "
        "p4c compiles 1/1 programs (1 warning)"
    )
    assert not report.all_passed(results, [], compiles)
    known = report.parse_known('[[known]]\npair = "b"\nway = "*"\nreason = "r"\nsource = "s"\n')
    line = report.summary_line(results, known, compiles)
    assert "p4lite-c json on bmv2 1/2 (+1 known)" in line
    assert report.all_passed(results, known, compiles)
    compiles["p4src/y.p4"] = runs.Outcome(runs.ERROR, "p4c: error")
    assert not report.all_passed(results, known, compiles)


def test_table_cells() -> None:
    results, _ = _results()
    known = report.parse_known(
        '[[known]]\npair = "b"\nway = "p4c json on p4lite"\nreason = "r"\nsource = "s"\n'
    )
    lines = report.format_table(["program", *runs.WAYS], report.pair_rows(results, known))
    assert lines[0].split("  ")[0] == "program"
    assert set(lines[1]) <= {"-", " "}
    assert lines[2].split() == ["a", "PASS", "PASS", "PASS"]
    assert "FAIL: Expected 1 got 2" in lines[3] and "KNOWN ERROR: p4c: error: x" in lines[3]
    assert report.cell(runs.Outcome(runs.PASS), known[0]) == "PASS (listed known)"
    assert report.cell(None) == "-"
    long = report.format_table(["h"], [["x" * 100]], max_width=20)
    assert long[2] == "x" * 17 + "..."


def test_json_report_is_serialisable() -> None:
    results, compiles = _results()
    data = report.json_report(results, [], compiles, ["p4c-bm2-ss /x"])
    text = json.dumps(data)
    assert data["counts"][runs.WAY_LITEC_BMV2] == {"passed": 1, "known": 0, "failed": 1, "total": 2}
    assert "Expected 1 got 2" in text and data["ok"] is False


# -- single runs with stub tools ---------------------------------------------------------

CHECK_BUILD = (
    'grep -q "define HAVE_SIMPLE_SWITCH" BUILD/config.h || { echo "ERROR: no define"; exit 1; }\n'
    "test -x BUILD/p4c-bm2-ss || exit 1\n"
)


def test_stub_runner_pass_fail_skip_timeout(tmp_path: Path) -> None:
    tools = _tools(tmp_path, runner=_script(tmp_path / "ok.sh", CHECK_BUILD + "exit 0"))
    assert runs.run_on_bmv2(tools, PAIR, tmp_path / "w1", 30).status == runs.PASS
    assert (tmp_path / "w1" / "action_if.p4").is_file()  # staged: .obs files land here
    assert (tmp_path / "w1" / "BUILD" / "p4c-bm2-ss").resolve() == tools.p4c.resolve()

    fail = 'echo "ERROR: Expected 1 packets on port 5 got 2"; echo "ERROR: Test failed"; exit 1'
    tools = _tools(tmp_path, runner=_script(tmp_path / "fail.sh", fail))
    outcome = runs.run_on_bmv2(tools, PAIR, tmp_path / "w2", 30)
    assert (outcome.status, outcome.reason) == (runs.FAIL, "Expected 1 packets on port 5 got 2")

    skip = f'echo "ERROR: config.h indicates ... {runs.SKIPPED_MARK}"; exit 0'
    tools = _tools(tmp_path, runner=_script(tmp_path / "skip.sh", skip))
    assert runs.run_on_bmv2(tools, PAIR, tmp_path / "w3", 30).status == runs.ERROR

    tools = _tools(tmp_path, runner=_script(tmp_path / "slow.sh", "sleep 5"))
    outcome = runs.run_on_bmv2(tools, PAIR, tmp_path / "w4", 0.5)
    assert (outcome.status, outcome.reason) == (runs.ERROR, "timeout after 0.5s")


def test_p4lite_c_stands_in_for_p4c_as_the_runner_calls_it(tmp_path: Path) -> None:
    # run-bmv2-test.py runs "BUILD/p4c-bm2-ss -o DIR/X.json X.p4" (process_file)
    call = CHECK_BUILD + 'BUILD/p4c-bm2-ss -o "$PWD/out/action_if.json" action_if.p4 || exit 1\n'
    call += "test -s out/action_if.json || exit 1\n"
    tools = _tools(tmp_path, runner=_script(tmp_path / "compile.sh", call))
    outcome = runs.run_on_bmv2(tools, PAIR, tmp_path / "w", 120, compiler=runs.compiler_script())
    assert outcome.status == runs.PASS, outcome.log


def test_compile_error_in_runner_is_error(tmp_path: Path) -> None:
    body = 'echo "x.p4(3): [--Werror=type-error] error: bad"; echo "ERROR: Error compiling"; exit 1'
    tools = _tools(tmp_path, runner=_script(tmp_path / "c.sh", body))
    outcome = runs.run_on_bmv2(tools, PAIR, tmp_path / "w", 30)
    assert outcome.status == runs.ERROR
    assert outcome.reason == "compile: x.p4(3): [--Werror=type-error] error: bad"


def test_p4c_json_on_p4lite_with_p4lite_c_as_stub_p4c(tmp_path: Path) -> None:
    p4c = _script(tmp_path / "p4c-bm2-ss", runs.compiler_script().removeprefix("#!/bin/sh\n"))
    tools = _tools(tmp_path, p4c=p4c)
    outcome = runs.run_p4c_json_on_p4lite(tools, PAIR, tmp_path / "w", 120)
    assert outcome.status == runs.PASS, outcome.log


def test_p4c_failure_and_warnings(tmp_path: Path) -> None:
    bad = _script(tmp_path / "bad", 'echo "prog.p4(1): [--Werror=x] error: no"; exit 1')
    outcome = runs.compile_with_p4c(_tools(tmp_path, p4c=bad), PAIR.p4, tmp_path / "o/a.json", 30)
    assert (outcome.status, outcome.reason) == (
        runs.ERROR,
        "p4c: prog.p4(1): [--Werror=x] error: no",
    )
    warn = _script(
        tmp_path / "warn",
        'echo "p.p4(2): [--Wwarn=unused] warning: x unused" >&2; echo "{}" > "$2"; exit 0',
    )
    outcome = runs.compile_with_p4c(_tools(tmp_path, p4c=warn), PAIR.p4, tmp_path / "o/b.json", 30)
    assert (outcome.status, outcome.warnings, outcome.reason) == (runs.PASS, 1, "1 warning")


def test_find_pairs_matches_the_suite() -> None:
    pairs = runs.find_pairs(ROOT / "tests" / "p4")
    assert len(pairs) == len(list((ROOT / "tests" / "p4").glob("*.stf")))
    assert all(p.p4.is_file() and p.stf.is_file() for p in pairs)
    assert [p.name for p in runs.find_pairs(ROOT / "p4src")] == ["aggregate"]
