"""bench/sim_validation.py and bench/sim.py: the emulator's rows become the scenarios
they describe, the ratios are computed as stated, and a missing emulator file is
refused with the command that makes one. (No timings are asserted.)"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bench import _validation_cases as cases
from bench import sim_validation

CONFIG = {"bw_mbit": 5.0, "agent_window": 32}


def row(backend: str, workers: int, seconds: float) -> dict:
    return {"backend": backend, "workers": workers, "size_mb": 0.5, "loss_percent": 1.0,
            "seconds": seconds}


@pytest.mark.parametrize(("backend", "path", "lanes"), [
    ("switch", "switch", 64), ("switch256", "switch", 256), ("pbox256", "pbox", 256),
    ("gloo", "ring", 64)])
def test_an_emulator_row_becomes_its_scenario(backend: str, path: str, lanes: int) -> None:
    s = sim_validation.scenario_for(row(backend, 4, 1.0), CONFIG, "P")
    assert s.job.paths == (path,) and s.job.lanes == lanes and s.job.window == 32
    assert s.topology.total_workers == 4 and s.links.bandwidth == 5e6
    assert s.links.overhead == 42 and s.links.loss == pytest.approx(0.01)
    assert s.job.elements * 4 == 2**19 and s.job.elements % lanes == 0


def test_ratios_are_each_path_over_the_ring_in_both() -> None:
    rows = [{**row("switch", 4, 1.0), "emulator_s": 1.0, "sim_s": 1.1, "emulator_cpu_bound": False},
            {**row("gloo", 4, 2.0), "emulator_s": 2.0, "sim_s": 2.0, "emulator_cpu_bound": True}]
    (ratio,) = sim_validation._ratios(rows)
    assert ratio["emulator"] == 0.5 and ratio["sim"] == pytest.approx(0.55)
    assert ratio["disagreement"] == pytest.approx(0.1) and ratio["emulator_cpu_bound"]


def test_without_emulator_results_it_says_how_to_make_them(tmp_path: Path, capsys) -> None:
    assert sim_validation.main(["--emulator", str(tmp_path / "none.json")]) == 2
    assert "bench.allreduce" in capsys.readouterr().err


# -- the elastic and P3 cases (bench/_validation_cases.py) --------------------------------

def elastic_row(mode: str, straggler: str, seconds: float) -> dict:
    return {"mode": mode, "straggler": straggler, "steady_median_s": seconds,
            "cpu": {"cpu_bound": straggler == "link"}}


def test_elastic_runs_come_from_the_benchmarks_json_and_from_the_reference_copy() -> None:
    bench = {"config": {}, "rows": [elastic_row("static", "none", 2.0),
                                    elastic_row("elastic", "link", 1.5)]}
    (run,) = cases.elastic_runs(bench)
    assert run["times"] == {"static/none": 2.0, "elastic/link": 1.5}
    assert run["cpu_bound"] == {"static/none": False, "elastic/link": True}
    reference = {"runs": [{"label": "a", "rows": [elastic_row("static", "none", 2.0)]},
                          {"label": "b", "rows": [elastic_row("elastic", "none", 3.0)]}]}
    assert [(r["label"], r["times"]) for r in cases.elastic_runs(reference)] == [
        ("a", {"static/none": 2.0}), ("b", {"elastic/none": 3.0})]


def test_p3_runs_pair_the_benchmarks_rows_by_run_at_the_balance_point() -> None:
    def prow(mode: str, run: int, rate: float | None, **kw) -> dict:
        return {"model": "resnet50", "bw_mbit": 5.0, "mode": mode, "run": run,
                "iterations_per_s": rate, "cpu": {"cpu_bound": True}, **kw}

    doc = {"rows": [prow("fifo", 0, 0.4), prow("p3", 0, 0.5), prow("fifo", 1, 0.25),
                    prow("p3", 1, 0.2), prow("p3", 0, 9.0, bw_mbit=10.0),
                    prow("p3", 0, 9.0, model="vgg19"), prow("p3", 2, None)]}
    runs = cases.p3_runs(doc)
    assert [r["times"] for r in runs] == [{"fifo": 2.5, "p3": 2.0}, {"fifo": 4.0, "p3": 5.0}]
    (ref,) = cases.p3_runs({"runs": [{"label": "x", "fifo_it_s": 0.5, "p3_it_s": 0.25}]})
    assert ref["label"] == "x" and ref["times"] == {"fifo": 2.0, "p3": 4.0}


def test_compare_gives_every_ratio_both_sides_have_and_the_disagreement() -> None:
    emulator = [{"label": "full", "times": {"static/link": 8.0, "elastic/link": 2.0,
                                            "static/none": 2.0, "elastic/none": 2.0},
                 "cpu_bound": {"static/link": True}},
                {"label": "elastic only", "times": {"elastic/link": 2.0, "elastic/none": 2.0},
                 "cpu_bound": {}}]
    sim = {"static/link": 6.0, "elastic/link": 2.4, "static/none": 2.0, "elastic/none": 2.0}
    out = cases.compare(cases.CASES["elastic"], emulator, sim, 0.10)
    assert [(r["run"], r["of"]) for r in out] == [
        ("full", "elastic/link / static/link"), ("full", "elastic/link / elastic/none"),
        ("full", "static/link / static/none"), ("full", "elastic/none / static/none"),
        ("elastic only", "elastic/link / elastic/none")]
    first = out[0]
    assert first["emulator"] == 0.25 and first["sim"] == pytest.approx(0.4)
    assert first["disagreement"] == pytest.approx(0.6) and not first["within_goal"]
    assert first["emulator_cpu_bound"]
    assert out[3]["disagreement"] == 0.0 and out[3]["within_goal"]
    assert not out[3]["emulator_cpu_bound"]


def test_each_case_simulates_its_scenarios_points_with_the_emulators_iterations() -> None:
    elastic = cases.points(cases.CASES["elastic"])
    assert sorted(elastic) == ["elastic/link", "elastic/none", "static/link", "static/none"]
    assert {p.job.iterations for p in elastic.values()} == {8}
    assert elastic["elastic/link"].straggler.factor == 4.0
    assert not elastic["static/link"].job.rebalance
    p3 = cases.points(cases.CASES["p3"], iterations=3)
    assert {k: p.job.schedule for k, p in p3.items()} == {"fifo": "fifo", "p3": "p3"}
    assert {p.job.iterations for p in p3.values()} == {3}


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_the_committed_emulator_figures_give_every_ratio_of_the_case(name: str) -> None:
    case = cases.CASES[name]
    runs = case.runs(json.loads(case.emulator_file.read_text()))
    have = {(top, bottom) for run in runs for _, top, bottom in case.ratios
            if top in run["times"] and bottom in run["times"]}
    assert have == {(top, bottom) for _, top, bottom in case.ratios}


@dataclass
class FakeResult:
    iteration_times: list[float]
    exact: bool = True
    resends: int = 0
    drops: int = 0
    wall_s: float = 0.0
    events: int = 0
    failures: list[str] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)


def test_a_case_run_writes_its_comparison(tmp_path: Path, monkeypatch) -> None:
    """The plumbing of --case p3 with the simulator replaced: the emulator's JSON in,
    the sim's figure as bench/priority.py takes it (the mean after the warm-up), the
    ratio in both and its disagreement out."""
    # mean after the warm-up 1.6 (the median 1.4, the second half's median 1.8)
    times = {"fifo": [9.0, 2.0, 2.0, 2.0], "p3": [9.0, 1.2, 1.4, 2.2]}
    monkeypatch.setattr(sim_validation, "run_scenario",
                        lambda point, tier: FakeResult(times[point.job.schedule]))
    emulator = tmp_path / "priority.json"
    emulator.write_text(json.dumps({"runs": [
        {"label": "one", "fifo_it_s": 0.5, "p3_it_s": 0.625}]}))
    assert sim_validation.main(["--case", "p3", "--emulator", str(emulator), "--iterations",
                                "4", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "sim_validation_p3.json").read_text())
    assert {r["key"]: r["sim_s"] for r in doc["sim"]} == {"fifo": 2.0, "p3": pytest.approx(1.6)}
    (ratio,) = doc["ratios"]
    assert ratio["emulator"] == pytest.approx(0.8) and ratio["sim"] == pytest.approx(0.8)
    assert ratio["disagreement"] == pytest.approx(0.0) and ratio["within_goal"]
    assert (tmp_path / "sim_validation_p3.png").stat().st_size > 0


def test_a_case_without_emulator_figures_is_refused(tmp_path: Path, capsys) -> None:
    assert sim_validation.main(["--case", "elastic", "--emulator",
                                str(tmp_path / "none.json")]) == 2
    assert "no emulator figures" in capsys.readouterr().err


def test_fabric_runs_come_from_the_benchmarks_json_and_from_the_reference_copy() -> None:
    """bench/hierarchy.py's rows keyed layout/path in the simulator's names (Gloo's ring
    is the ring), its CPU flag read from the row's cpu load."""
    doc = {"layouts": [{"layout": "2x4", "rows": [
        {"path": "switch", "median_s": 2.0, "cpu": {"cpu_bound": True}},
        {"path": "gloo", "median_s": 3.5, "cpu": {"cpu_bound": False}},
        {"path": "pbox-root", "median_s": 8.8, "cpu": None}]},
        {"layout": "4x2", "rows": [{"path": "pbox", "median_s": 14.0, "cpu": {}}]}]}
    (run,) = cases.fabric_runs(doc)
    assert run["times"] == {"2x4/switch": 2.0, "2x4/ring": 3.5, "2x4/pbox-root": 8.8,
                            "4x2/pbox": 14.0}
    assert run["cpu_bound"] == {"2x4/switch": True, "2x4/ring": False,
                                "2x4/pbox-root": False, "4x2/pbox": False}
    copy = cases.fabric_runs({"runs": [{"label": "t", "layout": "4x2", "rows": [
        {"path": "gloo", "median_s": 3.6, "cpu_bound": False},
        {"path": "switch", "median_s": 2.4, "cpu_bound": True}]}]})
    assert copy == [{"label": "t", "source": "", "times": {"4x2/ring": 3.6, "4x2/switch": 2.4},
                     "cpu_bound": {"4x2/ring": False, "4x2/switch": True}}]


