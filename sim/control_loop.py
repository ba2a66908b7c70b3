"""The controller's periodic work and the agents' heartbeats, under simulated time.

What ``workers/worker.py``'s job client and ``controller/api.py``'s ``Heartbeat`` and
``Expirer.tick`` do over gRPC, as two SimPy processes around the same
``JobRegistry`` (tier P, sim/controlled.py):

* every ``HEARTBEAT`` seconds each rank reports its session's counters and per-route
  service (``Session.route_service``) to ``JobRegistry.heartbeat``, and reads back the
  job's epoch and its map; an epoch other than the one its session runs under makes
  the session ``resync`` onto the new map, as ``Agent.follow`` does;
* every ``TICK`` seconds the controller promotes jobs waiting for switch slots and, if
  the topology lets it (``rebalance``), re-splits jobs' PBox shares by the measured
  rates (controller/core/elastic.py); the writes go to the switches and PBoxes as
  ``sim.controlled.apply`` makes them.

So a straggling PBox is found, and the job's share moved off it, by the controller's
own rules, in simulated seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from p4hub.controller.core.traffic import Counters, RouteService
from p4hub.hosts import routes
from p4hub.sim.controlled import ControlledJob, apply
from p4hub.sim.engine import Engine

HEARTBEAT = 0.5  # seconds, as workers/worker.py's job client
TICK = 1.0  # seconds, as p4hub-controller's --expire-interval default


class ControlLoop:
    def __init__(self, engine: Engine, job: ControlledJob, workers: list[Any],
                 switches: dict[str, Any], pboxes: dict[str, Any], *, rebalance: bool,
                 finished: Callable[[], bool]) -> None:
        """``finished``: true once the run's training is over (the loops end with it, so
        the clock stops where the work does)."""
        self.engine = engine
        self.finished = finished
        self.job = job
        self.workers = workers
        self.switches, self.pboxes = switches, pboxes
        self.rebalance = rebalance
        self.resyncs = 0  # sessions told to follow a new map
        self.moves: list[str] = []  # the job's aggregator changes, as the registry records them

    def start(self) -> None:
        self.engine.process(self._heartbeats())
        self.engine.process(self._ticks())

    def _heartbeats(self) -> Generator[Any, Any, None]:
        registry = self.job.registry
        job_id = self.job.replies[0].job_id
        while not self.finished():
            yield self.engine.timeout(HEARTBEAT)
            now = self.engine.now
            job = registry.jobs.get(job_id)
            if job is None:
                return
            for rank, worker in enumerate(self.workers):
                session = worker.session
                stats = session.stats
                epoch, service = session.route_service()
                registry.heartbeat(job_id, rank, now,
                                   Counters(stats.sent, stats.retransmitted, stats.results),
                                   RouteService(epoch, tuple(service)))
                if job.epoch != session.map_epoch:
                    session.resync(now, epoch=job.epoch,
                                   route_map=routes.from_wire(registry.routes(job, rank)))
                    self.resyncs += 1
                    worker.kick()

    def _ticks(self) -> Generator[Any, Any, None]:
        registry = self.job.registry
        job_id = self.job.replies[0].job_id
        while not self.finished():
            yield self.engine.timeout(TICK)
            now = self.engine.now
            updates = registry.promote(now)
            if self.rebalance:
                updates += registry.rebalance(now)
            if updates:
                apply(updates, self.switches, self.pboxes, self.job.pbox_names, self.job.book)
            job = registry.jobs.get(job_id)
            if job is not None:
                self.moves = [f"{m.at:.1f} s: {m.reason}" for m in job.moves]
