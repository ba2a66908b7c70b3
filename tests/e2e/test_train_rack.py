"""Training through the switch on a Mininet rack (root): ``make run``'s default mode.

The real driver pieces (experiments/run.py, experiments/train_run.py) on a 4-worker rack
with the P4 switch, the PBox and p4hub-controller: one epoch of DigitsNet over the p4hub
backend with the job on the switch, the same with the precision option (float32 blocks
through the switch to the job's float route on the PBox), and the same epoch over Gloo. The
p4hub paths must aggregate where they should, keep every rank's weights identical,
follow Gloo's loss within the driver's tolerance, and leave their jobs when the process
group is destroyed. The rack is torn down even when a check fails.
"""

from __future__ import annotations

import socket

import pytest

from p4hub.controller.client import JobClient
from p4hub.experiments import run, train_run
from p4hub.topologies.rack import Rack

pytestmark = pytest.mark.root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_one_epoch_through_the_switch_and_with_the_precision_option_follows_gloo():
    # a bound this tight sends a good share of DigitsNet's blocks as float32 (1e-3, make
    # run's default, sends almost none of them)
    results, problems, jobs_after = _train_one_epoch(
        ["switch", "precision", "gloo"], ["--precision", "1e-5"], "e2e-train")
    switch, gloo = results["switch"], results["gloo"]
    assert switch.ok and gloo.ok, (switch.problems, gloo.problems)
    assert not problems
    assert switch.where() == "switch"
    assert len(switch.losses()) == len(gloo.losses()) == 11  # 1437 images / (4 x 32)
    assert train_run.max_loss_gap(switch, gloo) < train_run.LOSS_TOLERANCE
    assert switch.epoch_rows()[0]["test_accuracy"] > 0.8
    stats = switch.done[0]["stats"]
    assert stats["results"] > 0 and stats["where"] == "switch"
    assert jobs_after == []  # every rank left its job when the group was destroyed
    precision = results["precision"]
    assert precision.ok, precision.problems
    assert precision.where() == "switch"
    assert train_run.max_loss_gap(precision, gloo) < train_run.LOSS_TOLERANCE
    floats = precision.float_share()
    assert floats is not None and 0 < floats[0] < floats[1], floats
    assert precision.done[0]["stats"]["where"] == "switch"


@pytest.mark.parametrize("schedule", ["fsdp", "zero"])
def test_sharded_training_through_the_switch_follows_gloo(schedule):
    """``make run RUN_ARGS="--schedule fsdp|zero"``'s pieces: one epoch of FSDP2 (gradients
    reduce-scattered, parameters all-gathered) or of DDP with ZeroRedundancyOptimizer,
    over the p4hub backend with the job on the switch and over Gloo: the same weights on
    every rank, Gloo's losses within the driver's tolerance, the jobs left at the end."""
    results, problems, jobs_after = _train_one_epoch(
        ["switch", "gloo"], ["--schedule", schedule], f"e2e-{schedule}")
    switch, gloo = results["switch"], results["gloo"]
    assert switch.ok and gloo.ok, (switch.problems, gloo.problems)
    assert not problems
    assert switch.where() == "switch"
    assert len(switch.losses()) == len(gloo.losses()) == 11
    assert train_run.max_loss_gap(switch, gloo) < train_run.LOSS_TOLERANCE
    assert switch.epoch_rows()[0]["test_accuracy"] > 0.8
    assert switch.done[0]["stats"]["results"] > 0
    assert jobs_after == []


def test_fsdp_with_reduce_scatters_in_the_network_follows_gloo():
    """``make run RUN_ARGS="--schedule fsdp --scatter network"``'s pieces: FSDP's
    reduce-scatters as SCATTERs (wire version 3) in scatter rounds on the switch, and
    with the job on the PBox through the switch to it; each rank receives only its own
    shard's results and DONEs for the others'; its all-gathers in gather rounds (each rank
    sends its own shard and joins, and gets the others' shards and DONEs for its own); the
    two paths bit-identical, Gloo's losses
    within the driver's tolerance, the same weights on every rank."""
    results, problems, jobs_after = _train_one_epoch(
        ["switch", "pbox", "gloo"], ["--schedule", "fsdp", "--scatter", "network"],
        "e2e-scatter")
    gloo = results["gloo"]
    assert gloo.ok, gloo.problems
    assert not problems  # includes the switch and PBox paths' bit identity
    for name in ("switch", "pbox"):
        ours = results[name]
        assert ours.ok, ours.problems
        assert ours.where() == name and ours.scatter == "network"
        assert len(ours.losses()) == len(gloo.losses()) == 11
        assert train_run.max_loss_gap(ours, gloo) < train_run.LOSS_TOLERANCE
        stats = ours.done[0]["stats"]
        assert stats["scatter_in_network"] and stats["dones"] > 0, stats
        # and the parameters' all-gathers in gather rounds: header-only joins went out
        assert stats["gather_in_network"] and stats["joins"] > 0, stats
    assert jobs_after == []


def _train_one_epoch(paths: list[str], options: list[str], name: str):
    """One epoch of ``make run``'s training on each of ``paths`` on one rack: the
    results by path, ``train_run.compare``'s problems, and the jobs left afterwards."""
    args = run.parse_args(["--epochs", "1", "--paths", ",".join(paths), "--no-pcap",
                           *options, "--grpc-port", str(free_port()),
                           "--controller-port", str(free_port())])
    with Rack(run.rack_config(args, run_name=name)) as rack:
        run.start_services(rack, args)
        results = {path: train_run.run_path(rack, train_run.PATHS[path], i, args)
                   for i, path in enumerate(paths)}
        problems = train_run.compare(results)
        client = JobClient(rack.controller_address, timeout=10.0)
        try:
            jobs_after = client.call("ListJobs")["jobs"]
        finally:
            client.close()
    return results, problems, jobs_after
