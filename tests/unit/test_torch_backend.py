"""The "p4hub" torch.distributed backend and DDP hook, with real processes on loopback
against a real PBox (``p4hub-pbox``), and against a stand-in controller JobService.

Each rank is ``python -m tests.unit.torch_ranks SCENARIO ...`` (see that module); the
checks are made inside the ranks and reported as JSON lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from p4hub.controller import api
from p4hub.controller.core.credentials import Caller

ROOT = Path(__file__).resolve().parents[2]
# job id -> (world size, slot base) configured on the PBox; slot ranges do not overlap, and
# every test group has its own job (a PBox cell keeps its round position: a second group
# starting again at position 0 on the same cells would be stale)
JOBS = {1: (3, 0), 2: (2, 64), 3: (3, 128), 4: (2, 192), 5: (4, 256), 6: (2, 320), 7: (2, 384),
        8: (2, 448), 9: (2, 512), 10: (2, 576), 11: (2, 640)}
SLOTS = 64


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def pbox():
    with pbox_serving([f"--job={j}:{w}:{base}:{SLOTS}" for j, (w, base) in JOBS.items()]) as at:
        yield at


@contextlib.contextmanager
def pbox_serving(jobs: list[str]) -> Iterator[str]:
    """A p4hub-pbox on 127.0.0.1 with ``jobs`` configured; yields its "ip:port"."""
    proc = subprocess.Popen([sys.executable, "-m", "p4hub.hosts.pbox.cli", "--listen", "127.0.0.1:0",
                             "--workers", "1", *jobs], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None  # started with stdout=PIPE
    try:
        ready = json.loads(proc.stdout.readline())
        assert ready["event"] == "ready", ready
        yield f"127.0.0.1:{ready['listen'][1]}"
    finally:
        proc.terminate()
        proc.wait(10)


def env_for(job: int | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("P4HUB_")}
    if job is not None:
        env.update(P4HUB_JOB_ID=str(job), P4HUB_SLOT_BASE=str(JOBS[job][1]),
                   P4HUB_SLOT_COUNT=str(SLOTS))
    env["P4HUB_INSECURE"] = "1"  # the fake controller serves plaintext
    env.update(extra)
    env["PYTHONPATH"] = str(ROOT)
    return env


def run_ranks(scenario: str, world: int, env: dict[str, str], timeout: float = 90.0,
              module: str = "tests.unit.torch_ranks") -> list[list[dict]]:
    """Start ``world`` ranks of ``module``, wait for all, return each rank's JSON lines."""
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-m", module, scenario,
                               str(rank), str(world), str(port)], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank in range(world)]
    return collect(procs, timeout)


def collect(procs: list[subprocess.Popen], timeout: float) -> list[list[dict]]:
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            outputs.append(lines)
            if not lines:
                raise AssertionError(f"a rank printed nothing; stderr:\n{err[-3000:]}")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return outputs


def assert_checks_pass(outputs: list[list[dict]], expected_checks: int) -> None:
    for rank, lines in enumerate(outputs):
        checks = [line for line in lines if "check" in line]
        failed = [c for c in checks if not c["ok"]]
        assert not failed, f"rank {rank}: {failed}"
        assert len(checks) == expected_checks, (rank, [c["check"] for c in checks], lines[-1])
        assert lines[-1] == {"event": "done"}, lines[-1]
    digests = [{d["digest"]: d["value"] for d in lines if "digest" in d} for lines in outputs]
    assert all(d == digests[0] for d in digests) and digests[0], digests


def test_collectives_dtypes_async_and_refusals(pbox):
    outputs = run_ranks("collectives", 3, env_for(1, P4HUB_AGGREGATOR=pbox))
    assert_checks_pass(outputs, expected_checks=21)


def test_p4hub_group_beside_gloo_and_the_ddp_hook_matches_gloo(pbox):
    outputs = run_ranks("mixed", 2, env_for(2, P4HUB_AGGREGATOR=pbox))
    assert_checks_pass(outputs, expected_checks=2)
    hook = next(c for c in outputs[0] if c.get("check") == "DDP hook matches Gloo's average")
    assert hook["worst_relative"] > 0  # quantized, so not bit-identical to Gloo's float sum


def test_overlapped_p3_steps_equal_the_unscheduled_loop(pbox):
    """Per-parameter all-reduce in priority classes, optimizer steps inside the next
    forward pass: the same parameters as all-reduce-then-step, on every rank."""
    outputs = run_ranks("overlap", 2, env_for(7, P4HUB_AGGREGATOR=pbox, P4HUB_CLASSES="8"))
    assert_checks_pass(outputs, 3)


