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
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
            return None
        return cls(*values)  # type: ignore[arg-type]


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


def job_rates(meters: list[TrafficMeter], packet_len: int) -> dict[str, float | None]:
    """The job's service as its ranks see it: result bytes per second per worker (the
    mean over the ranks that reported) and the mean resend ratio."""
    rates = [m.results_per_s for m in meters if m.results_per_s is not None]
    ratios = [m.resend_ratio for m in meters if m.resend_ratio is not None]
    return {
        "result_bytes_per_s": sum(rates) / len(rates) * packet_len if rates else None,
        "resend_ratio": sum(ratios) / len(ratios) if ratios else None,
    }


def _fold(average: float | None, sample: float) -> float:
    return sample if average is None else (1 - EWMA_WEIGHT) * average + EWMA_WEIGHT * sample


def _went_back(before: Counters, now: Counters) -> bool:
    return now.sent < before.sent or now.results < before.results or \
        now.retransmitted < before.retransmitted
