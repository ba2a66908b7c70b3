"""The ``cpu`` column of ``make run``'s tables (experiments/allreduce_run.py, train_run.py):
the drivers run with their worker launcher replaced by a fake that reports lines, and a
CpuSampler over a fake /proc whose counters the fake moves between reports (no Mininet)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from p4hub.experiments import allreduce_run, train_run
from p4hub.experiments.cpuload import CpuSampler
from p4hub.experiments.launch import WorkerRun
from p4hub.workers import workload
from tests.unit.test_cpuload import fake_proc

# the fake run: the runner is pid 10, the switch 20, an agent 51 under the runner
TICK_HZ = float(os.sysconf("SC_CLK_TCK"))


class FakeProc:
    """A fake /proc whose machine and switch counters advance by given ticks per report."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.busy = self.idle = self.switch = 0
        self.now = 100.0  # the sampler's clock: it moves as the 2 cores' ticks do
        self.write()

    def write(self) -> None:
        fake_proc(self.root, self.busy, self.idle,
                  [(10, "runner", 1, 0), (20, "p4lite-switch", 10, self.switch), (51, "worker", 10, 0)])

    def advance(self, busy: int, idle: int, switch: int) -> None:
        self.busy, self.idle, self.switch = self.busy + busy, self.idle + idle, self.switch + switch
        self.now += (busy + idle) / 2 / TICK_HZ
        self.write()


def sampler(proc: FakeProc) -> CpuSampler:
    return CpuSampler({"workers": 10, "switch": 20}, interval=600.0, proc=proc.root,
                      clock=lambda: proc.now)


def allreduce_args() -> argparse.Namespace:
    return argparse.Namespace(model=str(workload.DEFAULT_MODEL), scale=0.005, workers=2, bw=5.0,
                              loss=0.0, iterations=2, path_timeout=10.0, seed=1,
                              agent_timeout=5.0, rto_max=0.0, rto=0.0, per_layer=False)


