"""A congestion window per aggregator of a job's map (sans-I/O).

A job split over several aggregators (hosts/routes.py) reaches each over its own path
and queue: a PBox's link, the switch. One window over all of them (a session had one
until session 10) let a few consecutive positions into flight, and consecutive
positions sit on one or two routes (a route is a run of the window's slots), so the
PBoxes were served in turns: each one's measured rate was that of the moment it was
served in, the rates swung, and the elastic split traded slots back and forth
(bench/elastic.py with a link straggler kept 0.42-0.64 of its no-straggler throughput;
docs/notes/elastic.md §2). Here every aggregator has its own ``CongestionWindow``,
steered by its own round trips and timeouts, and limits the positions in flight on
its own slots; routes to one aggregator share its window (one queue). With one
aggregator this is the session's one window, as before.

Counting is the session's rule (hosts/session.py ``_budget``), per aggregator: every
position in flight on it while its results arrive (within a hold of its last one); in
silence only those sent within the hold. The argument that keeps ranks with different
windows from waiting on each other for ever holds per aggregator, because its slots are
served by it alone: in its silence every rank stops counting its positions on it and
sends its lowest ready positions on its slots next, the same on every rank, so the
lowest unfinished of them goes out everywhere and completes.

Ordering evidence: which positions have left the queues. Once a result has come back
for a position this rank sent *after* position p, on the same aggregator and with no
higher header priority, p has left the queues on its way there: on every link the later
one crossed after it (first in, first out) or behind it (strict priority queues serve a
higher priority first, never a lower one). p then waits at the aggregator for a peer,
or it was lost; neither is a queue this window can shrink. The evidence is this rank's
own (when it sent each position, what has come back), nothing from the aggregator; a
resent position gets none (its resent copy may still be queued, and only its first
send is known). It is used twice:

* a timeout of a position that has left the queues does not cut the window (a late
  peer or a loss, not a queue);
* a held-back position (below) that has left the queues does not count against the
  window at all. Only held-back ones: a stream's positions waiting for a lost peer's
  resend are few, and not counting them moved 8 workers on one PBox link at 1 % loss
  (tests/unit/test_congestion.py) from x1.18 the floor into a regime of x13.7, with
  13,824 drops, where the silence rule below counts by age alone.

Held back. The classes below the most urgent one with work are held back (hosts/
hold_back.py): their positions in flight wait, by design, for peers that send the more
urgent class first. Until they have left the queues they count against the window
when a held-back class asks for room (that keeps the bulk of a backward pass out of the
queue ahead of the urgent positions to come), but not when the most urgent class does.
Otherwise a rank whose window was full of positions waiting for a late rank could not
send the urgent positions that the late rank, once it caught up and sent its own urgent
class first, waited for: each waited for the other until a hold of silence (issue 31;
docs/notes/priority.md has the simulations). The queue stays bounded: the urgent class's
own positions within the window, plus held-back ones, which the window admitted when
they were sent. Both rules only ever count fewer positions than before, so the silence
argument above still holds.

A window that carries over to a new map (the same aggregator) keeps its size and is
resized to its new slot count; the session restarts every window on a resync (the path
may have changed).
"""

from __future__ import annotations

import numpy as np

from p4hub.hosts import wire
from p4hub.hosts.congestion import CongestionWindow
from p4hub.hosts.recovery import SlotTimers
from p4hub.hosts.routes import RouteMap

UNLIMITED = np.iinfo(np.int64).max // 2  # the budget of an aggregator its window does not limit
PRIORITIES = wire.MAX_PRIORITY + 1


def priority_of(flags: np.ndarray | None, count: int) -> np.ndarray:
    """The header priorities in ``flags`` (None: ``count`` zeros)."""
    if flags is None:
        return np.zeros(count, dtype=np.int64)
    return wire.priority_of(np.asarray(flags, dtype=np.int64))


