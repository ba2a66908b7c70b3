"""Sharded collectives (reduce-scatter, all-gather) and sharded training (FSDP2, ZeRO) over
the "p4hub" backend, with real processes on loopback against a real PBox.

The ranks are ``python -m tests.unit.torch_shard_ranks SCENARIO ...``; the checks are made
inside them (tests/unit/test_torch_backend.py has the harness).
"""

from __future__ import annotations

import pytest

from tests.unit.test_torch_backend import assert_checks_pass, env_for, pbox_serving, run_ranks

MODULE = "tests.unit.torch_shard_ranks"
# job id -> "id:world:slot base:slots" on this module's PBox (its own, so no job is shared
# with test_torch_backend's)
JOBS = {21: "21:3:0:64", 22: "22:3:64:64", 23: "23:2:128:64", 24: "24:3:192:64",
        25: "25:2:256:64"}


@pytest.fixture(scope="module")
def pbox():
    with pbox_serving([f"--job={j}" for j in JOBS.values()]) as at:
        yield at


def _env(job: int, pbox: str, **extra: str) -> dict[str, str]:
    _, world, base, slots = JOBS[job].split(":")
    env = env_for(None, P4HUB_AGGREGATOR=pbox, P4HUB_JOB_ID=str(job), P4HUB_SLOT_BASE=base,
                  P4HUB_SLOT_COUNT=slots, **extra)
    return env


@pytest.mark.parametrize("scatter", ["allreduce", "network"])
def test_reduce_scatter_and_all_gather_dtypes_shards_async_and_refusals(pbox, scatter):
    """Over the whole buffer's all-reduce and in the network (wire version 3: each rank
    receives only its own shard's results, DONEs for the others)."""
    job = 21 if scatter == "allreduce" else 24
    outputs = run_ranks("sharded", 3, _env(job, pbox, P4HUB_SCATTER=scatter), module=MODULE)
    assert_checks_pass(outputs, expected_checks=19)


def test_a_dead_rank_is_named_in_a_reduce_scatter(pbox):
    env = _env(22, pbox, P4HUB_DEAD_AFTER="3", TEST_PG_TIMEOUT="60")
    outputs = run_ranks("dead_scatter", 3, env, module=MODULE)
    assert outputs[2][-1] == {"event": "dying"}
    for rank in (0, 1):
        failed = outputs[rank][-1]
        assert failed["event"] == "failed", failed
        assert "reduce_scatter_tensor" in failed["error"], failed
        assert "rank 2 (127.0.0.1:" in failed["error"] and "heartbeat" in failed["error"], failed
        assert failed["seconds"] < 20, failed  # well inside the 60 s timeout


LOSS_TOLERANCE = 1e-4  # absolute, per step, per rank (cross-entropy of ~2.3)


@pytest.mark.parametrize("scatter", ["allreduce", "network"])
def test_fsdp2_and_zero_train_over_p4hub_as_over_gloo(pbox, scatter):
    """fully_shard (reduce_scatter_tensor AVG, all_gather_into_tensor) and
    ZeroRedundancyOptimizer (DDP's all-reduce, broadcasts from each shard's owner) train
    DigitsNet for 8 steps over p4hub and over Gloo in the same processes: every rank's
    loss within LOSS_TOLERANCE of Gloo's at every step, the parameters near Gloo's and
    bit-identical on both ranks (the digests). FSDP's reduce-scatters run over the
    all-reduce and in the network."""
    job = 23 if scatter == "allreduce" else 25
    outputs = run_ranks("training", 2, _env(job, pbox, P4HUB_SCATTER=scatter), module=MODULE,
                        timeout=240)
    assert_checks_pass(outputs, expected_checks=2)
    for lines in outputs:
        losses = {line["losses"]: line["values"] for line in lines if "losses" in line}
        for kind in ("fsdp", "zero"):
            ours, theirs = losses[f"{kind} p4hub"], losses[f"{kind} gloo"]
            assert len(ours) == len(theirs) == 8
            gaps = [abs(a - b) for a, b in zip(ours, theirs, strict=True)]
            assert max(gaps) < LOSS_TOLERANCE, (kind, gaps)
            assert ours[-1] < ours[0], (kind, ours)  # it trains
