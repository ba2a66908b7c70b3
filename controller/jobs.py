"""The job registry: joins, leaves, barriers and liveness, sans-I/O.

Like faucet's valves, every method takes an event (and ``now`` where time
matters) and returns the list of updates (controller/updates.py) that bring the
switches and PBoxes in line; nothing here touches a socket, a clock or gRPC.

A job lives on one rack (the switch its first worker hangs off). It aggregates
on the switch when the switch's slot pool has ``job_slots`` contiguous free
slots, otherwise on the rack's PBox (same wire protocol, same aggregator
address, so agents never notice). Per job the switch holds::

    jobs        job id -> job_on_switch(n, slot_base, slot_count, lane_code, group, name_tag,
                                        epoch)
                        | job_on_pbox(n, slot_base, slot_count, lane_code, name_tag)
    members     (job, rank, worker IPv4, worker UDP port, switch port) -> is_member
    result_dst  egress_rid = job*32 + rank -> set_result_dst(mac, ip, udp_port)
    multicast group <job id>: (worker port, rid) per worker   (switch jobs only)

That is everything needed to rebuild the registry after a restart
(``rebuild_from_entries``); only liveness deadlines, barrier progress and the
record of ended jobs are lost, and restart fresh.

Liveness: every member heartbeats over the job API (``heartbeat``; joins and
barriers count too). A member silent for ``worker_timeout`` ends its whole job
(``expire``): the survivors cannot complete a round without it, so keeping the job
would only hold its slots. The end is recorded (``JobEnd``: which rank, last heard
when) so that ShowJob says why the job is gone, and a restarted worker rejoining by
name creates a new job instance on the freed slots.

Events are all or nothing without copying the registry: between ``begin()`` and
``commit()`` every change an event makes records its inverse in an undo log, and
``rollback()`` replays the log backwards, so the registry (the very same object,
which barrier waiters look at) is back where it was. An event costs what it
changes, not the size of the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from controller import program as p
from controller import rack
from controller.errors import NotFoundError, RefusedError, SwitchStateError
from controller.slots import SlotError, SlotPool, SlotRange
from controller.topology import Topology, format_ipv4, parse_ipv4
from controller.traffic import Counters, TrafficMeter, job_rates
from controller.updates import (
    DELETE,
    INSERT,
    MODIFY,
    Entry,
    FieldMatch,
    GroupWrite,
    PBoxJobWrite,
    TableWrite,
    Update,
)

ON_SWITCH = "switch"
ON_PBOX = "pbox"
PLACE_AUTO = "auto"  # JoinJob placement: switch slots if free, else the PBox
PLACE_PBOX = "pbox"  # JoinJob placement: always the PBox
PLACEMENTS = (PLACE_AUTO, PLACE_PBOX)


class JobError(RefusedError):
    """A request the registry refuses (bad arguments, a conflict, no room)."""


class UnknownJobError(NotFoundError, JobError):
    """The request names a job id the registry does not have (NOT_FOUND, by type)."""


@dataclass
class Worker:
    rank: int
    ip: int
    port: int
    mac: int
    switch_port: int
    last_seen: float
    traffic: TrafficMeter = field(default_factory=TrafficMeter)  # from its heartbeats


@dataclass(frozen=True)
class Move:
    """The job's aggregator state was lost or the job changed aggregator: its epoch
    became ``epoch`` and its agents resynchronise (hosts/session.py ``resync``)."""

    at: float | None  # controller clock
    epoch: int
    where: str  # ON_SWITCH | ON_PBOX after the move
    slot_base: int
    reason: str


@dataclass
class Job:
    job_id: int
    name: str | None  # None after a rebuild until some worker joins by name again
    tag: int
    world_size: int
    switch: str
    where: str  # ON_SWITCH | ON_PBOX
    slots: SlotRange
    epoch: int
    pbox: str | None
    lanes: int = p.K  # int32 lanes per packet, chosen by the join that created the job
    workers: dict[int, Worker] = field(default_factory=dict)
    moves: list[Move] = field(default_factory=list)  # aggregator changes, oldest first
    # how it was placed: PLACE_AUTO jobs on the PBox go to the switch once it has room
    # (a job rebuilt after a controller restart counts as PLACE_PBOX: it stays put)
    placement: str = PLACE_PBOX
    barrier_generation: int = 0
    barrier_waiting: set[int] = field(default_factory=set)

    @property
    def window(self) -> int:
        return self.slots.count

    def service(self) -> dict[str, float | None]:
        """Its service as its ranks' heartbeats report it (controller/traffic.py)."""
        return job_rates([w.traffic for w in self.workers.values()],
                         p.P4HUB_HEADER_BYTES + 4 * self.lanes)


