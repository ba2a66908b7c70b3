"""The job registry: joins, leaves, barriers and liveness, sans-I/O.

Like faucet's valves, every method takes an event (and ``now`` where time
matters) and returns the list of updates (controller/core/updates.py) that bring the
switches and PBoxes in line; nothing here touches a socket, a clock or gRPC.

On a leaf-spine fabric a job may span racks: it is then a two-level tree
(controller/core/tree.py, docs/DESIGN.md §3.1), placed once all its workers have joined
(controller/core/fabric_placement.py). Otherwise a job lives on one rack (the
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
    result_dst  egress_rid = job*32 + member bit -> set_result_dst(mac, ip, udp_port)
    multicast group <job id>: (worker port, rid) per worker   (switch jobs only)

That is everything needed to rebuild the registry after a restart
(``controller.core.rebuild``); only liveness deadlines, barrier progress and the
record of ended jobs are lost, and restart fresh.

``JobRegistry`` is the registry's state and undo log (``Ledger``,
controller/core/ledger.py: events are all or nothing) with one method per event, each
delegating to the module of its concern:

    membership.py         joins, leaves, heartbeats, barriers, expiry, a job's end
    rack_placement.py     a new job's window on its rack's switch and PBoxes
    elastic_moves.py      rebalancing over PBoxes, promotion onto the switch
    fabric_placement.py   jobs over racks: held ranges, then their tree
    faults.py             restarted switches and PBoxes, lost PBoxes
    job_writes.py         the writes a job's state implies; a switch's expected state
"""

from __future__ import annotations

from p4hub.controller.core import elastic_moves, faults, job_writes, membership
from p4hub.controller.core import program as p
from p4hub.controller.core.job import PLACE_AUTO, Job, JoinReply
from p4hub.controller.core.ledger import Ledger
from p4hub.controller.core.traffic import Counters, RouteService
from p4hub.controller.core.updates import Entry, Update


class JobRegistry(Ledger):
    """All jobs of all racks. ``epoch_seed`` makes slot epochs unique across restarts
    (pass something like the time in milliseconds; tests pass a constant). Each event
    is documented where it is implemented."""

    # -- membership and liveness (membership.py) ---------------------------------------

    def join(
        self, name: str, world_size: int, rank: int, address: tuple[str, int], now: float,
        placement: str = PLACE_AUTO, lanes: int = p.DEFAULT_LANES, precision: float | None = None,
    ) -> tuple[JoinReply, list[Update]]:
        """A worker joins job ``name``; creates the job on first join (``membership.join``)."""
        return membership.join(self, name, world_size, rank, address, now, placement, lanes,
                               precision)

    def heartbeat(self, job_id: int, rank: int, now: float,
                  counters: Counters | None = None, service: RouteService | None = None) -> None:
        """The rank is alive (``membership.heartbeat``)."""
        membership.heartbeat(self, job_id, rank, now, counters, service)

    def leave(self, job_id: int, rank: int, now: float | None = None) -> list[Update]:
        """A worker leaves; the job ends with its last worker (``membership.leave``)."""
        return membership.leave(self, job_id, rank, now)

    def kill(self, job_id: int, now: float | None = None,
             reason: str = "killed by an operator (KillJob)") -> list[Update]:
        """End a job: remove every entry, free its slots (``membership.kill``)."""
        return membership.kill(self, job_id, now, reason)

    def expire(self, now: float) -> list[Update]:
        """End every job with a member silent for ``worker_timeout`` (``membership.expire``)."""
        return membership.expire(self, now)

    def barrier(self, job_id: int, rank: int, now: float) -> int:
        """Rank arrives at the job's barrier; the generation it waits on
        (``membership.barrier``)."""
        return membership.barrier(self, job_id, rank, now)

    def barrier_passed(self, job_id: int, generation: int) -> bool:
        return membership.barrier_passed(self, job_id, generation)

    def reply(self, job: Job, rank: int) -> JoinReply:
        """What rank ``rank`` of ``job`` is told on joining (``membership.reply``)."""
        return membership.reply(self, job, rank)

    def routes(self, job: Job, rank: int | None = None) -> tuple[dict, ...]:
        """The job's map as rank ``rank``'s agent runs it (``membership.routes``)."""
        return membership.routes(self, job, rank)

    # -- the job's aggregators: moves (elastic_moves.py) and faults (faults.py) -----------

    def promote(self, now: float | None) -> list[Update]:
        """PLACE_AUTO jobs on PBoxes onto the switch once it has room, racks of trees
        onto their leaves (``elastic_moves.promote``)."""
        return elastic_moves.promote(self, now)

    def rebalance(self, now: float) -> list[Update]:
        """Scale in, scale out or re-split each job's PBox share by its measured rates
        (``elastic_moves.rebalance``)."""
        return elastic_moves.rebalance(self, now)

    def _resplit(self, job: Job, shares: dict[str, int], now: float | None, reason: str,
                 dead: str | None = None) -> list[Update] | None:
        """The job's PBox share as ``shares`` on fresh ranges (``elastic_moves.resplit``)."""
        return elastic_moves.resplit(self, job, shares, now, reason, dead)

    def switch_restarted(self, switch: str, now: float | None) -> list[Update]:
        """``switch`` came back without its registers (``faults.switch_restarted``)."""
        return faults.switch_restarted(self, switch, now)

    def tree_pbox_restarted(self, job: Job, pbox: str, now: float | None) -> list[Update]:
        """A PBox of ``job``'s tree had lost the job (``faults.tree_pbox_restarted``)."""
        return faults.tree_pbox_restarted(self, job, pbox, now)

    def pbox_lost(self, job_id: int, pbox: str, now: float | None, reason: str) -> list[Update]:
        """PBox ``pbox`` cannot be reached (``faults.pbox_lost``)."""
        return faults.pbox_lost(self, job_id, pbox, now, reason)

    # -- the state a switch should be in (for resynchronising it; job_writes.py) ----------

    def expected_entries(self, switch: str) -> list[Entry]:
        """Every entry ``switch`` should hold: the rack's static ones and the jobs'."""
        return job_writes.expected_entries(self, switch)

    def expected_groups(self, switch: str) -> dict[int, tuple[tuple[int, int], ...]]:
        """Multicast groups ``switch`` should hold: flood, and one per switch job."""
        return job_writes.expected_groups(self, switch)

    @staticmethod
    def rack_pbox_writes(job: Job, op: str) -> list[Update]:
        """The writes of the PBoxes of ``job``'s tree (``job_writes.rack_pbox_writes``)."""
        return job_writes.rack_pbox_writes(job, op)
