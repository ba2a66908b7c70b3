"""Which aggregator serves each slot of a job's window: the job's aggregator map.

A job may split its window over several aggregators (issue 11, docs/notes/elastic.md):
the switch serves some of its slots, PBoxes the rest. Each ``Route`` is a run of the
window served by one aggregator, on that aggregator's slots ``slot_base ..
slot_base + count - 1``. Position g of a class goes to window slot ``g mod W``, so an
aggregator carries the share of every tensor's blocks that its slots are of the window.

The window's slot indices (class c's slot k is index ``c*W + k``) are given to the
routes k-major: all classes' slot 0 first, then all classes' slot 1, ... so every
priority class is spread over the aggregators in the same proportions, and every rank
computes the same assignment from the same routes. A route's slots follow its indices
in ascending order, so one route maps index i to slot ``slot_base + i``.

A new map (a re-split) must never give an aggregator's slot to another window slot
index than the old map did (``reassigned``): ranks learn of the new map at different
moments, and a rank still on the old map would otherwise send that slot positions of
another index, whose newer positions make the aggregator drop the new map's rounds as
stale. The controller therefore gives a route whose indices change fresh slots.

A PBox range of a job that also has switch slots carries the FALLBACK flag, which
makes the switch forward it (p4src/aggregate.p4). Results come back with the flag
they were sent with, so (flag, slot) identifies a result's window slot even where a
PBox's slot numbers overlap the switch's.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from hosts import wire
from hosts.errors import SessionError

_SLOT_LIMIT = 1 << 32


@dataclass(frozen=True)
class Route:
    """``count`` window slots served by ``aggregator`` on its slots from ``slot_base``.
    ``aggregator`` is opaque here (the transport's destination, e.g. (host, port);
    None: the agent's default aggregator)."""

    aggregator: Hashable
    slot_base: int
    count: int
    fallback: bool = False


class RouteMap:
    """Per window slot index: the route, the wire slot number, the header flag and the
    aggregator."""

    def __init__(self, routes: Sequence[Route], slots: int, window: int) -> None:
        """``slots``: the window's slot indices (window * classes); ``window``: per class.
        Routes covering more slots than that (a session that uses fewer than the job
        has, e.g. a window that its classes do not divide) each use the same share of
        theirs, by largest remainder, from their first slot."""
        _check(routes, slots)
        self.routes = tuple(routes)
        order = np.lexsort((np.arange(slots) // window, np.arange(slots) % window))  # k-major
        self.route_of = np.empty(slots, dtype=np.int64)
        self.wire_slot = np.empty(slots, dtype=np.int64)
        self.flag = np.zeros(slots, dtype=np.uint8)
        lo = 0
        for r, (route, used) in enumerate(zip(self.routes, _fit(self.routes, slots), strict=True)):
            mine = np.sort(order[lo : lo + used])  # its slots in index order
            self.route_of[mine] = r
            self.wire_slot[mine] = route.slot_base + np.arange(used)
            self.flag[mine] = wire.FLAG_FALLBACK if route.fallback else 0
            lo += used
        index: dict[Hashable, int] = {}
        for route in self.routes:
            index.setdefault(route.aggregator, len(index))
        self.aggregators = tuple(index)  # each once, in map order
        # window slot index -> aggregator (its path: its own timers and congestion window)
        self.aggregator_of = np.array([index[r.aggregator] for r in self.routes],
                                      dtype=np.int64)[self.route_of]
        keys = self._key(self.flag, self.wire_slot)
        self._sorted = np.argsort(keys, kind="stable")
        self._keys = keys[self._sorted]
        if np.any(self._keys[1:] == self._keys[:-1]):
            raise SessionError("two routes of the job use the same slot with the same flag: "
                               f"{_describe(self.routes)}")

    @property
    def single(self) -> bool:
        return len(self.routes) == 1

    def index_of(self, flags: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """The window slot index of each (header flags, wire slot), -1 where none."""
        keys = self._key(flags & wire.FLAG_FALLBACK, slots)
        at = np.minimum(np.searchsorted(self._keys, keys), self._keys.size - 1)
        return np.where(self._keys[at] == keys, self._sorted[at], -1)

    def describe(self) -> str:
        return _describe(self.routes)

    def reassigned(self, old: RouteMap) -> list[tuple[Hashable, int]]:
        """(aggregator, slot) pairs that ``old`` gave to another window slot index than
        this map does: a switch-over to this map from ``old`` is unsafe if any."""
        before = {(old.routes[r].aggregator, int(f), int(s)): i for i, (r, f, s) in
                  enumerate(zip(old.route_of, old.flag, old.wire_slot, strict=True))}
        out = []
        for i, (r, f, s) in enumerate(zip(self.route_of, self.flag, self.wire_slot, strict=True)):
            agg = self.routes[r].aggregator
            if before.get((agg, int(f), int(s)), i) != i:
                out.append((agg, int(s)))
        return out

    @staticmethod
    def _key(flags: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return (flags.astype(np.int64) & wire.FLAG_FALLBACK) << 32 | slots.astype(np.int64)


def single(slot_base: int, slot_count: int) -> list[Route]:
    """The whole window on the agent's default aggregator."""
    return [Route(None, slot_base, slot_count)]


def _check(routes: Sequence[Route], slots: int) -> None:
    if not routes:
        raise SessionError("a job needs at least one route")
    for route in routes:
        if route.count < 1 or route.slot_base < 0 or route.slot_base + route.count > _SLOT_LIMIT:
            raise SessionError(f"route {route} is not a valid 32-bit slot range")
    total = sum(route.count for route in routes)
    if total < slots:
        raise SessionError(f"the routes cover {total} slots, the window needs {slots}: "
                           f"{_describe(routes)}")


def _fit(routes: Sequence[Route], slots: int) -> list[int]:
    """How many of each route's slots a window of ``slots`` uses: all of them when the
    routes cover exactly ``slots``, else the same share of each by largest remainder
    (ties to the earlier route, so every rank gets the same)."""
    total = sum(route.count for route in routes)
    exact = [route.count * slots / total for route in routes]
    used = [int(x) for x in exact]
    order = sorted(range(len(routes)), key=lambda i: (-(exact[i] - used[i]), i))
    for i in order[: slots - sum(used)]:
        used[i] += 1
    return used


def from_wire(items: Sequence[dict] | None) -> list[Route] | None:
    """Routes as the controller's JoinJob and Heartbeat replies give them: each
    {"aggregator": "ip:port", "slot_base", "count", "fallback"}; None for none (a reply
    without a map: the job's one aggregator). Raises SessionError on a malformed one."""
    if not items:
        return None
    out = []
    for item in items:
        try:
            host, _, port = str(item["aggregator"]).rpartition(":")
            out.append(Route((host, int(port)), int(item["slot_base"]), int(item["count"]),
                             bool(item.get("fallback", False))))
        except (KeyError, TypeError, ValueError) as exc:
            raise SessionError(f"malformed route {item!r} from the controller: {exc}") from None
    return out


def to_wire(routes: Sequence[Route], default: tuple[str, int]) -> list[dict]:
    """Routes as ``from_wire`` reads them (``default``: the aggregator of a route that
    names none): what a heartbeat reports, so that a controller restarted while one of
    the job's PBoxes was unreachable learns that PBox's range from the agents."""
    out = []
    for route in routes:
        where: tuple[str, int] = route.aggregator if route.aggregator is not None else default  # type: ignore[assignment]
        host, port = where  # (IPv4, port), as from_wire makes them
        out.append({"aggregator": f"{host}:{port}", "slot_base": route.slot_base,
                    "count": route.count, "fallback": route.fallback})
    return out


def _describe(routes: Sequence[Route]) -> str:
    return ", ".join(f"{r.count} at {r.aggregator or 'default'} slots {r.slot_base}.."
                     f"{r.slot_base + r.count - 1}{' (fallback)' if r.fallback else ''}"
                     for r in routes)
