"""``p4hub-sim SCENARIO.toml``: run a scenario (or every point of its sweep) and report.

Each sweep point x path is one job: ``p4hub.sim.run.run_scenario`` on the point with
that single path. ``-j 1`` runs the jobs in order in this process (with a progress bar
that shows simulated time and events/s on a terminal); ``-j N`` fans them out over N
processes with joblib, whose backend a caller may also point at a Dask or Ray cluster
(``joblib.parallel_config``). The table goes to stdout (``--json``: sim.json's content
instead); sim.json and sim.png go to ``--out`` (default ``logs/sim-<name>-<time>/``).

Exit status: 0 every run finished; 1 a run failed or hit its memory budget (the message
names the point and the path); 2 the scenario was refused (file, field and reason).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from p4hub.sim import report
from p4hub.sim.errors import ScenarioError, SimError
from p4hub.sim.scenario import TIERS, Scenario, load, with_fields
from p4hub.sim.units import format_duration

# run_scenario(scenario, *, tier, seed, progress) -> RunResult (anything with to_dict())
RunFn = Callable[..., Any]
Progress = Callable[[float, int], None]
PROG = "p4hub-sim"


def run_scenario(scenario: Scenario, *, tier: str | None = None, seed: int | None = None,
                 progress: Progress | None = None) -> Any:
    """The simulator's entry point, imported when first used: ``--help`` and a refused
    scenario never load the engine."""
    from p4hub.sim.run import run_scenario as run

    return run(scenario, tier=tier, seed=seed, progress=progress)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Simulate in-network aggregation (and ring, PS baselines) "
        "on a rack or leaf-spine fabric described by a scenario file.")
    parser.add_argument("scenario", type=Path, help="scenario file (TOML; sim/scenarios/ has "
                        "examples)")
    parser.add_argument("--tier", choices=TIERS, help="fidelity: P per datagram, M macro-packets, "
                        "F fluid (default: the scenario's run.tier)")
    parser.add_argument("--seed", type=_natural(0), help="seed (default: the scenario's run.seed)")
    parser.add_argument("-j", "--jobs", type=_natural(1), default=1, metavar="N",
                        help="run N jobs at once in separate processes (default 1: in order, "
                        "in this process); each run has the scenario's whole memory budget")
    parser.add_argument("--out", type=Path, help="output folder (default "
                        "logs/sim-<name>-<time>/)")
    parser.add_argument("--json", action="store_true", help="print sim.json's content "
                        "instead of the table")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def _natural(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} is less than {least}")
        return value
    return parse


@dataclass(frozen=True)
class Job:
    index: int
    scenario: Scenario  # one point, one path
    path: str


@dataclass(frozen=True)
class Outcome:
    index: int
    record: dict[str, Any] | None  # the RunResult's to_dict(), when it finished
    error: str | None = None  # why it did not
    detail: str | None = None  # a traceback, for a failure that is not a SimError


def jobs_of(points: Sequence[Scenario]) -> list[Job]:
    """One job per point and path, points in sweep order, paths in the file's order."""
    jobs: list[Job] = []
    for point in points:
        for path in point.job.paths:
            jobs.append(Job(len(jobs), with_fields(point, {"job.paths": [path]}), path))
    return jobs


def run_job(job: Job, run: RunFn, tier: str | None, seed: int | None,
            progress: Progress | None = None) -> Outcome:
    """One job, its failure caught and described (so one failed run does not lose the
    others' results). Runs in a joblib worker process too: everything here pickles."""
    try:
        result = run(job.scenario, tier=tier, seed=seed, progress=progress)
        record = dict(result.to_dict() if hasattr(result, "to_dict") else result)
    except SimError as e:  # refused or stopped on purpose (memory budget, ...): the message says it
        return Outcome(job.index, None, f"{type(e).__name__}: {e}")
    except Exception as e:  # a bug: keep the traceback
        return Outcome(job.index, None, f"{type(e).__name__}: {e}", traceback.format_exc())
    point = job.scenario
    record.update(label=point.label, point=dict(point.point),
                  values={key: point.value(key) for key in point.point})
    record.setdefault("path", job.path)
    return Outcome(job.index, record)


