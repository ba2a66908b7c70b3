"""The job registry: joins, leaves, barriers and liveness, sans-I/O.

Like faucet's valves, every method takes an event (and ``now`` where time
matters) and returns the list of updates (controller/core/updates.py) that bring the
switches and PBoxes in line; nothing here touches a socket, a clock or gRPC.

On a leaf-spine fabric a job may span racks: it is then a two-level tree
(controller/core/tree.py, docs/DESIGN.md §3.1), placed once all its workers have joined
(``_create_on_fabric``, ``_place_on_fabric``). Otherwise a job lives on one rack (the
switch its first worker hangs off). Its window of
``job_slots`` slots is split over aggregators (its map, hosts/routes.py): the switch
takes as many as it has free (all of them, usually), the rack's PBoxes the rest, in
even shares at first (``Part``: one range per PBox; PBox slot numbers come from one
pool per rack, so they never collide across its PBoxes). ``rebalance`` then moves the
PBox share between PBoxes by their measured rates (controller/core/elastic.py), and
``promote`` moves a job onto the switch once the switch has room for all of it. Every
change of the map is a new epoch the agents learn from their heartbeats. Per job the
switch holds::

    jobs        job id -> job_on_switch(n, slot_base, slot_count, lane_code, group, name_tag,
                                        epoch)
                        | job_on_pbox(n, slot_base, slot_count, lane_code, name_tag)
    members     (job, rank, worker IPv4, worker UDP port, switch port) -> is_member
    result_dst  egress_rid = job*32 + rank -> set_result_dst(mac, ip, udp_port)
    multicast group <job id>: (worker port, rid) per worker   (switch jobs only)

That is everything needed to rebuild the registry after a restart
(``controller.rebuild``); only liveness deadlines, barrier progress and the
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

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from p4hub.controller.core import elastic, job_entries, rack
from p4hub.controller.core import program as p
from p4hub.controller.core.errors import NotFoundError, RefusedError
from p4hub.controller.core.slots import SlotPool, SlotRange, common_base, free_bases, is_free
from p4hub.controller.core.topology import Topology, aggregator_address, format_ipv4, parse_ipv4
from p4hub.controller.core.traffic import (
    Counters,
    RouteMeter,
    RouteService,
    TrafficMeter,
    job_rates,
    route_rates,
)
from p4hub.controller.core.tree import (
    Leaf,
    Tree,
    TreeError,
    TreeJob,
    leaf_entry,
    pbox_leaf_entry,
    pbox_leaf_write,
    plan,
    plan_under_pbox,
    root_entries,
    root_job_entry,
    root_pbox_write,
    root_replicas,
)
from p4hub.controller.core.updates import (
    DELETE,
    INSERT,
    MODIFY,
    Entry,
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
    routes: RouteMeter = field(default_factory=RouteMeter)  # per route of the job's map
    switch: str = ""  # the switch it hangs off; "" = its job's (one-rack topologies)


@dataclass(frozen=True)
class Move:
    """The job's aggregator state was lost or the job changed aggregator: its epoch
    became ``epoch`` and its agents resynchronise (hosts/session.py ``resync``)."""

    at: float | None  # controller clock
    epoch: int
    where: str  # ON_SWITCH | ON_PBOX after the move
    slot_base: int
    reason: str


@dataclass(frozen=True)
class Part:
    """A run of a job's window on one PBox: its slots there (from the rack's PBox pool,
    held by ``owner``). The last ``floats`` of them are the job's float route (a job
    with the precision option and switch slots: its float32 blocks of the switch's
    window slots, hosts/routes.py); a part may hold only those (``share`` 0)."""

    pbox: str
    slots: SlotRange
    owner: tuple[int, str, int]  # (job id, PBox, epoch it was allocated under)
    floats: int = 0

    @property
    def share(self) -> int:
        """Window slots it serves."""
        return self.slots.count - self.floats

    @property
    def window_slots(self) -> SlotRange:
        return SlotRange(self.slots.base, self.share)

    @property
    def float_slots(self) -> SlotRange:
        return SlotRange(self.slots.base + self.share, self.floats)


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
    # the precision option's relative error bound (None: off), chosen by the join that
    # created the job: its float blocks ride on its PBox routes, and with switch slots it
    # holds a float route on a PBox for those of the switch's window slots
    precision: float | None = None
    workers: dict[int, Worker] = field(default_factory=dict)
    moves: list[Move] = field(default_factory=list)  # aggregator changes, oldest first
    # how it was placed: PLACE_AUTO jobs on the PBox go to the switch once it has room
    # (a job rebuilt after a controller restart counts as PLACE_PBOX: it stays put)
    placement: str = PLACE_PBOX
    barrier_generation: int = 0
    barrier_waiting: set[int] = field(default_factory=set)
    # the PBox ranges of its map, by slot base; a job on the PBox has its first one in
    # ``pbox``/``slots`` too (the jobs entry's range)
    parts: tuple[Part, ...] = ()
    split_at: float | None = None  # when its map last changed (rebalance's hold-down)
    # the PBoxes its last re-split took slots from, and how many re-splits in a row gave
    # slots back to such a PBox (controller/core/elastic.py ``hold_down``)
    took_from: frozenset[str] = frozenset()
    reversals: int = 0
    slow_checks: dict[str, int] = field(default_factory=dict)  # PBox -> slow checks in a row
    left: dict[str, float] = field(default_factory=dict)  # PBox -> when it was drained or lost
    # a job on a fabric (controller/core/tree.py): the switches holding its slot range, root
    # spine first, until its workers are all in; then its tree (two levels), or none if
    # they all sit in one rack (an ordinary switch job there)
    fabric: tuple[str, ...] = ()
    tree: Tree | None = None
    # ... and the PBox ranges of racks whose leaf had no room at that base: those racks
    # aggregate on their first PBox, under the same root
    rack_pboxes: tuple[Part, ...] = ()
    # the PBox at the root when no spine had room (its range is in rack_pboxes: its
    # rack's workers are its members); "" under a spine
    root_pbox: str = ""
    # after a rebuild: its rack's PBoxes that did not answer list_jobs, whose ranges of
    # it are learnt from the first agent map a heartbeat brings (controller/core/rebuild.py)
    unheard: tuple[str, ...] = ()

    @property
    def over_racks(self) -> bool:
        """A job of a fabric that spans racks (or waits for its workers to know them)."""
        return bool(self.fabric or self.root_pbox)

    @property
    def window(self) -> int:
        on_switch = self.slots.count if self.where == ON_SWITCH else 0
        return on_switch + sum(part.share for part in self.parts)

    @property
    def share_parts(self) -> tuple[Part, ...]:
        """Its PBox ranges that serve window slots, in map order."""
        return tuple(part for part in self.parts if part.share)

    @property
    def float_part(self) -> Part | None:
        """The PBox range holding its float route, if it has one."""
        return next((part for part in self.parts if part.floats), None)

    def shares(self) -> dict[str, int]:
        """Window slots per aggregator (the switch by its name), in map order."""
        out = {self.switch: self.slots.count} if self.where == ON_SWITCH else {}
        out.update((part.pbox, part.share) for part in self.share_parts)
        return out

    def rates(self, min_samples: int = 1) -> list[float | None]:
        """Each route's measured rate (rounds/s while busy), in map order, from ranks
        with at least ``min_samples`` heartbeat intervals measured under this epoch."""
        return route_rates([w.routes for w in self.workers.values()], self.epoch,
                           len(self.shares()), min_samples)

    def service(self) -> dict[str, float | None]:
        """Its service as its ranks' heartbeats report it (controller/core/traffic.py)."""
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
    routes: tuple[dict, ...] = ()  # the map: aggregator "ip:port", slot_base, count, fallback
    precision: float | None = None  # the job's precision option (None: off)


