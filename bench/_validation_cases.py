"""The simulator against the emulator beyond ``bench/allreduce.py``'s rows: the elastic
link straggler (``bench/elastic.py``) and the P3 balance point (``bench/priority.py``).

Each case is a scenario file whose sweep is the emulator benchmark's set of runs
(``sim/scenarios/elastic-straggler.toml``: static/elastic x no straggler/a PBox link 4x
slower; ``sim/scenarios/p3-balance.toml``: FIFO/P3), the emulator's figures (its own
JSON, or the committed copy of its doc tables under ``bench/reference/``: its results
are not committed), and the ratios a user reads (elastic vs static, P3 vs FIFO). Both
sides reduce to *runs*: a label and an iteration time per configuration key
(``elastic/link``, ``p3``); a ratio is one key's time over another's, in the emulator
and in the simulator, and their disagreement is ``sim / emulator - 1`` (goal: +-10%).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from p4hub.sim import scenario

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "bench" / "reference"
SCENARIOS = REPO / "sim" / "scenarios"

# (name, numerator key, denominator key): iteration time over iteration time, so < 1
# means the numerator's configuration is faster
ELASTIC_RATIOS = (
    ("elastic vs static, PBox link straggler", "elastic/link", "static/link"),
    ("elastic: straggler vs none", "elastic/link", "elastic/none"),
    ("static: straggler vs none", "static/link", "static/none"),
    ("elastic vs static, no straggler", "elastic/none", "static/none"),
)
P3_RATIOS = (("P3 vs FIFO", "p3", "fifo"),)


@dataclass(frozen=True)
class Case:
    name: str
    scenario_file: Path
    emulator_file: Path  # default: the committed copy of the emulator's figures
    ratios: tuple[tuple[str, str, str], ...]
    key: Callable[[scenario.Scenario], str]  # a sweep point's configuration key
    runs: Callable[[Mapping[str, Any]], list[dict[str, Any]]]  # emulator JSON -> runs
    # a run's iteration times -> the figure compared (as the emulator benchmark takes it)
    summary: Callable[[list[float]], float]
    iterations: int  # the emulator benchmark's iterations (warm-up included)


def elastic_key(point: scenario.Scenario) -> str:
    mode = "elastic" if point.job.rebalance else "static"
    return f"{mode}/{'none' if point.straggler.factor == 1.0 else 'link'}"


def p3_key(point: scenario.Scenario) -> str:
    return point.job.schedule


def steady_median(seconds: list[float]) -> float:
    """bench/elastic.py's figure: the median over the second half of the iterations."""
    steady = seconds[len(seconds) // 2:] or seconds
    return statistics.median(steady) if steady else math.nan


def timed_mean(seconds: list[float]) -> float:
    """bench/priority.py's figure: the mean of the iterations after the first (warm-up)."""
    timed = seconds[1:] or seconds
    return statistics.fmean(timed) if timed else math.nan


def elastic_runs(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Runs from bench/elastic.py's JSON (one run) or bench/reference's copy (several)."""
    runs = doc["runs"] if "runs" in doc else [{"label": "bench/elastic.py JSON", **doc}]
    out = []
    for run in runs:
        times = {f"{r['mode']}/{r['straggler']}": float(r["steady_median_s"])
                 for r in run["rows"] if r.get("steady_median_s") is not None}
        cpu = {f"{r['mode']}/{r['straggler']}": bool(r.get("cpu_bound", r.get("cpu", {})
                                                           .get("cpu_bound", False)))
               for r in run["rows"]}
        out.append({"label": run.get("label", ""), "source": run.get("source", ""),
                    "times": times, "cpu_bound": cpu})
    return out


def p3_runs(doc: Mapping[str, Any], model: str = "resnet50",
            bw_mbit: float = 5.0) -> list[dict[str, Any]]:
    """Runs from bench/reference's copy (FIFO and P3 iterations/s per run) or from
    bench/priority.py's JSON (its rows of ``model`` at ``bw_mbit``, paired by run)."""
    if "runs" in doc:
        return [{"label": run["label"], "source": run.get("table", ""),
                 "times": {"fifo": 1 / run["fifo_it_s"], "p3": 1 / run["p3_it_s"]},
                 "cpu_bound": {"fifo": True, "p3": True}}  # the note: every row CPU-bound
                for run in doc["runs"]]
    by_run: dict[int, dict[str, Any]] = {}
    for row in doc.get("rows", []):
        if (row.get("model") != model or row.get("bw_mbit") != bw_mbit
                or not row.get("iterations_per_s")):
            continue
        run = by_run.setdefault(int(row.get("run", 0)), {
            "label": f"bench/priority.py run {row.get('run', 0)}", "source": "",
            "times": {}, "cpu_bound": {}})
        run["times"][row["mode"]] = 1 / row["iterations_per_s"]
        run["cpu_bound"][row["mode"]] = bool((row.get("cpu") or {}).get("cpu_bound"))
    return [by_run[k] for k in sorted(by_run)]


CASES = {
    "elastic": Case("elastic", SCENARIOS / "elastic-straggler.toml",
                    REFERENCE / "emulator_elastic.json", ELASTIC_RATIOS, elastic_key,
                    elastic_runs, steady_median, iterations=8),
    "p3": Case("p3", SCENARIOS / "p3-balance.toml", REFERENCE / "emulator_p3.json", P3_RATIOS,
               p3_key, p3_runs, timed_mean, iterations=13),
}


def points(case: Case, iterations: int | None = None) -> dict[str, scenario.Scenario]:
    """The case's scenario points by configuration key, with the emulator's iterations."""
    n = iterations if iterations is not None else case.iterations
    out = {}
    for point in scenario.load(case.scenario_file):
        out[case.key(point)] = scenario.with_fields(point, {"job.iterations": n})
    return out


def compare(case: Case, emulator: list[dict[str, Any]],
            sim: Mapping[str, float], goal: float) -> list[dict[str, Any]]:
    """Every ratio of the case that both the simulator and an emulator run have."""
    out = []
    for run in emulator:
        times = run["times"]
        for name, top, bottom in case.ratios:
            if not all(k in times and k in sim for k in (top, bottom)):
                continue
            emu = times[top] / times[bottom]
            simulated = sim[top] / sim[bottom]
            disagreement = simulated / emu - 1
            out.append({"ratio": name, "of": f"{top} / {bottom}", "run": run["label"],
                        "emulator": emu, "sim": simulated, "disagreement": disagreement,
                        "within_goal": abs(disagreement) <= goal,
                        "emulator_cpu_bound": any(run["cpu_bound"].get(k, False)
                                                  for k in (top, bottom))})
    return out
