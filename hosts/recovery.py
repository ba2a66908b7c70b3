"""Per-slot retransmission timers: an RTT-driven timeout with per-position backoff.

Time is an argument; nothing here reads a clock. Each of the window's slots holds at
most one position in flight, so the state is a few arrays indexed by slot.

The base timeout follows RFC 6298 (``srtt + 4 * rttvar``, clamped to ``[rto_min,
rto_max]``). The k-th retransmission of a position waits ``min(rto * 2**k, rto_max)``.
The backoff belongs to that position and never raises the shared base.

The base has a floor: ``FLOOR_FACTOR`` times the shortest round trip among the last
``max(HISTORY, W)`` results of any kind, retransmitted or not. A result can come back
no sooner than the round trip of the position's first transmission, so that minimum is
never below what a round trip takes now, and it is not inflated by a loss (the fastest
of many rounds was not the one held up). Without the floor, a base below the time a full
window takes to drain through the links (W datagrams serialized one after another) made
every slot time out and every round end in a retransmission, so no usable sample ever
came (see below) and the base never grew: measured on 8 workers with 256-lane packets at
5 Mbit/s, 1 to 2.5 resends per packet sent for the whole run
(tests/unit/test_recovery_bandwidth.py reproduces it on a simulated link).

Which samples count matters more here than in TCP. A position's "RTT" is the time to its
result, and the result waits for the slowest peer. A peer that lost a packet makes
everyone wait for its retransmission. If such waits fed the estimate, a larger timeout
would make recovery slower and the next samples larger. Measured on a simulated
3-worker, 1-slot job with 15 % loss, that feedback settled at the 1 s cap (one position
per 0.7 s). So a sample is taken only from a position that

* this worker never retransmitted (Karn's rule), and
* whose RESULT does not carry the retransmission flag. Aggregators copy the flags of
  the contribution that completed the cell, so the flag means the round was held up by
  somebody's loss recovery. An aggregator that clears the flag only makes this filter
  weaker.

A batch of samples updates the estimate at once: the mean moves ``srtt`` and the mean
absolute deviation moves ``rttvar``, each with the weight m single RFC 6298 updates
would have (``1 - (7/8)**m`` and ``1 - (3/4)**m``). The deviation keeps the spread
*inside* a window, where results come back one after another.
"""

from __future__ import annotations

import numpy as np

MAX_BACKOFF_DOUBLINGS = 30
HISTORY = 16  # results the floor looks back over (at least the window's)
FLOOR_FACTOR = 1.5  # the base stays above this times the fastest recent round trip


class SlotTimers:
    """Retransmission deadlines of a window of slots."""

    def __init__(self, window: int, rto_min: float, rto_max: float) -> None:
        if not 0 < rto_min <= rto_max:
            raise ValueError(f"need 0 < rto_min ({rto_min}) <= rto_max ({rto_max})")
        self.rto_min = rto_min
        self.rto_max = rto_max
        self.rto = rto_min
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.sent_at = np.zeros(window)  # first transmission of the position in flight
        self.deadline = np.full(window, np.inf)
        self.retries = np.zeros(window, dtype=np.int64)
        self._estimate = rto_min  # RFC 6298's srtt + 4 rttvar, clamped; rto adds the floor
        self._recent = np.full(max(HISTORY, window), np.inf)  # any round trip (a ring)
        self._recent_next = 0  # where the next one goes

    def on_sent(self, slots: np.ndarray, now: float) -> None:
        """Positions went out for the first time in ``slots``."""
        self.sent_at[slots] = now
        self.retries[slots] = 0
        self.deadline[slots] = now + self.rto

    def on_result(self, slots: np.ndarray, now: float, clean: np.ndarray | None = None) -> None:
        """Results arrived for ``slots``: stop their timers and learn the round trip.

        ``clean[i]`` is False for a result whose round was completed by a retransmission.
        """
        self.deadline[slots] = np.inf
        times = now - self.sent_at[slots]
        usable = self.retries[slots] == 0
        if clean is not None:
            usable &= clean
        if usable.any():
            self._sample(times[usable])
        self._remember(times)
        floor = FLOOR_FACTOR * float(self._recent.min())
        self.rto = min(max(self._estimate, floor), self.rto_max)

    def expired(self, now: float) -> np.ndarray:
        """Slots whose deadline has passed."""
        return np.flatnonzero(self.deadline <= now)

    def on_retransmitted(self, slots: np.ndarray, now: float) -> None:
        """``slots`` timed out and are resent at ``now``: back off each of them."""
        self.retries[slots] += 1
        doublings = np.minimum(self.retries[slots], MAX_BACKOFF_DOUBLINGS)
        self.deadline[slots] = now + np.minimum(self.rto * np.exp2(doublings), self.rto_max)

    def stop(self, slots: np.ndarray | slice) -> None:
        self.deadline[slots] = np.inf

    def next_deadline(self) -> float:
        return float(self.deadline.min()) if self.deadline.size else float("inf")

    def _sample(self, samples: np.ndarray) -> None:
        m = samples.size
        mean = float(samples.sum()) / m
        if self.srtt is None:
            spread = float(np.abs(samples - mean).sum()) / m
            self.srtt, self.rttvar = mean, max(mean / 2, spread)
        else:
            deviation = float(np.abs(samples - self.srtt).sum()) / m
            a, b = 1 - 0.875**m, 1 - 0.75**m
            self.rttvar = (1 - b) * self.rttvar + b * deviation
            self.srtt = (1 - a) * self.srtt + a * mean
        self._estimate = min(max(self.srtt + 4 * self.rttvar, self.rto_min), self.rto_max)

    def _remember(self, times: np.ndarray) -> None:
        keep = self._recent.size
        if times.size >= keep:
            self._recent[:] = times[-keep:]
            return
        at = self._recent_next
        first = min(times.size, keep - at)
        self._recent[at : at + first] = times[:first]
        self._recent[: times.size - first] = times[first:]
        self._recent_next = (at + times.size) % keep
