"""The reproduction runner (p4hub.sim.reproduce): every row's runs validate, the
statistics pair seeds and pick the best point, and the smallest real run writes a JSON
with the fields docs/reproductions.md reads."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from p4hub.sim.reproduce import cli, runner
from p4hub.sim.reproduce.rows import ROWS, Experiment, Variant


def test_every_experiment_expands_to_valid_scenarios() -> None:
    # with_fields re-validates each run's scenario: a series' field the schema refuses, or
    # a panel that breaks a cross-field rule, fails here rather than in a long run
    count = 0
    for row in ROWS.values():
        for exp in row.experiments:
            jobs = runner.jobs(exp)
            assert jobs, exp.name
            for job in jobs:
                assert job.scenario.job.paths == (job.scenario.job.paths[0],)
            assert {j.series for j in jobs} == {s.label for s in exp.series}
            count += len(jobs)
        if not row.experiments:
            assert row.pending  # a row with nothing to run says why
    assert count > 50


@dataclass
class _Result:
    times: list[float]
    workers: int

    def to_dict(self) -> dict[str, Any]:
        return {"iteration_times": self.times, "workers": self.workers, "ok": True,
                "failures": [], "bytes_by_link_class": {}, "wall_s": 0.0}


def _fake_run(scenario: Any, *, seed: int) -> _Result:
    """P3 is faster than FIFO by a factor that grows with bandwidth and varies by seed."""
    gbit = scenario.links.bandwidth / 1e9
    t = 1.0 / gbit
    if scenario.job.schedule == "p3":
        t /= 1.0 + 0.01 * gbit + 0.001 * seed
    return _Result([9.0, t, t], scenario.topology.total_workers)


def test_statistics_pair_seeds_and_take_the_best_point(tmp_path: Path) -> None:
    exp = next(e for e in ROWS["p3"].experiments if e.name == "p3-bandwidth")
    exp = Experiment(exp.name, exp.scenario, exp.title, exp.metric, exp.series,
                     (Variant("R", {"job.model": "resnet50"}),), "FIFO", "P3", seeds=(0, 1, 2))
    records = [runner.run_job(job, exp, _fake_run) for job in runner.jobs(exp)]
    assert all(r["steady_s"] < 9.0 for r in records)  # the first iteration is left out
    stats = runner.statistics_of(exp, records)
    best = stats["best"]["R"]
    assert best["x_shown"] == "40Gbit"  # the largest gain of the fake's sweep
    assert best["ratio"]["mean"] == pytest.approx(1.401)  # 1 + 0.4 + mean seed term 0.001
    assert best["ratio"]["n"] == 3
    # three ratios 1.400, 1.401, 1.402: sd 0.001, t(2) = 4.303
    assert best["ratio"]["ci95"] == pytest.approx(4.303 * 0.001 / math.sqrt(3), rel=1e-3)
    fifo = stats["points"][0]["series"]["FIFO"]
    assert fifo["mean"] == pytest.approx(4 * 32 / 1.0)  # 4 workers x batch 32 at 1 s
    assert fifo["ci95"] == pytest.approx(0.0)


def test_smallest_run_writes_json_and_png(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # the real simulator, tier F: ResNet-50 on 4 workers at 1 Gbit/s, two FIFOs and P3
    assert cli.main(["p3", "--only", "p3-bandwidth", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "p3-bandwidth.json").read_text())
    assert (tmp_path / "p3-bandwidth.png").stat().st_size > 0
    for key in ("row", "claim", "source", "scenario", "metric", "seeds", "stats", "records",
                "baseline", "candidate", "deterministic"):
        assert key in data
    assert [r["series"] for r in data["records"]] == ["FIFO, whole tensors", "FIFO", "P3"]
    for r in data["records"]:
        assert r["ok"] and r["tier"] == "F" and r["workers"] == 4
        assert r["metric"] == pytest.approx(4 * 32 / r["steady_s"])
    ratio = data["stats"]["best"]["ResNet-50"]["ratio"]["mean"]
    # the headline is P3 over the paper's baseline (whole-tensor FIFO)
    assert ratio == pytest.approx(data["records"][2]["metric"] / data["records"][0]["metric"])
    assert "p3-bandwidth" in capsys.readouterr().out


def test_unknown_row_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["p4"])
    assert e.value.code == 2
    assert "unknown row 'p4'" in capsys.readouterr().err


def test_make_reproduce_runs_the_named_row_and_needs_no_apt() -> None:
    if shutil.which("make") is None:
        pytest.fail("make is not installed (the Makefile is how p4hub is run)")
    repo = Path(__file__).resolve().parents[2]
    recipe = subprocess.run(["make", "-s", "-n", "-B", "reproduce", "NAME=p3",
                             "REPRODUCE_ARGS=-j2"], cwd=repo, capture_output=True, text=True,
                            check=True).stdout
    assert "-m p4hub.sim.reproduce p3 -j2" in recipe
    assert "apt-get" not in recipe and "dpkg" not in recipe  # no root needed


@dataclass
class _JobsResult:
    jobs: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"iteration_times": [1.0], "workers": 16, "ok": True, "failures": [],
                "bytes_by_link_class": {}, "wall_s": 0.0, "jobs": self.jobs}


def _fake_jobs_run(scenario: Any, *, seed: int) -> _JobsResult:
    """Four jobs; on the switch path each job with a window of the switch's slots takes
    1 s an iteration, the others 2 s; the PS 4 s, the ring 1.5 s, the PBoxes 2 s."""
    path = scenario.job.paths[0]
    fits = scenario.switch.slots // scenario.job.window
    jobs = {}
    for k, entry in enumerate(scenario.jobs):
        t = {"switch": 1.0 if k < fits else 2.0, "pbox": 2.0, "ps": 4.0, "ring": 1.5}[path]
        jobs[entry.name] = {"workers": [f"w{w + 1}" for w in entry.workers], "model": "m",
                            "where": path, "switch_slots": 0, "pbox_slots": 0,
                            "iteration_times": [9.0, t]}
    return _JobsResult(jobs)


def test_the_atp_row_sums_the_jobs_throughputs_and_divides_by_each_baseline() -> None:
    (exp,) = ROWS["atp"].experiments
    records = [runner.run_job(job, exp, _fake_jobs_run) for job in runner.jobs(exp)]
    stats = runner.statistics_of(exp, records)
    half = next(p for p in stats["points"] if p["panel"] == "ResNet-50" and p["x"] == 256)
    # two jobs of 4 workers at 1 s, two at 2 s: 4 x 32 x (1 + 1 + 0.5 + 0.5)
    assert half["series"]["switch, shared + PBox fallback"]["mean"] == pytest.approx(384.0)
    assert half["series"]["PS"]["mean"] == pytest.approx(4 * 4 * 32 / 4.0)
    assert half["ratio"]["mean"] == pytest.approx(384.0 / 128.0)
    assert half["ratio_to"]["ring"]["mean"] == pytest.approx(384.0 / (4 * 4 * 32 / 1.5))
    assert stats["best"]["ResNet-50"]["x_shown"] == "512"  # every job on the switch
    # the first iteration (9 s) left out; at the first point (1 slot) no job fits
    assert records[0]["x"] == 1 and records[0]["jobs"]["job1"]["steady_s"] == 2.0
    text = cli.table(exp, stats)
    assert "switch, shared + PBox fallback/PS" in text
    assert "switch, shared + PBox fallback/ring" in text
