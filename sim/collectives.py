"""In-network aggregation as a simulated collective: the job placed on the switches or
on a PBox, one ``Worker`` (a real ``Session``) per rank.

Placement follows the controller's rules for one job (docs/DESIGN.md §3.1): on a rack,
the leaf sums the job in its slots; over racks, a two-level tree, every leaf summing its
rack and sending one PARTIAL per cell up to the root spine, which sums the racks and
sends the RESULT back through the leaves. ``where="pbox"`` puts the whole job on rack 1's
first PBox (a job the switches had no room for). The aggregators are the PBox core
everywhere (``sim/nodes/switch.py`` says why that is the switch program's arithmetic).

A collective is all-reduce (SUM) of a float32 array; completion calls
``on_complete(rank, tensor_id, result)``, or ``on_failed(rank, tensor_id, reason)``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from p4hub.hosts.events import Event, TensorCompleted, TensorFailed
from p4hub.hosts.pbox.job_config import Parent
from p4hub.hosts.session import Session, SessionConfig
from p4hub.sim.controlled import ControlledJob, map_ports
from p4hub.sim.controlled import place as controlled_place
from p4hub.sim.errors import SimError
from p4hub.sim.fabric import Fabric
from p4hub.sim.nodes.worker import Worker

JOB_ID = 1


def run_sizes(fabric: Fabric, targets: Sequence[Mapping[Any, str]],
              macro: int) -> dict[str, int]:
    """Tier M's run size towards each PBox the job's ranks send to: ``macro`` divided by
    the ranks that share it (its fan-in). A PBox has one link, so the ranks' runs
    converge on it going in and its answers, one run per rank, leave by it one run at
    a time: the last rank's run waits behind the other ranks' whole runs, where tier P
    interleaves their datagrams and it waits behind one datagram of each. Runs of
    ``macro // fan-in`` keep that wait, one run from every rank, within one ``macro``
    run's serialization on the shared link. A switch needs no such rule: each rank
    reaches it, and hears from it, over its own link."""
    boxes = {box.name for box in fabric.all_pboxes()}
    fan_in: dict[str, int] = {}
    for aggregators in targets:
        for node in set(aggregators.values()):
            if node in boxes:
                fan_in[node] = fan_in.get(node, 0) + 1
    return {node: max(1, macro // n) for node, n in fan_in.items()}


class InaCollective:
    """All-reduce through the job's aggregators; ``where`` is "switch" or "pbox"."""

    def __init__(self, fabric: Fabric, where: str, *, slots: int, config: SessionConfig,
                 macro: int, datagram_cost: float,
                 on_complete: Callable[[int, Hashable, np.ndarray], None],
                 on_failed: Callable[[int, Hashable, str], None],
                 controlled: bool = False, seed: int = 0,
                 placed: Sequence[tuple[Session, dict[Hashable, str]]] | None = None,
                 ranks: Sequence[int] | None = None) -> None:
        """``controlled``: the controller's job logic places the job and programs the
        switches (tier P, sim/controlled.py); ``placed``: a job placed already, each
        rank's session and its aggregators (route -> node), on the fabric's workers
        ``ranks`` (one of several jobs, sim/multijob.py); otherwise ``_place`` places
        the job on every worker, by its rules."""
        hosts = list(range(fabric.workers)) if ranks is None else list(ranks)
        n = len(hosts)
        self.fabric = fabric
        self.where = where
        self.on_complete, self.on_failed = on_complete, on_failed
        lanes = config.lanes
        sessions: list[Session] = []
        targets: list[dict[Hashable, str]] = []
        self.controlled: ControlledJob | None = None
        if placed is not None:
            sessions = [session for session, _ in placed]
            targets = [dict(aggregators) for _, aggregators in placed]
        elif controlled:
            self.controlled = job = controlled_place(fabric, where, lanes=lanes,
                                                     job_slots=slots, seed=seed)
            for rank, reply in enumerate(job.replies):
                sessions.append(Session(reply.job_id, rank, n, reply.slot_base, reply.slot_count,
                                        config=config, epoch=reply.epoch,
                                        route_map=job.route_map(rank)))
                targets.append(job.aggregator_nodes(rank))
        else:
            try:
                first_hops = self._place(fabric, where, n, slots, lanes)
            except ValueError as exc:  # the aggregator core's refusal (AggregatorError)
                raise SimError(f"cannot place the job on the {where}: {exc}") from None
            sessions = [Session(JOB_ID, rank, n, 0, slots, config=config) for rank in range(n)]
            targets = [{None: hop} for hop in first_hops]
        self.workers: list[Worker] = []
        runs = run_sizes(fabric, targets, macro)
        for rank, host in enumerate(hosts):
            worker = Worker(fabric.engine, f"w{host + 1}", sessions[rank],
                            aggregators=targets[rank], macro=macro,
                            datagram_cost=datagram_cost, on_event=self._event, runs=runs)
            fabric.attach_worker(host, worker)
            self.workers.append(worker)
        if controlled:
            map_ports([*fabric.leaves, *fabric.spines], fabric.controller_topo,
                      fabric.workers_per_rack, fabric.pbox_names)
        self._rank = {w.name: r for r, w in enumerate(self.workers)}

    @staticmethod
    def _place(fabric: Fabric, where: str, n: int, slots: int, lanes: int) -> list[str]:
        """Configure the aggregators; returns each rank's first hop aggregator."""
        if where == "pbox":
            boxes = fabric.all_pboxes()
            if not boxes:
                raise SimError("the pbox path needs a PBox (topology.pboxes >= 1)")
            boxes[0].aggregator.add_job(JOB_ID, n, 0, slots, lanes)
            return [boxes[0].name] * n
        if where != "switch":
            raise SimError(f"unknown in-network path {where!r}")
        if fabric.racks == 1:
            fabric.leaves[0].aggregator.add_job(JOB_ID, n, 0, slots, lanes)
            return [fabric.leaves[0].name] * n
        root = fabric.spines[0]  # the controller's choice too: the first spine with room
        root.aggregator.add_job(JOB_ID, n, 0, slots, lanes)
        wpr = fabric.workers_per_rack
        for r, leaf in enumerate(fabric.leaves):  # a leaf numbers its rack's ranks
            leaf.aggregator.add_job(JOB_ID, n, 0, slots, lanes, parent=Parent(
                (root.name, 0), r, wpr, tuple(range(r * wpr, (r + 1) * wpr))))
        return [fabric.leaf_of(rank).name for rank in range(n)]

    def start(self, rank: int, tensor_id: Hashable, array: np.ndarray, *, priority: int = 0,
              stream: int | None = None) -> None:
        self.workers[rank].start(tensor_id, array, priority=priority, stream=stream)

    def _event(self, worker: Worker, event: Event) -> None:
        rank = self._rank[worker.name]
        if isinstance(event, TensorCompleted):
            self.on_complete(rank, event.tensor_id, event.result)
        elif isinstance(event, TensorFailed):
            self.on_failed(rank, event.tensor_id, event.reason)

    def counters(self) -> dict[str, int]:
        """Summed over the ranks' sessions: what was sent, resent and dropped."""
        out: dict[str, int] = {}
        for w in self.workers:
            for name, value in w.session.stats.as_dict().items():
                out[name] = out.get(name, 0) + int(value)
        return out
