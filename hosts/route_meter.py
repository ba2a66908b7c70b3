"""What each route of a job's map serves this rank while busy, sans-I/O.

Per route (hosts/routes.py): the results it delivered, and the seconds it was busy
(had a position of this rank in flight, up to the latest send or result). Results
over busy seconds is what the route serves while busy, whether its slots or its
congestion window limit it: the controller's measure of each aggregator
(controller/core/traffic.py). A session starts a fresh meter with every new map.
"""

from __future__ import annotations

import numpy as np

from p4hub.hosts.routes import RouteMap


class RouteMeter:
    """The results and busy seconds of each route of one map under one epoch."""

    def __init__(self, route_map: RouteMap, epoch: int, slot_pos: np.ndarray, now: float) -> None:
        """``slot_pos``: the session's position in flight per window slot (-1: none)."""
        self._map = route_map
        self.epoch = epoch
        routes = len(route_map.routes)
        self._results = np.zeros(routes, dtype=np.int64)
        self._busy = np.zeros(routes)
        self._flight = np.bincount(route_map.route_of[slot_pos >= 0], minlength=routes)
        self._mark = now  # the latest send or result the busy seconds run to

    def service(self) -> tuple[int, list[tuple[int, float]]]:
        """The epoch and, per route: (results, busy seconds)."""
        return self.epoch, [(int(n), float(t))
                            for n, t in zip(self._results, self._busy, strict=True)]

    def on_sent(self, slots: np.ndarray, now: float) -> None:
        """Positions went out on ``slots`` (window slot indices) at ``now``."""
        self._count_busy(now)
        self._flight += self._per_route(slots)

    def on_results(self, slots: np.ndarray, now: float) -> None:
        """The results of the positions in flight on ``slots`` arrived at ``now``."""
        self._count_busy(now)
        done = self._per_route(slots)
        self._results += done
        self._flight -= done

    def _per_route(self, slots: np.ndarray) -> np.ndarray:
        """How many of ``slots`` each route serves."""
        if self._map.single:
            return np.array([slots.size])
        return np.bincount(self._map.route_of[slots], minlength=len(self._map.routes))

    def _count_busy(self, now: float) -> None:
        """Before a send or a result changes what is in flight: the time since the
        previous one counts for every route that had a position in flight."""
        self._busy[self._flight > 0] += now - self._mark
        self._mark = now
