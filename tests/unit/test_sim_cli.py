"""``p4hub-sim`` (sim/cli.py) and its report (sim/report.py), with a fake run function in
place of the simulator: exit codes, messages, sim.json and sim.png, -j with joblib."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from p4hub.sim import cli, report, scenario
from p4hub.sim.errors import BudgetExceeded
from p4hub.sim.scenario import Scenario

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "sim" / "scenarios"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
BASE_TIME = {"switch": 1.0, "pbox": 1.2, "ps": 1.5, "ring": 2.0}


class FakeResult:
    """What run_scenario returns, as far as the CLI cares: to_dict()."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return self.data


def fake_run(s: Scenario, *, tier: str | None = None, seed: int | None = None,
             progress: Any = None) -> FakeResult:
    """Module level, so joblib's worker processes can import it by name."""
    assert len(s.job.paths) == 1, "the CLI runs one path per job"
    path = s.job.paths[0]
    workers = s.topology.total_workers
    if progress is not None:
        progress(0.5, 1000)
    return FakeResult({
        "scenario": s.name, "path": path, "tier": tier or s.run.tier,
        "seed": s.run.seed if seed is None else seed, "workers": workers,
        "iteration_times": [BASE_TIME[path] * workers * 1e-3, BASE_TIME[path] * workers * 1.2e-3],
        "events": 1000 * workers, "wall_s": 0.01 * workers**1.5, "peak_rss_bytes": 2**26,
        "bytes_by_link_class": {"host_up": 10, "spine": 5}, "drops": 0, "resends": 1,
        "slot_use": 0.5, "digest": "d", "exact": True,
        "extra": {"pid": os.getpid(), "scenario_tier": s.run.tier, "scenario_seed": s.run.seed}})


def failing_ring(s: Scenario, **kwargs: Any) -> FakeResult:
    if s.job.paths == ("ring",):
        raise BudgetExceeded("the run needs 12 GiB, its budget is 8 GiB")
    return fake_run(s, **kwargs)


def buggy_ps(s: Scenario, **kwargs: Any) -> FakeResult:
    if s.job.paths == ("ps",):
        raise ZeroDivisionError("division by zero")
    return fake_run(s, **kwargs)


def sim_json(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "sim.json").read_text())
    return data


def test_default_scenario_runs_each_path_and_writes_json_and_png(tmp_path: Path, capsys):
    code = cli.main([str(SCENARIOS / "default.toml"), "--out", str(tmp_path)], run=fake_run)
    assert code == 0
    data = sim_json(tmp_path)
    assert [r["path"] for r in data["results"]] == ["switch", "ring", "ps"]
    assert all(r["workers"] == 64 and r["label"] == "default" for r in data["results"])
    assert data["failures"] == [] and data["scenario"] == "default" and data["sweep"] == []
    assert (tmp_path / "sim.png").read_bytes().startswith(PNG_MAGIC)
    out = capsys.readouterr().out
    assert "switch" in out and "ring" in out and "iteration (median)" in out
    assert "sim.json" in out and "sim.png" in out


def test_tier_and_seed_reach_the_run_and_the_scenario(tmp_path: Path):
    code = cli.main([str(SCENARIOS / "default.toml"), "--out", str(tmp_path), "--tier", "F",
                     "--seed", "7"], run=fake_run)
    assert code == 0
    for r in sim_json(tmp_path)["results"]:
        assert (r["tier"], r["seed"]) == ("F", 7)
        assert (r["extra"]["scenario_tier"], r["extra"]["scenario_seed"]) == ("F", 7)


def test_without_tier_the_run_gets_none_and_the_scenario_keeps_its_own(tmp_path: Path):
    seen: list[tuple[Any, Any, str]] = []

    def run(s: Scenario, *, tier: Any = None, seed: Any = None, progress: Any = None) -> Any:
        seen.append((tier, seed, s.run.tier))
        return fake_run(s, tier=tier, seed=seed)

    assert cli.main([str(SCENARIOS / "rack-4-emulator.toml"), "--out", str(tmp_path)], run=run) == 0
    assert seen == [(None, None, "P")] * 3


