"""Several jobs in one simulated rack (a scenario's [[jobs]], sim/multijob.py): they share
the switch's slots through the controller's placement, fall back to the PBoxes, and
each runs exactly as it would alone where it shares nothing. Tiny runs in tier M; the
expected times are the single-job runs of the same workers, compared exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from p4hub.sim import cli, scenario
from p4hub.sim.errors import ScenarioError
from p4hub.sim.run import RunResult, run_scenario
from tests.support.sim_cases import scenario_from

BASE: dict[str, Any] = {
    "name": "jobs",
    "topology": {"kind": "rack", "workers": 4, "pboxes": 1},
    "links": {"bandwidth": "1Gbit", "delay": "5us", "queue": "512KB"},
    "switch": {"slots": 64},
    "job": {"model": "synthetic", "elements": 16384, "iterations": 3, "paths": ["switch"],
            "window": 32},
    "run": {"tier": "M", "seed": 1},
}
TWO: list[dict[str, Any]] = [{"name": "a", "workers": "1-2"}, {"name": "b", "workers": [3, 4]}]


def make(**sections: Any) -> scenario.Scenario:
    return scenario_from(BASE, **sections)


def run(path: str, **sections: Any) -> RunResult:
    result = run_scenario(make(**sections), path=path)
    assert result.ok, result.failures
    return result


def alone(path: str, **sections: Any) -> list[float]:
    """A 2-worker job alone on the rack (no [[jobs]]): the baseline of one job."""
    return run(path, topology={"workers": 2}, **sections).iteration_times


@pytest.mark.parametrize("path", ["switch", "ring"])
def test_two_identical_jobs_that_share_nothing_each_take_the_time_of_one_alone(path: str) -> None:
    r = run(path, jobs=TWO)
    single = alone(path)
    assert r.jobs["a"]["iteration_times"] == single
    assert r.jobs["b"]["iteration_times"] == single
    if path == "switch":
        assert [r.jobs[j]["where"] for j in "ab"] == ["switch", "switch"]
        assert r.exact is True and r.checked == 6  # 2 jobs x 3 iterations x 1 tensor


def test_a_job_with_no_slots_left_falls_back_to_the_pbox_and_runs_as_the_pbox_path() -> None:
    r = run("switch", switch={"slots": 32}, jobs=TWO)  # one window: the first job's
    a, b = r.jobs["a"], r.jobs["b"]
    assert (a["where"], a["switch_slots"], a["pbox_slots"]) == ("switch", 32, 0)
    assert (b["where"], b["switch_slots"], b["pbox_slots"]) == ("pbox", 0, 32)
    assert a["iteration_times"] == alone("switch")
    assert b["iteration_times"] == alone("pbox")
    assert r.exact is True


def test_a_job_short_of_slots_is_split_over_the_switch_and_the_pbox_and_sums_exactly() -> None:
    r = run("switch", switch={"slots": 24}, jobs=TWO)
    a, b = r.jobs["a"], r.jobs["b"]
    # the controller's rule: the switch's largest run (24 >= 32/8) and the rest on the PBox
    assert (a["where"], a["switch_slots"], a["pbox_slots"]) == ("switch+pbox", 24, 8)
    assert (b["where"], b["switch_slots"], b["pbox_slots"]) == ("pbox", 0, 32)
    assert a["exact"] is True and b["exact"] is True
    # b shares the PBox and its link with a's fallback share: slower than alone there
    assert min(b["iteration_times"]) > max(alone("pbox"))


def test_a_job_that_starts_after_another_ended_takes_its_freed_slots() -> None:
    first = run("switch", switch={"slots": 32}, jobs=[{"name": "a", "workers": "1-2"}])
    ended = first.jobs["a"]["ended_s"]
    later = [{"name": "a", "workers": "1-2"},
             {"name": "b", "workers": "3-4", "start": f"{ended * 1e6 + 1:.0f}us"}]
    r = run("switch", switch={"slots": 32}, jobs=later)
    assert r.jobs["b"]["where"] == "switch"
    # the same times up to the rounding of a later start (times are differences of clocks)
    assert r.jobs["b"]["iteration_times"] == pytest.approx(alone("switch"), rel=1e-9)
    # ... and one that starts while the first still holds them falls back
    early = [later[0], {**later[1], "start": "100us"}]
    assert run("switch", switch={"slots": 32}, jobs=early).jobs["b"]["where"] == "pbox"


def test_the_ps_jobs_share_the_servers() -> None:
    r = run("ps", jobs=TWO)
    single = alone("ps")
    for name in "ab":
        times = r.jobs[name]["iteration_times"]
        assert len(times) == 3 and all(t > s for t, s in zip(times, single, strict=True))
    assert r.iteration_times == [max(x, y) for x, y in zip(
        r.jobs["a"]["iteration_times"], r.jobs["b"]["iteration_times"], strict=True)]


def test_the_pbox_path_puts_every_job_on_the_pboxes() -> None:
    r = run("pbox", jobs=TWO)
    assert [r.jobs[j]["where"] for j in "ab"] == ["pbox", "pbox"]
    assert r.exact is True


@pytest.mark.parametrize(("sections", "where", "words"), [
    ({"jobs": [{"name": "a", "workers": "1-2"}, {"name": "b", "workers": [2, 3]}]},
     "jobs[1].workers", "w2 is also job 'a'"),
    ({"jobs": [{"name": "a", "workers": "1-2", "window": 8}]}, "jobs[0].window",
     "unknown job field"),
    ({"jobs": [{"name": "a"}]}, "jobs[0].workers", "missing"),
    ({"jobs": [{"name": "a", "workers": "1-5"}]}, "jobs[0].workers", "no worker w5"),
    ({"jobs": [{"name": "a", "workers": "2-1"}]}, "jobs[0].workers", "not a range"),
    ({"jobs": [{"name": "a", "workers": [1]}, {"name": "a", "workers": [2]}]},
     "jobs[1].name", "also jobs[0]'s name"),
    ({"jobs": TWO, "topology": {"pboxes": 0}}, "topology.pboxes", "need a PBox"),
    ({"jobs": TWO, "job": {"window": 4096}, "switch": {"slots": 1024}}, "jobs",
     "need 8192, more than the switch's 1024 and the PBoxes' 4096"),
    ({"jobs": TWO, "run": {"tier": "P"}}, "run.tier", "tier M only"),
    ({"jobs": TWO, "topology": {"kind": "leafspine", "workers": 2, "racks": 2}}, "jobs",
     "share one switch"),
    ({"jobs": [{"name": "a", "workers": [1], "model": "resnet50"}]}, "jobs[0].elements",
     "only for model = 'synthetic'"),
    ({"jobs": "a"}, "jobs", "array of tables"),
])
def test_bad_jobs_are_refused_with_the_field_and_the_reason(
        sections: dict[str, Any], where: str, words: str) -> None:
    with pytest.raises(ScenarioError) as info:
        make(**sections)
    assert info.value.field == where
    assert words in str(info.value)


def test_a_ring_job_of_one_worker_is_refused() -> None:
    with pytest.raises(ScenarioError, match="a ring needs at least 2 workers"):
        make(job={"paths": ["ring"]}, jobs=[{"name": "a", "workers": [1]}])


def test_p4hub_sim_prints_each_job_and_writes_it_to_the_json(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    toml = tmp_path / "two.toml"
    toml.write_text('name = "two"\n[topology]\nkind = "rack"\nworkers = 4\n'
                    '[links]\nbandwidth = "1Gbit"\n[switch]\nslots = 32\n'
                    '[job]\nmodel = "synthetic"\nelements = 16384\nwindow = 32\n'
                    'paths = ["switch"]\n'
                    '[[jobs]]\nname = "a"\nworkers = "1-2"\n'
                    '[[jobs]]\nname = "b"\nworkers = [3, 4]\n')
    assert cli.main([str(toml), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "job a (w1, w2): switch (32 switch + 0 PBox slots)" in out
    assert "job b (w3, w4): pbox (0 switch + 32 PBox slots)" in out
    (record,) = json.loads((tmp_path / "out" / "sim.json").read_text())["results"]
    assert set(record["jobs"]) == {"a", "b"} and record["workers"] == 4


def test_a_job_on_the_pbox_is_promoted_onto_freed_switch_slots_and_stays_exact() -> None:
    # a (3 iterations) holds the switch's one window and ends in 0.22 s; b falls back to
    # the PBox; the controller's tick at 1 s moves it onto the switch, its ranks resync at
    # that heartbeat, and its later iterations take a's time
    r = run("switch", links={"bandwidth": "10Mbit"}, switch={"slots": 32},
            jobs=[TWO[0], {**TWO[1], "iterations": 40}])
    a, b = r.jobs["a"], r.jobs["b"]
    assert a["moves"] == [] and a["ended_s"] < 1.0
    assert b["where"] == "switch" and (b["switch_slots"], b["pbox_slots"]) == (32, 0)
    assert len(b["moves"]) == 1 and b["moves"][0].startswith("1.000 s: switch s1 has free")
    assert b["resyncs"] == 2  # each rank once
    assert b["iteration_times"][0] > 1.9 * a["iteration_times"][-1]  # on the PBox
    assert b["iteration_times"][-1] == pytest.approx(a["iteration_times"][-1], rel=1e-9)
    assert b["exact"] is True and b["checked"] == 40  # every sum exact across the move


def test_churn_is_reported_as_slot_use_and_pbox_share() -> None:
    """Two jobs on a switch with one window of slots: the first holds half the switch's
    slots until it ends, the second sums on the PBox until the first's slots are free;
    on the pbox path the switch holds nothing and the PBox sums everything."""
    one = run("switch", jobs=[{"name": "a", "workers": "1-2"}],
              switch={"slots": 64}, job={"window": 32})
    assert one.slot_use == pytest.approx(0.5)  # 32 of 64 slots, the whole run
    assert one.pbox_share == 0.0
    both = run("switch", jobs=TWO, switch={"slots": 32}, job={"window": 32})
    assert both.jobs["b"]["where"] in ("pbox", "switch")  # promoted once a's slots freed
    assert both.pbox_share is not None and 0.0 < both.pbox_share < 1.0
    assert both.slot_use is not None and 0.0 < both.slot_use <= 1.0
    pbox = run("pbox", jobs=TWO)
    assert pbox.slot_use == 0.0 and pbox.pbox_share == 1.0
    assert run("ring", jobs=TWO).slot_use is None
