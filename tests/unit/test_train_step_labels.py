"""``make run``'s training tables print two different step times: an epoch row the
slowest rank's median step time, the summary the median over global steps (each timed
by its slowest rank). Each column's label says which, and each value is that statistic."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import pytest

from p4hub.experiments import train_run
from p4hub.experiments.launch import WorkerRun

# rank -> its time for steps 0, 1, 2 of the one epoch
STEP_SECONDS = {0: [0.1, 0.5, 0.2], 1: [0.3, 0.1, 0.1]}
RANK_MEDIANS = {rank: statistics.median(s) for rank, s in STEP_SECONDS.items()}  # 0.2, 0.1
EPOCH_VALUE = max(RANK_MEDIANS.values())  # 0.2: rank 0's median
SUMMARY_VALUE = statistics.median(max(steps) for steps in zip(*STEP_SECONDS.values(),
                                                                    strict=True))  # 0.3


def under(header: str, row: str, label: str) -> float:
    """The number printed right-aligned under ``label`` of ``header``."""
    end = header.index(label) + len(label)
    return float(row[:end].split()[-1])


def train_once(monkeypatch: pytest.MonkeyPatch) -> tuple[train_run.TrainResult, argparse.Namespace]:
    args = argparse.Namespace(workers=2, batch=4, epochs=1, bw=5.0, loss=0.0, path_timeout=10.0,
                              seed=1, agent_timeout=5.0)

    def fake_run_ranks(_rack: object, _command: Callable[[int], list[str]], _timeout: float,
                       on_line: Callable[[int, dict], None], run: WorkerRun, tag: str = "",
                       env: object = None) -> None:
        for step in range(3):
            for rank, seconds in STEP_SECONDS.items():
                on_line(rank, {"event": "step", "epoch": 0, "step": step, "rank": rank,
                               "loss": 1.0, "seconds": seconds[step]})
        for rank in STEP_SECONDS:  # the loop's epoch record: this rank's median
            on_line(rank, {"event": "epoch", "epoch": 0, "rank": rank, "train_loss": 1.0,
                           "test_accuracy": 0.5, "test_loss": 1.0,
                           "seconds_per_step": RANK_MEDIANS[rank], "param_digest": "d"})
        for rank in STEP_SECONDS:
            on_line(rank, {"event": "done", "rank": rank, "steps": 3, "param_digest": "d"})
        run.returncodes.update({0: 0, 1: 0})

    monkeypatch.setattr(train_run, "run_ranks", fake_run_ranks)
    result = train_run.run_path(object(), train_run.PATHS["gloo"], 0, args)  # type: ignore[arg-type]
    return result, args


def test_the_two_statistics_differ_here():
    assert EPOCH_VALUE == pytest.approx(0.2) and SUMMARY_VALUE == pytest.approx(0.3)


def test_the_labels_differ_and_name_their_statistic():
    assert train_run.EPOCH_STEP_LABEL != train_run.SUMMARY_STEP_LABEL
    assert "slowest rank" in train_run.EPOCH_STEP_LABEL and "median" in train_run.EPOCH_STEP_LABEL
    assert "median" in train_run.SUMMARY_STEP_LABEL and "global step" in train_run.SUMMARY_STEP_LABEL


def test_an_epoch_row_shows_the_slowest_ranks_median(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]):
    result, _ = train_once(monkeypatch)
    assert result.ok, result.problems
    lines = capsys.readouterr().out.splitlines()
    (header,) = [line for line in lines if line.lstrip().startswith("epoch")]
    row = lines[lines.index(header) + 1]
    assert under(header, row, train_run.EPOCH_STEP_LABEL) == pytest.approx(EPOCH_VALUE)


def test_the_summary_shows_the_median_global_step(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]):
    result, args = train_once(monkeypatch)
    capsys.readouterr()
    train_run.summarize({"gloo": result}, args)
    lines = capsys.readouterr().out.splitlines()
    (header,) = [line for line in lines if line.lstrip().startswith("path")]
    row = lines[lines.index(header) + 1]
    assert under(header, row, train_run.SUMMARY_STEP_LABEL) == pytest.approx(SUMMARY_VALUE)
    # samples/s follows from the same statistic
    assert under(header, row, "samples/s") == pytest.approx(2 * 4 / SUMMARY_VALUE, abs=0.5)
