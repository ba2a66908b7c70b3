"""Controller events are all or nothing through the registry's undo log (no copies):
a failed event leaves the very same registry object as it was, so barrier waiters
(keyed by job id) are never orphaned."""

from __future__ import annotations

import json
import threading
import time

import grpc
import pytest

from p4hub.controller import api
from p4hub.controller.core import topology
from p4hub.controller.core.credentials import LOCAL
from p4hub.controller.core.job import JobError
from p4hub.controller.core.jobs import JobRegistry
from p4hub.controller.driver import Controller, ControllerError
from tests.unit.test_controller_driver import (  # noqa: F401 (fixtures)
    FlakyClient,
    in_line,
    pipeline,
    switch,
)
from tests.unit.test_controller_jobs import RACK


def state(reg: JobRegistry):
    """Everything an event may change, dict order included."""
    jobs = [(job_id, job.name, job.slots, job.epoch, job.barrier_generation,
             sorted(job.barrier_waiting), [(r, w.ip, w.port, w.last_seen) for r, w in job.workers.items()])
            for job_id, job in reg.jobs.items()]
    pools = {name: (pool.free_ranges(), pool.owners())
             for name, pool in [*reg.switch_pools.items(), *reg.pbox_pools.items()]}
    return jobs, pools, reg._next_epoch, reg._last_job_id, list(reg.ended.items())


@pytest.fixture
def reg():
    rack = dict(RACK, pboxes={"pb1": {**RACK["pboxes"]["pb1"], "slots": 64}})
    reg = JobRegistry(topology.from_dict(rack), epoch_seed=100)
    for rank in range(3):
        reg.join("a", 3, rank, (f"10.0.0.{rank + 1}", 4000 + rank), now=0.0)
    reg.join("p", 1, 0, ("10.0.0.5", 5000), now=0.0, placement="pbox")
    reg.join("b", 2, 0, ("10.0.0.4", 4000), now=0.0)
    reg.barrier(1, 2, now=0.0)
    return reg


@pytest.mark.parametrize("event", [
    lambda reg: reg.join("c", 2, 0, ("10.0.0.6", 4000), now=1.0),  # creates a job (on the PBox)
    lambda reg: reg.join("b", 2, 1, ("10.0.0.6", 4001), now=1.0),  # adds a worker
    lambda reg: reg.join("a", 3, 1, ("10.0.0.2", 4001), now=5.0),  # a retry: only last_seen
    lambda reg: reg.leave(1, 2),  # a barrier waiter leaves; rank 2 is not the last worker
    lambda reg: reg.leave(3, 0),  # the last worker leaves: the job ends
    lambda reg: reg.kill(1),  # the first job: its place in the dicts matters
    lambda reg: reg.kill(2),  # a PBox job: PBox slots freed
    lambda reg: reg.expire(100.0),  # everything
], ids=["create", "add-worker", "retry", "leave", "leave-last", "kill", "kill-pbox", "expire"])
def test_rollback_puts_the_registry_back_exactly(reg, event):
    before = state(reg)
    reg.begin()
    event(reg)
    assert state(reg) != before
    reg.rollback()
    assert state(reg) == before
    reg.begin()  # and the undone registry still works, and commits
    event(reg)
    after = state(reg)
    reg.commit()
    assert state(reg) == after


def test_a_refused_event_changes_nothing(reg):
    reg.jobs[3].name = None  # as after a rebuild: the next join by name adopts it ...
    before = state(reg)
    reg.begin()
    with pytest.raises(JobError, match="world size 2, not 3"):
        reg.join("b", 3, 1, ("10.0.0.6", 4001), now=1.0)  # ... but this one is refused
    reg.rollback()
    assert state(reg) == before and reg.jobs[3].name is None


def test_events_do_not_nest(reg):
    reg.begin()
    with pytest.raises(RuntimeError, match="already in progress"):
        reg.begin()
    reg.commit()


def flaky_controller(topo, pipeline_config) -> tuple[Controller, list[FlakyClient]]:
    """A started controller whose P4Runtime clients the test can make fail."""
    clients: list[FlakyClient] = []

    def factory(conf):
        clients.append(FlakyClient(conf.grpc_addr, conf.device_id, election_id=(0, 100)))
        return clients[-1]

    ctl = Controller(topo, pipeline_config, client_factory=factory)
    ctl.start(now=0.0)
    return ctl, clients


def test_a_failed_write_keeps_the_registry_object(switch, pipeline):  # noqa: F811
    _, _, topo = switch
    ctl, clients = flaky_controller(topo, pipeline)
    try:
        registry = ctl.registry
        a = ctl.join("a", 2, 0, ("10.0.0.1", 4001), now=0.0)
        before = state(registry)
        for event in (lambda: ctl.join("a", 2, 1, ("10.0.0.2", 4002), now=0.0),
                      lambda: ctl.kill(a.job_id), lambda: ctl.expire(1000.0)):
            clients[0].keep = 1
            with pytest.raises(ControllerError, match="injected"):
                event()
            assert ctl.registry is registry and state(registry) == before and in_line(ctl)
    finally:
        ctl.close()


def test_a_barrier_in_progress_survives_a_failed_event(switch, pipeline):  # noqa: F811
    """Rank 0 waits at job A's barrier; another job's join fails half way and is rolled
    back; rank 1 arrives: rank 0 must pass at once, not by its timeout (it used to wait
    on the registry object the rollback had replaced)."""
    _, _, topo = switch
    ctl, clients = flaky_controller(topo, pipeline)
    service = api.JobService(ctl, clock=lambda: 0.0)

    def call(method: str, **request):
        return service.handle(method, json.dumps(request).encode(), LOCAL)

    try:
        job = call("JoinJob", name="a", world_size=2, rank=0, address="10.0.0.1:4001")["job_id"]
        call("JoinJob", name="a", world_size=2, rank=1, address="10.0.0.2:4002")
        results: list = []

        def rank0() -> None:
            try:
                results.append(call("Barrier", job_id=job, rank=0, timeout=4))
            except api.ApiError as exc:
                results.append(exc.code)

        waiter = threading.Thread(target=rank0)
        waiter.start()
        deadline = time.monotonic() + 5
        while not ctl.registry.jobs[job].barrier_waiting and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ctl.registry.jobs[job].barrier_waiting == {0}
        clients[0].keep = 1  # job B's first write goes in half way, then fails
        with pytest.raises(api.ApiError) as info:
            call("JoinJob", name="b", world_size=1, rank=0, address="10.0.0.3:4003")
        assert info.value.code == grpc.StatusCode.UNAVAILABLE
        started = time.monotonic()
        assert call("Barrier", job_id=job, rank=1, timeout=4) == {"generation": 0}
        waiter.join(timeout=2)
        assert results == [{"generation": 0}]
        assert time.monotonic() - started < 2
    finally:
        ctl.close()
        waiter.join()