def test_a_dead_rank_is_named_and_fails_the_others_fast(pbox):
    env = env_for(3, P4HUB_AGGREGATOR=pbox, P4HUB_DEAD_AFTER="3", TEST_PG_TIMEOUT="60")
    outputs = run_ranks("dead", 3, env)
    assert outputs[2][-1] == {"event": "dying"}
    for rank in (0, 1):
        failed = outputs[rank][-1]
        assert failed["event"] == "failed", failed
        assert "rank 2 (127.0.0.1:" in failed["error"] and "heartbeat" in failed["error"], failed
        assert failed["seconds"] < 20, failed  # well inside the 60 s timeout


def test_a_rank_that_is_alive_but_behind_is_named_when_the_deadline_passes(pbox):
    env = env_for(4, P4HUB_AGGREGATOR=pbox, P4HUB_TIMEOUT="2", P4HUB_DEAD_AFTER="30")
    outputs = run_ranks("late", 2, env)
    failed = outputs[0][-1]
    assert failed["event"] == "failed", failed
    assert "rank 1 (127.0.0.1:" in failed["error"] and "alive but" in failed["error"], failed
    assert failed["seconds"] < 10, failed


def test_torchrun_with_four_processes_and_c10d_rendezvous(pbox):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4",
         "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--max-restarts", "0",
         "-m", "tests.unit.torch_ranks", "basic"],
        cwd=ROOT, env=env_for(5, P4HUB_AGGREGATOR=pbox), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    (lines,) = collect([proc], timeout=120)
    checks = [line for line in lines if "check" in line]
    assert len(checks) == 4 and all(c["ok"] for c in checks), lines
    assert sum(1 for line in lines if line.get("event") == "done") == 4
    assert proc.returncode == 0


class FakeJobService(api.RequestHandler):
    """The controller's JobService as the backend sees it: JoinJob places the job on
    the test's PBox; every call is recorded; job names starting "refuse" are refused."""

    def __init__(self, pbox: str) -> None:
        self.pbox = pbox
        self.calls: list[tuple[str, dict]] = []
        self.tokens: list[str | None] = []  # the job token each call presented
        self.lock = threading.Lock()
        self.beats: dict[int, int] = {}  # heartbeats per rank
        self.new_epoch_after: int | None = None  # beats; then Heartbeat answers epoch 9
        self.end_after: int | None = None  # beats; then the job has ended (NOT_FOUND)
        self.refuse_after: int | None = None  # beats; then the token is refused
        self.job = 6  # the PBox job JoinJob hands out (each test group needs its own)
        self.routes: list[dict] | None = None  # the job's map, when split over PBoxes

    def handle(self, method: str, body: bytes, caller: Caller) -> dict:
        request = json.loads(body)
        with self.lock:
            self.calls.append((method, request))
            self.tokens.append(caller.job_token)
            if caller.admin_token is not None:
                raise api.ApiError(grpc.StatusCode.INVALID_ARGUMENT, "an agent administers")
        if method == "JoinJob":
            if request["name"].startswith("refuse"):
                raise api.ApiError(grpc.StatusCode.INVALID_ARGUMENT,
                                   "world size 2 needs 2 free ports on s1")
            world, base = JOBS[self.job]
            reply = {"job_id": self.job, "world_size": world, "rank": request["rank"],
                     "aggregator": self.pbox, "slot_base": base, "slot_count": SLOTS, "lanes": 64,
                     "window": SLOTS, "where": "pbox", "epoch": 3}
            return reply if self.routes is None else {**reply, "routes": self.routes}
        if method == "Heartbeat":
            return self._beat(request["rank"])
        return {}

    def _beat(self, rank: int) -> dict:
        with self.lock:
            self.beats[rank] = n = self.beats.get(rank, 0) + 1
        if self.end_after is not None and n > self.end_after:
            raise api.ApiError(grpc.StatusCode.NOT_FOUND, f"no job {self.job} (it ended: rank 1 "
                               "(127.0.0.1:1) sent no heartbeat for 9.0 s)")
        if self.refuse_after is not None and n > self.refuse_after:
            raise api.ApiError(grpc.StatusCode.PERMISSION_DENIED, f"a heartbeat for job "
                               f"{self.job}: the job token presented does not grant it")
        moved = self.new_epoch_after is not None and n > self.new_epoch_after
        beat = {"epoch": 9 if moved else 3, "where": "pbox", "slot_base": JOBS[self.job][1],
                "slot_count": SLOTS}
        return beat if self.routes is None else {**beat, "routes": self.routes}


@pytest.fixture
def controller(pbox):
    service = FakeJobService(pbox)
    server, port = api.serve(service, "127.0.0.1:0")
    yield service, f"127.0.0.1:{port}"
    server.stop(grace=None)


