"""How fast a job's aggregator serves it, from the counters its agents report (sans-I/O).

Each agent's heartbeat may carry its session's cumulative counters: datagrams sent for
the first time, retransmitted, and results received. Between two heartbeats of a rank
the meter turns their differences into rates and folds them into an exponentially
weighted moving average (PSLD profiles servers the same way, from the workers' side):

* ``results_per_s``: results the rank received per second: the aggregator's service
  rate as that worker sees it (in an all-reduce every rank gets every result, so the
  ranks of one job agree unless one of them is held up);
* ``resend_ratio``: retransmissions per first transmission: loss, congestion or a
  stalled peer on the path.

Time is an argument; a restarted agent (counters going down) starts over.

Per route of the job's aggregator map (hosts/routes.py), the heartbeat may also carry
the session's results and the seconds the route was busy (had a position of the rank
in flight) since the map's epoch began (``RouteService``); ``RouteMeter`` folds their
differences the same way, so the registry can tell each aggregator's rate while busy
(controller/core/elastic.py). Busy seconds, not each result's time in flight: with a
congestion window per aggregator (hosts/route_windows.py) a route may have fewer
positions in flight than slots, and its slots over their mean time in flight would
then count rounds it never had in flight.

And it carries the agent's map itself (``map``, hosts/routes.py ``to_wire``): its PBox
routes (``pbox_routes``) give back ranges a rebuilt controller could not list
(controller/core/rebuild.py ``recover_unheard``).
"""

from __future__ import annotations

from dataclasses import dataclass

EWMA_WEIGHT = 0.3  # of the newest interval
MIN_INTERVAL = 0.05  # seconds: closer heartbeats are folded into the next interval


@dataclass(frozen=True)
class Counters:
    """An agent's cumulative session counters, as its heartbeat reports them."""

    sent: int
    retransmitted: int
    results: int

    @classmethod
    def from_request(cls, request: dict) -> Counters | None:
        """The counters of a Heartbeat request, or None when it has none (or bad ones)."""
        values = [request.get(k) for k in ("sent", "retransmitted", "results")]
        if not all(_count(v) for v in values):
            return None
        return cls(*values)  # type: ignore[arg-type]


def pbox_routes(request: dict) -> list[tuple[str, int, int, bool]] | None:
    """(aggregator "ip:port", slot base, count, whether it is the float route) of each
    PBox route (``fallback``) of the agent's map a Heartbeat request carries; None when it
    has none (or a bad one)."""
    agent_map = request.get("map")
    if not isinstance(agent_map, list) or not agent_map:
        return None
    out = []
    for item in agent_map:
        if not isinstance(item, dict):
            return None
        address, base, count = item.get("aggregator"), item.get("slot_base"), item.get("count")
        if not isinstance(address, str) or not _count(base) or not _count(count):
            return None
        if item.get("fallback") is True and count:
            out.append((address, int(base), int(count),  # type: ignore[arg-type]
                        item.get("float") is True))
    return out


def _count(value: object) -> bool:
    """A non-negative int (and not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass
class TrafficMeter:
    """One rank's rates, updated from its heartbeats."""

    last: Counters | None = None
    last_at: float = 0.0
    results_per_s: float | None = None
    resend_ratio: float | None = None

    def update(self, counters: Counters, now: float) -> None:
        if self.last is None or _went_back(self.last, counters):
            self.last, self.last_at = counters, now  # first report, or a restarted agent
            return
        elapsed = now - self.last_at
        if elapsed < MIN_INTERVAL:
            return
        sent = counters.sent - self.last.sent
        resent = counters.retransmitted - self.last.retransmitted
        rate = (counters.results - self.last.results) / elapsed
        self.results_per_s = _fold(self.results_per_s, rate)
        if sent + resent > 0:
            self.resend_ratio = _fold(self.resend_ratio, resent / max(sent, 1))
        self.last, self.last_at = counters, now


@dataclass(frozen=True)
class RouteService:
    """Per route, cumulative (results, seconds busy) under map ``epoch``."""

    epoch: int
    routes: tuple[tuple[int, float], ...]

    @classmethod
    def from_request(cls, request: dict) -> RouteService | None:
        epoch, routes = request.get("epoch"), request.get("routes")
        if not isinstance(epoch, int) or not isinstance(routes, list) or len(routes) > 64:
            return None
        out = []
        for item in routes:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int)
                    and isinstance(item[1], int | float) and item[0] >= 0 and item[1] >= 0):
                return None
            out.append((int(item[0]), float(item[1])))
        return cls(epoch, tuple(out))


@dataclass
class RouteMeter:
    """One rank's moving averages of results and busy time per route, per epoch."""

    last: RouteService | None = None
    results: list[float] | None = None  # per route, EWMA of results per interval
    busy: list[float] | None = None  # per route, EWMA of seconds busy per interval
    samples: int = 0  # intervals folded in under this epoch

    def update(self, service: RouteService) -> None:
        if self.last is None or service.epoch != self.last.epoch or \
                len(service.routes) != len(self.last.routes):
            self._restart(service)  # a new map
            return
        deltas = [(n - n0, t - t0) for (n, t), (n0, t0) in
                  zip(service.routes, self.last.routes, strict=True)]
        if any(n < 0 or t < 0 for n, t in deltas):
            self._restart(service)  # a restarted agent
            return
        if sum(n for n, _ in deltas) == 0:
            return  # idle: nothing measured, keep the estimates
        none: list[float | None] = [None] * len(deltas)
        old_n: list[float | None] = list(self.results) if self.results else none
        old_t: list[float | None] = list(self.busy) if self.busy else none
        self.results = [_fold(a, n) for a, (n, _) in zip(old_n, deltas, strict=True)]
        self.busy = [_fold(a, t) for a, (_, t) in zip(old_t, deltas, strict=True)]
        self.last = service
        self.samples += 1

    def _restart(self, service: RouteService) -> None:
        self.last, self.results, self.busy, self.samples = service, None, None, 0


def route_rates(meters: list[RouteMeter], epoch: int, routes: int,
                min_samples: int = 1) -> list[float | None]:
    """Each of the ``routes`` routes' rate while busy (rounds per second: results over
    busy seconds), pooled over the ranks measuring map ``epoch`` with at least
    ``min_samples`` intervals folded in; None where unmeasured."""
    live = [m for m in meters if m.last is not None and m.last.epoch == epoch
            and m.samples >= min_samples and m.results is not None and m.busy is not None
            and len(m.results) == routes]
    out: list[float | None] = []
    for r in range(routes):
        results = sum((m.results or [])[r] for m in live)
        busy = sum((m.busy or [])[r] for m in live)
        out.append(results / busy if results > 0 and busy > 0 else None)
    return out


def job_rates(meters: list[TrafficMeter], packet_len: int) -> dict[str, float | None]:
    """The job's service as its ranks see it: result bytes per second per worker (the
    mean over the ranks that reported) and the mean resend ratio."""
    rates = [m.results_per_s for m in meters if m.results_per_s is not None]
    ratios = [m.resend_ratio for m in meters if m.resend_ratio is not None]
    return {
        "result_bytes_per_s": sum(rates) / len(rates) * packet_len if rates else None,
        "resend_ratio": sum(ratios) / len(ratios) if ratios else None,
    }


def _fold(average: float | None, sample: float) -> float:  # noqa: D103
    return sample if average is None else (1 - EWMA_WEIGHT) * average + EWMA_WEIGHT * sample


def _went_back(before: Counters, now: Counters) -> bool:
    return now.sent < before.sent or now.results < before.results or \
        now.retransmitted < before.retransmitted
