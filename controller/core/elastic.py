"""How to split a job's PBox share over its PBoxes: min-makespan on measured rates (PSLD).

A job's window slots each carry the same number of blocks (position g goes to slot
g mod W), so an aggregator with s slots carries s/W of every tensor, and a tensor is done
when the slowest aggregator is. What an aggregator serves while busy is its results
over the seconds it had positions in flight (the agents measure it per route:
hosts/session.py ``route_service``); call it its rate. Then its share of the work takes
s / rate, and the makespan is the largest of these. The split that minimises it gives
each aggregator slots in proportion to its rate (LPT's continuous limit), rounded by
largest remainder.

Against thrashing and stale estimates (PSLD's exploitation/exploration):
* every aggregator keeps at least ``min_share`` slots, so its rate stays measured and a
  straggler that recovers is seen (exploration);
* a new split is taken at once only when it cuts the predicted makespan by ``min_gain``
  (30%: PBoxes of equal speed behind the workers' shared uplinks measured up to 37%
  apart, which at 20% moved slots in one no-straggler run of bench/elastic.py in
  three); a smaller cut, at least ``PERSIST_GAIN``, is taken once every check for
  ``PERSIST_SECONDS`` under one map predicted it with the same aggregator holding the
  makespan up (``persisted``): noise moves which aggregator looks slowest from interval
  to interval, a real straggler does not (a PBox link 2x slower behind 2.5 Mbit/s
  worker links predicts only an 18-27% cut, and kept its even share for good under the
  30% rule alone: docs/reproductions.md, PSLD);
* a re-split that gives slots back to a PBox the previous re-split took them from (a
  reversal) waits ``HOLD_DOWN`` doubled for each reversal in a row before it, up to
  ``MAX_HOLD_DOWN`` (``hold_down``): two PBoxes of equal speed measured through noise
  otherwise trade slots back and forth, and every move costs the agents a resync
  (bench/elastic.py's link straggler with the agents' congestion window: 9 moves in 8
  iterations and 4.4 s an iteration before, 5 moves and 2.85 s with it; docs/notes/
  elastic.md §2);
* the caller holds a job's map for ``HOLD_DOWN`` seconds after each change, and plans
  only on rates measured over ``MIN_SAMPLES`` heartbeat intervals of the current map
  (single intervals are noisy: a rack run saw one PBox's rate swing 77-218 rounds/s).

Scaling (PSLD's scale in/out): a PBox whose rate stays under ``SCALE_IN_RATIO`` of the
best one's for ``SCALE_IN_CHECKS`` checks in a row is drained (its share goes to the
others, in proportion to their rates) and released; a PBox of the rack that the job does
not use (drained, or lost and back) is probed again after ``PROBE_AFTER`` seconds with
the exploration share, and rebalancing then grows it if it is fast. ``slow`` and
``probe`` decide; the registry keeps the streaks and the times.

Sans-I/O and pure: the registry applies what these return (controller/core/elastic_moves.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

HOLD_DOWN = 4.0  # seconds a job's map stays put after a change
MAX_HOLD_DOWN = 64.0  # ... at most, after reversals in a row (``hold_down``)
SCALE_IN_RATIO = 0.25  # a PBox below this fraction of the best PBox's rate is slow...
SCALE_IN_CHECKS = 3  # ...and drained after this many checks in a row (scale in)
PROBE_AFTER = 30.0  # seconds before a drained or lost PBox of the rack is probed again
MIN_GAIN = 0.3  # predicted makespan cut that re-splits at once (see the docstring)
PERSIST_GAIN = 0.15  # ... a smaller cut that re-splits once it persisted (``persisted``)
PERSIST_SECONDS = 2 * HOLD_DOWN  # ... for this long, the same aggregator holding it up
MIN_SAMPLES = 3  # heartbeat intervals a rank must have measured under the current map
MIN_SHARE_FRACTION = 0.05  # of the PBox share, at least one slot, per PBox (exploration)


@dataclass(frozen=True)
class Plan:
    shares: tuple[int, ...]
    makespan_now: float  # predicted seconds per slot-block, current split
    makespan_new: float  # with ``shares``
    reason: str
    slowest: int  # the aggregator that holds the current split's makespan up

    @property
    def gain(self) -> float:
        """The predicted makespan cut, a fraction of now's."""
        return 1 - self.makespan_new / self.makespan_now


@dataclass(frozen=True)
class Streak:
    """Since when, under which map, checks in a row predicted a re-split below
    ``MIN_GAIN`` with aggregator ``held_up`` holding the makespan up."""

    epoch: int
    held_up: str
    since: float


