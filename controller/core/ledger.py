"""The job registry's state and its undo log: the one place that changes it.

Events are all or nothing without copying the registry: between ``begin()`` and
``commit()`` every change an event makes goes through a method here (``assign``,
``add_job``, ``allocate``, ...) that records its inverse in an undo log, and
``rollback()`` replays the log backwards, so the registry (the very same object,
which barrier waiters look at) is back where it was. An event costs what it
changes, not the size of the registry.

The concern modules (membership, rack_placement, elastic_moves, fabric_placement,
faults) are functions over a ``Ledger``; ``JobRegistry`` (controller/core/jobs.py) is
a ``Ledger`` whose methods delegate to them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from p4hub.controller.core import program as p
from p4hub.controller.core.job import (
    ON_PBOX,
    Job,
    JobEnd,
    JobError,
    Move,
    Part,
    UnknownJobError,
    Worker,
    valid_epoch,
)
from p4hub.controller.core.slots import SlotPool, SlotRange
from p4hub.controller.core.topology import Topology

ENDED_KEPT = 256  # ended jobs remembered for ShowJob, oldest forgotten first
MOVES_KEPT = 16  # a job's latest moves, for ShowJob


class Ledger:
    """All jobs of all racks, their slot pools and the undo log. ``epoch_seed`` makes
    slot epochs unique across restarts (pass something like the time in milliseconds;
    tests pass a constant)."""

    def __init__(self, topo: Topology, epoch_seed: int = 1) -> None:
        self.topo = topo
        self.timeout = topo.controller.worker_timeout
        self.switch_pools = {name: SlotPool(sw.slots) for name, sw in topo.switches.items()}
        self.pbox_pools = _rack_pbox_pools(topo)  # PBox -> its rack's shared pool
        self.jobs: dict[int, Job] = {}
        self.ended: dict[int, JobEnd] = {}  # job id -> its last end, oldest first
        self._next_epoch = valid_epoch(epoch_seed)
        self._last_job_id = 0
        self._undo: list[Callable[[], object]] | None = None  # recording when not None
        # switches the driver cannot reach now (controller/driver.py check_switches): a
        # new job over racks is not rooted at such a spine
        self.unreachable: set[str] = set()

    # -- all-or-nothing events -----------------------------------------------------

    def begin(self) -> None:
        """Start an event: from now on every change can be undone by ``rollback``."""
        if self._undo is not None:
            raise RuntimeError("an event is already in progress")
        self._undo = []

    def commit(self) -> None:
        """Keep the event's changes; stop recording."""
        self._undo = None

    def rollback(self) -> None:
        """Undo every change since ``begin`` (latest first); stop recording."""
        undo, self._undo = self._undo or [], None
        while undo:
            undo.pop()()

    # -- undo-logged changes --------------------------------------------------------

    def record(self, inverse: Callable[[], object]) -> None:
        if self._undo is not None:
            self._undo.append(inverse)

    def assign(self, obj: Any, name: str, value: Any) -> None:
        old = getattr(obj, name)
        setattr(obj, name, value)
        self.record(lambda: setattr(obj, name, old))

    def add_job(self, job: Job) -> None:
        self.jobs[job.job_id] = job
        self.record(lambda: self.jobs.pop(job.job_id))

    def pop_job(self, job_id: int) -> Job | None:
        if job_id not in self.jobs:
            return None
        order = list(self.jobs) if self._undo is not None else []
        job = self.jobs.pop(job_id)
        self.record(lambda: _put_back(self.jobs, job_id, job, order))
        return job

    def record_end(self, end: JobEnd) -> None:
        """Remember ``end`` under its job id (the latest end of an id wins), forgetting
        the oldest beyond ENDED_KEPT; undone as a whole."""
        before = dict(self.ended) if self._undo is not None else {}
        self.ended.pop(end.job_id, None)
        self.ended[end.job_id] = end
        while len(self.ended) > ENDED_KEPT:
            del self.ended[next(iter(self.ended))]
        self.record(lambda: _replace(self.ended, before))

    def add_worker(self, job: Job, worker: Worker) -> None:
        job.workers[worker.rank] = worker
        self.record(lambda: job.workers.pop(worker.rank))

    def del_worker(self, job: Job, rank: int) -> None:
        order = list(job.workers) if self._undo is not None else []
        worker = job.workers.pop(rank)
        self.record(lambda: _put_back(job.workers, rank, worker, order))
        if rank in job.barrier_waiting:
            job.barrier_waiting.discard(rank)
            self.record(lambda: job.barrier_waiting.add(rank))

    def allocate(self, pool: SlotPool, owner: Hashable, count: int) -> SlotRange | None:
        got = pool.allocate(owner, count)
        if got is not None:
            self.record(lambda: pool.free(owner))
        return got

    def reserve(self, pool: SlotPool, owner: Hashable, base: int, count: int) -> None:
        pool.reserve(owner, base, count)
        self.record(lambda: pool.free(owner))

    def free(self, pool: SlotPool, owner: Hashable) -> None:
        got = pool.free(owner)
        self.record(lambda: pool.reserve(owner, got.base, got.count))

    # -- queries and shared changes --------------------------------------------------

    def job(self, job_id: int) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            end = self.ended.get(job_id)
            raise UnknownJobError(f"no job {job_id}" + (f" (it ended: {end.reason})" if end else ""))
        return job

    def job_by_name(self, name: str) -> Job | None:
        tag = p.name_tag(name)
        for job in self.jobs.values():
            if job.tag == tag and job.name in (name, None):
                return job
        return None

    def renew_epoch(self, job: Job, now: float | None, reason: str) -> None:
        """The aggregator lost the job's rounds (it restarted): a new epoch tells the
        agents to resynchronise; the switch treats the job's cells as fresh."""
        self.assign(job, "epoch", self.take_epoch())
        self.note_move(job, now, reason)

    def set_parts(self, job: Job, parts: tuple[Part, ...]) -> None:
        self.assign(job, "parts", parts)
        if job.where == ON_PBOX and parts:
            self.assign(job, "pbox", parts[0].pbox)
            self.assign(job, "slots", parts[0].slots)

    def note_move(self, job: Job, now: float | None, reason: str) -> None:
        moves = [*job.moves, Move(now, job.epoch, job.where, job.slots.base, reason)]
        self.assign(job, "moves", moves[-MOVES_KEPT:])

    def worker(self, job_id: int, rank: int) -> Worker:
        worker = self.job(job_id).workers.get(rank)
        if worker is None:
            raise JobError(f"job {job_id} has no rank {rank}")
        return worker

    def free_job_id(self) -> int:
        """The next free id after the last one handed out (round robin), so an id is
        reused as late as possible: stragglers of an ended job then find no job."""
        for step in range(p.MAX_JOBS - 1):
            job_id = (self._last_job_id + step) % (p.MAX_JOBS - 1) + 1
            if job_id not in self.jobs:
                self.assign(self, "_last_job_id", job_id)
                return job_id
        raise JobError(f"all {p.MAX_JOBS - 1} job ids are in use")

    def take_epoch(self) -> int:
        epoch = self._next_epoch
        self.assign(self, "_next_epoch", valid_epoch(epoch + 1))
        return epoch

    def free_tag(self, name: str) -> int:
        tag = p.name_tag(name)
        if any(job.tag == tag for job in self.jobs.values()):
            raise JobError(f"job name {name!r} collides with a running job's name tag; rename it")
        return tag


def _rack_pbox_pools(topo: Topology) -> dict[str, SlotPool]:
    """One slot pool per rack, shared by its PBoxes (as big as the smallest of them):
    a job's PBox ranges then never share a slot number, so a result's (flag, slot)
    names its route (hosts/routes.py)."""
    pools: dict[str, SlotPool] = {}
    for switch in topo.switches:
        pboxes = topo.pboxes_of(switch)
        if pboxes:
            pool = SlotPool(min(pb.slots for pb in pboxes))
            pools.update((pb.name, pool) for pb in pboxes)
    return pools


def _put_back(items: dict, key: Hashable, value: object, order: list) -> None:
    """Undo a removal from a dict: the item goes back where it was in ``order``."""
    items[key] = value
    if list(items) != order:
        restored = {k: items[k] for k in order}
        items.clear()
        items.update(restored)


def _replace(items: dict, content: dict) -> None:
    """Make ``items`` (the same object) hold exactly ``content``, in its order."""
    items.clear()
    items.update(content)
