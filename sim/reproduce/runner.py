"""Run an experiment's sweep through ``sim.run.run_scenario`` and reduce it to statistics.

Every run is one point of the experiment's scenario file, with a panel's and a series'
fields and a seed set (``scenario.with_fields``: validated as a file would be), on the
point's one path: the same code paths as ``make sim``. A run's figure is its *steady*
iteration time: the median of the second half of its iterations (the first ones carry
the pipeline's start). The metric (higher is better):

* ``throughput``: images (or sequences) per second, ``workers x 32 / steady`` (the
  bundled profiles are batch 32 a GPU);
* ``goodput``: tensor elements all-reduced per second, ``elements / steady``; the
  switch's ceiling (its datagrams' payload share of the link) comes with it;
* ``cross_rack_bytes``: bytes on the leaves' uplinks per iteration;
* ``iterations_per_s``: ``1 / steady``;
* ``jobs_throughput``: a scenario of several jobs (``[[jobs]]``): the sum over the jobs
  of each job's throughput, ``its workers x 32 / its steady``.

Over seeds: the mean and a 95% confidence interval (Student's t); a headline ratio is
taken per seed (candidate over baseline, the same seed) and then summarised the same way.
"""

from __future__ import annotations

import math
import statistics
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from p4hub.hosts import wire
from p4hub.sim.errors import SimError
from p4hub.sim.reproduce.rows import BATCH, Experiment
from p4hub.sim.scenario import Scenario, load, with_fields

# two-sided 95% Student t quantiles by degrees of freedom (no scipy dependency for this)
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 15: 2.131, 20: 2.086, 30: 2.042}
RunFn = Callable[..., Any]


@dataclass(frozen=True)
class Job:
    experiment: str
    panel: str
    series: str
    seed: int
    x_key: str
    x_shown: str  # the swept value as the file writes it
    scenario: Scenario


def jobs(exp: Experiment, *, seeds: Sequence[int] | None = None, quick: bool = False) -> list[Job]:
    """The experiment's runs in order: panel, point, series, seed. ``quick``: the first
    panel and the first point only, one seed (the smallest run of the experiment)."""
    points = load(exp.path)
    panels = exp.panels
    if quick:
        points, panels = points[:1], panels[:1]
    chosen = list(seeds if seeds is not None else exp.seeds)
    if quick or (exp.deterministic and seeds is None):
        chosen = chosen[:1]
    out = []
    for panel in panels:
        for point in points:
            (key, shown), = point.point.items()
            for series in exp.series:
                for seed in chosen:
                    fields = {**panel.fields, **series.fields, "run.seed": seed}
                    out.append(Job(exp.name, panel.label, series.label, seed, key,
                                   _shown(shown), with_fields(point, fields)))
    return out


def _shown(value: object) -> str:
    return value if isinstance(value, str) else f"{value:g}" if isinstance(value, float) \
        else str(value)


