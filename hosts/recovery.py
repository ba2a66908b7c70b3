"""Per-slot retransmission timers: exponential backoff and an RTT-driven timeout.

Time is an argument; nothing here reads a clock. Each of the window's slots holds at
most one chunk in flight, so the state is a few arrays indexed by slot. The base
timeout follows RFC 6298 (``srtt + 4 * rttvar``), sampled only from chunks that were
not retransmitted (Karn's rule), and never below ``rto_min`` nor above ``rto_max``.
A chunk's k-th retransmission waits ``min(rto * 2**k, rto_max)``.

The "RTT" of a chunk is the time to its result, which includes waiting for the
slowest peer: a late peer therefore raises the timeout (fewer useless resends)
rather than lowering it.
"""

from __future__ import annotations

import numpy as np

MAX_BACKOFF_DOUBLINGS = 16  # 2**16 x rto is beyond any sane rto_max anyway


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
        self.sent_at = np.zeros(window)
        self.deadline = np.full(window, np.inf)
        self.retries = np.zeros(window, dtype=np.int64)

    def on_sent(self, slots: np.ndarray, now: float) -> None:
        """Chunks went out for the first time in ``slots``."""
        self.sent_at[slots] = now
        self.retries[slots] = 0
        self.deadline[slots] = now + self.rto

    def on_result(self, slots: np.ndarray, now: float) -> None:
        """Results arrived for ``slots``: stop their timers and learn the RTT."""
        fresh = slots[self.retries[slots] == 0]
        if fresh.size:
            self._sample(now - float(self.sent_at[fresh].sum()) / fresh.size)
        self.deadline[slots] = np.inf

    def expired(self, now: float) -> np.ndarray:
        """Slots whose deadline has passed."""
        return np.flatnonzero(self.deadline <= now)

    def on_retransmitted(self, slots: np.ndarray, now: float) -> None:
        """``slots`` were resent at ``now``: back off their next deadline."""
        self.retries[slots] += 1
        doublings = np.minimum(self.retries[slots], MAX_BACKOFF_DOUBLINGS)
        self.deadline[slots] = now + np.minimum(self.rto * np.exp2(doublings), self.rto_max)

    def stop(self, slots: np.ndarray | slice) -> None:
        self.deadline[slots] = np.inf

    def next_deadline(self) -> float:
        return float(self.deadline.min()) if self.deadline.size else float("inf")

    def _sample(self, rtt: float) -> None:
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        self.rto = min(max(self.srtt + 4 * self.rttvar, self.rto_min), self.rto_max)
