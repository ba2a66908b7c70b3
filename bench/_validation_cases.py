"""The simulator against the emulator beyond ``bench/allreduce.py``'s rows: the elastic
link straggler (``bench/elastic.py``), the P3 balance point (``bench/priority.py``) and
the leaf-spine fabric (``bench/hierarchy.py``).

Each case is a scenario file whose sweep and paths are the emulator benchmark's set of
runs (``sim/scenarios/elastic-straggler.toml``: static/elastic x no straggler/a PBox link
4x slower; ``sim/scenarios/p3-balance.toml``: FIFO/P3; ``sim/scenarios/fabric-2x4.toml``
and ``fabric-4x2.toml``: the switch tree, the single PBox and the ring), the emulator's
figures (its own JSON, or the committed copy of its doc tables under
``bench/reference/``: its results are not committed), and the ratios a user reads
(elastic vs static, P3 vs FIFO, tree vs ring). Both sides reduce to *runs*: a label and
an iteration time per configuration key (``elastic/link``, ``p3``, ``2x4/switch``); a
ratio is one key's time over another's, in the emulator and in the simulator, and their
disagreement is ``sim / emulator - 1`` (goal: +-10%). A ratio whose key the simulator
did not run is reported as not simulated, never approximated.
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
FABRIC_LAYOUTS = ("2x4", "4x2")
# bench/hierarchy.py's path names -> the simulator's keys ("pbox-root": the switch path
# with the spine's slots narrowed, so the controller roots the tree at a rack's PBox)
HIERARCHY_PATHS = {"switch": "switch", "pbox": "pbox", "gloo": "ring", "pbox-root": "pbox-root"}
FABRIC_RATIOS = tuple(
    (f"{name}, {lay}", f"{lay}/{top}", f"{lay}/{bottom}") for lay in FABRIC_LAYOUTS
    for name, top, bottom in (
        ("tree vs Gloo ring", "switch", "ring"),
        ("tree vs single PBox", "switch", "pbox"),
        ("single PBox vs Gloo ring", "pbox", "ring"),
        ("root PBox vs tree", "pbox-root", "switch"),
        ("root PBox vs single PBox", "pbox-root", "pbox")))


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
    more_scenarios: tuple[Path, ...] = ()  # further scenario files of the same case


def elastic_key(point: scenario.Scenario) -> str:
    mode = "elastic" if point.job.rebalance else "static"
    return f"{mode}/{'none' if point.straggler.factor == 1.0 else 'link'}"


def p3_key(point: scenario.Scenario) -> str:
    return point.job.schedule


def fabric_key(point: scenario.Scenario) -> str:
    """``2x4/switch``; the switch path with no spine room (``switch.spine_slots`` below
    the window: the controller roots the tree at a rack's PBox) is ``2x4/pbox-root``."""
    path = point.job.paths[0]
    if path == "switch" and 0 < point.switch.spine_slots < point.job.window:
        path = "pbox-root"
    return f"{point.topology.racks}x{point.topology.workers}/{path}"


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


def median(seconds: list[float]) -> float:
    """bench/hierarchy.py's figure: the median of every iteration."""
    return statistics.median(seconds) if seconds else math.nan


def fabric_runs(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Runs from bench/reference's copy (one a layout) or bench/hierarchy.py's JSON (one
    run over its layouts); keys ``layout/path`` in the simulator's path names."""
    if "runs" in doc:
        runs = [(run["label"], run.get("source", ""),
                 [{**row, "layout": run["layout"]} for row in run["rows"]])
                for run in doc["runs"]]
    else:
        runs = [("bench/hierarchy.py JSON", "",
                 [{**row, "layout": lay["layout"],
                   "cpu_bound": bool((row.get("cpu") or {}).get("cpu_bound"))}
                  for lay in doc["layouts"] for row in lay["rows"]])]
    out = []
    for label, source, rows in runs:
        times, cpu = {}, {}
        for row in rows:
            if row["path"] not in HIERARCHY_PATHS or row.get("median_s") is None:
                continue
            key = f"{row['layout']}/{HIERARCHY_PATHS[row['path']]}"
            times[key] = float(row["median_s"])
            cpu[key] = bool(row.get("cpu_bound"))
        out.append({"label": label, "source": source, "times": times, "cpu_bound": cpu})
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
    "fabric": Case("fabric", SCENARIOS / "fabric-2x4.toml", REFERENCE / "emulator_fabric.json",
                   FABRIC_RATIOS, fabric_key, fabric_runs, median, iterations=4,
                   more_scenarios=(SCENARIOS / "fabric-4x2.toml",)),
}


def points(case: Case, iterations: int | None = None) -> dict[str, scenario.Scenario]:
    """The case's scenario points by configuration key, with the emulator's iterations:
    one a sweep point and path (each path runs as its own simulation)."""
    n = iterations if iterations is not None else case.iterations
    out: dict[str, scenario.Scenario] = {}
    for source in (case.scenario_file, *case.more_scenarios):
        for point in scenario.load(source):
            for path in point.job.paths:
                one = scenario.with_fields(point, {"job.iterations": n, "job.paths": [path]})
                out.setdefault(case.key(one), one)  # a path the sweep does not change: once
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


def not_simulated(case: Case, emulator: list[dict[str, Any]],
                  sim: Mapping[str, float]) -> list[dict[str, Any]]:
    """The case's ratios an emulator run has and the simulator cannot give: a key with
    no simulated counterpart, named rather than approximated."""
    out = []
    for run in emulator:
        for name, top, bottom in case.ratios:
            missing = [k for k in (top, bottom) if k not in sim]
            if missing and all(k in run["times"] for k in (top, bottom)):
                out.append({"ratio": name, "of": f"{top} / {bottom}", "run": run["label"],
                            "emulator": run["times"][top] / run["times"][bottom],
                            "not_in_simulator": missing})
    return out
