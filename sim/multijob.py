"""Several jobs in one simulated rack (a scenario's ``[[jobs]]``, sim/jobs_spec.py).

Each job is a ``Trainer`` over its own workers and its own collective, started at its
start time; the jobs share the switch, its slot pool, the PBoxes and every link. Per path:

* ``switch`` and ``pbox``: when a job starts, each rank joins it through the
  controller's ``JobRegistry`` (controller/core/jobs.py), as workers join over the
  controller's gRPC API, ``switch`` with the automatic placement (the switch's slots if
  it has room, else as many as it has in one run, at least an eighth of the window, and
  the rest on the rack's PBoxes; else all on the PBoxes) and ``pbox`` with the PBox
  placement. The registry's PBox writes configure the PBoxes' cores
  (``controlled.apply``); a job with switch slots is configured on the switch's
  aggregator at the registry's slot range. Each rank's ``Session`` runs the reply's
  epoch and map, whose switch route (addressed to the rack's first PBox, which the
  switch answers for) is sent to the switch node and whose PBox routes (flagged
  FALLBACK, which the switch forwards) to the PBoxes. When a job's last rank finishes,
  every rank leaves: the registry frees its slots and removes it from the PBoxes, and
  the switch forgets it, so a later job may take its slots. Every ``TICK`` the
  controller promotes (``JobRegistry.promote``, as p4hub-controller's expiry tick does):
  a job that went to the PBoxes moves onto the switch once it has room, or takes a
  larger switch range; its ranks learn the new map at their next heartbeat
  (``HEARTBEAT``) and resync onto it, as ``Agent.follow`` does (sim/control_loop.py
  does the same for tier P's one job).
* ``ring``: a ring per job over its workers.
* ``ps``: a sharded parameter server per job, on the same PBoxes: every PBox serves
  every job's shard of each tensor, in arrival order, at its CPU's rate.

Churn, as the run reports it: the switch's slots the jobs hold over time (every
placement, promotion and end changes it: ``slot_timeline``; ``slot_use`` is its
time-weighted mean over the run, as a fraction of the switch's slots), and how much of
the aggregation went to the PBoxes (``RunResult.pbox_share``, from the nodes' counts).

Not modelled: the controller's re-split of PBox shares by measured rates (the
heartbeats here carry no counters), and its liveness expiry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, cast

from p4hub.controller.core import topology
from p4hub.controller.core.job import ON_SWITCH, PLACE_AUTO, PLACE_PBOX
from p4hub.controller.core.jobs import JobRegistry
from p4hub.controller.core.updates import PBoxJobWrite, Update
from p4hub.hosts import routes
from p4hub.hosts.routes import Route
from p4hub.hosts.session import Session, SessionConfig
from p4hub.sim.baselines import RingCollective, ShardedPS
from p4hub.sim.collectives import InaCollective
from p4hub.sim.control_loop import HEARTBEAT, TICK
from p4hub.sim.controlled import CONTROLLER_GRPC, WORKER_UDP_PORT, apply, make_book
from p4hub.sim.engine import Engine
from p4hub.sim.errors import SimError
from p4hub.sim.fabric import Fabric
from p4hub.sim.jobs_spec import PBOX_POOL, JobEntry
from p4hub.sim.network import Frame
from p4hub.sim.training import Trainer, load_workload

CHECK_LIMIT = 50_000_000  # parameters x ranks x iterations a job's results are checked to


@dataclass
class JobRun:
    """One job of the run: its trainer, its collective once started, its placement."""

    entry: JobEntry
    trainer: Trainer
    collective: Any = None
    job_id: int | None = None  # the registry's (in-network paths)
    where: str = ""  # "switch", "switch+pbox", "pbox" (in-network); the path otherwise
    switch_slots: int = 0
    pbox_slots: int = 0
    failures: list[str] = field(default_factory=list)
    moves: list[str] = field(default_factory=list)  # the registry's, for this job
    resyncs: int = 0  # sessions told to follow a new map

    def record(self) -> dict[str, Any]:
        t = self.trainer
        return {
            "workers": [f"w{w + 1}" for w in self.entry.workers], "model": self.entry.model,
            "start_s": self.entry.start, "where": self.where,
            "switch_slots": self.switch_slots, "pbox_slots": self.pbox_slots,
            "iteration_times": t.iteration_seconds(),
            "ended_s": t.ended_at if t.finished == t.ranks else None,
            "exact": (t.mismatches == 0) if t.check else None, "checked": t.checked,
            "moves": list(self.moves), "resyncs": self.resyncs,
            "failures": [*self.failures, *t.failures]}


class Jobs:
    """The scenario's jobs on ``fabric`` over ``path``; ``start`` schedules them."""

    def __init__(self, engine: Engine, fabric: Fabric, scenario: Any, path: str, *,
                 seed: int, macro: int, check: bool | None) -> None:
        self.engine, self.fabric, self.scenario = engine, fabric, scenario
        self.path, self.seed, self.macro = path, seed, macro
        job = scenario.job
        self.p3 = job.schedule == "p3"
        self.classes = job.classes if self.p3 else 1
        self.slots = job.class_window * self.classes if self.p3 else job.window
        self.runs: list[JobRun] = []
        for entry in scenario.jobs:
            work = load_workload(entry.model, scale=entry.scale, elements=entry.elements,
                                 gpu_speed=scenario.hosts.gpu_speed)
            small = work.parameters * entry.size * entry.iterations <= CHECK_LIMIT
            ina = path in ("switch", "pbox")
            trainer = Trainer(engine, work, ranks=entry.size, iterations=entry.iterations,
                              schedule=job.schedule, classes=self.classes, lanes=job.lanes,
                              seed=seed, check=ina and (small if check is None else check),
                              slice_params=job.slice_params)
            self.runs.append(JobRun(entry, trainer))
        self.registry: JobRegistry | None = None
        if path in ("switch", "pbox"):
            workers, pboxes = fabric.workers_per_rack, len(fabric.all_pboxes())
            raw = topology.rack_dict(workers, f"{CONTROLLER_GRPC}0", pboxes=pboxes,
                                     slots=scenario.switch.slots, job_slots=self.slots,
                                     pbox_slots=PBOX_POOL)
            self.topo = topology.from_dict(raw)
            self.registry = JobRegistry(self.topo, epoch_seed=seed)
            self.book, self.pbox_names = make_book(self.topo, 1, workers, pboxes, 1)
            self.pboxes = {box.name: box for box in fabric.all_pboxes()}
        # (simulated time, switch slots the jobs hold) at every change
        self.slot_timeline: list[tuple[float, int]] = [(0.0, 0)]
        self._ps_of: dict[str, list[Callable[[Frame], list[Frame]]]] = {}
        if path == "ps":  # the PBoxes serve every job: each frame goes to its sender's job
            for shard, server in enumerate(fabric.all_pboxes()):
                server.serve_plain = self._serve(shard)

    # -- the run ------------------------------------------------------------------------

    def start(self) -> None:
        for run in self.runs:
            self.engine.call_at(run.entry.start, self._start, run)
        if self.registry is not None and self.path == "switch":  # PLACE_AUTO jobs move
            self.engine.process(self._ticks())
            self.engine.process(self._heartbeats())

    @property
    def done(self) -> bool:
        return all(r.trainer.finished == r.trainer.ranks for r in self.runs) or self.failed

    @property
    def failed(self) -> bool:
        return any(r.failures or r.trainer.failures for r in self.runs)

    def _slots_changed(self) -> None:
        held = sum(run.switch_slots for run in self._placed_runs())
        if held != self.slot_timeline[-1][1]:
            self.slot_timeline.append((self.engine.now, held))

    def slot_use(self, until: float) -> float | None:
        """The switch's slots the jobs held, time-weighted over [0, ``until``], as a
        fraction of its slots (None: no in-network path, or no time)."""
        if self.registry is None or until <= 0:
            return None
        held = 0.0
        points = [*self.slot_timeline, (until, 0)]
        for (t0, slots), (t1, _) in zip(points, points[1:], strict=False):
            held += slots * (min(t1, until) - min(t0, until))
        return held / (until * self.scenario.switch.slots)

    def iteration_times(self) -> list[float]:
        """Per iteration, the slowest job's (up to the fewest iterations any job ran)."""
        times = [r.trainer.iteration_seconds() for r in self.runs]
        return [max(t[i] for t in times) for i in range(min(len(t) for t in times))]

    def counters(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for run in self.runs:
            if isinstance(run.collective, InaCollective):
                for key, value in run.collective.counters().items():
                    out[key] = out.get(key, 0) + value
        return out

    def _start(self, run: JobRun) -> None:
        trainer, entry = run.trainer, run.entry
        if self.path in ("switch", "pbox"):
            try:
                run.collective = self._placed(run)
            except SimError as exc:
                run.failures.append(f"job {entry.name!r}: {exc}")
                return
        elif self.path == "ring":
            run.collective = RingCollective(self.fabric, macro=self.macro,
                                            on_complete=trainer.complete, ranks=entry.workers)
            run.where = "ring"
        else:
            ps = ShardedPS(self.fabric, macro=self.macro, on_complete=trainer.complete,
                           ranks=entry.workers, serve=False)
            callbacks = [ps.pushed_cb(s) for s in range(len(ps.servers))]
            for host in ps.hosts:
                self._ps_of[host.name] = callbacks
            run.collective, run.where = ps, "ps"
        trainer.collective = run.collective
        trainer.on_finished = lambda: self._finish(run)
        trainer.start()

    def _serve(self, shard: int) -> Callable[[Frame], list[Frame]]:
        def serve(frame: Frame) -> list[Frame]:
            return self._ps_of[frame.src][shard](frame)
        return serve

    # -- in-network jobs: the controller's placement -----------------------------------

    def _placed(self, run: JobRun) -> InaCollective:
        registry = self.registry
        assert registry is not None
        entry, job = run.entry, self.scenario.job
        now = self.engine.now
        placement = PLACE_AUTO if self.path == "switch" else PLACE_PBOX
        reply = None
        for rank, w in enumerate(entry.workers):
            host = self.topo.hosts[f"w{w + 1}"]
            try:
                reply, updates = registry.join(entry.name, entry.size, rank,
                                               (topology.format_ipv4(host.ip),
                                                WORKER_UDP_PORT + w), now, placement, job.lanes)
            except ValueError as exc:  # the registry's refusal (JobError): no room
                raise SimError(f"the controller refused the job: {exc}") from None
            self._apply(updates)
        assert reply is not None
        placed = registry.jobs[reply.job_id]
        run.job_id = placed.job_id
        run.pbox_slots = sum(part.share for part in placed.share_parts)
        if placed.where == ON_SWITCH:
            run.switch_slots = placed.slots.count
            self.fabric.leaves[0].aggregator.add_job(placed.job_id, entry.size,
                                                     placed.slots.base, placed.slots.count,
                                                     job.lanes)
        run.where = "+".join(w for w, n in (("switch", run.switch_slots),
                                            ("pbox", run.pbox_slots)) if n)
        self._slots_changed()
        config = SessionConfig(window=job.class_window if self.p3 else job.window,
                               lanes=job.lanes, classes=self.classes,
                               credit=job.window if self.p3 else None, rto_max=job.rto_max)
        sessions = []
        for rank in range(entry.size):
            r = registry.reply(placed, rank)
            route_map = self._nodes(routes.from_wire(r.routes) or [])
            session = Session(r.job_id, rank, entry.size, r.slot_base, r.slot_count,
                              config=config, epoch=r.epoch, route_map=route_map)
            sessions.append((session, {route.aggregator: str(route.aggregator)
                                       for route in route_map}))
        return InaCollective(self.fabric, self.path, slots=self.slots, config=config,
                             macro=self.macro, datagram_cost=self.scenario.hosts.datagram_cost,
                             on_complete=run.trainer.complete, on_failed=run.trainer.failed,
                             placed=sessions, ranks=entry.workers)

    def _nodes(self, route_map: list[Route]) -> list[Route]:
        """The map's aggregators as the simulation's nodes: the switch route is addressed
        to the rack's first PBox, whose address the switch answers for (aggregate.p4 sums
        what is not flagged FALLBACK), so it goes to the switch node here."""
        out = []
        for route in route_map:
            host, _ = cast(tuple[str, int], route.aggregator)  # routes.from_wire's (ip, port)
            node = self.book.by_ip[bytes(int(x) for x in host.split("."))]
            if not route.fallback and not route.floats:
                node = self.fabric.leaves[0].name
            out.append(dataclasses.replace(route, aggregator=node))
        return out

    def _apply(self, updates: list[Update]) -> None:
        """The registry's PBox writes, to the PBoxes' cores (the switch's table and group
        writes have no model here: its aggregator is configured from the job's range)."""
        writes: list[Update] = [u for u in updates if isinstance(u, PBoxJobWrite)]
        apply(writes, {}, self.pboxes, self.pbox_names, self.book)

    # -- the controller's tick and the agents' heartbeats --------------------------------

    def _ticks(self) -> Generator[Any, Any, None]:
        registry = self.registry
        assert registry is not None
        while not self.done:
            yield self.engine.timeout(TICK)
            updates = registry.promote(self.engine.now)
            if not updates:
                continue
            self._apply(updates)
            for run in self._placed_runs():
                self._sync_switch(run)

    def _heartbeats(self) -> Generator[Any, Any, None]:
        registry = self.registry
        assert registry is not None
        while not self.done:
            yield self.engine.timeout(HEARTBEAT)
            now = self.engine.now
            for run in self._placed_runs():
                assert run.job_id is not None
                job = registry.jobs[run.job_id]
                for rank, worker in enumerate(run.collective.workers):
                    if worker.session.map_epoch == job.epoch:
                        continue
                    route_map = self._nodes(routes.from_wire(registry.routes(job, rank)) or [])
                    worker.session.resync(now, epoch=job.epoch, route_map=route_map)
                    worker.aggregators.update({r.aggregator: str(r.aggregator)
                                               for r in route_map})
                    run.resyncs += 1
                    worker.kick()

    def _placed_runs(self) -> list[JobRun]:
        """The in-network jobs placed and not finished."""
        registry = self.registry
        assert registry is not None
        return [run for run in self.runs if run.job_id is not None
                and run.job_id in registry.jobs and run.trainer.finished < run.trainer.ranks]

    def _sync_switch(self, run: JobRun) -> None:
        """The switch's aggregator and the run's record as the registry now has the job
        (a promotion: its range on the switch is new, or larger)."""
        registry = self.registry
        assert registry is not None and run.job_id is not None
        job = registry.jobs[run.job_id]
        switch = job.slots.count if job.where == ON_SWITCH else 0
        pbox = sum(part.share for part in job.share_parts)
        moves = [f"{m.at:.3f} s: {m.reason}" for m in job.moves]
        if moves == run.moves:
            return
        run.moves = moves
        aggregator = self.fabric.leaves[0].aggregator
        if any(c.job_id == job.job_id for c in aggregator.jobs()):
            aggregator.remove_job(job.job_id)
        if switch:
            aggregator.add_job(job.job_id, run.entry.size, job.slots.base, switch,
                               self.scenario.job.lanes)
        run.switch_slots, run.pbox_slots = switch, pbox
        run.where = "+".join(w for w, n in (("switch", switch), ("pbox", pbox)) if n)
        self._slots_changed()

    def _finish(self, run: JobRun) -> None:
        if run.job_id is None or self.registry is None:
            return
        for rank in range(run.entry.size):
            self._apply(self.registry.leave(run.job_id, rank, self.engine.now))
        aggregator = self.fabric.leaves[0].aggregator
        if any(c.job_id == run.job_id for c in aggregator.jobs()):
            aggregator.remove_job(run.job_id)
        self._slots_changed()


def describe(runs: list[JobRun]) -> dict[str, dict[str, Any]]:
    """Per job, by name, what the run reports."""
    return {run.entry.name: run.record() for run in runs}