def steady(times: Sequence[float]) -> float:
    """The median of the second half of the iterations (all of them when one)."""
    if not times:
        return math.nan
    return float(statistics.median(times[len(times) // 2:]))


def max_goodput(scenario: Scenario) -> float:
    """Elements/s a host link carries in the switch's datagrams: its payload share."""
    lanes = scenario.job.lanes
    share = 4 * lanes / (wire.packet_len(lanes) + scenario.links.overhead)
    return scenario.links.bandwidth / 8 * share / 4


def metric(exp: Experiment, scenario: Scenario, result: dict[str, Any]) -> float:
    times = result.get("iteration_times") or []
    s = steady(times)
    if exp.metric == "throughput":
        return result["workers"] * BATCH / s
    if exp.metric == "goodput":
        return scenario.job.elements / s
    if exp.metric == "iterations_per_s":
        return 1.0 / s
    if exp.metric == "jobs_throughput":
        jobs = result.get("jobs") or {}
        if not jobs:
            raise SimError("jobs_throughput needs a scenario with [[jobs]]")
        return sum(len(j["workers"]) * BATCH / steady(j["iteration_times"])
                   for j in jobs.values())
    if exp.metric == "cross_rack_bytes":
        return result.get("bytes_by_link_class", {}).get("spine_up", 0) / max(len(times), 1)
    raise SimError(f"unknown metric {exp.metric!r}")


def run_job(job: Job, exp: Experiment, run: RunFn) -> dict[str, Any]:
    """One run, reduced to a record (its failure described, not raised)."""
    sc = job.scenario
    record: dict[str, Any] = {
        "experiment": job.experiment, "panel": job.panel, "series": job.series,
        "seed": job.seed, "x_key": job.x_key, "x": sc.value(job.x_key), "x_shown": job.x_shown,
        "path": sc.job.paths[0], "tier": sc.run.tier, "workers": sc.topology.total_workers}
    try:
        result = run(sc, seed=job.seed).to_dict()
    except Exception as e:  # one failed run keeps the others' results; the JSON names it
        record.update(ok=False, failures=[f"{type(e).__name__}: {e}"],
                      traceback=traceback.format_exc())
        return record
    record.update({key: result.get(key) for key in (
        "iteration_times", "events", "wall_s", "drops", "resends", "exact", "ok", "failures",
        "bytes_by_link_class", "simulated_s")})
    record["steady_s"] = steady(result.get("iteration_times") or [])
    counters = result.get("counters") or {}
    if "moves" in counters:  # tier P's controller: its re-splits (the elastic rows)
        record["moves"] = counters["moves"]
    if result.get("jobs"):  # several jobs: where each ran and its own steady time
        record["jobs"] = {name: {"where": j["where"], "switch_slots": j["switch_slots"],
                                 "pbox_slots": j["pbox_slots"], "model": j["model"],
                                 "steady_s": steady(j["iteration_times"]),
                                 "moves": j.get("moves", [])}
                          for name, j in result["jobs"].items()}
    record["metric"] = metric(exp, sc, result) if result.get("ok") else math.nan
    if exp.metric == "goodput" and record["path"] in ("switch", "pbox"):
        record["max_goodput"] = max_goodput(sc)
    return record


def summarise(values: Sequence[float]) -> dict[str, Any]:
    """Mean and the 95% CI's half-width over seeds (None with one value)."""
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return {"mean": None, "ci95": None, "n": 0}
    mean = statistics.fmean(vals)
    if len(vals) < 2:
        return {"mean": mean, "ci95": None, "n": len(vals)}
    df = len(vals) - 1
    t = _T95.get(df) or _T95[max(k for k in _T95 if k <= df)]
    return {"mean": mean, "ci95": t * statistics.stdev(vals) / math.sqrt(len(vals)),
            "n": len(vals)}


def _groups(records: Sequence[dict[str, Any]]) -> Iterator[tuple[str, str, list[dict[str, Any]]]]:
    """(panel, x_shown, records) in run order."""
    seen: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        seen.setdefault((r["panel"], r["x_shown"]), []).append(r)
    for (panel, x), members in seen.items():
        yield panel, x, members


def _by_seed(records: Sequence[dict[str, Any]], series: str) -> dict[int, float]:
    """The series' metric by seed, where the run gave one."""
    out: dict[int, float] = {}
    for r in records:
        value = r.get("metric")
        if r["series"] == series and value is not None and not math.isnan(value):
            out[r["seed"]] = float(value)
    return out


def _ratio(members: Sequence[dict[str, Any]], candidate: str, baseline: str) -> dict[str, Any]:
    """The candidate's metric over the baseline's, paired by seed, summarised."""
    base = _by_seed(members, baseline)
    cand = _by_seed(members, candidate)
    return summarise([cand[s] / base[s] for s in cand if s in base and base[s] > 0])


def statistics_of(exp: Experiment, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per panel, point and series the metric's mean and CI; per panel and point the
    headline ratio (candidate over baseline, paired by seed); per panel the best point."""
    points: list[dict[str, Any]] = []
    for panel, x, members in _groups(records):
        entry: dict[str, Any] = {"panel": panel, "x_shown": x, "x": members[0]["x"],
                                 "series": {}}
        for series in exp.series:
            mine = [r for r in members if r["series"] == series.label]
            entry["series"][series.label] = {
                **summarise([r.get("metric", math.nan) for r in mine]),
                "steady_s": summarise([r.get("steady_s", math.nan) for r in mine])["mean"],
                "max_goodput": mine[0].get("max_goodput") if mine else None}
            summary = entry["series"][series.label]
            if summary["max_goodput"] and summary["mean"] is not None:
                summary["of_ceiling"] = summary["mean"] / summary["max_goodput"]
        if exp.baseline and exp.candidate:
            entry["ratio"] = _ratio(members, exp.candidate, exp.baseline)
            if exp.others:
                entry["ratio_to"] = {other: _ratio(members, exp.candidate, other)
                                     for other in exp.others}
        points.append(entry)
    best: dict[str, Any] = {}
    for entry in points:
        mean = (entry.get("ratio") or {}).get("mean")
        if mean is None:
            continue
        held = best.get(entry["panel"])
        if held is None or mean > held["ratio"]["mean"]:
            best[entry["panel"]] = {"x_shown": entry["x_shown"], "ratio": entry["ratio"]}
    return {"points": points, "best": best}