def test_joining_through_the_controller_heartbeats_and_leaves(controller):
    service, address = controller
    outputs = run_ranks("basic", 2, env_for(P4HUB_CONTROLLER=address))
    assert_checks_pass_basic(outputs)
    joins = [r for m, r in service.calls if m == "JoinJob"]
    assert sorted(j["rank"] for j in joins) == [0, 1]
    assert len({j["name"] for j in joins}) == 1 and len({j["address"] for j in joins}) == 2
    assert all(j["address"].startswith("127.0.0.1:") for j in joins)
    leaves = sorted(r["rank"] for m, r in service.calls if m == "LeaveJob")
    assert leaves == [0, 1]
    # rank 0's token reached rank 1 through the store; every call presented it
    assert len(set(service.tokens)) == 1 and len(service.tokens[0] or "") == 43
    stats = next(line["stats"] for line in outputs[0] if "stats" in line)
    assert stats["where"] == "pbox" and stats["job_id"] == 6


def assert_checks_pass_basic(outputs: list[list[dict]]) -> None:
    for lines in outputs:
        assert [c["ok"] for c in lines if "check" in c] == [True], lines
        assert lines[-1] == {"event": "done"}


def test_a_join_the_controller_refuses_says_why(controller):
    _, address = controller
    outputs = run_ranks("basic", 2, env_for(P4HUB_CONTROLLER=address, P4HUB_JOB_NAME="refuse-1"))
    for lines in outputs:
        assert lines[-1]["event"] == "init failed", lines
        assert "refused" in lines[-1]["error"] and "needs 2 free ports" in lines[-1]["error"]


def test_a_bad_setting_is_named_before_anything_starts():
    outputs = run_ranks("basic", 1, env_for(P4HUB_AGGREGATOR="no-port-here"))
    assert outputs[0][-1]["event"] == "init failed"
    assert "P4HUB_AGGREGATOR='no-port-here'" in outputs[0][-1]["error"]


def test_a_new_epoch_in_the_heartbeat_resyncs_and_the_sums_stay_exact(controller):
    """Each rank's heartbeat reply changes the job's epoch at its own moment (as after a
    switch restart): the agent resynchronises (here the PBox kept its state, so the
    resends are duplicates) and every sum stays exact."""
    service, address = controller
    service.new_epoch_after, service.job = 1, 8
    outputs = run_ranks("follow", 2, env_for(P4HUB_CONTROLLER=address))
    for lines in outputs:
        assert [c["ok"] for c in lines if "check" in c] == [True], lines
        stats = next(line["stats"] for line in lines if "stats" in line)
        assert stats["resyncs"] == 1, stats


def test_a_job_the_controller_ended_fails_the_group_with_its_reason(controller):
    service, address = controller
    service.end_after, service.job = 1, 9
    outputs = run_ranks("follow", 2, env_for(P4HUB_CONTROLLER=address))
    for lines in outputs:
        failed = [line["failed"] for line in lines if "failed" in line]
        assert failed and "the controller ended job 9" in failed[0], lines
        assert "rank 1 (127.0.0.1:1) sent no heartbeat" in failed[0]


def test_a_refused_token_fails_the_group_at_once_and_says_so(controller):
    """A controller that stops taking the job's token (restarted without its state
    directory): retrying would only let the job expire, so the group fails, naming it."""
    service, address = controller
    service.refuse_after, service.job = 1, 11
    outputs = run_ranks("follow", 2, env_for(P4HUB_CONTROLLER=address))
    for lines in outputs:
        failed = [line["failed"] for line in lines if "failed" in line]
        assert failed and "the controller refused job 11's token" in failed[0], lines


def test_a_job_split_over_two_pboxes_reduces_exactly_and_reports_each_route(controller):
    """The JoinJob reply maps the window over two PBoxes (32 slots on each, the second
    flagged): the backend's agent sends to both, every sum is exact, and its heartbeats
    report results per route."""
    service, address = controller
    service.job = 10
    with pbox_serving(["--job=10:2:2000:32"]) as second:
        service.routes = [
            {"aggregator": service.pbox, "slot_base": JOBS[10][1], "count": 32, "fallback": True},
            {"aggregator": second, "slot_base": 2000, "count": 32, "fallback": True},
        ]
        outputs = run_ranks("follow", 2, env_for(P4HUB_CONTROLLER=address))  # ~4 s of sums
    for lines in outputs:
        assert [c["ok"] for c in lines if "check" in c] == [True], lines
    beats = [r for m, r in service.calls if m == "Heartbeat" and r.get("routes")]
    assert beats and all(len(r["routes"]) == 2 for r in beats)
    assert max(r["routes"][1][0] for r in beats) > 0  # results came back from the second