def test_the_fabric_case_runs_each_path_of_each_layout_once() -> None:
    """Each path of each layout is its own simulation; the switch path with the spine
    narrowed is the root-PBox key, and the sweep's second point adds no other run."""
    points = cases.points(cases.CASES["fabric"])
    assert sorted(points) == sorted(f"{lay}/{path}" for lay in ("2x4", "4x2")
                                    for path in ("switch", "pbox", "ring", "pbox-root"))
    for key, point in points.items():
        assert point.job.iterations == 4 and len(point.job.paths) == 1
        path = key.split("/")[1]
        assert point.job.paths[0] == ("switch" if path == "pbox-root" else path)
        assert point.switch.spine_slots == (1 if path == "pbox-root" else 0)


def test_a_ratio_the_simulator_did_not_run_is_named_not_approximated() -> None:
    case = cases.CASES["fabric"]
    emulator = [{"label": "e", "times": {"2x4/switch": 2.0, "2x4/ring": 4.0,
                                         "2x4/pbox-root": 8.0}, "cpu_bound": {}}]
    sim = {"2x4/switch": 1.0, "2x4/ring": 2.0}
    (ratio,) = cases.compare(case, emulator, sim, 0.1)
    assert ratio["of"] == "2x4/switch / 2x4/ring" and ratio["disagreement"] == 0.0
    (missing,) = cases.not_simulated(case, emulator, sim)
    assert missing["of"] == "2x4/pbox-root / 2x4/switch" and missing["emulator"] == 4.0
    assert missing["not_in_simulator"] == ["2x4/pbox-root"]


