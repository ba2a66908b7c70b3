"""p4lite.xcheck.sample without the reference tools: p4lite-c's output classified, quoted
includes staged, the figures and failure groups, and a run on a tiny synthetic folder that
says the reference is absent and measures p4lite's compile only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from p4lite.xcheck import runs, sample
from p4lite.xcheck.tools import ToolsMissing


@pytest.mark.parametrize(
    ("rc", "output", "status", "message"),
    [
        (0, "", sample.COMPILED, ""),
        (0, "x.p4:3:1: warning: 'y' is unused\n", sample.COMPILED, ""),
        (1, "x.p4:12:9: error: not supported by p4lite: this call inside an expression\n",
         sample.REFUSED, "not supported by p4lite: this call inside an expression"),
        (1, "a.p4:1:1: warning: w\n/t/b.p4:7: error: type mismatch: expected bit<8>\n",
         sample.REFUSED, "type mismatch: expected bit<8>"),
        (1, "Traceback (most recent call last):\n  ...\nKeyError: 'x'\n"
            "p4lite-c: internal compiler error: KeyError: 'x'\np4lite-c: this is a bug\n",
         sample.CRASHED, "KeyError: 'x'"),
        (1, "Segmentation fault\n", sample.CRASHED, "Segmentation fault"),
        (1, "", sample.CRASHED, "exit 1 without a message"),
        (None, "", sample.CRASHED, "timeout"),
    ],
)  # fmt: skip
def test_classify_compile(rc: int | None, output: str, status: str, message: str) -> None:
    got = sample.classify_compile(rc, output)
    assert (got.status, got.message) == (status, message)


def test_stage_includes_copies_quoted_includes_recursively(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "prog.p4").write_text('#include <core.p4>\n#include "skel.p4"\n', encoding="utf-8")
    (src / "skel.p4").write_text('# include "inner.p4"\n#include "missing.p4"\n', encoding="utf-8")
    (src / "inner.p4").write_text("// leaf\n", encoding="utf-8")
    (src / "unrelated.p4").write_text("", encoding="utf-8")
    pair = runs.Pair("prog", src / "prog.p4", src / "prog.stf")
    work = tmp_path / "work"
    sample.stage_includes(pair, work)
    assert sorted(p.name for p in work.iterdir()) == ["inner.p4", "skel.p4"]


def _program(name: str, compile_status: str, message: str = "", **ways: str) -> sample.Program:
    outcomes = {
        way: runs.Outcome(status, reason)
        for way, (status, reason) in (
            (w, s.split(":", 1) if ":" in s else (s, "")) for w, s in ways.items()
        )
    }
    return sample.Program(name, sample.Compile(compile_status, message),
                          {_WAYS[k]: v for k, v in outcomes.items()})  # fmt: skip


_WAYS = {"ref": runs.WAY_REF, "litec": runs.WAY_LITEC_BMV2, "p4c_lite": runs.WAY_P4C_LITE}


def test_summary_with_reference() -> None:
    programs = [
        _program("ok", sample.COMPILED, ref="PASS", litec="PASS", p4c_lite="PASS"),
        _program("bad_ref", sample.COMPILED, ref="FAIL:Test failed", litec="FAIL", p4c_lite="FAIL"),
        _program("refused1", sample.REFUSED, "no loops", ref="PASS",
                 litec="ERROR:compile: no loops", p4c_lite="PASS"),
        _program("refused2", sample.REFUSED, "no loops", ref="PASS",
                 litec="ERROR:compile: no loops", p4c_lite="ERROR:p4lite.stf: boom"),
        _program("wrong", sample.COMPILED, ref="PASS", litec="FAIL:Expected packet", p4c_lite="PASS"),
        _program("load", sample.COMPILED, ref="PASS", litec="PASS",
                 p4c_lite="FAIL:p4lite.switch.core.errors.SwitchLoadError: varbit"),
    ]  # fmt: skip
    data = sample.summarize(programs, with_reference=True)
    assert data["programs"] == 6 and data["counted"] == 5
    assert list(data["reference_fails"]) == ["bad_ref"]
    assert data["p4lite_compiles"] == 3
    assert data["refused"] == {"no loops": ["refused1", "refused2"]}
    assert data["crashed"] == {}
    litec, p4c_lite = data[runs.WAY_LITEC_BMV2], data[runs.WAY_P4C_LITE]
    assert litec["pass"] == 2 and p4c_lite["pass"] == 3
    assert litec["wrong"] == {"wrong": "FAIL: Expected packet"}
    assert litec["error"] == {}  # a refused program's compile error is counted once, as refused
    assert p4c_lite["wrong"] == {}  # p4lite refusing p4c's JSON is no wrong packet
    assert p4c_lite["error"] == {
        "refused2": "ERROR: p4lite.stf: boom",
        "load": "FAIL: p4lite.switch.core.errors.SwitchLoadError: varbit",
    }
    assert data["all_three"] == 1
    assert sample.cause_counts(data) == {"refused": 2, "crashed": 0, "wrong packets": 1}
    text = "\n".join(sample.report_lines(data))
    assert "reference passes: 5" in text
    assert "p4lite compiles:        3/5 (60.0%)" in text
    assert "[2] no loops" in text and "refused1, refused2" in text
    assert "wrong packets, p4lite-c json on bmv2 (1):" in text
    json.dumps(data)


def test_summary_without_reference_counts_every_program() -> None:
    programs = [_program("a", sample.COMPILED), _program("b", sample.CRASHED, "KeyError: 'x'")]
    data = sample.summarize(programs, with_reference=False)
    assert data["counted"] == 2 and data["p4lite_compiles"] == 1
    assert data["crashed"] == {"KeyError: 'x'": ["b"]}
    assert runs.WAY_LITEC_BMV2 not in data
    text = "\n".join(sample.report_lines(data))
    assert "reference toolchain absent" in text and "1/2 (50.0%)" in text


def test_main_on_a_synthetic_folder_without_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "sample"
    folder.mkdir()
    for name in ("good", "loops", "nostf"):
        (folder / f"{name}.p4").write_text("// synthetic\n", encoding="utf-8")
        if name != "nostf":
            (folder / f"{name}.stf").write_text("packet 0 00\nexpect 0 00\n", encoding="utf-8")

    def missing() -> None:
        raise ToolsMissing(["p4c-bm2-ss (not on PATH)"])

    def fake_compile(pair: runs.Pair, out_json: Path, timeout: float) -> sample.Compile:
        # p4lite-c itself is not run here (a second a program); classify_compile has its tests
        if pair.name == "loops":
            return sample.classify_compile(1, f"{pair.p4}:2:5: error: no loops\n")
        return sample.classify_compile(0, "")

    monkeypatch.setattr(sample, "find_tools", missing)
    monkeypatch.setattr(sample, "compile_with_p4lite", fake_compile)
    out = tmp_path / "out"
    assert sample.main([str(folder), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "missing: p4c-bm2-ss" in captured.err
    assert "measuring p4lite's compile only" in captured.err
    assert "p4lite compiles:        1/2 (50.0%)" in captured.out
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert data["reference"] is False
    assert data["refused"] == {"no loops": ["loops"]}
    assert set(data["per_program"]) == {"good", "loops"}


def test_main_without_pairs_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sample.main([str(tmp_path), "--no-reference", "--out", str(tmp_path / "o")]) == 2
    assert "no X.p4 + X.stf pairs" in capsys.readouterr().err
