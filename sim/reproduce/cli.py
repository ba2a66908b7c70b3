"""The reproduction command: run rows, print their tables, write JSON and PNG.

``python -m p4hub.sim.reproduce [ROW ...] [--seeds N] [-j N] [--out DIR] [--figures]
[--quick] [--list]``. With no row, every row (the long run: see docs/reproductions.md).
Each experiment writes ``<name>.json`` (every run's record, the statistics, the
headline) and ``<name>.png`` into ``--out`` (default ``logs/reproduce-<time>/``);
``--figures`` writes them into ``docs/figures/`` instead, where the committed ones live.
Exit status: 0 every run finished; 1 a run failed (named on stderr); 2 bad arguments.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from p4hub.sim import report
from p4hub.sim.reproduce import figures, runner
from p4hub.sim.reproduce.rows import ROWS, Experiment, Row

FIGURES = Path("docs/figures")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m p4hub.sim.reproduce",
        description="Re-run the seed papers' experiments in the simulator (rows: "
        + ", ".join(ROWS) + ").")
    parser.add_argument("rows", nargs="*", metavar="ROW", help="rows to run (default: all)")
    parser.add_argument("--only", metavar="EXPERIMENT", help="one experiment of the rows")
    parser.add_argument("--seeds", type=int, metavar="N", help="seeds 0..N-1 for every "
                        "experiment (default: each experiment's own; one where seeds change "
                        "nothing)")
    parser.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                        help="runs at once in separate processes (default 1)")
    parser.add_argument("--out", type=Path, help="output folder (default logs/reproduce-<time>/)")
    parser.add_argument("--figures", action="store_true",
                        help=f"write into {FIGURES}/ (the committed figures)")
    parser.add_argument("--quick", action="store_true", help="each experiment's first panel "
                        "and point, one seed (a smoke run)")
    parser.add_argument("--list", action="store_true", help="list the rows and exit")
    args = parser.parse_args(argv)
    unknown = [r for r in args.rows if r not in ROWS]
    if unknown:
        parser.error(f"unknown row {unknown[0]!r} (one of {', '.join(ROWS)})")
    if args.seeds is not None and args.seeds < 1:
        parser.error("--seeds needs at least 1")
    if args.jobs < 1:
        parser.error("-j needs at least 1")
    return args


def execute(exp: Experiment, jobs: Sequence[runner.Job], workers: int,
            run: runner.RunFn) -> list[dict[str, Any]]:
    """The runs, in order, or over ``workers`` processes; a line per run on stderr."""
    total = len(jobs)
    if workers <= 1 or total <= 1:
        out = []
        for k, job in enumerate(jobs, 1):
            record = runner.run_job(job, exp, run)
            _progress(k, total, record)
            out.append(record)
        return out
    from joblib import Parallel, delayed

    parallel = Parallel(n_jobs=min(workers, total), return_as="generator")
    out = []
    for k, record in enumerate(parallel(delayed(runner.run_job)(job, exp, run)
                                        for job in jobs), 1):
        _progress(k, total, record)
        out.append(record)
    return out


def _progress(k: int, total: int, r: dict[str, Any]) -> None:
    state = "ok" if r.get("ok") else "FAILED"
    wall = r.get("wall_s")
    print(f"  [{k}/{total}] {r['experiment']} {r['panel']} {r['x_shown']} {r['series']} "
          f"seed {r['seed']}: {state}" + (f", {wall:.1f} s" if wall else ""),
          file=sys.stderr, flush=True)


def _fmt(metric: str, s: dict[str, Any] | None) -> str:
    if not s or s.get("mean") is None:
        return "-"
    mean, ci = s["mean"], s.get("ci95")
    if metric in ("throughput", "jobs_throughput"):
        text = f"{mean:.1f}"
        return text + (f" ±{ci:.1f}" if ci is not None else "")
    if metric == "iterations_per_s":
        return f"{mean:.3f}" + (f" ±{ci:.3f}" if ci is not None else "")
    return report.human_count(mean) + (f" ±{report.human_count(ci)}" if ci is not None else "")


def table(exp: Experiment, stats: dict[str, Any]) -> str:
    head = ["panel", "x", *[f"{s.label}" for s in exp.series]]
    ratio = bool(exp.baseline and exp.candidate)
    if ratio:
        head += [f"{exp.candidate}/{b}" for b in (exp.baseline, *exp.others)]
    lines = [head]
    for p in stats["points"]:
        row = [p["panel"], p["x_shown"],
               *[_fmt(exp.metric, p["series"].get(s.label)) for s in exp.series]]
        if ratio:
            others = p.get("ratio_to") or {}
            for r in (p.get("ratio") or {}, *(others.get(o) or {} for o in exp.others)):
                row.append("-" if r.get("mean") is None else f"{r['mean']:.3f}"
                           + (f" ±{r['ci95']:.3f}" if r.get("ci95") is not None else ""))
        lines.append(row)
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    text = [f"{exp.name}: {exp.title} [{exp.metric}]"]
    for line in lines:
        text.append("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)))
    return "\n".join(text)


def run_experiment(row: Row, exp: Experiment, out: Path, *, seeds: Sequence[int] | None,
                   quick: bool, workers: int, run: runner.RunFn) -> tuple[bool, Path]:
    """Run one experiment, write its JSON and PNG, print its table; (all ok, JSON path)."""
    jobs = runner.jobs(exp, seeds=seeds, quick=quick)
    t0, cpu0 = time.perf_counter(), time.process_time()
    records = execute(exp, jobs, workers, run)
    stats = runner.statistics_of(exp, records)
    payload = {
        "row": row.name, "source": row.source, "claim": row.claim, "pending": row.pending,
        "experiment": exp.name, "title": exp.title, "scenario": f"sim/scenarios/reproduce/"
        f"{exp.scenario}", "metric": exp.metric, "baseline": exp.baseline,
        "others": list(exp.others),
        "candidate": exp.candidate, "seeds": sorted({j.seed for j in jobs}),
        "deterministic": exp.deterministic, "quick": quick,
        "wall_s": time.perf_counter() - t0,
        # this process's CPU (with -j, the workers' is not in it): the wall time on a busy
        # machine says little about the row's cost; this does
        "cpu_s": time.process_time() - cpu0, "stats": stats, "records": records}
    path = report.write_json(payload, out / f"{exp.name}.json")
    if any(r.get("metric") is not None and not math.isnan(r["metric"]) for r in records):
        figures.plot(exp, stats, out / f"{exp.name}.png")
    print(table(exp, stats))
    ok = all(r.get("ok") for r in records)
    for r in records:
        if not r.get("ok"):
            print(f"{exp.name}: {r['panel']} {r['x_shown']} {r['series']} seed {r['seed']}: "
                  f"{'; '.join(r.get('failures') or ['failed'])}", file=sys.stderr)
    return ok, path


def main(argv: Sequence[str] | None = None, *, run: runner.RunFn | None = None) -> int:
    """The command; ``run`` replaces ``sim.run.run_scenario`` (a seam for tests)."""
    args = parse_args(argv)
    if run is None:
        from p4hub.sim.run import run_scenario

        run = run_scenario
    rows = [ROWS[name] for name in args.rows] or list(ROWS.values())
    if args.list:
        for row in ROWS.values():
            names = ", ".join(e.name for e in row.experiments) or "pending"
            print(f"{row.name}: {row.source}: {names}")
        return 0
    out = FIGURES if args.figures else args.out or Path("logs") / (
        "reproduce-" + datetime.now().strftime("%Y%m%d-%H%M%S"))
    seeds = list(range(args.seeds)) if args.seeds is not None else None
    ok = True
    for row in rows:
        if not row.experiments:
            print(f"{row.name}: pending: {row.pending}")
            continue
        for exp in row.experiments:
            if args.only and exp.name != args.only:
                continue
            done, path = run_experiment(row, exp, out, seeds=seeds, quick=args.quick,
                                        workers=args.jobs, run=run)
            ok = ok and done
            print(f"wrote {path} and its .png\n")
    return 0 if ok else 1
