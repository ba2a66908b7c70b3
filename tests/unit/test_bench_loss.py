"""``bench/allreduce.py --loss``: argument handling, the rows' loss figures, the summary,
the plot and the driver's sweep order, all in-process (the racks are faked: no Mininet)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from bench import allreduce as bench
from p4hub.experiments import launch
from p4hub.experiments.launch import WorkerRun


@pytest.fixture(autouse=True)
def _torch_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "_have_torch", lambda: True)  # keep Gloo in the defaults


def test_a_loss_list_sweeps_from_zero_with_the_switch_path_and_gloo():
    args = bench.parse_args(["--loss", "10,1,5"])
    assert args.sweep and args.loss == [0.0, 1.0, 5.0, 10.0]
    assert args.backends == ["switch256", "gloo"]
    assert args.out.name == "allreduce_loss.json"
    args = bench.parse_args(["--loss", "0,5", "--backends", "switch", "--out", "x.json"])
    assert args.loss == [0.0, 5.0] and args.backends == ["switch"] and args.out == Path("x.json")


def test_without_loss_the_benchmark_is_what_it_was():
    args = bench.parse_args([])
    assert not args.sweep and args.loss == [0.0]
    assert args.backends == list(bench.ALL_BACKENDS)
    assert args.out.name == "allreduce.json"


@pytest.mark.parametrize("bad", ["100", "-1", "5,abc"])
def test_a_loss_outside_0_to_100_percent_is_refused(bad: str, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        bench.parse_args(["--loss", bad])
    assert "loss" in capsys.readouterr().err


def test_the_launcher_keeps_each_ranks_agent_counters():
    run = WorkerRun()
    launch._record(run, 1, {"event": "done", "rank": 1, "agent_stats": {"sent": 5}}, 2, None)
    launch._record(run, 0, {"event": "done", "rank": 0, "agent_stats": {}}, 2, None)
    assert run.agent_stats == {1: {"sent": 5}, 0: {}}


def test_resends_per_packet_sum_over_the_ranks():
    stats = {0: {"sent": 300, "retransmitted": 30, "early_resends": 20},
             1: {"sent": 100, "retransmitted": 10, "early_resends": 0}}
    assert bench.resend_figures(stats) == {"resends_per_packet": 0.1,
                                           "early_resends_per_packet": 0.05}
    assert bench.resend_figures({}) == {"resends_per_packet": None,
                                        "early_resends_per_packet": None}  # Gloo: no agent


class _NoCpu:
    def load(self, _windows: object) -> None:
        return None


def test_a_row_says_its_loss_rate_and_resends():
    run = WorkerRun(agent_stats={0: {"sent": 50, "retransmitted": 5, "early_resends": 4},
                                 1: {"sent": 50, "retransmitted": 5, "early_resends": 2}})
    for rep, seconds in enumerate((2.0, 3.0, 4.0)):
        run.iterations[(2.0, rep)] = {r: {"seconds": seconds - r * 0.5, "where": "switch"}
                                      for r in (0, 1)}
    args = argparse.Namespace(sizes_mb=[2.0], bw=5.0, repeat=3)
    (row,) = bench._rows("switch256", 2, run, args, {}, _NoCpu(), {}, loss=5.0)
    assert row["loss_percent"] == 5.0 and row["seconds"] == 3.0  # median of the slowest ranks
    assert row["resends_per_packet"] == 0.1 and row["early_resends_per_packet"] == 0.06


def _row(backend: str, loss: float, seconds: float | None, workers: int = 4) -> dict[str, Any]:
    return {"backend": backend, "workers": workers, "size_mb": 2.0, "loss_percent": loss,
            "seconds": seconds, "resends_per_packet": 0.2 if backend != "gloo" else None,
            "early_resends_per_packet": 0.1 if backend != "gloo" else None}


def test_each_row_is_held_against_its_own_lossless_time():
    rows = [_row("switch256", 0.0, 2.0), _row("switch256", 10.0, 3.0), _row("gloo", 0.0, 4.0),
            _row("gloo", 10.0, 9.0), _row("switch256", 10.0, 3.0, workers=8),
            _row("gloo", 5.0, None)]
    bench.add_loss_ratios(rows)
    assert [r["x_lossless"] for r in rows] == [1.0, 1.5, 1.0, 2.25, None, None]
    table = bench.loss_table(rows)
    assert table[0].split() == ["backend", "N", "MB", "loss", "%", "time", "s", "x", "lossless",
                                "resends/pkt", "early/pkt"]
    assert table[1].split() == ["gloo", "4", "2", "0", "4.000", "1.00", "-", "-"]
    assert table[2].split() == ["gloo", "4", "2", "5", "-", "-", "-", "-"]
    assert table[5].split() == ["switch256", "4", "2", "10", "3.000", "1.50", "0.200", "0.100"]
    assert table[6].split() == ["switch256", "8", "2", "10", "3.000", "-", "0.200", "0.100"]


def test_the_driver_runs_every_rate_on_its_own_rack_and_writes_the_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    calls: list[tuple[int, float]] = []

    def fake_bench_workers(workers: int, args: argparse.Namespace, loss: float = 0.0) -> list:
        calls.append((workers, loss))
        return [_row(b, loss, 2.0 * (1 + loss / 10), workers) | {"complete": True}
                for b in args.backends]

    monkeypatch.setattr(bench, "bench_workers", fake_bench_workers)
    monkeypatch.setattr(bench, "mininet_ready", lambda name: True)  # no root, no handler
    out = tmp_path / "loss.json"
    assert bench.main(["--workers", "2,4", "--sizes-mb", "2", "--loss", "10,5",
                       "--out", str(out)]) == 0
    assert calls == [(2, 0.0), (2, 5.0), (2, 10.0), (4, 0.0), (4, 5.0), (4, 10.0)]
    report = json.loads(out.read_text())
    assert report["config"]["loss_percent"] == [0.0, 5.0, 10.0]
    ratios = {(r["backend"], r["workers"], r["loss_percent"]): r["x_lossless"]
              for r in report["results"]}
    assert ratios[("switch256", 4, 10.0)] == 2.0 and ratios[("gloo", 2, 5.0)] == 1.5
    assert out.with_suffix(".png").stat().st_size > 0


def test_make_run_allreduce_reports_the_agents_resends(capsys: pytest.CaptureFixture[str]):
    from p4hub.experiments import allreduce_run
    from p4hub.workers import workload

    run = WorkerRun(agent_stats={0: {"sent": 300, "retransmitted": 30, "early_resends": 20},
                                 1: {"sent": 100, "retransmitted": 10, "early_resends": 0}})
    assert allreduce_run.agent_resends(run) == {
        "agent_sent": 400, "agent_retransmitted": 40, "agent_early_resends": 20}
    assert allreduce_run.agent_resends(WorkerRun()) == {}  # Gloo, or workers that died
    result = allreduce_run.PathResult("switch path", "switch", rows=[{"seconds": 2.0}],
                                      counters=allreduce_run.agent_resends(run))
    args = argparse.Namespace(model=str(workload.DEFAULT_MODEL), scale=0.02, bw=5.0, workers=2,
                              loss=10.0)
    allreduce_run.summarize([result], args)
    out = capsys.readouterr().out
    assert "agents resent 40 of 400 datagrams (0.100 per packet; 20 early" in out
    assert "switch port counters" not in out