# Why a job ended (JobEnd.cause).
END_KILLED = "killed"  # KillJob
END_LEFT = "left"  # its last worker left
END_SILENT = "silent"  # a member sent no heartbeat for worker_timeout seconds
END_LOST = "aggregator-lost"  # its aggregator died and no other one had room
ENDED_KEPT = 256  # ended jobs remembered for ShowJob, oldest forgotten first
MOVES_KEPT = 16  # a job's latest moves, for ShowJob
GROW_STEP = 8  # a partly placed job's switch share grows by at least 1/GROW_STEP of its window


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

    def _reserve(self, pool: SlotPool, owner: Hashable, base: int, count: int) -> None:
        pool.reserve(owner, base, count)
        self._record(lambda: pool.free(owner))

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
        pbox = self.topo.pbox_of(self._rack_of(job, rank))
        assert pbox is not None  # a job is only created on a rack with a PBox
        return JoinReply(
            job_id=job.job_id, world_size=job.world_size, rank=rank,
            aggregator_ip=format_ipv4(pbox.ip), aggregator_port=p.AGG_UDP_PORT,
            slot_base=job.slots.base, slot_count=job.window, k=job.lanes,
            window=job.window, where=job.where, epoch=job.epoch, routes=self.routes(job, rank),
            precision=job.precision,
        )

    def routes(self, job: Job, rank: int | None = None) -> tuple[dict, ...]:
        """The job's map as rank ``rank``'s agent runs it (hosts/routes.py): the switch's
        range first (addressed to the rack's first PBox, whose address the switch answers
        for), then each PBox's, flagged so that the switch forwards them, then its float
        route if it has one (flagged, ``"float": true``). A job over a
        fabric has one route, to the rank's own rack (its leaf); without a rank, to the
        root spine's address."""
        if job.over_racks and rank is None:
            root = (self.topo.pboxes[job.root_pbox] if job.root_pbox
                    else self.topo.switches[job.fabric[0]])
            return (_route(root.ip, job.slots, False),)
        out = []
        if job.where == ON_SWITCH:
            first = self.topo.pbox_of(self._rack_of(job, rank))
            assert first is not None
            out.append(_route(first.ip, job.slots, False))
        out += [_route(self.topo.pboxes[part.pbox].ip, part.window_slots, True)
                for part in job.share_parts]
        floats = job.float_part
        if floats is not None:
            out.append({**_route(self.topo.pboxes[floats.pbox].ip, floats.float_slots, True),
                        "float": True})
        return tuple(out)

    def _rack_of(self, job: Job, rank: int | None) -> str:
        """The switch rank ``rank`` hangs off (the job's, for one-rack jobs)."""
        worker = job.workers.get(rank) if rank is not None else None
        return self._rack_of_worker(job, worker) if worker is not None else job.switch

    # -- events ------------------------------------------------------------------

    def join(
        self, name: str, world_size: int, rank: int, address: tuple[str, int], now: float,
        placement: str = PLACE_AUTO, lanes: int = p.K, precision: float | None = None,
    ) -> tuple[JoinReply, list[Update]]:
        """A worker joins job ``name``; creates the job on first join. Idempotent per
        (rank, address): a retried join gets the same reply and no updates.
        ``placement`` only matters to the join that creates the job: PLACE_AUTO takes
        switch slots when there are any (else the PBox, until ``promote`` finds room on
        the switch), PLACE_PBOX puts the job on the rack's PBox
        (to compare both paths on the same rack). ``lanes`` (64 or 256 int32 lanes per
        packet) is set by the join that creates the job; every later join must ask for
        the same, and so with ``precision`` (the precision option's relative error bound,
        0 < bound < 1, None: off): such a job's float blocks go to PBoxes, on its PBox
        routes and, while it has switch slots, on a float route it holds on one of its
        rack's PBoxes (hosts/routes.py); on a fabric it is placed wholly on its rack's
        PBoxes (PLACE_PBOX: a job over racks cannot carry float blocks)."""
        if placement not in PLACEMENTS:
            raise JobError(f"placement must be one of {PLACEMENTS}, not {placement!r}")
        if precision is not None:
            if not 0.0 < precision < 1.0:
                raise JobError(f"precision must be a relative error bound strictly between "
                               f"0 and 1, not {precision!r}")
            if self.topo.spines():  # not over racks: float blocks need a PBox of its rack
                placement = PLACE_PBOX
        if lanes not in p.LANE_COUNTS:
            raise JobError(f"lanes must be one of {p.LANE_COUNTS}, not {lanes!r}")
        ip, port = _check_join(name, world_size, rank, address)
        host = self.topo.host_by_ip(ip)
        if host is None:
            raise JobError(f"{format_ipv4(ip)} is not a host of the topology")
        updates: list[Update] = []
        job = self.job_by_name(name)
        if job is None and self.topo.spines() and placement == PLACE_AUTO:
            job, updates = self._create_on_fabric(name, world_size, host.switch, lanes)
        elif job is None:
            job, updates = self._create(name, world_size, host.switch, placement, lanes,
                                        precision)
        elif job.name is None:
            self._set(job, "name", name)  # adopted after a rebuild
            if job.precision is None:  # its PBoxes keep it; unless none answered the rebuild
                self._set(job, "precision", precision)
        if job.world_size != world_size:
            raise JobError(f"job {name!r} has world size {job.world_size}, not {world_size}")
        if job.lanes != lanes:
            raise JobError(f"job {name!r} has {job.lanes} lanes per packet, not {lanes}")
        if job.precision != precision:
            raise JobError(f"job {name!r} has precision {job.precision}, not {precision} "
                           "(every rank must ask for the same; None: off)")
        switch, switch_port = host.switch, host.port
        if job.switch != host.switch and not job.over_racks:
            if job.where != ON_PBOX or not self.topo.spines():
                raise JobError(f"job {name!r} runs on rack {job.switch}; {format_ipv4(ip)} is "
                               f"on {host.switch} (one rack per job, but for a PBox job on a "
                               "fabric)")
            # a PBox job of another rack: its packets reach the PBox's leaf over the
            # flood root, the way its L2 goes (controller/core/rack.py)
            switch = job.switch
            switch_port = self.topo.port_to(job.switch, self.topo.flood_root() or "") or 0
        known = job.workers.get(rank)
        if known is not None:
            if (known.ip, known.port) != (ip, port):
                raise JobError(f"rank {rank} of job {name!r} is already taken by "
                               f"{format_ipv4(known.ip)}:{known.port}")
            self._set(known, "last_seen", now)
            return self.reply(job, rank), updates
        worker = Worker(rank, ip, port, host.mac, switch_port, now, switch=switch)
        self._add_worker(job, worker)
        updates += self._member_writes(job, worker, INSERT)
        if job.over_racks and job.tree is None:
            if len(job.workers) == job.world_size:
                updates += self._place_on_fabric(job)
        elif self._has_group(job, switch):
            rack_size = sum(w.switch == switch for w in job.workers.values())
            op = INSERT if rack_size == 1 and job.tree is None else MODIFY
            updates.append(self._group_write(job, op, switch))
        return self.reply(job, rank), updates

    def heartbeat(self, job_id: int, rank: int, now: float,
                  counters: Counters | None = None, service: RouteService | None = None) -> None:
        """The rank is alive; ``counters``: its session's, for the service rates;
        ``service``: per route of the map, for rebalancing."""
        worker = self._worker(job_id, rank)
        worker.last_seen = now
        if counters is not None:
            worker.traffic.update(counters, now)
        if service is not None:
            worker.routes.update(service)

    def leave(self, job_id: int, rank: int, now: float | None = None) -> list[Update]:
        """A worker leaves; the job ends with its last worker."""
        job = self.job(job_id)
        worker = self._worker(job_id, rank)
        if len(job.workers) == 1:
            return self._end(job, now, END_LEFT, f"its last worker (rank {rank}) left")
        self._del_worker(job, rank)
        updates = self._member_writes(job, worker, DELETE)
        switch = self._rack_of_worker(job, worker)
        if self._has_group(job, switch):
            updates.append(self._group_write(job, MODIFY, switch))
        return updates

    @staticmethod
    def _has_group(job: Job, switch: str) -> bool:
        """Whether ``switch`` holds the job's multicast group: it aggregates the job (a
        switch job, a tree's root or a leaf that is not on its PBox)."""
        if job.tree is not None:
            leaf = job.tree.leaf(switch)
            if switch == job.tree.root:
                return not job.tree.root_pbox
            return leaf is not None and not leaf.pbox
        return job.where == ON_SWITCH and not job.over_racks and switch == job.switch

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

    # -- the job's aggregators: lost state, moves, rebalancing ---------------------------

    def renew_epoch(self, job: Job, now: float | None, reason: str) -> None:
        """The aggregator lost the job's rounds (it restarted): a new epoch tells the
        agents to resynchronise; the switch treats the job's cells as fresh."""
        self._set(job, "epoch", self._take_epoch())
        self._note_move(job, now, reason)

    def switch_restarted(self, switch: str, now: float | None) -> list[Update]:
        """``switch`` came back without its registers: each job aggregating on it gets a
        new epoch (its agents resynchronise, every cell counts as fresh). The other
        switches of a tree get their jobs entries rewritten with it; ``switch`` itself is
        the caller's to resynchronise (``expected_entries``)."""
        updates: list[Update] = []
        for job in sorted(self.jobs.values(), key=lambda j: j.job_id):
            if job.tree is not None and switch in job.tree.switches:
                updates += self._renew_tree(job, now, f"switch {switch} restarted", switch)
            elif job.switch == switch and job.where == ON_SWITCH and not job.over_racks:
                self.renew_epoch(job, now, f"switch {switch} restarted")
        return updates

    def _renew_tree(self, job: Job, now: float | None, reason: str,
                    skip: str = "") -> list[Update]:
        """A new epoch for a job over racks: its jobs entries on every switch of its tree
        but ``skip`` get it (every cell counts as fresh, the agents resynchronise)."""
        self.renew_epoch(job, now, reason)
        return [TableWrite(name, MODIFY, entry)
                for name, entry in self._tree_jobs_entries(job) if name != skip]

    def tree_pbox_restarted(self, job: Job, pbox: str, now: float | None) -> list[Update]:
        """A PBox of ``job``'s tree had lost the job (it restarted; it has it again,
        empty): a new epoch, as for a restarted switch."""
        return self._renew_tree(job, now, f"PBox {pbox} had lost the job")

    def _tree_jobs_entries(self, job: Job) -> list[tuple[str, Entry]]:
        assert job.tree is not None
        spec = _tree_job(job)
        out = [(job.tree.root, root_job_entry(spec, job.tree))]
        out += [(leaf.switch, self._leaf_entry(job, leaf)) for leaf in job.tree.leaves]
        return out

    def pbox_lost(self, job_id: int, pbox: str, now: float | None, reason: str) -> list[Update]:
        """PBox ``pbox`` cannot be reached: the job moves whole to its rack's switch if
        the switch has room for its window, else that PBox's share goes to the rack's
        other PBoxes; with neither, the job ends (END_LOST). A job with the precision
        option goes to the switch only with its float route on another PBox, and a float
        route alone on the dead PBox moves to another. The dead PBox is not written to."""
        job = self.job(job_id)
        if job.tree is not None:
            return self._tree_pbox_lost(job, pbox, now, reason)
        if all(part.pbox != pbox for part in job.parts):
            return []
        others = [pb.name for pb in self.topo.pboxes_of(job.switch) if pb.name != pbox]
        self._set(job, "left", {**job.left, pbox: now if now is not None else 0.0})
        if all(part.pbox != pbox for part in job.share_parts):  # only its float route
            moved = self._resplit(job, {pt.pbox: pt.share for pt in job.share_parts}, now,
                                  f"{reason}; its float route moved", dead=pbox)
            return moved if moved is not None else self._end(
                job, now, END_LOST, f"{reason}; no other PBox of the rack has room for its "
                "float route (the precision option)", dead=pbox)
        moved = self._whole_onto_switch(job, now, f"{reason}; moved to switch {job.switch}",
                                        dead=pbox)
        if moved is not None:
            return moved
        if not others:
            return self._end(job, now, END_LOST, f"{reason}; switch {job.switch} has no "
                             f"{job.window} free slots to take the job over and the rack has "
                             "no other PBox", dead=pbox)
        total = sum(part.share for part in job.parts)
        updates = self._resplit(job, _even(others, total), now,
                                f"{reason}; its share moved to PBox(es) {', '.join(others)}",
                                dead=pbox)
        if updates is None:
            return self._end(job, now, END_LOST, f"{reason}; the other PBoxes have no room",
                             dead=pbox)
        return updates

    def _tree_pbox_lost(self, job: Job, pbox: str, now: float | None,
                        reason: str) -> list[Update]:
        """A PBox of a job over racks cannot be reached: a rack on it moves onto its leaf
        if the leaf has room at the job's base; a root PBox, or a rack whose leaf has
        none, ends the job (END_LOST)."""
        assert job.tree is not None
        leaf = next((leaf for leaf in job.tree.leaves if leaf.pbox == pbox), None)
        if leaf is not None:
            moved = self._rack_onto_leaf(job, leaf, now, f"{reason}; rack {leaf.switch} moved "
                                         "onto its leaf", dead=pbox)
            if moved is not None:
                return moved
            return self._end(job, now, END_LOST, f"{reason}; leaf {leaf.switch} has no "
                             f"{job.slots.count} free slots at base {job.slots.base}", dead=pbox)
        if pbox == job.tree.root_pbox:
            return self._end(job, now, END_LOST, f"{reason}; it was the root of the job",
                             dead=pbox)
        return []

    def _rack_onto_leaf(self, job: Job, leaf: Leaf, now: float | None, reason: str,
                        dead: str = "") -> list[Update] | None:
        """The rack of ``leaf`` (on its PBox) aggregates on its leaf from now on, if the
        leaf has room at the job's base (None if not): a new epoch for the whole tree,
        since the PBox's rounds in flight are gone (``dead``: that PBox cannot be
        reached, it is not written to)."""
        assert job.tree is not None
        if not is_free(self.switch_pools[leaf.switch], job.slots.base, job.slots.count):
            return None
        updates: list[Update] = []
        if leaf.pbox != dead:
            updates.append(pbox_leaf_write(_tree_job(job), job.tree, leaf, DELETE))
        part = next(part for part in job.rack_pboxes if part.pbox == leaf.pbox)
        self._free(self.pbox_pools[part.pbox], part.owner)
        self._reserve(self.switch_pools[leaf.switch], job.job_id, job.slots.base,
                      job.slots.count)
        self._set(job, "rack_pboxes", tuple(p for p in job.rack_pboxes if p is not part))
        self._set(job, "fabric", (*job.fabric, leaf.switch))
        self._set(job, "tree", replace(job.tree, leaves=tuple(
            replace(node, pbox="") if node is leaf else node for node in job.tree.leaves)))
        # the group first: the leaf multicasts as soon as its entry says it aggregates
        return [self._group_write(job, INSERT, leaf.switch),
                *self._renew_tree(job, now, reason), *updates]

    def promote(self, now: float | None) -> list[Update]:
        """Jobs that went to PBoxes because the switch was short of slots (PLACE_AUTO)
        move whole onto the switch once it has room for their window, oldest first
        (ATP's best effort: the switch aggregates whatever it can), and the PBoxes drop
        the job; short of that, such a job takes a larger switch range once the switch
        has one (``_grow_on_switch``)."""
        updates: list[Update] = []
        for job in sorted(self.jobs.values(), key=lambda j: j.job_id):
            if not job.share_parts or job.placement != PLACE_AUTO:
                continue
            pboxes = ", ".join(part.pbox for part in job.share_parts)
            moved = self._whole_onto_switch(job, now, f"switch {job.switch} has free slots "
                                                      f"again; moved off PBox {pboxes}")
            updates += moved if moved is not None else self._grow_on_switch(job, now) or []
        for job in sorted(self.jobs.values(), key=lambda j: j.job_id):
            # racks of jobs over racks that aggregate on their PBox: back onto their leaf
            for leaf in job.tree.leaves if job.tree is not None else ():
                if leaf.pbox:
                    updates += self._rack_onto_leaf(job, leaf, now, (
                        f"leaf {leaf.switch} has free slots again; rack moved off PBox "
                        f"{leaf.pbox}")) or []
        return updates

    def _grow_on_switch(self, job: Job, now: float | None) -> list[Update] | None:
        """A fresh switch range for ``job`` at least ``GROW_STEP`` of its window larger
        than the one it has, as large as the switch has in one run; the PBox share
        shrinks to the rest, split over the fastest of its PBoxes in proportion to their
        rates (even while unmeasured), each keeping at least the exploration share.
        None when the switch has no such run, or the PBox pool no fresh ranges."""
        have = job.slots.count if job.where == ON_SWITCH else 0
        take = min(self.switch_pools[job.switch].largest_free(), job.window - 1)
        if take < have + max(1, job.window // GROW_STEP):
            return None
        shares = _shrunk_shares(job, job.window - take)
        epoch = self._take_epoch()
        floats = self._float_need(job, on_switch=True)
        parts = (self._allocate_parts(job.job_id, shares, epoch, floats)
                 if floats is not False else None)
        got = self._switch_range(job, take) if parts is not None else None
        if parts is None or got is None:
            for part in parts or ():
                self._free(self.pbox_pools[part.pbox], part.owner)
            return None
        was_on_switch, old = job.where == ON_SWITCH, job.parts
        for part in old:
            self._free(self.pbox_pools[part.pbox], part.owner)
        self._set(job, "where", ON_SWITCH)
        self._set(job, "pbox", self.topo.pbox_of(job.switch).name)  # type: ignore[union-attr]
        self._set(job, "slots", got)
        self._set_parts(job, parts)
        self._set(job, "epoch", epoch)
        self._set(job, "split_at", now)
        self._note_move(job, now, f"switch {job.switch} has {take} free slots in a run; "
                                  f"switch share {have} -> {take} of {job.window}")
        updates: list[Update] = [TableWrite(job.switch, MODIFY, job_entry(job))]
        if job.workers and not was_on_switch:
            updates.append(self._group_write(job, INSERT))
        updates += [part_write(job, part, MODIFY) for part in parts]
        kept = {part.pbox for part in parts}
        updates += [PBoxJobWrite(part.pbox, DELETE, job.job_id) for part in old
                    if part.pbox not in kept]
        return updates

    def rebalance(self, now: float) -> list[Update]:
        """For every job with PBox ranges (controller/core/elastic.py): drain a PBox that stayed
        slow (scale in), probe a PBox of the rack it does not use (scale out), or re-split
        the PBox share by the measured rates; at most one change per
        ``elastic.HOLD_DOWN`` seconds a job."""
        updates: list[Update] = []
        for job in sorted(self.jobs.values(), key=lambda j: j.job_id):
            if not job.share_parts:
                continue
            rates = job.rates(elastic.MIN_SAMPLES)[1 if job.where == ON_SWITCH else 0:]
            measured = all(r is not None for r in rates)
            if measured and len(job.share_parts) > 1:
                self._count_slow(job, [float(r) for r in rates if r is not None])
            if job.split_at is not None and now - job.split_at < elastic.HOLD_DOWN:
                continue
            moved = self._scale_in(job, rates, now) if measured else None
            if moved is None:
                moved = self._probe(job, now)
            if moved is None and measured and len(job.share_parts) > 1:
                moved = self._replan(job, rates, now)
            updates += moved or []
        return updates

    def _count_slow(self, job: Job, rates: list[float]) -> None:
        slow = elastic.slow(rates)
        streaks = {part.pbox: job.slow_checks.get(part.pbox, 0) + 1 if is_slow else 0
                   for part, is_slow in zip(job.share_parts, slow, strict=True)}
        self._set(job, "slow_checks", streaks)

    def _scale_in(self, job: Job, rates: list[float | None], now: float) -> list[Update] | None:
        """Drain the slowest PBox if it was slow SCALE_IN_CHECKS checks in a row."""
        parts = job.share_parts
        if len(parts) < 2:
            return None
        values = [float(r) for r in rates if r is not None]
        victim = min(range(len(values)), key=lambda i: (values[i], i))
        name = parts[victim].pbox
        checks = job.slow_checks.get(name, 0)
        if checks < elastic.SCALE_IN_CHECKS:
            return None
        shares = elastic.drain([part.share for part in parts], values, victim)
        self._set(job, "left", {**job.left, name: now})
        return self._resplit(job, {p.pbox: n for p, n in zip(parts, shares, strict=True) if n},
                             now, f"drained PBox {name} (scale in): {values[victim]:.0f} rounds/s, "
                             f"under {elastic.SCALE_IN_RATIO:.0%} of the best "
                             f"({max(values):.0f}) at {checks} checks in a row")

    def _probe(self, job: Job, now: float) -> list[Update] | None:
        """Give a PBox of the rack the job does not use (drained, or lost and back) the
        exploration share, PROBE_AFTER seconds after it left (scale out)."""
        using = {part.pbox for part in job.share_parts}
        spare = [pb.name for pb in self.topo.pboxes_of(job.switch) if pb.name not in using
                 and now - job.left.get(pb.name, -float("inf")) >= elastic.PROBE_AFTER]
        if not spare:
            return None
        shares = elastic.probe({part.pbox: part.share for part in job.share_parts}, spare)
        if shares is None:
            return None
        self._set(job, "left", {k: v for k, v in job.left.items() if k not in spare})
        return self._resplit(job, shares, now, f"probing PBox {', '.join(spare)} with "
                             f"{shares[spare[0]]} slots (scale out)")

    def _replan(self, job: Job, rates: list[float | None], now: float) -> list[Update] | None:
        parts = job.share_parts
        plan = elastic.plan([part.share for part in parts], rates)
        if plan is None:
            return None
        old = {part.pbox: part.share for part in parts}
        shares = {part.pbox: n for part, n in zip(parts, plan.shares, strict=True)}
        reversal = elastic.reverses(old, shares, job.took_from)
        if reversal and job.split_at is not None and (
                now - job.split_at < elastic.hold_down(job.reversals)):
            return None
        updates = self._resplit(job, shares, now, f"rebalanced over PBoxes: {plan.reason}"
                                + (f" (reversal {job.reversals + 1} in a row)" if reversal else ""))
        if updates is not None:
            self._set(job, "reversals", job.reversals + 1 if reversal else 0)
            self._set(job, "took_from", elastic.losers(old, shares))
        return updates

    def _resplit(self, job: Job, shares: dict[str, int], now: float | None, reason: str,
                 dead: str | None = None) -> list[Update] | None:
        """Give the job's PBox share the new ``shares`` (PBox -> slots), each on a fresh
        range (a slot that served one window index must not serve another: hosts/
        routes.py), under a new epoch, and its float route too if it has one (on a
        fresh range, merged with its host's share); None if the rack's PBox pool has no
        room (or no PBox but ``dead`` can take the float route)."""
        floats = self._float_need(job, on_switch=job.where == ON_SWITCH, dead=dead)
        if floats is False:
            return None
        epoch = self._take_epoch()
        parts = self._allocate_parts(job.job_id, shares, epoch, floats)
        if parts is None:
            return None
        old = job.parts
        for part in old:
            self._free(self.pbox_pools[part.pbox], part.owner)
        self._set_parts(job, parts)
        self._set(job, "epoch", epoch)
        self._set(job, "split_at", now)
        self._note_move(job, now, reason)
        updates: list[Update] = [TableWrite(job.switch, MODIFY, job_entry(job))]
        updates += [part_write(job, part, MODIFY) for part in parts]
        kept = {part.pbox for part in parts}
        updates += [PBoxJobWrite(part.pbox, DELETE, job.job_id) for part in old
                    if part.pbox not in kept and part.pbox != dead]
        return updates

    def _set_parts(self, job: Job, parts: tuple[Part, ...]) -> None:
        self._set(job, "parts", parts)
        if job.where == ON_PBOX and parts:
            self._set(job, "pbox", parts[0].pbox)
            self._set(job, "slots", parts[0].slots)

    def _switch_range(self, job: Job, count: int) -> SlotRange | None:
        """A new switch range of ``count`` slots for ``job``, disjoint from the one it
        has (a slot must not serve another window index: hosts/routes.py), which is
        freed; None if the switch has no room."""
        pool = self.switch_pools[job.switch]
        if job.where != ON_SWITCH:
            return self._allocate(pool, job.job_id, count)
        got = self._allocate(pool, ("moving", job.job_id), count)
        if got is None:
            return None
        self._free(pool, ("moving", job.job_id))
        self._free(pool, job.job_id)
        pool.reserve(job.job_id, got.base, got.count)
        self._record(lambda: pool.free(job.job_id))
        return got

    def _whole_onto_switch(self, job: Job, now: float | None, reason: str,
                           dead: str | None = None) -> list[Update] | None:
        """The whole window onto a fresh switch range, with a fresh float route for a job
        with the precision option; None, holding nothing new, when the switch has no room
        (or no PBox of the rack but ``dead`` has room for the float route)."""
        epoch = self._take_epoch() if job.precision is not None else None
        floats = self._float_part(job, epoch, dead) if epoch is not None else None
        if epoch is not None and floats is None:
            return None
        got = self._switch_range(job, job.window)
        if got is None:
            if floats is not None:
                self._free(self.pbox_pools[floats.pbox], floats.owner)
            return None
        return self._onto_switch(job, got, now, reason, dead=dead, epoch=epoch, floats=floats)

    def _onto_switch(self, job: Job, got: SlotRange, now: float | None,
                     reason: str, dead: str | None = None, epoch: int | None = None,
                     floats: Part | None = None) -> list[Update]:
        """The whole window onto the switch range ``got`` under ``epoch`` (a new one if
        None), with ``floats`` as its float route (a job with the precision option)."""
        was_on_switch = job.where == ON_SWITCH
        old = job.parts
        for part in old:
            self._free(self.pbox_pools[part.pbox], part.owner)
        self._set(job, "parts", (floats,) if floats is not None else ())
        self._set(job, "pbox", self.topo.pbox_of(job.switch).name)  # type: ignore[union-attr]
        self._set(job, "where", ON_SWITCH)
        self._set(job, "slots", got)
        self._set(job, "epoch", self._take_epoch() if epoch is None else epoch)
        self._set(job, "split_at", now)
        self._note_move(job, now, reason)
        updates: list[Update] = [TableWrite(job.switch, MODIFY, job_entry(job))]
        if job.workers:
            updates.append(self._group_write(job, MODIFY if was_on_switch else INSERT))
        if floats is not None:
            updates.append(part_write(job, floats, MODIFY))
        updates += [PBoxJobWrite(part.pbox, DELETE, job.job_id) for part in old
                    if part.pbox != dead and (floats is None or part.pbox != floats.pbox)]
        return updates

    def _float_need(self, job: Job, on_switch: bool,
                    dead: str | None = None) -> tuple[str, int] | None | Literal[False]:
        """(PBox, slots) of the float route ``job`` needs placed ``on_switch`` or not
        (None: none, without the precision option or switch slots; False: it needs one
        and no PBox of its rack but ``dead`` could hold it)."""
        if job.precision is None or not on_switch:
            return None
        host = self._float_host(job, dead)
        return (host, job.window) if host is not None else False

    def _float_host(self, job: Job, dead: str | None = None) -> str | None:
        """Where a float route goes: the rack's first PBox the job did not leave (drained or
        lost), else its first; never ``dead``."""
        names = [pb.name for pb in self.topo.pboxes_of(job.switch) if pb.name != dead]
        return min(names, key=lambda name: name in job.left) if names else None

    def _float_part(self, job: Job, epoch: int, dead: str | None = None) -> Part | None:
        """A fresh range holding only ``job``'s float route, for a move onto the switch;
        None if no PBox of its rack (but ``dead``) has room."""
        host = self._float_host(job, dead)
        if host is None:
            return None
        owner = (job.job_id, host, epoch)
        got = self._allocate(self.pbox_pools[host], owner, job.window)
        return Part(host, got, owner, job.window) if got is not None else None

    def _note_move(self, job: Job, now: float | None, reason: str) -> None:
        moves = [*job.moves, Move(now, job.epoch, job.where, job.slots.base, reason)]
        self._set(job, "moves", moves[-MOVES_KEPT:])

    def _end(self, job: Job, now: float | None, cause: str, reason: str,
             rank: int | None = None, last_seen: float | None = None,
             dead: str | None = None) -> list[Update]:
        """Remove every entry of ``job``, free its slots and record why it ended
        (``dead``: a PBox that is unreachable, not written to)."""
        self._pop_job(job.job_id)
        self._record_end(JobEnd(job.job_id, job.name, job.world_size, job.switch, job.where,
                                job.slots, cause, reason, now, rank, last_seen))
        updates: list[Update] = []
        if job.tree is not None:
            updates += [u for u in self._tree_writes(job, DELETE)
                        if not (isinstance(u, PBoxJobWrite) and u.pbox == dead)]
        elif not job.over_racks:
            updates.append(TableWrite(job.switch, DELETE, job_entries.jobs_key(job.job_id)))
        for worker in job.workers.values():
            updates += self._member_writes(job, worker, DELETE)
        for switch in job.fabric:
            self._free(self.switch_pools[switch], job.job_id)
        for part in job.rack_pboxes:
            self._free(self.pbox_pools[part.pbox], part.owner)
        if job.where == ON_SWITCH and not job.over_racks:
            self._free(self.switch_pools[job.switch], job.job_id)
            if job.workers:
                updates.append(GroupWrite(job.switch, DELETE, job.job_id))
        for part in job.parts:
            self._free(self.pbox_pools[part.pbox], part.owner)
            if part.pbox != dead:
                updates.append(PBoxJobWrite(part.pbox, DELETE, job.job_id))
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
            if job.tree is not None:
                leaf = job.tree.leaf(switch)
                if switch == job.tree.root:
                    entries += root_entries(_tree_job(job), job.tree, INSERT)
                elif leaf is not None:
                    entries.append(self._leaf_entry(job, leaf))
            elif job.switch == switch and not job.over_racks:
                entries.append(job_entry(job))
            for _, worker in sorted(job.workers.items()):
                if self._rack_of_worker(job, worker) == switch:
                    entries.append(_member_entry(job.job_id, worker, INSERT))
                    entries.append(_result_dst_entry(job.job_id, worker, INSERT))
        return entries

    def expected_groups(self, switch: str) -> dict[int, tuple[tuple[int, int], ...]]:
        """Multicast groups ``switch`` should hold: flood, and one per switch job."""
        groups = {p.FLOOD_GROUP: rack.flood_group(self.topo, switch).replicas}
        for job in self.jobs.values():
            if job.tree is not None and switch == job.tree.root and not job.tree.root_pbox:
                groups[job.job_id] = root_replicas(job.job_id, job.tree)
            elif self._has_group(job, switch) and (job.tree is not None or job.workers):
                groups[job.job_id] = self._group_write(job, MODIFY, switch).replicas
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
        self._set(self, "_next_epoch", valid_epoch(epoch + 1))
        return epoch

    def _free_tag(self, name: str) -> int:
        tag = p.name_tag(name)
        if any(job.tag == tag for job in self.jobs.values()):
            raise JobError(f"job name {name!r} collides with a running job's name tag; rename it")
        return tag

    def _create(self, name: str, world_size: int, switch: str, placement: str, lanes: int,
                precision: float | None = None) -> tuple[Job, list[Update]]:
        """PLACE_AUTO: the whole window on the switch if it has room; else as many
        switch slots as it has in one run (at least an eighth of the window) and the
        rest in even shares over the rack's PBoxes; else all on the PBoxes.
        PLACE_PBOX: all on the PBoxes. With ``precision`` and switch slots, a float route
        on the rack's first PBox too."""
        tag = self._free_tag(name)
        pboxes = self.topo.pboxes_of(switch)
        if not pboxes:
            raise JobError(f"rack {switch} has no PBox, so no aggregator address")
        job_id = self._free_job_id()
        want = self.topo.switches[switch].job_slots
        got = None
        if placement == PLACE_AUTO:
            pool = self.switch_pools[switch]
            take = min(want, pool.largest_free())
            if take >= max(1, want // 8):
                got = self._allocate(pool, job_id, take)
        epoch = self._take_epoch()  # the switch's cells and the agents' resyncs go by it
        rest = want - (got.count if got is not None else 0)
        floats = (pboxes[0].name, want) if precision is not None and got is not None else None
        parts = self._allocate_parts(job_id, _even([pb.name for pb in pboxes], rest), epoch,
                                     floats)
        if parts is None:
            raise JobError(f"no room for {want} slots on switch {switch} or its PBoxes")
        if got is not None:
            where, slots, pbox = ON_SWITCH, got, pboxes[0].name
        else:
            where, slots, pbox = ON_PBOX, parts[0].slots, parts[0].pbox
        job = Job(job_id, name, tag, world_size, switch, where, slots, epoch, pbox, lanes,
                  precision=precision, placement=placement, parts=parts)
        self._add_job(job)
        updates: list[Update] = [TableWrite(switch, INSERT, job_entry(job))]
        updates += [part_write(job, part, INSERT) for part in parts]
        return job, updates

    def _allocate_parts(self, job_id: int, shares: dict[str, int], epoch: int,
                        floats: tuple[str, int] | None = None) -> tuple[Part, ...] | None:
        """A fresh range on each PBox of ``shares`` (PBox -> slots), held by (job, PBox,
        ``epoch``), by slot base, and ``floats`` (PBox, slots) as the float route at the
        end of that PBox's range (a PBox configures one range per job); None if the
        rack's PBox pool has no room."""
        counts = dict(shares)
        if floats is not None:
            counts[floats[0]] = counts.get(floats[0], 0) + floats[1]
        parts = []
        for pbox, count in counts.items():
            owner = (job_id, pbox, epoch)
            got = self._allocate(self.pbox_pools[pbox], owner, count)
            if got is None:
                return None
            parts.append(Part(pbox, got, owner, floats[1] if floats and floats[0] == pbox else 0))
        return tuple(sorted(parts, key=lambda part: part.slots.base))

    @staticmethod
    def _rack_of_worker(job: Job, worker: Worker) -> str:
        return worker.switch or job.switch

    def _member_writes(self, job: Job, worker: Worker, op: str) -> list[Update]:
        switch = self._rack_of_worker(job, worker)
        return [
            TableWrite(switch, op, _member_entry(job.job_id, worker, op)),
            TableWrite(switch, op, _result_dst_entry(job.job_id, worker, op)),
        ]

    def _group_write(self, job: Job, op: str, switch: str | None = None) -> GroupWrite:
        """The job's multicast group on ``switch`` (default: the job's): its workers there."""
        switch = switch or job.switch
        replicas = tuple(
            (w.switch_port, p.result_rid(job.job_id, w.rank))
            for w in sorted(job.workers.values(), key=lambda w: w.rank)
            if self._rack_of_worker(job, w) == switch
        )
        return GroupWrite(switch, op, job.job_id, replicas)

    # -- jobs over a fabric (controller/core/tree.py) -----------------------------------

    def _create_on_fabric(self, name: str, world_size: int, leaf: str,
                          lanes: int) -> tuple[Job, list[Update]]:
        """A job on a leaf-spine fabric: one range at the same base on every leaf and on
        the spine with the most free slots (the root, if the job spans racks), held until
        all its workers are in and ``_place_on_fabric`` knows its racks. Nothing is
        written yet: the agents' first packets find no job and are resent."""
        tag = self._free_tag(name)
        if self.topo.pbox_of(leaf) is None:
            raise JobError(f"rack {leaf} has no PBox, so no aggregator address")
        job_id = self._free_job_id()
        want = self.topo.switches[leaf].job_slots
        spines = [s for s in self.topo.spines() if s not in self.unreachable]
        root = min(spines, key=lambda s: (-self.switch_pools[s].free_slots(), s), default="")
        pbox = self.topo.pbox_of(leaf)
        assert pbox is not None
        base, on_pbox = (self._fabric_base(self.switch_pools[root], self.topo.leaves(), want)
                         if root else (None, ()))
        root_pbox = ""
        if base is None:  # no spine has room (or none is up): the rack's PBox is the root
            base, on_pbox = self._fabric_base(self.pbox_pools[pbox.name], self.topo.leaves(),
                                              want)
            if base is None:
                where = f"the spine {root}" if root else "a spine that is up"
                raise JobError(f"no {want} free slots at one base on {where} (nor on rack "
                               f"{leaf}'s PBox {pbox.name}) and on every rack's leaf or PBox")
            # its rack's workers are the PBox's members (its leaf only holds the range
            # for a job that turns out to be this rack's alone)
            root, root_pbox = leaf, pbox.name
            on_pbox = (leaf, *(s for s in on_pbox if s != leaf))
        epoch = self._take_epoch()
        holders = tuple(s for s in dict.fromkeys((root, *self.topo.leaves()))
                        if s not in on_pbox)
        if root_pbox and is_free(self.switch_pools[leaf], base, want):
            holders = (leaf, *holders)  # for a job that turns out to be this rack's alone
        for switch in holders:
            self._reserve(self.switch_pools[switch], job_id, base, want)
        parts = []
        for rack_leaf in on_pbox:
            first = self.topo.pbox_of(rack_leaf)
            assert first is not None
            owner = (job_id, first.name, epoch)
            self._reserve(self.pbox_pools[first.name], owner, base, want)
            parts.append(Part(first.name, SlotRange(base, want), owner))
        job = Job(job_id, name, tag, world_size, leaf, ON_SWITCH, SlotRange(base, want), epoch,
                  pbox.name, lanes, placement=PLACE_PBOX, fabric=holders,
                  rack_pboxes=tuple(parts), root_pbox=root_pbox)
        self._add_job(job)
        return job, []

    def _fabric_base(self, root: SlotPool, leaves: Sequence[str],
                     want: int) -> tuple[int | None, tuple[str, ...]]:
        """The lowest base free in the root's pool and on every one of ``leaves``;
        failing that, the base free at the root where the fewest racks must use their
        PBox instead of their leaf (the leaves without room there), and those leaves."""
        base = common_base([root, *(self.switch_pools[s] for s in leaves)], want)
        if base is not None:
            return base, ()
        best: tuple[int, int, tuple[str, ...]] | None = None
        for candidate in free_bases(root, want):
            on_pbox = tuple(leaf for leaf in leaves
                            if not is_free(self.switch_pools[leaf], candidate, want))
            if all(self._rack_pbox_free(leaf, candidate, want) for leaf in on_pbox):
                key = (len(on_pbox), candidate, on_pbox)
                best = key if best is None or key < best else best
        return (best[1], best[2]) if best is not None else (None, ())

    def _rack_pbox_free(self, leaf: str, base: int, count: int) -> bool:
        first = self.topo.pbox_of(leaf)
        return first is not None and is_free(self.pbox_pools[first.name], base, count)

    def _place_on_fabric(self, job: Job) -> list[Update]:
        """All workers are in: one rack makes an ordinary switch job on its leaf; several
        make a tree under the root spine. Switches outside it give the range back."""
        racks: dict[str, int] = {}
        for worker in job.workers.values():
            racks[worker.switch] = racks.get(worker.switch, 0) + 1
        on_pbox = {self._leaf_of_part(part): part for part in job.rack_pboxes}
        if len(racks) == 1:
            (leaf,) = racks
            on_leaf = leaf in job.fabric
            self._release_fabric(job, (leaf,) if on_leaf else (), () if on_leaf else (leaf,))
            self._set(job, "fabric", ())
            self._set(job, "root_pbox", "")
            self._set(job, "switch", leaf)
            part = None if on_leaf else on_pbox.get(leaf)
            if part is None:
                return [TableWrite(leaf, INSERT, job_entry(job)), self._group_write(job, INSERT)]
            # one rack without room on its leaf: an ordinary PBox job there
            self._set(job, "rack_pboxes", ())
            self._set(job, "where", ON_PBOX)
            self._set(job, "pbox", part.pbox)
            self._set_parts(job, (part,))
            return [TableWrite(leaf, INSERT, job_entry(job)), part_write(job, part, INSERT)]
        try:
            if job.root_pbox:
                ranks: dict[str, list[int]] = {}
                for worker in job.workers.values():
                    ranks.setdefault(worker.switch, []).append(worker.rank)
                planned = plan_under_pbox(self.topo, job.root_pbox, ranks,
                                          frozenset(racks) & set(on_pbox))
            else:
                planned = plan(self.topo, job.fabric[0], racks, frozenset(racks) & set(on_pbox))
        except TreeError as exc:
            raise JobError(f"job {job.name!r} cannot span racks {', '.join(sorted(racks))}: "
                           f"{exc}") from None
        # a root PBox's leaf only forwards to it: the range it held goes back too
        self._release_fabric(job, tuple(s for s in planned.switches
                                        if not (s == planned.root and planned.root_pbox)),
                             planned.switches)
        self._set(job, "fabric", tuple(s for s in planned.switches if s not in on_pbox))
        self._set(job, "tree", planned)
        self._set(job, "switch", planned.root)
        return self._tree_writes(job, INSERT)

    def _leaf_of_part(self, part: Part) -> str:
        return self.topo.pboxes[part.pbox].switch

    def _release_fabric(self, job: Job, switches: tuple[str, ...],
                        racks: tuple[str, ...]) -> None:
        """Give back the range on every switch but ``switches``, and on the PBox of every
        rack (leaf) but ``racks``."""
        for switch in job.fabric:
            if switch not in switches:
                self._free(self.switch_pools[switch], job.job_id)
        kept = []
        for part in job.rack_pboxes:
            if self._leaf_of_part(part) in racks:
                kept.append(part)
            else:
                self._free(self.pbox_pools[part.pbox], part.owner)
        self._set(job, "rack_pboxes", tuple(kept))

    def _tree_writes(self, job: Job, op: str) -> list[Update]:
        """Every write of the job's tree but its workers' member entries: the root's
        entries and group, each leaf's jobs entry and group."""
        assert job.tree is not None
        spec = _tree_job(job)
        updates: list[Update] = [TableWrite(job.tree.root, op, e)
                                 for e in root_entries(spec, job.tree, op)]
        if job.tree.root_pbox:
            updates.append(root_pbox_write(spec, job.tree, op))
        else:
            updates.append(GroupWrite(job.tree.root, op, job.job_id,
                                      () if op == DELETE else root_replicas(job.job_id, job.tree)))
        for leaf in job.tree.leaves:
            entry = (job_entries.jobs_key(job.job_id) if op == DELETE
                     else self._leaf_entry(job, leaf))
            updates.append(TableWrite(leaf.switch, op, entry))
            if leaf.pbox:
                updates.append(pbox_leaf_write(spec, job.tree, leaf, op))
            else:
                updates.append(self._group_write(job, op, leaf.switch))
        return updates

    @staticmethod
    def rack_pbox_writes(job: Job, op: str) -> list[Update]:
        """The writes of the PBoxes of ``job``'s tree: its root PBox, its racks' first
        levels."""
        if job.tree is None:
            return []
        spec = _tree_job(job)
        root: list[Update] = [root_pbox_write(spec, job.tree, op)] if job.tree.root_pbox else []
        return root + [pbox_leaf_write(spec, job.tree, leaf, op)
                       for leaf in job.tree.leaves if leaf.pbox]

    @staticmethod
    def _leaf_entry(job: Job, leaf: Leaf) -> Entry:
        """The jobs entry of a leaf of ``job``'s tree: it aggregates, or its rack's PBox."""
        assert job.tree is not None
        spec = _tree_job(job)
        return pbox_leaf_entry(spec, leaf) if leaf.pbox else leaf_entry(spec, job.tree, leaf)


# -- entries ---------------------------------------------------------------------


def _tree_job(job: Job) -> TreeJob:
    return TreeJob(job.job_id, job.tag, job.epoch, job.lanes, job.world_size, job.slots)


def part_write(job: Job, part: Part, op: str) -> PBoxJobWrite:
    """Configure (INSERT; MODIFY: make sure it is there as described) the job on the
    PBox of ``part``, with that part's range."""
    return PBoxJobWrite(part.pbox, op, job.job_id, job.world_size, part.slots.base,
                        part.slots.count, job.lanes, precision=job.precision,
                        floats=part.floats)


def _shrunk_shares(job: Job, rest: int) -> dict[str, int]:
    """``rest`` slots over the fastest of ``job``'s PBoxes, in proportion to their rates
    (alike while any is unmeasured), each at least the exploration share, in map order."""
    names = [part.pbox for part in job.share_parts]
    rates = job.rates(elastic.MIN_SAMPLES)[1 if job.where == ON_SWITCH else 0:]
    measured = len(rates) == len(names) and all(r is not None and r > 0 for r in rates)
    weights = [float(r) for r in rates if r is not None] if measured else [1.0] * len(names)
    floor = elastic.min_share(rest)
    fastest = sorted(range(len(names)), key=lambda i: (-weights[i], i))[: max(1, rest // floor)]
    keep = sorted(fastest)
    shares = elastic.proportional(rest, [weights[i] for i in keep], floor)
    return {names[i]: count for i, count in zip(keep, shares, strict=True)}


def _even(pboxes: list[str], count: int) -> dict[str, int]:
    """``count`` window slots in even shares over ``pboxes`` (the earlier ones take the
    remainder; a PBox with no slot gets no share)."""
    shares = elastic.proportional(count, [1.0] * len(pboxes), 0)
    return {pbox: n for pbox, n in zip(pboxes, shares, strict=True) if n}


def _route(ip: int, slots: SlotRange, fallback: bool) -> dict:
    return {"aggregator": aggregator_address(ip), "slot_base": slots.base,
            "count": slots.count, "fallback": fallback}


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


def job_entry(job: Job) -> Entry:
    """The switch's jobs entry for ``job``."""
    if job.where == ON_SWITCH:
        return job_entries.on_switch(job.job_id, job.world_size, job.slots, job.lanes, job.tag,
                                     job.epoch)
    return job_entries.on_pbox(job.job_id, job.world_size, job.slots, job.lanes, job.tag)


def _member_entry(job_id: int, worker: Worker, op: str) -> Entry:
    return job_entries.member(job_id, worker.rank, worker.ip, worker.port, worker.switch_port, op)


def _result_dst_entry(job_id: int, worker: Worker, op: str) -> Entry:
    return job_entries.result_dst(job_id, worker.rank, worker.mac, worker.ip, worker.port, op)


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


def valid_epoch(value: int) -> int:
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
