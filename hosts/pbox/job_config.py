"""A PBox job as the aggregator is told it: its description (``JobConfig``, with the
``Parent`` of a rack's first level), the checks a description must pass
(``check_job``, ``parse_parent``: ``AggregatorError``, never raised for a datagram), and
the per-job counters the aggregator keeps (``JobStats``). The rules themselves are
hosts/pbox/aggregator.py's."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from p4hub.hosts.errors import HostError
from p4hub.hosts.wire import DEFAULT_LANES, LANE_COUNTS, MAX_WORKERS, MAX_WORLD_SIZE

Address = tuple  # (host, port) as returned by recvfrom; compared as a whole

REJECT_REASONS = ("type", "lanes", "rank", "slot", "count", "address", "shard", "float",
                  "float_full", "owner")


class AggregatorError(HostError, ValueError):
    """A job configuration the aggregator cannot accept (never raised for a datagram)."""


@dataclass(slots=True)
class JobStats:
    """Per-job counters. ``rejected`` maps a reason (see REJECT_REASONS) to a count."""

    contributions: int = 0  # new contributions accepted (not duplicates)
    duplicates: int = 0  # contributions whose bit was already set, or for a complete round
    stale: int = 0  # contributions older than the cell's round (dropped; aggregator._apply)
    abandoned: int = 0  # open rounds replaced by a newer position (after a resync)
    completions: int = 0  # cell rounds completed
    results_sent: int = 0  # RESULT datagrams sent on completion (n per completion)
    dones_sent: int = 0  # header-only DONEs of scatter and gather rounds (completions and duplicates)
    resent_results: int = 0  # stored results unicast back to a duplicate
    # as a rack's first level under a parent (JobConfig.parent):
    partials_sent: int = 0  # completed cells sent up as one PARTIAL
    partials_resent: int = 0  # ... sent again for the lowest rank's duplicate
    parent_results: int = 0  # the parent's RESULTs stored and sent to the rack
    parent_dropped: int = 0  # the parent's RESULTs for no waiting cell (repeats, late)
    float_completions: int = 0  # float cells completed (also counted in completions)
    bytes_received: int = 0
    bytes_sent: int = 0
    last_seen: float = 0.0  # `now` of the last datagram accepted for this job
    rejected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REJECT_REASONS, 0))

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Parent:
    """The job's root when this aggregator is its rack's first level (a job over racks,
    docs/DESIGN.md §3.1): a completed cell goes up to ``address`` as one PARTIAL from
    child ``child`` standing for ``rack_size`` workers, and the root's RESULT comes back
    from it, as for a leaf switch."""

    address: Address  # (ip, port) of the root
    child: int
    rack_size: int
    # the rack's ranks in bit order (bit i: ranks[i]); empty: a worker's bit is its rank,
    # which only a job of at most MAX_WORKERS ranks can use
    ranks: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class JobConfig:
    job_id: int
    world_size: int  # the whole job's: ranks are 0..world_size-1, a RESULT's count
    slot_base: int
    slot_count: int
    lanes: int = DEFAULT_LANES
    parent: Parent | None = None  # None: this aggregator completes the job's cells


def parse_parent(value: Parent | dict | None) -> Parent | None:
    """A Parent from itself or its fields (as they cross the PBox's pipes and control
    channel: the address a list); raises AggregatorError."""
    if value is None or isinstance(value, Parent):
        return value
    try:
        host, port = value["address"]
        ranks = tuple(int(r) for r in value.get("ranks", ()))
        return Parent((str(host), int(port)), int(value["child"]), int(value["rack_size"]),
                      ranks)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise AggregatorError(f"a parent is {{address: [ip, port], child, rack_size[, ranks]}}, "
                              f"got {value!r}") from None


def check_job(config: JobConfig) -> None:
    if not 0 <= config.job_id <= 0xFFFF:
        raise AggregatorError(f"job id {config.job_id} does not fit in 16 bits")
    if not 1 <= config.world_size <= MAX_WORLD_SIZE:
        raise AggregatorError(f"world size {config.world_size} outside 1..{MAX_WORLD_SIZE}")
    if config.lanes not in LANE_COUNTS:
        raise AggregatorError(f"lane count {config.lanes} is not one of {LANE_COUNTS}")
    if config.slot_count < 1:
        raise AggregatorError(f"slot count {config.slot_count} must be positive")
    parent = config.parent
    if parent is not None and not (1 <= parent.rack_size <= config.world_size
                                   and 0 <= parent.child < MAX_WORKERS):
        raise AggregatorError(f"parent {parent}: rack size outside 1..{config.world_size} "
                              f"or child outside 0..{MAX_WORKERS - 1}")
    if parent is not None:
        _check_ranks(parent, config.world_size)
    if config.slot_base < 0 or config.slot_base + config.slot_count > 1 << 32:
        raise AggregatorError(
            f"slot range [{config.slot_base}, {config.slot_base + config.slot_count}) "
            "does not fit in 32 bits"
        )


def _check_ranks(parent: Parent, world_size: int) -> None:
    """A leaf's rank list numbers its rack's workers (module docstring): as many as its
    rack size, distinct, each a rank of the job; without one, every rank must fit a bit."""
    ranks = parent.ranks
    if not ranks:
        if world_size > MAX_WORKERS:
            raise AggregatorError(f"a rack's first level of a job of {world_size} workers "
                                  f"(over {MAX_WORKERS}) needs its rack's ranks")
        return
    if (len(ranks) != parent.rack_size or len(set(ranks)) != len(ranks)
            or not all(0 <= r < world_size for r in ranks)):
        raise AggregatorError(f"parent ranks {list(ranks)}: not {parent.rack_size} distinct "
                              f"ranks of 0..{world_size - 1}")