@dataclass(frozen=True)
class JoinReply:
    job_id: int
    world_size: int
    rank: int
    aggregator_ip: str
    aggregator_port: int
    slot_base: int
    slot_count: int
    k: int
    window: int
    where: str
    epoch: int  # changes whenever the job's aggregator state is lost or it moves


# Why a job ended (JobEnd.cause).
END_KILLED = "killed"  # KillJob
END_LEFT = "left"  # its last worker left
END_SILENT = "silent"  # a member sent no heartbeat for worker_timeout seconds
END_LOST = "aggregator-lost"  # its aggregator died and no other one had room
ENDED_KEPT = 256  # ended jobs remembered for ShowJob, oldest forgotten first
MOVES_KEPT = 16  # a job's latest moves, for ShowJob


@dataclass(frozen=True)
class JobEnd:
    """How and when a job ended. Times are the controller's clock (monotonic s);
    ``None`` when the caller gave none (tests driving the registry directly)."""

    job_id: int
    name: str | None
    world_size: int
    switch: str
    where: str
    slots: SlotRange
    cause: str  # END_KILLED | END_LEFT | END_SILENT | END_LOST
    reason: str  # the cause in words, naming the rank for END_SILENT
    ended_at: float | None
    rank: int | None = None  # the silent rank (END_SILENT)
    last_seen: float | None = None  # when that rank was last heard from