class RouteWindows:
    """The congestion windows of a session's aggregators, and which slots each limits."""

    def __init__(self, route_map: RouteMap, cap: int, before: RouteWindows | None = None) -> None:
        """``route_map``: the session's map; ``cap``: the most positions one window may
        allow (the session's window, or its credit with several classes); ``before``:
        the windows of the previous map, whose aggregators keep theirs."""
        self.aggregators = route_map.aggregators
        self.of_slot = route_map.aggregator_of  # window slot index -> aggregator
        self.slots = np.bincount(self.of_slot, minlength=len(self.aggregators))  # slots of each
        kept = dict(zip(before.aggregators, before.windows, strict=True)) if before else {}
        # the counters of windows this map drops, so that the sums below never go back
        self._dropped_cuts = before.cuts if before else 0
        self._dropped_backoffs = before.backoffs if before else 0
        self.windows: list[CongestionWindow] = []
        for aggregator, count in zip(self.aggregators, self.slots.tolist(), strict=True):
            maximum = max(1, min(count, cap))
            window = kept.get(aggregator)
            if window is None:
                window = CongestionWindow(maximum)
            else:
                window.resize(maximum)
                self._dropped_cuts -= window.cuts
                self._dropped_backoffs -= window.backoffs
            self.windows.append(window)
        self.progress = np.zeros(len(self.aggregators))  # when each last had a result (or a touch)
        # per aggregator and header priority: the latest first transmission whose result
        # has come back (see "Ordering evidence")
        self._returned = np.full((len(self.aggregators), PRIORITIES), -np.inf)
        self._reserve = np.zeros(len(self.aggregators), dtype=np.int64)  # see "Held back"

    def left_queues(self, slots: np.ndarray, sent_at: np.ndarray, flags: np.ndarray | None,
                    resent: np.ndarray) -> np.ndarray:
        """Which positions in flight in window slots ``slots`` (first sent at ``sent_at``,
        header ``flags``; None: priority 0) have left the queues: a result came back for
        one sent after it on the same aggregator with no higher priority. Not one that
        was ``resent``: its resent copy may be queued (only the first send is known)."""
        on = self.of_slot[slots]
        lower = np.maximum.accumulate(self._returned, axis=1)  # any priority up to k
        return (sent_at < lower[on, priority_of(flags, slots.size)]) & ~resent

    def touch(self, now: float) -> None:
        """Work started or restarted at ``now``: every aggregator counts as answering."""
        self.progress[:] = now

    def budgets(self, flight: np.ndarray, sent_at: np.ndarray, hold: float, now: float,
                flags: np.ndarray | None = None,
                timers: SlotTimers | None = None) -> tuple[np.ndarray | None, float]:
        """Per aggregator, how many more positions may go out now (``UNLIMITED`` where its
        window is no limit; None where none is), and when that may grow with no result
        arriving. ``flight``: the window slot indices in flight; ``sent_at``: when each
        was first sent; ``hold``: the session's credit hold (two smoothed round trips);
        ``flags``: their headers' flags (their priority; None: all priority 0);
        ``timers``: the session's (which are resent, which held back; None: none is).
        Positions that have left the queues do not count (see "Ordering evidence");
        held-back ones do not count for the most urgent class (``admit``'s ``urgent``,
        see "Held back")."""
        limits = np.array([w.limit for w in self.windows], dtype=np.int64)
        bound = np.flatnonzero(limits < self.slots)
        self._reserve = np.zeros(limits.size, dtype=np.int64)
        if not bound.size:
            return None, np.inf
        held = timers.suspended[flight] if timers else np.zeros(flight.size, dtype=bool)
        if held.any():
            resent = timers.retries[flight] > 0 if timers else held
            queued = ~(held & self.left_queues(flight, sent_at, flags, resent))
            flight, sent_at, held = flight[queued], sent_at[queued], held[queued]
        on = self.of_slot[flight] if limits.size > 1 else np.zeros(flight.size, dtype=np.int64)
        budget = np.full(limits.size, UNLIMITED, dtype=np.int64)
        wake = np.inf
        for a in bound.tolist():
            mine, waits = sent_at[on == a], held[on == a]
            if now < self.progress[a] + hold:  # answering: everything in flight counts
                counts, at = np.ones(mine.size, dtype=bool), float(self.progress[a]) + hold
            else:  # silent: only what went out within a hold
                counts = mine + hold > now
                at = float(mine[counts].min()) + hold if counts.any() else np.inf
            budget[a] = limits[a] - np.count_nonzero(counts)
            self._reserve[a] = np.count_nonzero(counts & waits)
            wake = min(wake, at)
        return budget, wake

    def admit(self, slots: np.ndarray, budget: np.ndarray, credit: int | None,
              urgent: bool = False) -> np.ndarray:
        """Which of ``slots`` (window slot indices in sending order) may go out: the first
        ones of each aggregator within its ``budget``, then the first ``credit`` of those
        (None: no credit limit). What they use is taken off ``budget``. ``urgent``: the
        slots are of the most urgent class with work, for which the held-back positions
        of the last ``budgets`` do not count (see "Held back")."""
        room = budget + self._reserve if urgent else budget
        on = self.of_slot[slots]
        if budget.size == 1:
            keep = np.arange(slots.size) < room[0]
        else:  # each slot's rank among its aggregator's, in sending order
            order = np.argsort(on, kind="stable")
            grouped = on[order]
            rank = np.empty(slots.size, dtype=np.int64)
            rank[order] = np.arange(slots.size) - np.searchsorted(grouped, grouped)
            keep = rank < room[on]
        if credit is not None:
            keep &= np.cumsum(keep) <= max(credit, 0)
        budget -= np.bincount(on[keep], minlength=budget.size)
        return keep

    def on_results(self, slots: np.ndarray, times: np.ndarray, clean: np.ndarray,
                   now: float, flags: np.ndarray | None = None) -> None:
        """Results for window slots ``slots`` arrived at ``now``, ``times`` after they were
        first sent; ``clean``: which of them the round-trip estimate may take; ``flags``:
        the results' header flags (their priority; None: all priority 0)."""
        np.maximum.at(self._returned, (self.of_slot[slots], priority_of(flags, slots.size)),
                      now - times)
        if len(self.windows) == 1:
            self.windows[0].on_results(slots.size, times[clean], now)
            self.progress[0] = now
            return
        on = self.of_slot[slots]
        for a in np.unique(on).tolist():
            mine = on == a
            self.windows[a].on_results(int(np.count_nonzero(mine)), times[mine & clean], now)
        self.progress[on] = now

    def on_timeouts(self, slots: np.ndarray, now: float, timers: SlotTimers,
                    flags: np.ndarray | None = None) -> None:
        """Positions in window slots ``slots`` timed out at ``now``; ``timers``: the
        session's, whose path a is aggregator a (its round trips); ``flags``: their
        headers' flags. The timeout of a position that has left the queues (see
        "Ordering evidence") is a late peer's or a loss, no sign of a queue."""
        # the session counts this timeout's resend before it calls: resent before it
        resent = timers.retries[slots] > 1
        slots = slots[~self.left_queues(slots, timers.sent_at[slots], flags, resent)]
        for a in np.unique(self.of_slot[slots]).tolist():
            self.windows[a].on_timeout(now, timers.path_srtt(a), timers.path_fastest(a))

    def restart(self) -> None:
        """The paths may have changed (a resync): every window forgets its base."""
        for window in self.windows:
            window.restart()
        self._returned[:] = -np.inf

    @property
    def limit(self) -> int:
        """Positions all the windows allow in flight together."""
        return sum(w.limit for w in self.windows)

    @property
    def cuts(self) -> int:
        """Halvings on timeouts, over every window this session has had."""
        return self._dropped_cuts + sum(w.cuts for w in self.windows)

    @property
    def backoffs(self) -> int:
        """Rounds whose delay shrank a window, over every window this session has had."""
        return self._dropped_backoffs + sum(w.backoffs for w in self.windows)