def test_an_unknown_tier_is_refused_with_exit_status_2(tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main([str(SCENARIOS / "rack-4-emulator.toml"), "--out", str(tmp_path),
                  "--tier", "Q"], run=fake_run)
    assert stopped.value.code == 2
    assert "--tier" in capsys.readouterr().err
    assert not (tmp_path / "sim.json").exists()


def test_a_bad_scenario_exits_2_with_file_field_and_reason(tmp_path: Path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('[topology]\nkind = "rack"\nworkers = 8\n[links]\nbandwith = "10Gbit"\n')
    calls: list[Scenario] = []
    assert cli.main([str(bad), "--out", str(tmp_path / "o")], run=lambda s, **k: calls.append(s)) == 2
    err = capsys.readouterr().err
    assert f"{bad}: [links.bandwith] unknown field" in err and "Traceback" not in err
    assert calls == [] and not (tmp_path / "o").exists()


def test_a_missing_file_exits_2(tmp_path: Path, capsys):
    assert cli.main([str(tmp_path / "none.toml")], run=fake_run) == 2
    assert "cannot read the scenario" in capsys.readouterr().err


def test_python_dash_m_refuses_a_bad_scenario_without_a_traceback(tmp_path: Path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[topology]\nkind = "ring"\nworkers = 8\n')
    proc = subprocess.run([sys.executable, "-m", "p4hub.sim", str(bad)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "[topology.kind] 'ring' is not one of 'rack', 'leafspine'" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_bad_arguments_exit_2(capsys):
    for argv in (["x.toml", "-j", "0"], ["x.toml", "--tier", "Q"], ["x.toml", "--seed", "-1"]):
        with pytest.raises(SystemExit) as caught:
            cli.main(argv, run=fake_run)
        assert caught.value.code == 2
    capsys.readouterr()


def test_a_budget_refusal_exits_1_naming_the_point_and_path_and_keeps_the_rest(tmp_path: Path,
                                                                                capsys):
    code = cli.main([str(SCENARIOS / "default.toml"), "--out", str(tmp_path)], run=failing_ring)
    assert code == 1
    err = capsys.readouterr().err
    assert "default / path ring: BudgetExceeded: the run needs 12 GiB, its budget is 8 GiB" in err
    assert "Traceback" not in err
    data = sim_json(tmp_path)
    assert [r["path"] for r in data["results"]] == ["switch", "ps"]
    assert data["failures"] == [{"label": "default", "path": "ring", "traceback": None,
                                 "error": "BudgetExceeded: the run needs 12 GiB, its budget is 8 GiB"}]


def test_a_crashing_run_exits_1_with_its_traceback(tmp_path: Path, capsys):
    assert cli.main([str(SCENARIOS / "default.toml"), "--out", str(tmp_path)], run=buggy_ps) == 1
    err = capsys.readouterr().err
    assert "default / path ps: ZeroDivisionError: division by zero" in err
    assert "Traceback" in err and "buggy_ps" in err


def test_json_prints_sim_json(tmp_path: Path, capsys):
    assert cli.main([str(SCENARIOS / "default.toml"), "--out", str(tmp_path), "--json"],
                    run=fake_run) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == sim_json(tmp_path)


def test_the_default_output_folder_is_under_logs(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main([str(SCENARIOS / "default.toml")], run=fake_run) == 0
    assert cli.main([str(SCENARIOS / "default.toml")], run=fake_run) == 0
    found = sorted((tmp_path / "logs").glob("sim-default-*/sim.json"))
    assert len(found) == 2  # two runs in the same second do not overwrite each other
    capsys.readouterr()


def test_a_sweep_over_two_processes_with_joblib(tmp_path: Path, capsys):
    code = cli.main([str(SCENARIOS / "sweep-workers.toml"), "--out", str(tmp_path), "-j", "2",
                     "--quiet"], run=fake_run)
    assert code == 0
    data = sim_json(tmp_path)
    results = data["results"]
    # in job order (point, then path), whatever order the processes finished in
    assert [(r["workers"], r["path"]) for r in results] == [
        (w, p) for w in (4, 8, 16, 32) for p in ("switch", "ring", "ps")]
    assert all(r["extra"]["pid"] != os.getpid() for r in results), "not run in worker processes"
    assert results[3]["point"] == {"topology.workers": 4} and results[3]["values"] == {
        "topology.workers": 4}
    # the fake's wall time is 0.01 * workers**1.5: the fit must find the 1.5
    assert data["wall_exponents"] == pytest.approx({"switch": 1.5, "ring": 1.5, "ps": 1.5})
    assert (tmp_path / "sim.png").read_bytes().startswith(PNG_MAGIC)
    assert "wall time ~ workers^1.50 (switch)" in capsys.readouterr().out


def test_jobs_are_points_times_paths_each_with_one_path():
    points = scenario.load(SCENARIOS / "sweep-workers.toml")
    jobs = cli.jobs_of(points)
    assert len(jobs) == 12 and [j.index for j in jobs] == list(range(12))
    assert [(j.scenario.topology.workers, j.path) for j in jobs[:4]] == [
        (2, "switch"), (2, "ring"), (2, "ps"), (4, "switch")]
    assert all(j.scenario.job.paths == (j.path,) for j in jobs)


def test_an_in_process_run_gets_a_progress_callback_when_shown():
    points = scenario.load(SCENARIOS / "default.toml")
    seen: list[Any] = []

    def run(s: Scenario, *, tier: Any = None, seed: Any = None, progress: Any = None) -> Any:
        seen.append(progress)
        if progress is not None:
            progress(0.25, 10_000)
        return fake_run(s)

    outcomes = cli.execute(cli.jobs_of(points), run, tier=None, seed=None, show=True)
    assert all(o.record is not None for o in outcomes) and all(callable(p) for p in seen)
    seen.clear()
    cli.execute(cli.jobs_of(points), run, tier=None, seed=None, show=False)
    assert seen == [None, None, None]  # no bar, no per-event cost


def test_the_meter_writes_simulated_time_and_event_rate():
    updates: list[dict[str, Any]] = []

    class Bar:
        def update(self, task: Any, **fields: Any) -> None:
            updates.append(fields)

    meter = cli._Meter(Bar(), 0)
    meter(0.5, 10)  # within 0.1 s of the start: skipped (the engine may call very often)
    assert updates == []
    meter.last -= 1.0
    meter.start -= 1.0
    meter(0.0123, 1_000_000)
    assert len(updates) == 1 and updates[0]["sim"].startswith("sim 12.3 ms, ")
    assert updates[0]["sim"].endswith(" events/s")


# -- the report ---------------------------------------------------------------------------


def record(path: str, workers: int, label: str, point: dict[str, Any], **extra: Any
           ) -> dict[str, Any]:
    data = fake_run_dict(path, workers)
    data.update(label=label, point=point, values=dict(point), **extra)
    return data


def fake_run_dict(path: str, workers: int) -> dict[str, Any]:
    return {"path": path, "tier": "M", "workers": workers,
            "iteration_times": [0.003, 0.001, 0.002], "events": 1500, "wall_s": 0.5,
            "peak_rss_bytes": 3 * 2**20, "drops": 2, "resends": 0, "exact": False}


def test_the_plain_table_lines_up_and_flags_inexact_sums():
    text = report.plain_table([record("switch", 8, "a", {}), record("ring", 8, "a", {})])
    header, rule, first, second = text.splitlines()
    assert header.split()[:2] == ["point", "path"] and set(rule) == {"-", " "}
    assert "2 ms" in first and "1 ms" in first and "3 ms" in first  # median, min, max
    assert "3 MiB" in first and "3k events" not in first and "1.5k" in first
    assert first.endswith("NO") and len({len(header), len(rule)}) == 1


def test_the_rich_table_prints(tmp_path: Path):
    path = tmp_path / "table.txt"
    with path.open("w") as file:
        report.print_table([record("switch", 8, "a", {})], file=file, fancy=True)
    assert "switch" in path.read_text()


def test_a_record_without_iterations_shows_dashes():
    data = record("switch", 8, "a", {})
    data["iteration_times"] = []
    assert all(math.isnan(x) for x in report.iteration_stats(data))
    assert " - " in report.plain_table([data])


def test_the_x_axis_is_the_first_numeric_swept_field():
    records = [record("ring", 8, "p", {"job.schedule": s, "links.loss": x})
               for s in ("fifo", "p3") for x in (0.0, 0.01)]
    assert report.x_key(records, ["job.schedule", "links.loss"]) == "links.loss"
    assert report.x_key(records, ["job.schedule"]) is None
    assert report.wall_fits(records, ["job.schedule", "links.loss"]) == {}


def test_fit_exponent():
    xs = [8, 16, 32, 64]
    assert report.fit_exponent(xs, [3 * x**1.25 for x in xs]) == pytest.approx(1.25)
    assert report.fit_exponent([8, 8], [1.0, 2.0]) is None


@pytest.mark.parametrize("sweep", [[], ["job.schedule"], ["links.loss"], ["topology.workers"]])
def test_every_figure_shape_draws(tmp_path: Path, sweep: list[str]):
    values: dict[str, list[Any]] = {"job.schedule": ["fifo", "p3"], "links.loss": [0.0, 0.01],
              "topology.workers": [8, 16]}
    records = []
    for i in range(2 if sweep else 1):
        point = {key: values[key][i] for key in sweep}
        for path in ("switch", "ring"):
            records.append(record(path, 8 * (i + 1), f"p{i}", point))
    png = report.plot(records, sweep, tmp_path / "x" / "sim.png", title="t")
    assert png.read_bytes().startswith(PNG_MAGIC)


def test_json_is_strict(tmp_path: Path):
    import numpy as np

    payload = {"a": float("nan"), "b": np.float64(1.5), "c": (1, 2), "d": Path("x"),
               "e": np.arange(2), "f": {"g": np.int64(3), "h": float("inf")}}
    data = json.loads(report.write_json(payload, tmp_path / "sim.json").read_text())
    assert data == {"a": None, "b": 1.5, "c": [1, 2], "d": "x", "e": [0, 1],
                    "f": {"g": 3, "h": None}}


# -- make sim -----------------------------------------------------------------------------


def _make_n(*goals: str) -> str:
    if shutil.which("make") is None:
        pytest.fail("make is not installed (the Makefile is how p4hub is run)")
    # -B: every prerequisite as if out of date, so the listing shows all make would do
    return subprocess.run(["make", "-s", "-n", "-B", *goals], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout


def test_make_sim_runs_the_default_scenario_and_needs_no_apt():
    recipe = _make_n("sim", "SIM_ARGS=--tier F -j 2")
    assert "-m p4hub.sim sim/scenarios/default.toml --tier F -j 2" in recipe
    assert "pip install" in recipe  # it builds the venv
    assert "apt-get" not in recipe and "dpkg" not in recipe  # installing packages needs root
    # the apt step is still there for everything else
    assert "apt-get" in _make_n("venv") and "apt-get" in _make_n("sim", "unit")


def test_the_default_scenario_runs_for_real_in_tier_f(tmp_path: Path) -> None:
    """The real simulator behind the CLI (tier F: seconds, not minutes)."""
    code = cli.main([str(SCENARIOS / "default.toml"), "--out", str(tmp_path), "--tier", "F",
                     "--quiet"])
    assert code == 0
    results = sim_json(tmp_path)["results"]
    assert [r["path"] for r in results] == ["switch", "ring", "ps"]
    assert all(r["ok"] and r["workers"] == 64 and len(r["iteration_times"]) == 2
               for r in results)
    # ResNet-50's compute (89.5 ms at gpu_speed 1) bounds every path's iteration from below
    assert all(min(r["iteration_times"]) >= 0.0894 for r in results)