def test_allreduce_rows_and_summary_carry_the_cpu_flag(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    proc = FakeProc(tmp_path)
    # iteration 0: the machine busy 196 of 200 ticks (1.96 of 2 cores); iteration 1: 100 of 400
    steps = [(196, 4, 20), (100, 300, 10)]

    def fake_run_workers(_rack: object, _worker_args: Callable[[int], list[str]], timeout: float,
                         on_iteration: Callable[[tuple, dict[int, dict]], None] | None = None,
                         tag: str = "") -> WorkerRun:
        assert on_iteration is not None
        for it, (busy, idle, switch) in enumerate(steps):
            proc.advance(busy, idle, switch)
            line = {"iteration": it, "seconds": 1e-4, "max_abs_err": 0.0, "exact": True,
                    "digest": "d", "where": "gloo"}
            on_iteration((None, it), {0: line, 1: dict(line)})
        return WorkerRun(returncodes={0: 0, 1: 0})

    monkeypatch.setattr(allreduce_run, "run_workers", fake_run_workers)
    with sampler(proc) as cpu:
        result = allreduce_run.run_gloo_path(object(), allreduce_args(), cpu)  # type: ignore[arg-type]
    assert result.ok, result.problems
    first, second = (row["cpu"] for row in result.rows)
    assert first["label"].startswith("CPU-bound (1.96/2 cores, 1.76 outside the run; switch ")
    assert first["cpu_bound"] and first["machine_bound"]
    assert second["label"] == "link-bound (cpu 0.50/2)" and not second["cpu_bound"]
    assert result.cpu is not None and result.cpu["busy_cores"] == pytest.approx(2 * 296 / 600, abs=1e-3)
    allreduce_run.summarize([result], allreduce_args())
    out = capsys.readouterr().out
    assert "CPU-bound (1.96/2 cores, 1.76 outside the run; switch" in out  # the row, as printed live
    assert "link-bound (cpu 0.50/2)" in out
    assert f"ok      {result.cpu['label']}" in out  # the path's summary line
    report = allreduce_run.path_report(result)
    assert report["cpu"] == result.cpu and report["rows"][0]["cpu"] == first


def test_training_epochs_and_summary_carry_the_cpu_flag(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    proc = FakeProc(tmp_path)
    args = argparse.Namespace(workers=2, batch=4, epochs=2, bw=5.0, loss=0.0, path_timeout=10.0,
                              seed=1, agent_timeout=5.0)

    def fake_run_ranks(_rack: object, _command: Callable[[int], list[str]], _timeout: float,
                       on_line: Callable[[int, dict], None], run: WorkerRun, tag: str = "",
                       env: object = None) -> None:
        for epoch, (busy, idle, switch) in enumerate([(50, 350, 5), (190, 10, 98)]):
            proc.now += 0.01  # the step starts a little after the previous epoch's mark
            for rank in (0, 1):
                on_line(rank, {"event": "step", "epoch": epoch, "step": epoch, "rank": rank,
                               "loss": 1.0, "seconds": 1e-4})
            proc.advance(busy, idle, switch)
            for rank in (0, 1):
                on_line(rank, {"event": "epoch", "epoch": epoch, "rank": rank, "train_loss": 1.0,
                               "test_accuracy": 0.5, "test_loss": 1.0, "seconds_per_step": 0.1,
                               "param_digest": "d"})
        for rank in (0, 1):
            on_line(rank, {"event": "done", "rank": rank, "steps": 2, "param_digest": "d"})
        run.returncodes.update({0: 0, 1: 0})

    monkeypatch.setattr(train_run, "run_ranks", fake_run_ranks)
    with sampler(proc) as cpu:
        result = train_run.run_path(object(), train_run.PATHS["gloo"], 0, args, cpu=cpu)  # type: ignore[arg-type]
    assert result.ok, result.problems
    rows = result.epoch_rows()
    assert rows[0]["cpu"]["label"] == "link-bound (cpu 0.25/2)"
    assert rows[1]["cpu"]["label"].startswith("CPU-bound (1.90/2 cores, 0.93 outside the run; switch ")
    assert result.cpu is not None and result.cpu["busy_cores"] == pytest.approx(2 * 240 / 600, abs=1e-3)
    train_run.summarize({"gloo": result}, args)
    out = capsys.readouterr().out
    assert "link-bound (cpu 0.25/2)" in out and "CPU-bound (1.90/2 cores" in out
    assert out.rstrip().endswith(result.cpu["label"])


def test_training_without_a_sampler_says_nothing_was_measured(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(workers=1, batch=4, epochs=1, bw=5.0, loss=0.0, path_timeout=10.0,
                              seed=1, agent_timeout=5.0)

    def fake_run_ranks(_rack: object, _command: object, _timeout: float,
                       on_line: Callable[[int, dict], None], run: WorkerRun, tag: str = "",
                       env: object = None) -> None:
        on_line(0, {"event": "step", "epoch": 0, "step": 0, "rank": 0, "loss": 1.0, "seconds": 0.1})
        on_line(0, {"event": "epoch", "epoch": 0, "rank": 0, "train_loss": 1.0, "test_accuracy": 0.5,
                    "test_loss": 1.0, "seconds_per_step": 0.1, "param_digest": "d"})
        run.returncodes[0] = 0

    monkeypatch.setattr(train_run, "run_ranks", fake_run_ranks)
    result = train_run.run_path(object(), train_run.PATHS["gloo"], 0, args)  # type: ignore[arg-type]
    assert result.cpu is None and result.epoch_rows()[0]["cpu"] is None
    assert capsys.readouterr().out.rstrip().endswith("cpu ?")


def test_bench_allreduce_rows_carry_the_cpu_flag(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from bench import allreduce as bench

    proc = FakeProc(tmp_path)
    args = argparse.Namespace(sizes_mb=[0.5, 2.0], bw=5.0, repeat=1)
    run = WorkerRun()
    with sampler(proc) as cpu:
        windows: dict[float, list[tuple[float, float]]] = {}
        record = bench._window_recorder(cpu, windows)
        for size, (busy, idle, switch) in ((0.5, (40, 360, 10)), (2.0, (199, 1, 150))):
            proc.now += 0.01
            proc.advance(busy, idle, switch)
            by_rank = {r: {"size_mb": size, "iteration": 0, "seconds": 1e-4, "where": "switch"}
                       for r in (0, 1)}
            run.iterations[(size, 0)] = by_rank
            record((size, 0), by_rank)
    rows = bench._rows("switch", 2, run, args, {}, cpu, windows)
    assert rows[0]["cpu"]["label"] == "link-bound (cpu 0.20/2)"
    assert rows[1]["cpu"]["label"] == "CPU-bound (1.99/2 cores, 0.50 outside the run; switch 1.49)"
    bench._print_row(rows[1])
    assert capsys.readouterr().out.rstrip().endswith("; CPU-bound (1.99/2 cores, 0.50 outside the run; switch 1.49)")


def test_bench_training_window_uses_the_same_rule(tmp_path: Path) -> None:
    from bench.training import CpuWindow

    proc = FakeProc(tmp_path)
    with sampler(proc) as cpu:
        window = CpuWindow(first_step=1, last_step=2, world=2, cpu=cpu)
        for step, ticks in ((0, (200, 0, 0)), (1, (10, 190, 0)), (2, (10, 190, 196))):
            proc.advance(*ticks)
            for rank in (0, 1):
                window.observe(rank, {"event": "step", "step": step, "seconds": 1e-4})
            cpu.mark()  # what the sampler's thread does every SAMPLE_SECONDS
    load = window.load()
    assert load is not None  # steps 1..2 only: the busy warm-up step 0 is left out
    assert load.label() == "CPU-bound (0.10/2 cores; switch 0.98)"
