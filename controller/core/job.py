"""A job as the registry (controller/core/jobs.py) holds it: its workers, its window's
aggregators (the switch's range, its PBox ``Part``s, a tree over racks), its moves and,
once it is gone, how it ended; the reply a joining worker gets; the errors the registry
raises. Plain data: the registry's concern modules change it, through the undo log
(controller/core/ledger.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from p4hub.controller.core import program as p
from p4hub.controller.core.elastic import Streak
from p4hub.controller.core.errors import NotFoundError, RefusedError
from p4hub.controller.core.slots import SlotRange
from p4hub.controller.core.traffic import RouteMeter, TrafficMeter, job_rates, route_rates
from p4hub.controller.core.tree import Tree

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
    # its bit in the cells' bitmaps on that switch (members entry, result_dst's rid):
    # its rank while that is below MAX_WORKERS and free there, else the lowest free bit
    # (a job over racks has up to MAX_WORLD_SIZE ranks, at most MAX_WORKERS a switch)
    bit: int = -1

    def __post_init__(self) -> None:
        if self.bit < 0:
            self.bit = self.rank


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
    lanes: int = p.DEFAULT_LANES  # int32 lanes per packet, chosen by the join that created the job
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
    # checks in a row that predicted a re-split below elastic.MIN_GAIN (``elastic.persisted``)
    gain_streak: Streak | None = None
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
    lanes: int
    window: int
    where: str
    epoch: int  # changes whenever the job's aggregator state is lost or it moves
    routes: tuple[dict, ...] = ()  # the map: aggregator "ip:port", slot_base, count, fallback
    precision: float | None = None  # the job's precision option (None: off)
    # its aggregators run scatter rounds (reduce-scatter, wire version 3): the switch and
    # a PBox do, a job over racks does not (a leaf has none, nor a PBox under a parent)
    scatter: bool = True
    # ... and gather rounds (all-gather, wire version 3: GATHER, GATHER_JOIN), where the
    # same holds; an agent told neither (an older controller) gathers over the all-reduce
    gather: bool = True


# Why a job ended (JobEnd.cause).
END_KILLED = "killed"  # KillJob
END_LEFT = "left"  # its last worker left
END_SILENT = "silent"  # a member sent no heartbeat for worker_timeout seconds
END_LOST = "aggregator-lost"  # its aggregator died and no other one had room



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



def valid_epoch(value: int) -> int:
    """Epochs are 32-bit and never 0 (0 is a register's initial owner)."""
    value &= 0xFFFF_FFFF
    return value or 1


