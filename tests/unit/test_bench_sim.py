"""bench/sim_validation.py and bench/sim.py: the emulator's rows become the scenarios
they describe, the ratios are computed as stated, and a missing emulator file is
refused with the command that makes one. (No timings are asserted.)"""

from __future__ import annotations

from pathlib import Path

import pytest

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
