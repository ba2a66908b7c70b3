"""workers.train: the sharding invariants, identical models, and short Gloo runs of the
training program on loopback (two processes, no root)."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from p4hub.workers.train import data, loop
from p4hub.workers.train.model import build_model, parameter_count

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 120.0  # seconds for a whole 2-process run; it takes ~10 s on 2 cores
# A 1-epoch world-2 run (22 steps of 64 samples) reached 0.93-0.96 over seeds 1-6.
ONE_EPOCH_MIN_ACCURACY = 0.85


@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("epoch", [0, 1])
def test_shards_split_each_global_batch(world: int, epoch: int) -> None:
    batch = 32
    expected = data.global_batches(epoch, world, batch, seed=5, n_train=data.TRAIN_SIZE)
    shards = [data.shard(epoch, rank, world, batch, seed=5) for rank in range(world)]
    assert {len(s) for s in shards} == {data.TRAIN_SIZE // (world * batch)}
    for step, global_batch in enumerate(expected):
        parts = [s[step] for s in shards]
        assert all(len(p) == batch for p in parts)
        union = np.concatenate(parts)
        assert len(set(union.tolist())) == len(union)  # disjoint
        np.testing.assert_array_equal(union, global_batch)


def test_global_batch_does_not_depend_on_the_split() -> None:
    two = [data.shard(0, r, 2, 64, seed=1) for r in range(2)]
    four = [data.shard(0, r, 4, 32, seed=1) for r in range(4)]
    assert len(two[0]) == len(four[0])
    for step in range(len(two[0])):
        np.testing.assert_array_equal(np.concatenate([s[step] for s in two]),
                                      np.concatenate([s[step] for s in four]))


def test_an_epoch_visits_each_sample_at_most_once() -> None:
    visited = np.concatenate(data.global_batches(0, 4, 32, seed=1, n_train=data.TRAIN_SIZE))
    assert len(visited) == 11 * 128  # the last partial batch is dropped
    assert len(np.unique(visited)) == len(visited)
    assert visited.min() >= 0 and visited.max() < data.TRAIN_SIZE


def test_shard_is_deterministic_from_seed_and_epoch() -> None:
    first = data.shard(2, 1, 4, 32, seed=7)
    again = data.shard(2, 1, 4, 32, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not np.array_equal(first[0], data.shard(3, 1, 4, 32, seed=7)[0])
    assert not np.array_equal(first[0], data.shard(2, 1, 4, 32, seed=8)[0])


def test_shard_rejects_a_rank_outside_the_world() -> None:
    with pytest.raises(ValueError):
        data.shard(0, 4, 4, 32, seed=1)


def test_split_shapes_and_scaling() -> None:
    split = data.load_split(1)
    assert split.train_images.shape == (data.TRAIN_SIZE, 1, 8, 8)
    assert split.test_images.shape == (data.TEST_SIZE, 1, 8, 8)
    assert split.train_images.dtype == torch.float32
    assert split.train_labels.dtype == torch.int64
    assert 0.0 <= float(split.train_images.min()) and float(split.train_images.max()) <= 1.0
    assert set(split.test_labels.tolist()) == set(range(10))
    assert torch.equal(split.test_images, data.load_split(1).test_images)
    assert not torch.equal(split.test_images, data.load_split(2).test_images)


def test_build_model_is_identical_for_a_seed() -> None:
    first, again, other = build_model(3), build_model(3), build_model(4)
    for a, b in zip(first.parameters(), again.parameters(), strict=True):
        assert torch.equal(a, b)
    assert loop.param_digest(first) == loop.param_digest(again) != loop.param_digest(other)
    # no buffers: DDP would otherwise broadcast them before every forward pass
    assert list(first.buffers()) == []
    assert parameter_count(first) == 3818
    assert first(torch.zeros(5, 1, 8, 8)).shape == (5, 10)


def test_main_reports_missing_rendezvous_as_an_error(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    for name in loop.TORCHRUN_VARS:
        monkeypatch.delenv(name, raising=False)
    assert loop.main(["--comm", "gloo"]) == 1
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["event"] == "error" and record["error"].startswith("ValueError: ")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_ranks(world: int, *extra: str) -> list[list[dict]]:
    """Run ``world`` ranks of the training program with Gloo on loopback; each rank's
    JSON records. Every process is killed, whatever happens."""
    env = {k: v for k, v in os.environ.items() if k not in loop.TORCHRUN_VARS}
    env["GLOO_SOCKET_IFNAME"] = "lo"
    master = f"127.0.0.1:{free_port()}"
    procs: list[subprocess.Popen] = []
    try:
        for rank in range(world):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "p4hub.workers.train.loop", "--comm", "gloo",
                 "--rank", str(rank), "--world", str(world), "--master", master,
                 "--timeout", "60", *extra],
                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outputs = [proc.communicate(timeout=RUN_TIMEOUT) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, (_, stderr) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, stderr[-2000:]
    return [[json.loads(line) for line in out.splitlines()] for out, _ in outputs]


def of_kind(records: list[dict], event: str) -> list[dict]:
    return [r for r in records if r["event"] == event]


def test_two_ranks_hold_the_same_weights() -> None:
    ranks = run_ranks(2, "--max-steps", "4")
    for rank, records in enumerate(ranks):
        assert of_kind(records, "ready") == [{"event": "ready", "rank": rank, "comm": "gloo",
                                              "params": 3818, "world": 2}]
        steps = of_kind(records, "step")
        assert [s["step"] for s in steps] == [0, 1, 2, 3]
        assert all(math.isfinite(s["loss"]) and s["seconds"] > 0 for s in steps)
        assert of_kind(records, "done")[0]["steps"] == 4
    epochs = [of_kind(records, "epoch")[0] for records in ranks]
    assert epochs[0]["param_digest"] == epochs[1]["param_digest"]
    assert epochs[0]["test_accuracy"] == epochs[1]["test_accuracy"]
    assert epochs[0]["steps"] == 4 and "where" not in epochs[0]
    # same global batches, different halves: the ranks' own losses differ
    assert of_kind(ranks[0], "step")[1]["loss"] != of_kind(ranks[1], "step")[1]["loss"]


def test_one_epoch_learns_the_digits() -> None:
    ranks = run_ranks(2, "--epochs", "1")
    epochs = [of_kind(records, "epoch") for records in ranks]
    assert [len(e) for e in epochs] == [1, 1]
    first, second = epochs[0][0], epochs[1][0]
    assert first["steps"] == data.TRAIN_SIZE // 64
    assert first["param_digest"] == second["param_digest"]
    assert first["test_accuracy"] >= ONE_EPOCH_MIN_ACCURACY, first
    assert first["train_loss"] < math.log(10)  # below chance level


def test_fsdp_and_zero_schedules_train_as_ddp_does() -> None:
    """--schedule fsdp|zero (over Gloo here; over p4hub in test_torch_sharded.py): the
    same losses as DDP at every step within float rounding (the sums are ordered
    differently), and every rank's full parameters the same."""
    losses = {}
    for schedule in ("ddp", "fsdp", "zero"):
        ranks = run_ranks(2, "--max-steps", "3", "--schedule", schedule)
        losses[schedule] = [[s["loss"] for s in of_kind(records, "step")] for records in ranks]
        digests = {of_kind(records, "done")[0]["param_digest"] for records in ranks}
        assert len(digests) == 1, (schedule, digests)
    for schedule in ("fsdp", "zero"):
        for ours, ddp in zip(losses[schedule], losses["ddp"], strict=True):
            assert len(ours) == len(ddp) == 3
            assert max(abs(a - b) for a, b in zip(ours, ddp, strict=True)) < 1e-5, (schedule,
                                                                                   ours, ddp)
