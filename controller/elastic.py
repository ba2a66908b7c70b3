"""How to split a job's PBox share over its PBoxes: min-makespan on measured rates (PSLD).

A job's window slots each carry the same number of blocks (position g goes to slot
g mod W), so an aggregator with s slots carries s/W of every tensor, and a tensor is done
when the slowest aggregator is. What an aggregator serves while busy is its slots
divided by their mean time in flight (the agents measure it per route:
hosts/session.py ``route_service``); call it its rate. Then its share of the work takes
s / rate, and the makespan is the largest of these. The split that minimises it gives
each aggregator slots in proportion to its rate (LPT's continuous limit), rounded by
largest remainder.

Against thrashing and stale estimates (PSLD's exploitation/exploration):
* every aggregator keeps at least ``min_share`` slots, so its rate stays measured and a
  straggler that recovers is seen (exploration);
* a new split is taken only when it cuts the predicted makespan by ``min_gain``;
* the caller holds a job's map for ``HOLD_DOWN`` seconds after each change, and plans
  only on rates measured over ``MIN_SAMPLES`` heartbeat intervals of the current map
  (single intervals are noisy: a rack run saw one PBox's rate swing 77-218 rounds/s).

Sans-I/O and pure: the registry (controller/jobs.py) applies what ``plan`` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

HOLD_DOWN = 4.0  # seconds a job's map stays put after a change
MIN_GAIN = 0.2  # predicted makespan cut needed to re-split
MIN_SAMPLES = 3  # heartbeat intervals a rank must have measured under the current map
MIN_SHARE_FRACTION = 0.05  # of the PBox share, at least one slot, per PBox (exploration)


@dataclass(frozen=True)
class Plan:
    shares: tuple[int, ...]
    makespan_now: float  # predicted seconds per slot-block, current split
    makespan_new: float  # with ``shares``
    reason: str


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
    min_share = max(1, int(total * MIN_SHARE_FRACTION))
    if total < min_share * len(shares):
        return None
    new = proportional(total, measured, min_share)
    now, then = makespan(shares, measured), makespan(new, measured)
    if new == tuple(shares) or then > (1 - min_gain) * now:
        return None
    slowest = max(range(len(measured)), key=lambda i: (shares[i] / measured[i], -i))
    reason = (f"rates {', '.join(f'{r:.0f}' for r in measured)} rounds/s: predicted "
              f"makespan {then / now:.0%} of now; aggregator {slowest} held it up")
    return Plan(new, now, then, reason)