def persisted(streak: Streak | None, plan: Plan, epoch: int, held_up: str,
              now: float) -> tuple[bool, Streak | None]:
    """Whether ``plan`` is to be taken now, and the streak to keep: at once if it cuts
    the makespan by ``MIN_GAIN``, else once the same map has had the same aggregator
    holding it up at every check for ``PERSIST_SECONDS``."""
    if plan.gain >= MIN_GAIN:
        return True, None
    if streak is None or streak.epoch != epoch or streak.held_up != held_up:
        return False, Streak(epoch, held_up, now)
    return now - streak.since >= PERSIST_SECONDS, streak


def hold_down(reversals: int) -> float:
    """Seconds a job's map stays put before a re-split that would be a reversal, after
    ``reversals`` reversals in a row."""
    return min(HOLD_DOWN * 2.0 ** (reversals + 1), MAX_HOLD_DOWN)


def reverses(old: dict[str, int], new: dict[str, int], took_from: frozenset[str]) -> bool:
    """Whether the split ``new`` gives slots back to a PBox in ``took_from`` (those the
    previous re-split took slots from)."""
    return any(new.get(pbox, 0) > old.get(pbox, 0) for pbox in took_from)


def losers(old: dict[str, int], new: dict[str, int]) -> frozenset[str]:
    """The PBoxes the split ``new`` takes slots from."""
    return frozenset(pbox for pbox, count in old.items() if new.get(pbox, 0) < count)


def min_share(total: int) -> int:
    """The exploration floor of a PBox share of ``total`` slots."""
    return max(1, int(total * MIN_SHARE_FRACTION))


def slow(rates: Sequence[float]) -> list[bool]:
    """Which aggregators are slow this check: under SCALE_IN_RATIO of the best rate."""
    best = max(rates)
    return [r < SCALE_IN_RATIO * best for r in rates]


def drain(shares: Sequence[int], rates: Sequence[float], victim: int) -> tuple[int, ...]:
    """``shares`` with aggregator ``victim``'s moved to the others in proportion to
    their rates (``victim`` gets 0)."""
    others = [i for i in range(len(shares)) if i != victim]
    moved = proportional(sum(shares), [rates[i] for i in others], min_share(sum(shares)))
    out = [0] * len(shares)
    for i, n in zip(others, moved, strict=True):
        out[i] = n
    return tuple(out)


def probe(shares: dict[str, int], spare: Sequence[str]) -> dict[str, int] | None:
    """``shares`` plus the exploration share for each ``spare`` aggregator, taken from
    the largest shares; None when there is too little to take."""
    out = dict(shares)
    each = min_share(sum(shares.values()))
    for name in spare:
        largest = max(out, key=lambda n: (out[n], n))
        if out[largest] - each < each:
            return None
        out[largest] -= each
        out[name] = each
    return out


def makespan(shares: Sequence[int], rates: Sequence[float]) -> float:
    """The slowest aggregator's time for its share (relative units)."""
    return max(s / r for s, r in zip(shares, rates, strict=True) if s > 0)


def proportional(total: int, rates: Sequence[float], min_share: int) -> tuple[int, ...]:
    """``total`` slots in proportion to ``rates``, each at least ``min_share``, by largest
    remainder (ties to the earlier aggregator: every evaluation gives the same split)."""
    n = len(rates)
    spare = total - min_share * n
    if spare < 0:
        raise ValueError(f"{total} slots cannot give {n} aggregators {min_share} each")
    weight = sum(rates)
    exact = [spare * r / weight for r in rates]
    shares = [min_share + int(x) for x in exact]
    left = total - sum(shares)
    order = sorted(range(n), key=lambda i: (-(exact[i] - int(exact[i])), i))
    for i in order[:left]:
        shares[i] += 1
    return tuple(shares)


def plan(shares: Sequence[int], rates: Sequence[float | None],
         min_gain: float = MIN_GAIN) -> Plan | None:
    """A better split of ``sum(shares)`` slots over the aggregators, or None to keep
    ``shares`` (an aggregator not measured yet, too little to gain, or nothing to move)."""
    if len(shares) < 2 or any(r is None or r <= 0 for r in rates):
        return None
    measured = [float(r) for r in rates if r is not None]
    total = sum(shares)
    floor = min_share(total)
    if total < floor * len(shares):
        return None
    new = proportional(total, measured, floor)
    now, then = makespan(shares, measured), makespan(new, measured)
    if new == tuple(shares) or then > (1 - min_gain) * now:
        return None
    slowest = max(range(len(measured)), key=lambda i: (shares[i] / measured[i], -i))
    reason = (f"rates {', '.join(f'{r:.0f}' for r in measured)} rounds/s: predicted "
              f"makespan {then / now:.0%} of now; aggregator {slowest} held it up")
    return Plan(new, now, then, reason, slowest)
