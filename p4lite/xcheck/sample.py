"""``python -m p4lite.xcheck.sample FOLDER``: measure p4lite on an outside sample of pairs.

FOLDER holds ``X.p4`` + ``X.stf`` pairs (e.g. p4c's ``testdata/p4_16_samples/*-bmv2``),
kept outside the project, with any file they ``#include "..."`` beside them. Each
program is compiled by p4lite (ok / refused with p4lite's message / crashed) and,
when the reference toolchain is found (see ``p4lite.xcheck.tools``), run the three
ways of ``python -m p4lite.xcheck``: real p4c + BMv2 (the reference), p4lite's JSON
on BMv2, real p4c's JSON on p4lite. A program whose reference run fails is left
out of the figures and counted on its own: its STF does not hold on real p4c + BMv2
here, so it says nothing about p4lite.

Without the reference toolchain only p4lite's compile is measured, and the report
says so. Writes ``OUT/report.json`` and prints the figures and the failures grouped
by cause. Exit status 0 once the report is written (a measurement, not a gate);
2 for a FOLDER without pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from p4lite.xcheck import runs
from p4lite.xcheck.tools import Tools, ToolsMissing, find_tools

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "build" / "xcheck-sample"

COMPILED, REFUSED, CRASHED = "compiled", "refused", "crashed"
_ICE = "internal compiler error"
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*)?(?:Error|Exception)\b[^:]*: ")
_LOCATION = re.compile(r"^\S+?:\d+(?::\d+)?:\s*")  # file:line[:col]: before a message


@dataclass
class Compile:
    """p4lite's compile of one program."""

    status: str  # COMPILED, REFUSED or CRASHED
    message: str = ""


@dataclass
class Program:
    """Everything measured for one pair."""

    name: str
    compile: Compile
    ways: dict[str, runs.Outcome] = field(default_factory=dict)


def classify_compile(rc: int | None, output: str) -> Compile:
    """p4lite-c's exit status and output as ok / refused (its first error) / crashed."""
    if rc is None:
        return Compile(CRASHED, "timeout")
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    if rc == 0:
        return Compile(COMPILED)
    for line in lines:
        if _ICE in line:
            return Compile(CRASHED, line.split(_ICE, 1)[1].lstrip(": "))
    for line in lines:
        if re.search(r"\berror:", line):
            return Compile(REFUSED, _LOCATION.sub("", line).removeprefix("error: "))
    return Compile(CRASHED, lines[-1] if lines else f"exit {rc} without a message")