class JobRegistry:
    """All jobs of all racks. ``epoch_seed`` makes slot epochs unique across restarts
    (pass something like the time in milliseconds; tests pass a constant)."""

    def __init__(self, topo: Topology, epoch_seed: int = 1) -> None:
        self.topo = topo
        self.timeout = topo.controller.worker_timeout
        self.switch_pools = {name: SlotPool(sw.slots) for name, sw in topo.switches.items()}
        self.pbox_pools = {name: SlotPool(pb.slots) for name, pb in topo.pboxes.items()}
        self.jobs: dict[int, Job] = {}
        self.ended: dict[int, JobEnd] = {}  # job id -> its last end, oldest first
        self._next_epoch = _valid_epoch(epoch_seed)
        self._last_job_id = 0
        self._undo: list[Callable[[], object]] | None = None  # recording when not None

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

    def _record(self, inverse: Callable[[], object]) -> None:
        if self._undo is not None:
            self._undo.append(inverse)

    def _set(self, obj: Any, name: str, value: Any) -> None:
        old = getattr(obj, name)
        setattr(obj, name, value)
        self._record(lambda: setattr(obj, name, old))

    def _add_job(self, job: Job) -> None:
        self.jobs[job.job_id] = job
        self._record(lambda: self.jobs.pop(job.job_id))

    def _pop_job(self, job_id: int) -> Job | None:
        if job_id not in self.jobs:
            return None
        order = list(self.jobs) if self._undo is not None else []
        job = self.jobs.pop(job_id)
        self._record(lambda: _put_back(self.jobs, job_id, job, order))
        return job

    def _record_end(self, end: JobEnd) -> None:
        """Remember ``end`` under its job id (the latest end of an id wins), forgetting
        the oldest beyond ENDED_KEPT; undone as a whole."""
        before = dict(self.ended) if self._undo is not None else {}
        self.ended.pop(end.job_id, None)
        self.ended[end.job_id] = end
        while len(self.ended) > ENDED_KEPT:
            del self.ended[next(iter(self.ended))]
        self._record(lambda: _replace(self.ended, before))

    def _add_worker(self, job: Job, worker: Worker) -> None:
        job.workers[worker.rank] = worker
        self._record(lambda: job.workers.pop(worker.rank))

    def _del_worker(self, job: Job, rank: int) -> None:
        order = list(job.workers) if self._undo is not None else []
        worker = job.workers.pop(rank)
        self._record(lambda: _put_back(job.workers, rank, worker, order))
        if rank in job.barrier_waiting:
            job.barrier_waiting.discard(rank)
            self._record(lambda: job.barrier_waiting.add(rank))

    def _allocate(self, pool: SlotPool, owner: Hashable, count: int) -> SlotRange | None:
        got = pool.allocate(owner, count)
        if got is not None:
            self._record(lambda: pool.free(owner))
        return got

    def _free(self, pool: SlotPool, owner: Hashable) -> None:
        got = pool.free(owner)
        self._record(lambda: pool.reserve(owner, got.base, got.count))

    # -- queries -----------------------------------------------------------------

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

    def reply(self, job: Job, rank: int) -> JoinReply:
        pbox = self.topo.pbox_of(job.switch)
        assert pbox is not None  # a job is only created on a rack with a PBox
        return JoinReply(
            job_id=job.job_id, world_size=job.world_size, rank=rank,
            aggregator_ip=format_ipv4(pbox.ip), aggregator_port=p.AGG_UDP_PORT,
            slot_base=job.slots.base, slot_count=job.slots.count, k=job.lanes,
            window=job.window, where=job.where, epoch=job.epoch,
        )

    # -- events ------------------------------------------------------------------

    def join(
        self, name: str, world_size: int, rank: int, address: tuple[str, int], now: float,
        placement: str = PLACE_AUTO, lanes: int = p.K,
    ) -> tuple[JoinReply, list[Update]]:
        """A worker joins job ``name``; creates the job on first join. Idempotent per
        (rank, address): a retried join gets the same reply and no updates.
        ``placement`` only matters to the join that creates the job: PLACE_AUTO takes
        switch slots when there are any (else the PBox, until ``promote`` finds room on
        the switch), PLACE_PBOX puts the job on the rack's PBox
        (to compare both paths on the same rack). ``lanes`` (64 or 256 int32 lanes per
        packet) is set by the join that creates the job; every later join must ask for
        the same."""
        if placement not in PLACEMENTS:
            raise JobError(f"placement must be one of {PLACEMENTS}, not {placement!r}")
        if lanes not in p.LANE_COUNTS:
            raise JobError(f"lanes must be one of {p.LANE_COUNTS}, not {lanes!r}")
        ip, port = _check_join(name, world_size, rank, address)
        host = self.topo.host_by_ip(ip)
        if host is None:
            raise JobError(f"{format_ipv4(ip)} is not a host of the topology")
        updates: list[Update] = []
        job = self.job_by_name(name)
        if job is None:
            job, updates = self._create(name, world_size, host.switch, placement, lanes)
        elif job.name is None:
            self._set(job, "name", name)  # adopted after a rebuild
        if job.world_size != world_size:
            raise JobError(f"job {name!r} has world size {job.world_size}, not {world_size}")
        if job.lanes != lanes:
            raise JobError(f"job {name!r} has {job.lanes} lanes per packet, not {lanes}")
        if job.switch != host.switch:
            raise JobError(f"job {name!r} runs on rack {job.switch}; {format_ipv4(ip)} is on "
                           f"{host.switch} (one rack per job)")
        known = job.workers.get(rank)
        if known is not None:
            if (known.ip, known.port) != (ip, port):
                raise JobError(f"rank {rank} of job {name!r} is already taken by "
                               f"{format_ipv4(known.ip)}:{known.port}")
            self._set(known, "last_seen", now)
            return self.reply(job, rank), updates
        worker = Worker(rank, ip, port, host.mac, host.port, now)
        self._add_worker(job, worker)
        updates += self._member_writes(job, worker, INSERT)
        if job.where == ON_SWITCH:
            op = INSERT if len(job.workers) == 1 else MODIFY
            updates.append(self._group_write(job, op))
        return self.reply(job, rank), updates

    def heartbeat(self, job_id: int, rank: int, now: float,
                  counters: Counters | None = None) -> None:
        """The rank is alive; ``counters``: its session's, for the service rates."""
        worker = self._worker(job_id, rank)
        worker.last_seen = now
        if counters is not None:
            worker.traffic.update(counters, now)

    def leave(self, job_id: int, rank: int, now: float | None = None) -> list[Update]:
        """A worker leaves; the job ends with its last worker."""
        job = self.job(job_id)
        worker = self._worker(job_id, rank)
        if len(job.workers) == 1:
            return self._end(job, now, END_LEFT, f"its last worker (rank {rank}) left")
        self._del_worker(job, rank)
        updates = self._member_writes(job, worker, DELETE)
        if job.where == ON_SWITCH:
            updates.append(self._group_write(job, MODIFY))
        return updates

    def kill(self, job_id: int, now: float | None = None,
             reason: str = "killed by an operator (KillJob)") -> list[Update]:
        """End a job: remove every entry, free its slots."""
        return self._end(self.job(job_id), now, END_KILLED, reason)

    def expire(self, now: float) -> list[Update]:
        """End every job that has a member not heard from for more than ``worker_timeout``
        seconds (the longest-silent member is the one named)."""
        updates: list[Update] = []
        for job in list(self.jobs.values()):
            silent = [w for w in job.workers.values() if now - w.last_seen > self.timeout]
            if not silent:
                continue
            dead = min(silent, key=lambda w: (w.last_seen, w.rank))
            reason = (f"rank {dead.rank} ({format_ipv4(dead.ip)}:{dead.port}) sent no heartbeat "
                      f"for {now - dead.last_seen:.1f} s (worker_timeout {self.timeout:g} s)")
            if len(silent) > 1:
                others = ", ".join(str(w.rank) for w in sorted(silent, key=lambda w: w.rank)
                                   if w is not dead)
                reason += f"; also silent: rank(s) {others}"
            updates += self._end(job, now, END_SILENT, reason, dead.rank, dead.last_seen)
        return updates

    # -- the job's aggregator: lost state, moves -------------------------------------

    def renew_epoch(self, job: Job, now: float | None, reason: str) -> None:
        """The aggregator lost the job's rounds (it restarted): a new epoch tells the
        agents to resynchronise; the switch treats the job's cells as fresh."""
        self._set(job, "epoch", self._take_epoch())
        self._note_move(job, now, reason)

    def move_to_switch(self, job_id: int, now: float | None, reason: str) -> list[Update]:
        """The job's PBox is gone: put the job on its rack's switch (same slot count,
        new epoch), or end it (END_LOST) when the switch has no room. The dead PBox is
        not written to."""
        job = self.job(job_id)
        if job.where == ON_SWITCH:
            return []
        got = self._allocate(self.switch_pools[job.switch], job.job_id, job.slots.count)
        if got is None:
            return self._end(job, now, END_LOST,
                             f"{reason}; switch {job.switch} has no {job.slots.count} free "
                             "slots to take the job over", tell_pbox=False)
        return self._onto_switch(job, got, now, f"{reason}; moved to switch {job.switch}")

    def promote(self, now: float | None) -> list[Update]:
        """Jobs that went to the PBox because the switch was full (PLACE_AUTO) move to
        the switch once it has room for them, oldest first (ATP's best effort: the
        switch aggregates whatever it can). The PBox drops the job."""
        updates: list[Update] = []
        for job in sorted(self.jobs.values(), key=lambda j: j.job_id):
            if job.where != ON_PBOX or job.placement != PLACE_AUTO or job.pbox is None:
                continue
            got = self._allocate(self.switch_pools[job.switch], job.job_id, job.slots.count)
            if got is None:
                continue
            pbox = job.pbox
            updates += self._onto_switch(job, got, now,
                                         f"switch {job.switch} has free slots again; moved "
                                         f"off PBox {pbox}")
            updates.append(PBoxJobWrite(pbox, DELETE, job.job_id))
        return updates

    def _onto_switch(self, job: Job, got: SlotRange, now: float | None,
                     reason: str) -> list[Update]:
        assert job.pbox is not None
        self._free(self.pbox_pools[job.pbox], job.job_id)
        self._set(job, "where", ON_SWITCH)
        self._set(job, "slots", got)
        self._set(job, "epoch", self._take_epoch())
        self._note_move(job, now, reason)
        updates: list[Update] = [TableWrite(job.switch, MODIFY, job_entry(job))]
        if job.workers:
            updates.append(self._group_write(job, INSERT))
        return updates

    def _note_move(self, job: Job, now: float | None, reason: str) -> None:
        moves = [*job.moves, Move(now, job.epoch, job.where, job.slots.base, reason)]
        self._set(job, "moves", moves[-MOVES_KEPT:])

    def _end(self, job: Job, now: float | None, cause: str, reason: str,
             rank: int | None = None, last_seen: float | None = None,
             tell_pbox: bool = True) -> list[Update]:
        """Remove every entry of ``job``, free its slots and record why it ended
        (``tell_pbox``: False when its PBox is unreachable)."""
        self._pop_job(job.job_id)
        self._record_end(JobEnd(job.job_id, job.name, job.world_size, job.switch, job.where,
                                job.slots, cause, reason, now, rank, last_seen))
        updates: list[Update] = [TableWrite(job.switch, DELETE, _job_key(job.job_id))]
        for worker in job.workers.values():
            updates += self._member_writes(job, worker, DELETE)
        if job.where == ON_SWITCH:
            self._free(self.switch_pools[job.switch], job.job_id)
            if job.workers:
                updates.append(GroupWrite(job.switch, DELETE, job.job_id))
        else:
            assert job.pbox is not None
            self._free(self.pbox_pools[job.pbox], job.job_id)
            if tell_pbox:
                updates.append(PBoxJobWrite(job.pbox, DELETE, job.job_id))
        return updates

    def barrier(self, job_id: int, rank: int, now: float) -> int:
        """Rank arrives at the job's barrier; returns the generation it waits on.
        The barrier is passed once ``barrier_passed(job_id, generation)``."""
        job = self.job(job_id)
        self._worker(job_id, rank).last_seen = now
        generation = job.barrier_generation
        job.barrier_waiting.add(rank)
        if len(job.barrier_waiting) == job.world_size:
            job.barrier_waiting.clear()
            job.barrier_generation += 1
        return generation

    def barrier_passed(self, job_id: int, generation: int) -> bool:
        return self.job(job_id).barrier_generation > generation

    # -- the state a switch should be in (for resynchronising it) ---------------------

    def expected_entries(self, switch: str) -> list[Entry]:
        """Every entry ``switch`` should hold: the rack's static ones and the jobs'."""
        entries = rack.rack_entries(self.topo, switch)
        for job in sorted(self.jobs.values(), key=lambda j: j.job_id):
            if job.switch != switch:
                continue
            entries.append(job_entry(job))
            for _, worker in sorted(job.workers.items()):
                entries.append(_member_entry(job.job_id, worker, INSERT))
                entries.append(_result_dst_entry(job.job_id, worker, INSERT))
        return entries

    def expected_groups(self, switch: str) -> dict[int, tuple[tuple[int, int], ...]]:
        """Multicast groups ``switch`` should hold: flood, and one per switch job."""
        groups = {p.FLOOD_GROUP: rack.flood_group(self.topo, switch).replicas}
        for job in self.jobs.values():
            if job.switch == switch and job.where == ON_SWITCH and job.workers:
                groups[job.job_id] = self._group_write(job, MODIFY).replicas
        return groups

    # -- internals ---------------------------------------------------------------

    def _worker(self, job_id: int, rank: int) -> Worker:
        worker = self.job(job_id).workers.get(rank)
        if worker is None:
            raise JobError(f"job {job_id} has no rank {rank}")
        return worker

    def _free_job_id(self) -> int:
        """The next free id after the last one handed out (round robin), so an id is
        reused as late as possible: stragglers of an ended job then find no job."""
        for step in range(p.MAX_JOBS - 1):
            job_id = (self._last_job_id + step) % (p.MAX_JOBS - 1) + 1
            if job_id not in self.jobs:
                self._set(self, "_last_job_id", job_id)
                return job_id
        raise JobError(f"all {p.MAX_JOBS - 1} job ids are in use")

    def _take_epoch(self) -> int:
        epoch = self._next_epoch
        self._set(self, "_next_epoch", _valid_epoch(epoch + 1))
        return epoch

    def _create(self, name: str, world_size: int, switch: str,
                placement: str, lanes: int) -> tuple[Job, list[Update]]:
        tag = p.name_tag(name)
        if any(job.tag == tag for job in self.jobs.values()):
            raise JobError(f"job name {name!r} collides with a running job's name tag; rename it")
        pbox = self.topo.pbox_of(switch)
        if pbox is None:
            raise JobError(f"rack {switch} has no PBox, so no aggregator address")
        job_id = self._free_job_id()
        want = self.topo.switches[switch].job_slots
        got = None
        if placement == PLACE_AUTO:
            got = self._allocate(self.switch_pools[switch], job_id, want)
        where = ON_SWITCH
        if got is None:
            got = self._allocate(self.pbox_pools[pbox.name], job_id, want)
            where = ON_PBOX
            if got is None:
                raise JobError(f"no room for {want} slots on switch {switch} or PBox {pbox.name}")
        epoch = self._take_epoch()  # the switch's cells and the agents' resyncs go by it
        job = Job(job_id, name, tag, world_size, switch, where, got, epoch, pbox.name, lanes,
                  placement=placement)
        self._add_job(job)
        updates: list[Update] = [TableWrite(switch, INSERT, job_entry(job))]
        if where == ON_PBOX:
            updates.append(pbox_job_write(job, INSERT))
        return job, updates

    def _member_writes(self, job: Job, worker: Worker, op: str) -> list[Update]:
        return [
            TableWrite(job.switch, op, _member_entry(job.job_id, worker, op)),
            TableWrite(job.switch, op, _result_dst_entry(job.job_id, worker, op)),
        ]

    def _group_write(self, job: Job, op: str) -> GroupWrite:
        replicas = tuple(
            (w.switch_port, p.result_rid(job.job_id, w.rank))
            for w in sorted(job.workers.values(), key=lambda w: w.rank)
        )
        return GroupWrite(job.switch, op, job.job_id, replicas)


