"""``make run``'s precision path (experiments/train_run.py ``PATHS["precision"]``): the
p4hub backend with the precision option. Driven with the worker launcher replaced by a
fake that reports lines (no Mininet); the Mininet run is tests/e2e/test_train_rack.py."""

from __future__ import annotations

import argparse
import types
from collections.abc import Callable

import pytest

from p4hub.experiments import run, train_run
from p4hub.experiments.launch import WorkerRun
from p4hub.hosts.pytorch.config import BackendConfig


def args_for(paths: str, *extra: str) -> argparse.Namespace:
    return run.parse_args(["--paths", paths, "--epochs", "1", *extra])


def fake_launcher(where: str, digest: str, stats: dict,
                  envs: dict[int, dict]) -> Callable[..., None]:
    """A run_ranks whose two ranks train one epoch on ``where`` and end with ``digest``."""

    def run_ranks(_rack: object, _command: Callable[[int], list[str]], _timeout: float,
                  on_line: Callable[[int, dict], None], result_run: WorkerRun, tag: str = "",
                  env: Callable[[int], dict] | None = None) -> None:
        for rank in (0, 1):
            envs[rank] = env(rank) if env is not None else {}
            on_line(rank, {"event": "step", "epoch": 0, "step": 0, "rank": rank,
                           "loss": 1.0, "seconds": 0.1})
        for rank in (0, 1):
            on_line(rank, {"event": "epoch", "epoch": 0, "rank": rank, "train_loss": 1.0,
                           "test_accuracy": 0.9, "test_loss": 0.3, "seconds_per_step": 0.1,
                           "param_digest": digest})
        for rank in (0, 1):
            on_line(rank, {"event": "done", "rank": rank, "steps": 1, "param_digest": digest,
                           "where": where, "stats": {"where": where, **stats}})
        result_run.returncodes.update({0: 0, 1: 0})

    return run_ranks


RACK = types.SimpleNamespace(controller_address="10.99.0.254:50060")


def train(monkeypatch: pytest.MonkeyPatch, name: str, args: argparse.Namespace, where: str,
          digest: str = "d", stats: dict | None = None,
          envs: dict[int, dict] | None = None) -> train_run.TrainResult:
    args.workers = 2
    launcher = fake_launcher(where, digest, stats or {}, envs if envs is not None else {})
    monkeypatch.setattr(train_run, "run_ranks", launcher)
    return train_run.run_path(RACK, train_run.PATHS[name], 0, args)  # type: ignore[arg-type]


def test_the_precision_path_asks_its_ranks_for_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    envs: dict[int, dict] = {}
    args = args_for("switch,precision,gloo", "--precision", "1e-4")
    train(monkeypatch, "precision", args, "switch", envs=envs)
    assert {rank: env["P4HUB_PRECISION"] for rank, env in envs.items()} == {0: "0.0001",
                                                                           1: "0.0001"}
    # the backend reads it back as the same bound, with the automatic placement
    config = BackendConfig.from_env(envs[0])
    assert config.precision == 1e-4 and config.placement == "auto"
    envs.clear()
    train(monkeypatch, "switch", args, "switch", envs=envs)
    assert all("P4HUB_PRECISION" not in env for env in envs.values())


@pytest.mark.parametrize("bound", ["0", "1", "-1e-3", "2"])
def test_a_bound_outside_0_1_is_refused(bound: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        args_for("precision", f"--precision={bound}")
    assert "--precision must be strictly between 0 and 1" in capsys.readouterr().err


def test_the_precision_path_must_aggregate_on_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    args = args_for("precision")
    assert train(monkeypatch, "precision", args, "switch").ok
    on_pbox = train(monkeypatch, "precision", args, "pbox")
    assert on_pbox.problems == ["aggregated on pbox, expected switch"]
    # over racks a precision job goes to a PBox (a tree cannot carry float blocks)
    fabric = args_for("precision", "--topo", "leafspine")
    assert train(monkeypatch, "precision", fabric, "pbox").ok


def test_only_the_exact_paths_must_be_bit_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    args = args_for("switch,pbox,precision")
    switch = train(monkeypatch, "switch", args, "switch", digest="a")
    precision = train(monkeypatch, "precision", args, "switch", digest="b")
    assert train_run.compare({"switch": switch, "precision": precision}) == []
    assert switch.ok and precision.ok
    pbox = train(monkeypatch, "pbox", args, "pbox", digest="c")
    assert train_run.compare({"switch": switch, "pbox": pbox}) == [
        "pbox and switch paths are not bit-identical"]


def test_scatter_in_the_network_on_the_switch_and_pbox_paths_which_must_agree(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``--scatter network``: the switch and PBox paths' ranks get P4HUB_SCATTER=network
    (both run scatter rounds), the precision path's do not (its float blocks are not laid
    out by shard); the two network paths must be bit-identical to each other."""
    args = args_for("switch,pbox,precision", "--schedule", "fsdp", "--scatter", "network")
    results = {}
    for name, where in (("switch", "switch"), ("pbox", "pbox"), ("precision", "switch")):
        envs: dict[int, dict] = {}
        results[name] = train(monkeypatch, name, args, where, digest="a", envs=envs)
        told = {env.get("P4HUB_SCATTER") for env in envs.values()}
        assert told == ({None} if name == "precision" else {"network"}), name
        assert results[name].scatter == ("allreduce" if name == "precision" else "network")
    assert train_run.compare(results) == []
    results["pbox"] = train(monkeypatch, "pbox", args, "pbox", digest="c")
    assert train_run.compare(results) == ["pbox and switch paths are not bit-identical"]


def test_the_summary_counts_the_float_blocks(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    args = args_for("precision", "--precision", "1e-3")
    result = train(monkeypatch, "precision", args, "switch",
                   stats={"float_blocks": 3, "sent": 400})
    assert result.float_share() == (3, 400)
    train_run.summarize({"precision": result}, args)
    assert "float32 blocks (rank 0): 3 of 400 packets sent (0.75%), bound 0.001" in \
        capsys.readouterr().out
    assert train(monkeypatch, "switch", args, "switch").float_share() is None
