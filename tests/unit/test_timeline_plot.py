"""experiments/timeline_plot.py on timelines shaped as workers/worker.py --timeline writes
them: replay_iteration records on a fake clock and an agent that answers at once."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from p4hub.experiments import timeline_plot
from p4hub.hosts import p3
from p4hub.workers import replay
from tests.support.replay_fakes import FakeClock, InstantAgent

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def timeline(tmp_path: Path, name: str, iterations: int = 2) -> Path:
    """A timeline file as worker.py writes it: two layers, b's backward first."""
    layers = [replay.Layer("a", 300, 0.01, 0.02), replay.Layer("b", 600, 0.03, 0.06)]
    plan = p3.p3_plan([300, 600], 256, 256)
    clock = FakeClock()
    agent = InstantAgent(clock)
    grads = [np.ones(300, np.float32), np.ones(600, np.float32)]
    records = [replay.replay_iteration(agent, layers, plan, grads, i, sleep=clock.sleep,
                                       clock=lambda: clock.now) for i in range(iterations)]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"mode": name, "model": "two", "layers": ["a", "b"],
                                "iterations": [dataclasses.asdict(r) for r in records]}))
    return path


def test_a_layer_spans_from_its_first_ready_to_its_last_done(tmp_path: Path):
    doc = json.loads(timeline(tmp_path, "fifo").read_text())
    # b's backward ends at 0.06 and a's at 0.08; each slice is back 1 ms after its start
    spans = timeline_plot.layer_spans(doc["iterations"][0])
    assert [x for span in spans for x in span] == pytest.approx([0.08, 0.081, 0.06, 0.061])


def test_layer_spans_orders_by_layer_and_takes_the_extremes():
    iteration = {"slices": [{"layer": 1, "ready": 0.5, "done": 0.9},
                            {"layer": 0, "ready": 0.2, "done": 0.4},
                            {"layer": 1, "ready": 0.3, "done": 0.6},
                            {"layer": 0, "ready": 0.25, "done": 0.7}]}
    assert timeline_plot.layer_spans(iteration) == [(0.2, 0.7), (0.3, 0.9)]


def test_plot_timelines_writes_one_png_for_every_run(tmp_path: Path):
    out = tmp_path / "timelines.png"
    timeline_plot.plot_timelines({"FIFO": timeline(tmp_path, "fifo"),
                                  "P3": timeline(tmp_path, "p3")}, out)
    assert out.read_bytes().startswith(PNG_MAGIC)
    wide = int.from_bytes(out.read_bytes()[16:20], "big")  # IHDR width: one panel per run
    single = tmp_path / "one.png"
    timeline_plot.plot_timelines({"FIFO": timeline(tmp_path, "fifo")}, single, iteration=0)
    assert wide > 1.5 * int.from_bytes(single.read_bytes()[16:20], "big")


def test_main_plots_name_path_pairs_and_refuses_anything_else(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "cli.png"
    assert timeline_plot.main([str(out), f"FIFO={timeline(tmp_path, 'fifo')}"]) == 0
    assert out.read_bytes().startswith(PNG_MAGIC)
    assert timeline_plot.main([str(tmp_path / "x.png"), "no-equals-sign"]) == 2
    assert timeline_plot.main([str(tmp_path / "x.png")]) == 2
    assert "timeline_plot OUT.png NAME=TIMELINE.json" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()