# -- entries ---------------------------------------------------------------------


def _job_key(job_id: int) -> Entry:
    return Entry(p.JOBS, (FieldMatch(p.JOBS_JOB, job_id),))


def pbox_job_write(job: Job, op: str) -> PBoxJobWrite:
    """Configure (INSERT; MODIFY: make sure it is there as described) a PBox job."""
    assert job.pbox is not None
    return PBoxJobWrite(job.pbox, op, job.job_id, job.world_size, job.slots.base,
                        job.slots.count, job.lanes)


def job_entry(job: Job) -> Entry:
    """The switch's jobs entry for ``job``."""
    common = (("world_size", job.world_size), ("slot_base", job.slots.base),
              ("slot_count", job.slots.count), ("lane_code", p.lane_code(job.lanes)))
    if job.where == ON_SWITCH:
        params = (*common, ("mcast_grp", job.job_id), ("name_tag", job.tag), ("epoch", job.epoch))
        return Entry(p.JOBS, _job_key(job.job_id).match, p.ACT_JOB_ON_SWITCH, params)
    return Entry(p.JOBS, _job_key(job.job_id).match, p.ACT_JOB_ON_PBOX,
                 (*common, ("name_tag", job.tag)))


def _member_entry(job_id: int, worker: Worker, op: str) -> Entry:
    match = (FieldMatch(p.MEMBERS_JOB, job_id), FieldMatch(p.MEMBERS_RANK, worker.rank),
             FieldMatch(p.MEMBERS_SRC, worker.ip), FieldMatch(p.MEMBERS_SPORT, worker.port),
             FieldMatch(p.MEMBERS_PORT, worker.switch_port))
    return Entry(p.MEMBERS, match, "" if op == DELETE else p.ACT_IS_MEMBER)