class _Meter:
    """The ``progress(sim_time, events)`` callback of an in-process run: simulated time
    and events/s into the bar, at most ten times a second (the engine may call often)."""

    def __init__(self, bar: Any, task: Any) -> None:
        self.bar, self.task = bar, task
        self.start = self.last = time.monotonic()

    def __call__(self, sim_time: float, events: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.1:
            return
        self.last = now
        rate = events / max(now - self.start, 1e-9)
        self.bar.update(self.task, sim=f"sim {format_duration(sim_time)}, "
                        f"{report.human_count(rate)} events/s")


def execute(jobs: Sequence[Job], run: RunFn, *, tier: str | None, seed: int | None,
            workers: int = 1, show: bool = False) -> list[Outcome]:
    """Run ``jobs`` (in order, or over ``workers`` processes) and return their outcomes
    in job order."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("{task.fields[sim]}"),
                   console=Console(file=sys.stderr), disable=not show, transient=False)
    outcomes: list[Outcome] = []
    with bar:
        task = bar.add_task("runs", total=len(jobs), sim="")
        for outcome in _outcomes(jobs, run, tier, seed, workers, bar, task, show):
            outcomes.append(outcome)
            bar.update(task, advance=1)
        bar.update(task, description="runs", sim="")  # the last job's name would outlive it
    return sorted(outcomes, key=lambda o: o.index)


def _outcomes(jobs: Sequence[Job], run: RunFn, tier: str | None, seed: int | None,
              workers: int, bar: Any, task: Any, show: bool) -> Iterator[Outcome]:
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            bar.update(task, description=f"{job.scenario.label} / {job.path}", sim="")
            yield run_job(job, run, tier, seed, _Meter(bar, task) if show else None)
        return
    from joblib import Parallel, delayed

    # each process runs whole jobs: the simulations share nothing, so no callback crosses back
    parallel = Parallel(n_jobs=min(workers, len(jobs)), return_as="generator_unordered")
    yield from parallel(delayed(run_job)(job, run, tier, seed) for job in jobs)


def default_out(name: str, now: datetime | None = None) -> Path:
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    out = Path("logs") / f"sim-{name}-{stamp}"
    n = 1
    while out.exists():  # two runs in the same second keep both
        n += 1
        out = Path("logs") / f"sim-{name}-{stamp}-{n}"
    return out


def main(argv: Sequence[str] | None = None, *, run: RunFn | None = None) -> int:
    """The command; ``run`` replaces ``run_scenario`` (a seam for tests)."""
    args = parse_args(argv)
    run = run if run is not None else run_scenario
    overrides: dict[str, Any] = {}
    if args.tier is not None:
        overrides["run.tier"] = args.tier
    if args.seed is not None:
        overrides["run.seed"] = args.seed
    try:
        # the overrides are validated with the rest (tier P has the real switch's limits)
        points = [with_fields(p, overrides) if overrides else p for p in load(args.scenario)]
        jobs = jobs_of(points)
    except ScenarioError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    show = not args.quiet and not args.json and sys.stdout.isatty() and sys.stderr.isatty()
    try:
        outcomes = execute(jobs, run, tier=args.tier, seed=args.seed, workers=args.jobs,
                           show=show)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    records = [o.record for o in outcomes if o.record is not None]
    failures = [(jobs[o.index], o) for o in outcomes if o.record is None]
    sweep = list(points[0].point)
    out = args.out or default_out(points[0].name)
    payload = {
        "scenario": points[0].name, "source": str(args.scenario), "tier": args.tier,
        "seed": args.seed, "sweep": sweep, "results": records,
        "failures": [{"label": job.scenario.label, "path": job.path, "error": o.error,
                      "traceback": o.detail} for job, o in failures],
        "wall_exponents": report.wall_fits(records, sweep),
    }
    written = [report.write_json(payload, out / "sim.json")]
    if records:
        written.append(report.plot(records, sweep, out / "sim.png", title=points[0].name))
    if args.json:
        print((out / "sim.json").read_text(), end="")
    else:
        if records:
            report.print_table(records)
            for line in report.job_lines(records):
                print(line)
        for name, k in payload["wall_exponents"].items():
            print(f"wall time ~ workers^{k:.2f} ({name})")
        print("wrote " + ", ".join(map(str, written)))
    for job, o in failures:
        print(f"{PROG}: {job.scenario.label} / path {job.path}: {o.error}", file=sys.stderr)
        if o.detail:
            print(o.detail, file=sys.stderr, end="")
    return 1 if failures else 0
