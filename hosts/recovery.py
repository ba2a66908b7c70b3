"""Per-slot retransmission timers: exponential backoff and an RTT-driven timeout.

Time is an argument; nothing here reads a clock. Each of the window's slots holds at
most one chunk in flight, so the state is a few arrays indexed by slot. The base
timeout follows RFC 6298 (``srtt + 4 * rttvar``), sampled only from chunks that were
not retransmitted (Karn's rule), and never below ``rto_min`` nor above ``rto_max``.
Each timeout event doubles the base timeout (capped at ``rto_max``) until a fresh
sample resets it, so a chunk's k-th retransmission waits ``min(rto * 2**k, rto_max)``.

The "RTT" of a chunk is the time to its result, which includes waiting for the
slowest peer: a late peer therefore raises the timeout (fewer useless resends)
rather than lowering it.
"""

from __future__ import annotations

import numpy as np


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
        """``slots`` timed out and are resent at ``now``: back off (RFC 6298, 5.5).

        The base timeout doubles once per timeout event and the resent slots wait for
        the doubled value; it stays backed off until a chunk that was never resent
        gives a fresh RTT sample. So the k-th resend of a lone chunk waits
        ``rto * 2**k``, and when a whole window times out because the aggregator is
        slower than the timeout (all samples then come from resent chunks, which Karn's
        rule discards), the next window is sent with the backed-off timeout instead of
        timing out again.
        """
        self.retries[slots] += 1
        self.rto = min(self.rto * 2, self.rto_max)
        self.deadline[slots] = now + self.rto

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