def _result_dst_entry(job_id: int, worker: Worker, op: str) -> Entry:
    match = (FieldMatch(p.RESULT_DST_RID, p.result_rid(job_id, worker.rank)),)
    if op == DELETE:
        return Entry(p.RESULT_DST, match)
    params = (("mac", worker.mac), ("ip", worker.ip), ("udp_port", worker.port))
    return Entry(p.RESULT_DST, match, p.ACT_SET_RESULT_DST, params)


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


def _valid_epoch(value: int) -> int:
    """Epochs are 32-bit and never 0 (0 is a register's initial owner)."""
    value &= 0xFFFF_FFFF
    return value or 1


def _check_join(name: str, world_size: int, rank: int, address: tuple[str, int]) -> tuple[int, int]:
    if not isinstance(name, str) or not 1 <= len(name) <= 255:
        raise JobError("a job name is 1..255 characters")
    if not 1 <= world_size <= p.MAX_WORKERS:
        raise JobError(f"world size {world_size} outside 1..{p.MAX_WORKERS}")
    if not 0 <= rank < world_size:
        raise JobError(f"rank {rank} outside 0..{world_size - 1}")
    host, port = address
    try:
        ip = parse_ipv4(host)
    except ValueError as exc:
        raise JobError(str(exc)) from None
    if not 1 <= port <= 0xFFFF:
        raise JobError(f"UDP port {port} outside 1..65535")
    return ip, port


