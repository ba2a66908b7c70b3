"""P3 slicing and priorities, and the workload replay on fake and real agents."""

from __future__ import annotations

import json

import numpy as np
import pytest

from p4hub.hosts import p3
from p4hub.hosts.errors import SessionError
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.workers import replay, workload
from tests.support.replay_fakes import FakeClock, InstantAgent
from tests.unit.test_agent_loopback import UdpAggregator, run_ranks

JOB, N = 3, 4


def test_priorities_fall_with_the_log_distance_from_the_input():
    got = [p3.layer_priority(i) for i in range(130)]
    assert got[:8] == [7, 6, 6, 5, 5, 5, 5, 4]
    assert got[62] == 2 and got[63] == 1 and got[126] == 1 and got[127] == 0
    assert got == sorted(got, reverse=True)
    with pytest.raises(SessionError):
        p3.layer_priority(-1)


@pytest.mark.parametrize("lanes", [64, 256])
def test_slices_are_whole_blocks_and_cover_every_layer(lanes):
    sizes = [10, 40_000, 100_000, 1]
    plan = p3.p3_plan(sizes, 40_000, lanes)
    for layer, (size, slices) in enumerate(zip(sizes, plan, strict=True)):
        assert [s.layer for s in slices] == [layer] * len(slices)
        assert slices[0].start == 0 and slices[-1].stop == size
        assert all(a.stop == b.start for a, b in zip(slices, slices[1:], strict=False))
        assert all(s.start % lanes == 0 for s in slices)  # block boundaries never move
        assert {s.priority for s in slices} == {p3.layer_priority(layer)}
    assert [len(s) for s in plan] == [1, 1, 3, 1] if lanes == 64 else [1, 1, 3, 1]
    assert plan[2][0].size == p3.slice_length(40_000, lanes)


def test_layer_classes_keep_runs_of_layers_input_side_most_urgent():
    assert [p3.layer_class(i, 54, 32) for i in (0, 1, 2, 52, 53)] == [31, 31, 30, 1, 0]
    assert [p3.layer_class(i, 19, 32) for i in range(19)] == list(range(31, 12, -1))
    assert {p3.layer_class(i, 5, 1) for i in range(5)} == {0}
    with pytest.raises(SessionError):
        p3.layer_class(5, 5, 4)


def test_backward_order_starts_from_the_last_layer():
    plan = p3.p3_plan([512, 1024, 256], 256, 256)
    assert [(s.layer, s.index) for s in p3.backward_order(plan)] == [
        (2, 0), (1, 0), (1, 1), (1, 2), (1, 3), (0, 0), (0, 1)]


def test_replay_tiles_backward_then_forward_and_waits_per_layer():
    layers = [replay.Layer("a", 300, 0.01, 0.02), replay.Layer("b", 600, 0.03, 0.06)]
    plan = p3.p3_plan([300, 600], 256, 256)
    clock = FakeClock()
    agent = InstantAgent(clock)
    grads = [np.ones(300, np.float32), np.ones(600, np.float32)]
    rec = replay.replay_iteration(agent, layers, plan, grads, 0, sleep=clock.sleep,
                                  clock=lambda: clock.now)
    # backward: b (0.06) then a (0.02); forward: a (0.01) then b (0.03)
    assert rec.backward_seconds == pytest.approx(0.08)
    assert rec.seconds == pytest.approx(0.12)
    assert rec.forward_start == pytest.approx([0.08, 0.09])
    assert agent.started == [(256, 6), (256, 6), (88, 6), (256, 7), (44, 7)]  # b's first
    assert [s["ready"] for s in rec.slices] == pytest.approx([0.08, 0.08, 0.06, 0.06, 0.06])


def test_p3_and_fifo_replays_return_the_same_bits_through_real_agents():
    """The scheduled step gives the same parameters as the unscheduled one: slices are
    whole blocks, so the sliced all-reduce is bit for bit the whole tensor's."""
    path = workload.model_path("resnet50")
    layers = replay.load_layers(path, time_scale=0.0, param_scale=0.001)
    sizes = [layer.params for layer in layers]
    digests = {}
    for mode, plan, classes in (("fifo", p3.fifo_plan(sizes), 1),
                                ("p3", p3.p3_plan(sizes, 4096, 64), 4)):  # fmt: skip
        core = Aggregator()
        core.add_job(JOB, N, 0, 32)
        box = UdpAggregator(core)
        try:
            results = run_ranks(
                box.address,
                lambda agent, rank, plan=plan: replay.replay_iteration(
                    agent, layers, plan, replay.synthetic_gradients(layers, rank, 5), 0,
                    timeout=30.0, classes=agent.classes).digest,
                classes=classes, window=32 // classes)  # fmt: skip
        finally:
            box.close()
        assert len(set(results)) == 1, f"{mode}: ranks disagree"
        digests[mode] = results[0]
    assert digests["fifo"] == digests["p3"]
    assert json.dumps(digests)  # plain strings
