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

A job with the precision option sends some blocks as float32, which only a PBox can
sum. A float block of a window slot on a PBox route rides on that route. For the window
slots on the switch, the map has a *float route* (``Route.floats``): a range of a PBox
with the FALLBACK flag, not part of the window, at least as long as the window; a float
block of window slot index i on an unflagged route goes to its slot ``slot_base + i``.
Float results come back flagged on those slots, so (flag, slot) still names the window
slot. No other packet goes there, so the switch route's slot simply skips those
positions (a newer position starts a new round there: docs/DESIGN.md §3).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from p4hub.hosts import wire
from p4hub.hosts.errors import SessionError

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
    floats: bool = False  # the float route: float blocks of the unflagged routes' slots


class RouteMap:
    """Per window slot index: the route, the wire slot number, the header flag and the
    aggregator."""

    def __init__(self, routes: Sequence[Route], slots: int, window: int) -> None:
        """``slots``: the window's slot indices (window * classes); ``window``: per class.
        Routes covering more slots than that (a session that uses fewer than the job
        has, e.g. a window that its classes do not divide) each use the same share of
        theirs, by largest remainder, from their first slot."""
        floats = [route for route in routes if route.floats]
        window_routes = [route for route in routes if not route.floats]
        _check(window_routes, slots)
        if len(floats) > 1 or (floats and (floats[0].count < slots or not floats[0].fallback)):
            raise SessionError(f"a map has at most one float route, flagged and at least as "
                               f"long as the window ({slots} slots): {_describe(routes)}")
        self.routes = tuple(window_routes)  # the window's: the meters and windows go by these
        self.float_route = floats[0] if floats else None
        self.all_routes = (*self.routes, *floats)  # a float route is the last
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
        # where a float block of each window slot goes: its own route if that is a PBox's,
        # else the float route's slot for its index
        self.float_slot = self.wire_slot.copy()
        every = np.arange(slots, dtype=np.int64)
        self._key_index, self._key_route = every, self.route_of
        keys = self._key(self.flag, self.wire_slot)
        if self.float_route is not None:
            plain = np.flatnonzero(self.flag == 0)
            self.float_slot[plain] = self.float_route.slot_base + plain
            keys = np.concatenate((keys, self._key(np.full(plain.size, wire.FLAG_FALLBACK),
                                                   self.float_slot[plain])))
            self._key_index = np.concatenate((every, plain))
            self._key_route = np.concatenate((self.route_of,
                                              np.full(plain.size, len(self.routes))))
        self._sorted = np.argsort(keys, kind="stable")
        self._keys = keys[self._sorted]
        if np.any(self._keys[1:] == self._keys[:-1]):
            raise SessionError("two routes of the job use the same slot with the same flag: "
                               f"{_describe(self.all_routes)}")

    @property
    def single(self) -> bool:
        """One route serves the whole window (there may be a float route beside it)."""
        return len(self.routes) == 1

    @property
    def one_destination(self) -> bool:
        """Every packet goes to the one route's aggregator."""
        return len(self.all_routes) == 1

    def index_of(self, flags: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """The window slot index of each (header flags, wire slot), -1 where none."""
        at, found = self._lookup(flags, slots)
        return np.where(found, self._key_index[at], -1)

    def route_index_of(self, flags: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """The route (into ``all_routes``) each (header flags, wire slot) goes to, -1
        where none: a float block on a float route's slot goes to the float route."""
        at, found = self._lookup(flags, slots)
        return np.where(found, self._key_route[at], -1)

    def _lookup(self, flags: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each key's place among the map's keys as built (before sorting), and whether
        it is one of them."""
        keys = self._key(flags & wire.FLAG_FALLBACK, slots)
        pos = np.minimum(np.searchsorted(self._keys, keys), self._keys.size - 1)
        return self._sorted[pos], self._keys[pos] == keys

    def describe(self) -> str:
        return _describe(self.all_routes)

    def reassigned(self, old: RouteMap) -> list[tuple[Hashable, int]]:
        """(aggregator, slot) pairs that ``old`` gave to another window slot index than
        this map does (a float route's slots included): a switch-over to this map from
        ``old`` is unsafe if any."""
        before = {(agg, f, s): i for agg, f, s, i in old._entries()}
        return [(agg, s) for agg, f, s, i in self._entries()
                if before.get((agg, f, s), i) != i]

    def _entries(self) -> list[tuple[Hashable, int, int, int]]:
        """(aggregator, flag, wire slot, window slot index) of every key."""
        flags = (self._keys >> 32).astype(np.int64)
        slots = self._keys & 0xFFFFFFFF
        return [(self.all_routes[int(self._key_route[k])].aggregator, int(f), int(s),
                 int(self._key_index[k]))
                for k, f, s in zip(self._sorted, flags, slots, strict=True)]

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
                             bool(item.get("fallback", False)), bool(item.get("float", False))))
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
                    "count": route.count, "fallback": route.fallback,
                    **({"float": True} if route.floats else {})})
    return out


def check_float_blocks(routes: Sequence[Route], vouched: bool, what: str) -> None:
    """SessionError if float blocks (the precision option) have no PBox on ``routes``:
    a route without the FALLBACK flag (the switch's) and no float route, but where the
    map is one route the caller vouches for as a PBox (``vouched``: a session never
    given a flagged map)."""
    if any(r.floats for r in routes) or (len(routes) == 1 and vouched):
        return
    if not all(r.fallback for r in routes):
        raise SessionError("the precision option needs a PBox for float blocks: every "
                           "route flagged (a PBox's) or a float route, but "
                           f"{what} has neither: {_describe(routes)}")


def _describe(routes: Sequence[Route]) -> str:
    return ", ".join(f"{r.count} at {r.aggregator or 'default'} slots {r.slot_base}.."
                     f"{r.slot_base + r.count - 1}{' (fallback)' if r.fallback else ''}"
                     f"{' (float blocks)' if r.floats else ''}"
                     for r in routes)
