"""``python -m p4lite.xcheck [-j N] [--timeout S] [--only NAME]... [--known FILE] [--out DIR]``.

Exit status: 0 when every pair passes all three ways (failures listed in the
known-failures file aside) and real p4c compiles every program; 1 otherwise;
2 when the reference tools are missing (the message says which, and how to get
them found) or the known-failures file is malformed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from p4lite.xcheck import report, runs
from p4lite.xcheck.tools import Tools, ToolsMissing, find_tools

ROOT = Path(__file__).resolve().parents[2]
PAIRS_DIR = ROOT / "tests" / "p4"
PROGRAM_DIRS = (ROOT / "p4src", ROOT / "bench" / "programs")
KNOWN_FILE = PAIRS_DIR / "XCHECK_KNOWN.toml"
OUT_DIR = ROOT / "build" / "xcheck"


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m p4lite.xcheck",
        description="Cross-check p4lite against real p4c-bm2-ss, simple_switch and p4c's STF "
        "runner (found on PATH and through P4REF, P4C_SRC, REF_PY, BM_PYTHONPATH).",
    )
    ap.add_argument("-j", "--jobs", type=int, default=2, help="runs at a time (default 2)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per run (default 120)")
    ap.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="only this tests/p4 or p4src pair (repeatable); skips the compile-only programs",
    )
    ap.add_argument(
        "--known",
        type=Path,
        default=KNOWN_FILE,
        help=f"known-failures file (default {KNOWN_FILE.relative_to(ROOT)})",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=OUT_DIR,
        help=f"report and work folder (default {OUT_DIR.relative_to(ROOT)})",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work folders of passing runs")
    ap.add_argument("--fuzz", type=int, default=0, metavar="N",
                    help="differential fuzzing instead: N random programs (p4lite/xcheck/fuzz)")
    ap.add_argument("--seed", type=int, default=1, help="first fuzz seed (default 1)")
    ap.add_argument("--packets", type=int, default=24, help="packets per fuzz program")
    ap.add_argument("--pairs-dir", type=Path, default=None,
                    help="also write each minimised fuzz reproducer here (e.g. tests/p4)")
    return ap.parse_args(argv)  # fmt: skip


Job = tuple[str, str, Callable[[], runs.Outcome]]  # (name, way, run)


def build_jobs(
    tools: Tools, pairs: list[runs.Pair], programs: list[Path], work: Path, timeout: float
) -> list[Job]:
    jobs: list[Job] = []
    litec = runs.compiler_script()
    for pair in pairs:
        base = work / pair.name

        def ref(p: runs.Pair = pair, d: Path = base / "p4c-bmv2") -> runs.Outcome:
            return runs.run_on_bmv2(tools, p, d, timeout)

        def lite_bmv2(p: runs.Pair = pair, d: Path = base / "p4lite-c-bmv2") -> runs.Outcome:
            return runs.run_on_bmv2(tools, p, d, timeout, compiler=litec)

        def p4c_lite(p: runs.Pair = pair, d: Path = base / "p4c-p4lite") -> runs.Outcome:
            return runs.run_p4c_json_on_p4lite(tools, p, d, timeout)

        jobs += [(pair.name, runs.WAY_REF, ref), (pair.name, runs.WAY_LITEC_BMV2, lite_bmv2),
                 (pair.name, runs.WAY_P4C_LITE, p4c_lite)]  # fmt: skip
    for program in programs:
        label = str(program.relative_to(ROOT)) if program.is_relative_to(ROOT) else str(program)
        out = work / "compile" / program.parent.name / f"{program.stem}.json"

        def compile_only(p: Path = program, o: Path = out) -> runs.Outcome:
            return runs.compile_with_p4c(tools, p, o, timeout)

        jobs.append((label, runs.WAY_COMPILE, compile_only))
    return jobs


def _guarded(job: Job) -> runs.Outcome:
    try:
        return job[2]()
    except Exception as exc:  # a bug here or an unreadable file: one ERROR, not a crash
        return runs.Outcome(runs.ERROR, f"xcheck: {type(exc).__name__}: {exc}")


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        tools = find_tools()
    except ToolsMissing as exc:
        print(exc.message(), file=sys.stderr)
        return 2
    try:
        known = report.load_known(args.known)
    except report.KnownFileError as exc:
        print(f"xcheck: {exc}", file=sys.stderr)
        return 2
    if args.fuzz:
        return _fuzz(tools, args)
    selected = _select(args.only)
    if selected is None:
        return 2
    pairs, programs = selected

    out: Path = args.out.resolve()  # p4c runs in the work folder: paths must be absolute
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    print("xcheck: reference tools:")
    for line in tools.describe():
        print(f"  {line}")
    jobs = build_jobs(tools, pairs, programs, work, args.timeout)
    print(f"xcheck: {len(pairs)} pairs x 3 ways + {len(programs)} programs, "
          f"{len(jobs)} runs, {args.jobs} at a time, {args.timeout:g}s each at most", flush=True)  # fmt: skip

    start = time.monotonic()
    results, compiles = _run(jobs, pairs, args.jobs)
    if not args.keep:  # keep the folders of failed runs for a look
        for name, ways in results.items():
            for way, outcome in ways.items():
                if outcome.ok:
                    shutil.rmtree(work / name / _folder(way), ignore_errors=True)
    _print_tables(results, known, compiles)
    data = report.json_report(results, known, compiles, tools.describe())
    data["seconds"] = round(time.monotonic() - start, 1)
    out.mkdir(parents=True, exist_ok=True)
    report_path = out / "report.json"
    report_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print()
    print(f"xcheck: report {report_path}; failed runs' folders under {work}")
    print(report.summary_line(results, known, compiles))
    return 0 if report.all_passed(results, known, compiles) else 1


def _select(only: list[str] | None) -> tuple[list, list[Path]] | None:
    """The pairs and programs to run (``--only`` keeps those pairs and no programs);
    None, after saying why, when ``--only`` names a pair that does not exist."""
    # the project's own programs that have an STF beside them (p4src/aggregate.stf) too
    pairs = runs.find_pairs(PAIRS_DIR) + runs.find_pairs(PROGRAM_DIRS[0])
    programs = [p for d in PROGRAM_DIRS for p in sorted(d.glob("*.p4"))]
    if not only:
        return pairs, programs
    unknown = sorted(set(only) - {p.name for p in pairs})
    if unknown:
        print(f"xcheck: no such pair in tests/p4 or p4src: {', '.join(unknown)}", file=sys.stderr)
        return None
    return [p for p in pairs if p.name in only], []


def _run(jobs: list, pairs: list[runs.Pair], parallel: int
         ) -> tuple[dict[str, dict[str, runs.Outcome]], dict[str, runs.Outcome]]:
    """Every job on a thread pool: (each pair's outcome per way, each program's compile)."""
    results: dict[str, dict[str, runs.Outcome]] = {p.name: {} for p in pairs}
    compiles: dict[str, runs.Outcome] = {}
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = [(job, pool.submit(_guarded, job)) for job in jobs]
        for done, (job, future) in enumerate(futures, 1):
            name, way, _ = job
            outcome = future.result()
            if way == runs.WAY_COMPILE:
                compiles[name] = outcome
            else:
                results[name][way] = outcome
            if not outcome.ok:
                print(f"  [{done}/{len(jobs)}] {name} / {way}: {report.cell(outcome)}", flush=True)
    return results, compiles


def _print_tables(results: dict[str, dict[str, runs.Outcome]], known: list[report.KnownFailure],
                  compiles: dict[str, runs.Outcome]) -> None:
    print()
    headers = ["program", *runs.WAYS]
    for line in report.format_table(headers, report.pair_rows(results, known)):
        print(line)
    if compiles:
        print()
        rows = [[n, report.cell(o)] for n, o in sorted(compiles.items())]
        for line in report.format_table(["program", runs.WAY_COMPILE], rows):
            print(line)


def _fuzz(tools: Tools, args: argparse.Namespace) -> int:
    from p4lite.xcheck.fuzz.campaign import FINDINGS, Settings, run_campaign

    st = Settings(args.fuzz, args.seed, args.packets, args.jobs, args.timeout,
                  out=args.out.resolve() / "fuzz", pairs_dir=args.pairs_dir)
    print(f"xcheck: fuzzing {st.count} programs (seeds {st.seed}..{st.seed + st.count - 1}), "
          f"{st.packets} packets each, {st.jobs} at a time", flush=True)
    summary = run_campaign(tools, st)
    print(summary.line())
    print(f"xcheck: fuzz report {st.out / 'fuzz-report.json'}")
    bad = sum(summary.kinds[k] for k in FINDINGS) + summary.kinds["reference error"]
    return 1 if bad else 0


def _folder(way: str) -> str:
    return {runs.WAY_REF: "p4c-bmv2", runs.WAY_LITEC_BMV2: "p4lite-c-bmv2",
            runs.WAY_P4C_LITE: "p4c-p4lite"}[way]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
