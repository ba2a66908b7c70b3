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

A window that carries over to a new map (the same aggregator) keeps its size and is
resized to its new slot count; the session restarts every window on a resync (the path
may have changed).
"""

from __future__ import annotations

import numpy as np

from p4hub.hosts.congestion import CongestionWindow
from p4hub.hosts.recovery import SlotTimers
from p4hub.hosts.routes import RouteMap

UNLIMITED = np.iinfo(np.int64).max // 2  # the budget of an aggregator its window does not limit


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

    def touch(self, now: float) -> None:
        """Work started or restarted at ``now``: every aggregator counts as answering."""
        self.progress[:] = now

    def budgets(self, flight: np.ndarray, sent_at: np.ndarray, hold: float,
                now: float) -> tuple[np.ndarray | None, float]:
        """Per aggregator, how many more positions may go out now (``UNLIMITED`` where its
        window is no limit; None where none is), and when that may grow with no result
        arriving. ``flight``: the window slot indices in flight; ``sent_at``: when each
        was first sent; ``hold``: the session's credit hold (two smoothed round trips)."""
        limits = np.array([w.limit for w in self.windows], dtype=np.int64)
        bound = np.flatnonzero(limits < self.slots)
        if not bound.size:
            return None, np.inf
        on = self.of_slot[flight] if limits.size > 1 else np.zeros(flight.size, dtype=np.int64)
        budget = np.full(limits.size, UNLIMITED, dtype=np.int64)
        wake = np.inf
        for a in bound.tolist():
            mine = sent_at[on == a]
            if now < self.progress[a] + hold:  # answering: everything in flight counts
                budget[a], at = limits[a] - mine.size, float(self.progress[a]) + hold
            else:  # silent: only what went out within a hold
                young = mine[mine + hold > now]
                budget[a] = limits[a] - young.size
                at = float(young.min()) + hold if young.size else np.inf
            wake = min(wake, at)
        return budget, wake

    def admit(self, slots: np.ndarray, budget: np.ndarray, credit: int | None) -> np.ndarray:
        """Which of ``slots`` (window slot indices in sending order) may go out: the first
        ones of each aggregator within its ``budget``, then the first ``credit`` of those
        (None: no credit limit). What they use is taken off ``budget``."""
        on = self.of_slot[slots]
        if budget.size == 1:
            keep = np.arange(slots.size) < budget[0]
        else:  # each slot's rank among its aggregator's, in sending order
            order = np.argsort(on, kind="stable")
            grouped = on[order]
            rank = np.empty(slots.size, dtype=np.int64)
            rank[order] = np.arange(slots.size) - np.searchsorted(grouped, grouped)
            keep = rank < budget[on]
        if credit is not None:
            keep &= np.cumsum(keep) <= max(credit, 0)
        budget -= np.bincount(on[keep], minlength=budget.size)
        return keep

    def on_results(self, slots: np.ndarray, times: np.ndarray, clean: np.ndarray,
                   now: float) -> None:
        """Results for window slots ``slots`` arrived at ``now``, ``times`` after they were
        first sent; ``clean``: which of them the round-trip estimate may take."""
        if len(self.windows) == 1:
            self.windows[0].on_results(slots.size, times[clean], now)
            self.progress[0] = now
            return
        on = self.of_slot[slots]
        for a in np.unique(on).tolist():
            mine = on == a
            self.windows[a].on_results(int(np.count_nonzero(mine)), times[mine & clean], now)
        self.progress[on] = now

    def on_timeouts(self, slots: np.ndarray, now: float, timers: SlotTimers) -> None:
        """Positions in window slots ``slots`` timed out at ``now``; ``timers``: the
        session's, whose path a is aggregator a (its round trips)."""
        for a in np.unique(self.of_slot[slots]).tolist():
            self.windows[a].on_timeout(now, timers.path_srtt(a), timers.path_fastest(a))

    def restart(self) -> None:
        """The paths may have changed (a resync): every window forgets its base."""
        for window in self.windows:
            window.restart()

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