def compile_with_p4lite(pair: runs.Pair, out_json: Path, timeout: float) -> Compile:
    out_json.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "p4lite.compiler", "-o", str(out_json), str(pair.p4)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        proc = subprocess.run(cmd, cwd=pair.p4.parent, env=env, capture_output=True,
                              text=True, timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        return classify_compile(None, "")
    return classify_compile(proc.returncode, proc.stdout + proc.stderr)


def stage_includes(pair: runs.Pair, workdir: Path) -> None:
    """Copy the files ``pair.p4`` includes with quotes (and theirs) next to its copy:
    the runner compiles the program in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    todo, seen = [pair.p4], set()
    while todo:
        source = todo.pop()
        for name in _INCLUDE.findall(source.read_text(encoding="utf-8", errors="replace")):
            found = source.parent / name
            if name in seen or not found.is_file():
                continue
            seen.add(name)
            dest = workdir / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(found, dest)
            todo.append(found)


def _ways(tools: Tools, pair: runs.Pair, work: Path, timeout: float
          ) -> list[tuple[str, Callable[[], runs.Outcome]]]:  # fmt: skip
    litec = runs.compiler_script()
    dirs = {runs.WAY_REF: work / "p4c-bmv2", runs.WAY_LITEC_BMV2: work / "p4lite-c-bmv2",
            runs.WAY_P4C_LITE: work / "p4c-p4lite"}  # fmt: skip
    for d in dirs.values():
        stage_includes(pair, d)
    return [
        (runs.WAY_REF, lambda: runs.run_on_bmv2(tools, pair, dirs[runs.WAY_REF], timeout)),
        (runs.WAY_LITEC_BMV2,
         lambda: runs.run_on_bmv2(tools, pair, dirs[runs.WAY_LITEC_BMV2], timeout, litec)),
        (runs.WAY_P4C_LITE,
         lambda: runs.run_p4c_json_on_p4lite(tools, pair, dirs[runs.WAY_P4C_LITE], timeout)),
    ]  # fmt: skip


def measure(pairs: list[runs.Pair], tools: Tools | None, work: Path, timeout: float,
            jobs: int) -> list[Program]:  # fmt: skip
    """Every pair compiled by p4lite and, with ``tools``, run the three ways."""
    programs = {p.name: Program(p.name, Compile(CRASHED, "not run")) for p in pairs}

    def one(pair: runs.Pair) -> None:
        base = work / pair.name
        programs[pair.name].compile = compile_with_p4lite(pair, base / "p4lite.json", timeout)
        if tools is None:
            return
        for way, run in _ways(tools, pair, base, timeout):
            try:
                outcome = run()
            except Exception as exc:  # an unreadable file: one ERROR, not a crash
                outcome = runs.Outcome(runs.ERROR, f"sample: {type(exc).__name__}: {exc}")
            programs[pair.name].ways[way] = outcome

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for done, _ in enumerate(pool.map(one, pairs), 1):
            if done % 10 == 0 or done == len(pairs):
                print(f"  {done}/{len(pairs)} programs", flush=True)
    return [programs[p.name] for p in pairs]


def _pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100.0 * part / whole:.1f}%)" if whole else f"{part}/0"


def summarize(programs: list[Program], with_reference: bool) -> dict:
    """The figures and the failures grouped by cause, as JSON-ready data."""
    if with_reference:
        excluded = [p for p in programs if not _ok(p, runs.WAY_REF)]
        counted = [p for p in programs if _ok(p, runs.WAY_REF)]
    else:
        excluded, counted = [], list(programs)
    compiled = [p for p in counted if p.compile.status == COMPILED]
    data: dict = {
        "programs": len(programs),
        "reference": with_reference,
        "reference_fails": {p.name: _reason(p.ways.get(runs.WAY_REF)) for p in excluded},
        "counted": len(counted),
        "p4lite_compiles": len(compiled),
        "refused": _group(counted, REFUSED),
        "crashed": _group(counted, CRASHED),
    }
    if with_reference:
        for way in (runs.WAY_LITEC_BMV2, runs.WAY_P4C_LITE):
            wrong, error = {}, {}
            for p in counted:
                outcome = p.ways.get(way)
                if outcome is None or outcome.ok:
                    continue
                if outcome.status == runs.FAIL and not _refusal(outcome):
                    wrong[p.name] = _reason(outcome)
                elif p in compiled or way == runs.WAY_P4C_LITE:  # else counted as refused
                    error[p.name] = _reason(outcome)
            data[way] = {"pass": sum(_ok(p, way) for p in counted), "wrong": wrong,
                         "error": error}  # fmt: skip
        data["all_three"] = sum(
            _ok(p, runs.WAY_LITEC_BMV2) and _ok(p, runs.WAY_P4C_LITE) for p in counted
        )
    return data


def _ok(program: Program, way: str) -> bool:
    outcome = program.ways.get(way)
    return outcome is not None and outcome.ok


def _refusal(outcome: runs.Outcome) -> bool:
    """A FAIL that is p4lite refusing the JSON (the STF runner's last line is an
    exception such as ``SwitchLoadError``), not a packet that differs."""
    return bool(_EXCEPTION.match(outcome.reason))


def _reason(outcome: runs.Outcome | None) -> str:
    if outcome is None:
        return "not run"
    return f"{outcome.status}: {outcome.reason}" if outcome.reason else outcome.status


def _group(programs: list[Program], status: str) -> dict[str, list[str]]:
    """{message: [program, ...]} for the programs whose compile has ``status``."""
    groups: dict[str, list[str]] = {}
    for p in programs:
        if p.compile.status == status:
            groups.setdefault(p.compile.message, []).append(p.name)
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def report_lines(data: dict) -> list[str]:
    """The printed report."""
    counted = data["counted"]
    lines = [f"sample: {data['programs']} programs"]
    if data["reference"]:
        lines.append(f"  reference (p4c + BMv2) fails, left out: {len(data['reference_fails'])}")
        for name, why in sorted(data["reference_fails"].items()):
            lines.append(f"    {name}: {why}")
        lines.append(f"  reference passes: {counted}")
    else:
        lines.append("  reference toolchain absent: p4lite's compile only, every program counted")
    lines.append(f"  p4lite compiles:        {_pct(data['p4lite_compiles'], counted)}")
    if data["reference"]:
        for way in (runs.WAY_LITEC_BMV2, runs.WAY_P4C_LITE):
            lines.append(f"  passes {way + ':':24s}{_pct(data[way]['pass'], counted)}")
        lines.append(f"  passes both p4lite ways:      {_pct(data['all_three'], counted)}")
    for title, key in (("refused by p4lite", "refused"), ("p4lite crashed", "crashed")):
        groups = data[key]
        if groups:
            lines.append(f"{title} ({sum(map(len, groups.values()))}):")
            for message, names in groups.items():
                lines.append(f"  [{len(names)}] {message}")
                lines.append(f"      {', '.join(names)}")
    if data["reference"]:
        for way in (runs.WAY_LITEC_BMV2, runs.WAY_P4C_LITE):
            for kind in ("wrong", "error"):
                found = data[way][kind]
                if found:
                    what = "wrong packets" if kind == "wrong" else "errors and refused JSON"
                    lines.append(f"{what}, {way} ({len(found)}):")
                    lines += [f"  {n}: {why}" for n, why in sorted(found.items())]
    return lines


def cause_counts(data: dict) -> Counter[str]:
    """How many counted programs fail for each broad cause (first cause only)."""
    out: Counter[str] = Counter()
    out["refused"] = sum(map(len, data["refused"].values()))
    out["crashed"] = sum(map(len, data["crashed"].values()))
    if data["reference"]:
        wrong = set(data[runs.WAY_LITEC_BMV2]["wrong"]) | set(data[runs.WAY_P4C_LITE]["wrong"])
        out["wrong packets"] = len(wrong)
    return out


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m p4lite.xcheck.sample", description=__doc__.split(
        "\n\n")[0])  # fmt: skip
    ap.add_argument("folder", type=Path, help="a folder of X.p4 + X.stf pairs")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="programs at a time (default 1)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per run (default 120)")
    ap.add_argument("--first", type=int, default=0, metavar="N",
                    help="only the first N pairs by name")  # fmt: skip
    ap.add_argument(
        "--no-reference",
        action="store_true",
        help="measure p4lite's compile only, even when the reference is found",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=OUT_DIR,
        help=f"report and work folder (default {OUT_DIR.relative_to(ROOT)})",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    pairs = runs.find_pairs(args.folder.resolve())
    if args.first:
        pairs = pairs[: args.first]
    if not pairs:
        print(f"sample: no X.p4 + X.stf pairs in {args.folder}", file=sys.stderr)
        return 2
    tools: Tools | None = None
    if not args.no_reference:
        try:
            tools = find_tools()
        except ToolsMissing as exc:
            print(exc.message(), file=sys.stderr)
            print("sample: measuring p4lite's compile only", file=sys.stderr)
    out: Path = args.out.resolve()
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    start = time.monotonic()
    programs = measure(pairs, tools, work, args.timeout, args.jobs)
    data = summarize(programs, tools is not None)
    data["folder"] = str(args.folder.resolve())
    data["seconds"] = round(time.monotonic() - start, 1)
    data["per_program"] = {
        p.name: {"p4lite compile": p.compile.status + (f": {p.compile.message}"
                                                       if p.compile.message else ""),
                 **{way: _reason(o) for way, o in p.ways.items()}}
        for p in programs
    }  # fmt: skip
    (out / "report.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print("\n".join(report_lines(data)))
    print(f"sample: report {out / 'report.json'}; work folders under {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