# -- rebuild after a restart -------------------------------------------------------


def rebuild_from_entries(
    topo: Topology, entries: dict[str, list[Entry]], now: float, epoch_seed: int = 1
) -> tuple[JobRegistry, list[Update]]:
    """Rebuild the registry from the table entries read back from each switch.

    Returns the registry and the repair writes: static rack entries that are
    missing, member/result entries that belong to no job (deleted), and a
    PBoxJobWrite MODIFY ("make sure it is there") per PBox job. Every
    rebuilt worker counts as seen at ``now``; barriers start over. Raises
    ``SwitchStateError`` naming the switch when its jobs entries make no sense
    (overlapping slots, a job on two switches, a PBox job on a rack without a PBox).
    """
    registry = JobRegistry(topo, epoch_seed)
    repairs: list[Update] = []
    max_epoch = 0
    for switch, switch_entries in sorted(entries.items()):
        if switch not in topo.switches:
            raise SwitchStateError(f"entries for switch {switch!r}, which the topology does not "
                                   "have")
        by_table: dict[str, list[Entry]] = {}
        for entry in switch_entries:
            by_table.setdefault(entry.table, []).append(entry)
        for entry in by_table.get(p.JOBS, []):
            try:
                job = _rebuild_job(registry, switch, entry)
            except (JobError, SlotError) as exc:
                raise SwitchStateError(f"switch {switch}: cannot rebuild job "
                                       f"{entry.match_value(p.JOBS_JOB)} from its entries: {exc}"
                                       ) from None
            max_epoch = max(max_epoch, job.epoch)
        repairs += _rebuild_workers(registry, switch, by_table, now)
        repairs += rack.reconcile(topo, switch, switch_entries)
    registry._next_epoch = _valid_epoch(max(registry._next_epoch, max_epoch + 1))
    registry._last_job_id = max(registry.jobs, default=0)
    for job in registry.jobs.values():
        if job.where == ON_PBOX:
            job.epoch = registry._take_epoch()
    for job in sorted(registry.jobs.values(), key=lambda j: j.job_id):
        if job.where == ON_PBOX and job.pbox is not None:  # make sure the PBox still has it
            repairs.append(pbox_job_write(job, MODIFY))
    return registry, repairs