def test_the_fabric_case_compares_the_median_of_every_iteration(tmp_path: Path,
                                                                monkeypatch) -> None:
    """--case fabric with the simulator replaced: bench/hierarchy.py's figure is the
    median of all its iterations (the mean of the middle two of four), not the steady
    half's or the mean after a warm-up."""
    times = {"switch": [9.0, 1.0, 3.0, 2.0], "pbox": [16.0, 14.0, 12.0, 13.0],
             "ring": [4.0, 4.0, 4.0, 4.0]}

    def fake(point, tier):
        spine_root = point.switch.spine_slots == 1 and point.job.paths[0] == "switch"
        return FakeResult([8.0] * 4 if spine_root else times[point.job.paths[0]])

    monkeypatch.setattr(sim_validation, "run_scenario", fake)
    emulator = tmp_path / "hierarchy.json"
    emulator.write_text(json.dumps({"layouts": [{"layout": "2x4", "rows": [
        {"path": "switch", "median_s": 1.25, "cpu": {"cpu_bound": True}},
        {"path": "gloo", "median_s": 2.0, "cpu": {}}]}]}))
    assert sim_validation.main(["--case", "fabric", "--emulator", str(emulator),
                                "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "sim_validation_fabric.json").read_text())
    sim = {r["key"]: r["sim_s"] for r in doc["sim"]}
    assert sim["2x4/switch"] == 2.5 and sim["2x4/pbox"] == 13.5 and sim["4x2/pbox-root"] == 8.0
    (ratio,) = doc["ratios"]  # the only ratio this emulator JSON has
    assert ratio["of"] == "2x4/switch / 2x4/ring" and ratio["emulator"] == 0.625
    assert ratio["sim"] == 0.625 and ratio["within_goal"] and ratio["emulator_cpu_bound"]
    assert doc["not_simulated"] == []
    assert doc["more_scenarios"] == ["sim/scenarios/fabric-4x2.toml"]
    assert (tmp_path / "sim_validation_fabric.png").stat().st_size > 0


def test_sim_tiers_ratios_are_m_over_p_and_f_over_m_against_their_goals() -> None:
    from bench import sim_tiers

    rows = [{"case": "rack32", "loss": 0.0, "path": "switch", "tier": t, "iteration_s": s}
            for t, s in (("P", 0.010), ("M", 0.0104), ("F", 0.0116))]
    (entry,) = sim_tiers.ratios(rows)
    assert entry["M/P"] == pytest.approx(1.04) and entry["M/P within goal"]
    assert entry["F/M"] == pytest.approx(0.0116 / 0.0104) and not entry["F/M within goal"]
    # a failed tier leaves its ratios out rather than making one up
    rows[0]["iteration_s"] = None
    (entry,) = sim_tiers.ratios(rows)
    assert "M/P" not in entry and "F/M" in entry


def test_sim_tiers_runs_a_small_case_in_every_tier_and_checks_its_sums(tmp_path: Path) -> None:
    from bench import sim_tiers

    out = tmp_path / "tiers.json"
    assert sim_tiers.main(["--cases", "rack32", "--loss", "0", "--elements", "1024",
                           "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [r["tier"] for r in doc["rows"]] == ["P", "M", "F"]
    assert all(r["exact"] for r in doc["rows"] if r["tier"] != "F")
    assert all(r["iteration_s"] > 0 for r in doc["rows"]) and out.with_suffix(".png").exists()
