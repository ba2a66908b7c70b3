"""Resynchronisation's courtesy resends, sans-I/O (a ``Session`` holds one).

When the job's aggregator state is lost (a restarted switch) or the job moves (another
aggregator, other slots: a new epoch), the rounds in flight are gone, and ranks stand
at different places: per slot, a rank's last position h is either its peers' or one
step (W) ahead, and some ranks may hold a result that others lost. So every rank
resends, per slot, what it has no result for (the session's retransmissions) and, as a
*courtesy* to its peers, the position before it whose result it holds but a peer may
still need: h - W if h is in flight, h itself if its result is in. A rank keeps the
packets of both (the session's packet store has one row per cell, so h - W's bytes are
intact while h is in flight). A courtesy packet is resent with backoff until the new
aggregator's result for it, or for the next position of its slot, arrives (either
shows every rank has it), or until the session's deadline. A courtesy position nobody
needs meets its slot's next round in the same cell: the aggregator lets the newer round
replace an open one (hosts/pbox/aggregator.py), so it never blocks it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from p4hub.hosts import wire

POSITION_MASK = 0xFFFFFFFF  # the wire's position field is g mod 2**32


def courtesy_positions(slot_pos: np.ndarray, slot_next: np.ndarray, window: int) -> np.ndarray:
    """Per window slot, its courtesy position (h - W while h is in flight, else h
    itself), or a negative number where the slot has none (nothing sent before)."""
    courtesy = np.where(slot_pos >= 0, slot_pos, slot_next) - window
    first = np.arange(slot_pos.size) % window  # each slot's first position
    return np.where(courtesy >= first, courtesy, -1)


class CourtesyResends:
    """The courtesy packets of the latest resync, one per window slot at most, each
    resent with backoff (from the first ``rto`` up to ``rto_max``) until a result shows
    every rank has it, or until the deadline."""

    def __init__(self, slots: int, lanes: int, window: int) -> None:
        self.window = window
        self._pos = np.full(slots, -1, dtype=np.int64)  # the slot's courtesy position, or -1
        self._pkts = wire.packet_array(slots, lanes)
        self._due = np.full(slots, np.inf)
        self._wait = np.zeros(slots)
        self._until = -np.inf  # courtesy resends give up after this

    @property
    def active(self) -> bool:
        """Whether any courtesy packet may still go out."""
        return self._until > -np.inf

    def start(self, positions: np.ndarray, packets: Callable[[np.ndarray, np.ndarray], np.ndarray],
              now: float, rto: float, deadline: float) -> None:
        """A resync: resend each slot's courtesy position (``positions``, negative: none;
        ``courtesy_positions``) from ``now`` on, the first time at once, for
        ``deadline`` seconds at most. ``packets(slots, positions)``: the packets the
        session sent for them."""
        slots = np.flatnonzero(positions >= 0)
        self._pos[:] = -1
        self._pos[slots] = positions[slots]
        self._pkts[slots] = packets(slots, positions[slots])
        self._pkts["hdr"]["flags"] |= wire.FLAG_RETRANSMIT
        self._due[:] = np.inf
        self._due[slots] = now
        self._wait[slots] = rto
        self._until = now + deadline if slots.size else -np.inf

    def due(self, now: float, rto_max: float) -> np.ndarray:
        """Courtesy packets due now (each then backs off, up to ``rto_max``)."""
        if now > self._until:
            self.stop()
            return self._pkts[:0]
        due = np.flatnonzero(self._due <= now)
        if not due.size:
            return self._pkts[:0]
        self._due[due] = now + self._wait[due]
        self._wait[due] = np.minimum(self._wait[due] * 2, rto_max)
        return self._pkts[due]

    def next_due(self) -> float:
        """When ``due`` has something next (or gives up): inf when inactive."""
        if not self.active:
            return np.inf
        return min(float(self._due.min()), self._until)

    def on_results(self, slots: np.ndarray, positions: np.ndarray) -> None:
        """Results (their window slots and wire positions) arrived: one for a courtesy
        position, or for its slot's next one, shows that every rank has (or no longer
        needs) it: stop resending it."""
        held = self._pos[slots]
        got = positions.astype(np.int64)
        done = (held >= 0) & (
            ((held & POSITION_MASK) == got) | (((held + self.window) & POSITION_MASK) == got)
        )
        if done.any():
            self._pos[slots[done]] = -1
            self._due[slots[done]] = np.inf
            if not (self._pos >= 0).any():
                self.stop()

    def stop(self) -> None:
        self._pos[:] = -1
        self._due[:] = np.inf
        self._until = -np.inf