def _rebuild_job(registry: JobRegistry, switch: str, entry: Entry) -> Job:
    job_id = entry.match_value(p.JOBS_JOB)
    base, count = entry.param("slot_base"), entry.param("slot_count")
    pbox = registry.topo.pbox_of(switch)
    if entry.action == p.ACT_JOB_ON_SWITCH:
        where, epoch = ON_SWITCH, entry.param("epoch")
        slots = registry.switch_pools[switch].reserve(job_id, base, count)
    elif entry.action == p.ACT_JOB_ON_PBOX and pbox is not None:
        # a PBox job's epoch is not in its entry: it gets a new one below (its agents
        # resync once, needlessly, which only sends duplicates)
        where, epoch = ON_PBOX, 0
        slots = registry.pbox_pools[pbox.name].reserve(job_id, base, count)
    else:
        raise JobError(f"jobs entry for job {job_id} on {switch} has action {entry.action!r}")
    if job_id in registry.jobs:
        raise JobError(f"job {job_id} appears on two switches")
    code = entry.param("lane_code")
    if code >= len(p.LANE_COUNTS):
        raise JobError(f"jobs entry for job {job_id} on {switch} has lane code {code}")
    job = Job(job_id, None, entry.param("name_tag"), entry.param("world_size"), switch, where,
              slots, epoch, pbox.name if pbox else None, p.LANE_COUNTS[code])
    registry.jobs[job_id] = job
    return job


def _rebuild_workers(
    registry: JobRegistry, switch: str, by_table: dict[str, list[Entry]], now: float
) -> list[Update]:
    members = {
        (e.match_value(p.MEMBERS_JOB), e.match_value(p.MEMBERS_RANK)): e
        for e in by_table.get(p.MEMBERS, [])
    }
    stale: list[Update] = []
    for entry in by_table.get(p.RESULT_DST, []):
        job_id, rank = p.split_rid(entry.match_value(p.RESULT_DST_RID))
        member = members.pop((job_id, rank), None)
        job = registry.jobs.get(job_id)
        host = registry.topo.host_by_ip(entry.param("ip"))
        if job is None or job.switch != switch or member is None or host is None:
            stale.append(TableWrite(switch, DELETE, Entry(entry.table, entry.match)))
            if member is not None:
                stale.append(TableWrite(switch, DELETE, Entry(member.table, member.match)))
            continue
        job.workers[rank] = Worker(rank, entry.param("ip"), entry.param("udp_port"),
                                   entry.param("mac"), host.port, now)
    for member in members.values():  # members without a result_dst entry
        stale.append(TableWrite(switch, DELETE, Entry(member.table, member.match)))
    return stale
