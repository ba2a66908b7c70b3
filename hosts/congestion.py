"""A worker's congestion window: positions in flight, set by queueing delay (sans-I/O).

Time is an argument; nothing here reads a clock. The session (hosts/session.py) sends a
position only while fewer than ``limit`` of its positions are in flight (besides its
slots and its credit), and tells this window each batch of results and each timeout.

Why delay, not loss. A job on one PBox sends n datagrams per position into the PBox's
one link (and n results out of it), so n workers with a full window W each queue n*W
datagrams there. On the rack's 2.5 Mbit/s links with 1044-byte packets that is 1.8 s
at n = 8, W = 64: longer than ``rto_max``, so every position timed out and every worker
resent it, while nothing was lost; the queue (1000 packets) hardly ever dropped. A
loss-based window would have reacted to those timeouts only after the damage, and to
random loss on a 1:1 switch path as well. The queue itself is the signal:
the queueing delay of a position is its round trip minus the smallest round trip this
session has seen (``base_rtt``), and the window is steered to keep it near ``target``
(LEDBAT's rule, RFC 6817, counted in positions):

* once per round (a round trip's worth of results), by the round's fastest clean
  sample (first transmission, no retransmission flag: the samples the RTT estimate
  takes; the fastest is the one least disturbed by jitter or by a peer that sent late,
  Vegas's choice), the window moves by ``GAIN * off`` with ``off = (target - delay) /
  target``, at most +1 and at most a halving: about +1 per round trip with an empty
  queue, a halving per round trip when the queue is far beyond the target;
* it starts at ``INITIAL`` and, until the delay first reaches half the target, grows
  by ``SLOW_START_GROWTH`` per result (x1.5 per round trip: a doubling outran the
  retransmission timeout, whose estimate follows the round trip a round late), so the
  first window is not a burst of n*W datagrams;
* a timeout halves it (once per smoothed round trip at most) only when even the
  fastest recent round trip of any result shows a queue, or before any clean sample:
  then every round carries someone's retransmission flag and nothing else tells of
  the queue. A timeout while round trips stay short is a random loss.

A session has one window per aggregator of its job's map (hosts/route_windows.py): each
path has its own queue. The session (hosts/session.py ``_budget``) counts every position
in flight on an aggregator against its window while its results arrive, and by age (as
its credit) only in silence, which keeps ranks with different windows from waiting on
each other for ever; and it keeps the retransmission timeout above ``RTO_SRTT_FLOOR``
smoothed round trips, because each step of the window moves every rank's round trip at
once.

On a 1:1 path the only queue is the worker's own uplink, which a full window fills by
W transmission times; the window keeps about ``target`` of it queued, still far more
than the link needs to stay busy, so throughput is unchanged. The measurements are in
docs/notes/host-agent.md §5a and bench/congestion.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

INITIAL = 4.0  # positions in flight before the first round trip
TARGET = 0.05  # seconds of queueing delay the window aims at
GAIN = 1.0  # window change per round trip at one target of error
SLOW_START_GROWTH = 0.5  # per result in slow start: x1.5 per round trip (see above)
RTO_SRTT_FLOOR = 1.5  # with a window, the retransmission timeout stays above this x srtt
# the queueing delay is judged on the fastest of at least this many recent clean samples
# (LEDBAT's current-delay filter): a round of a small window has one or two, and on a
# path whose round trips spread wide without a queue (a slow software switch) their
# minimum stays far above the base, which held the window at 1 (measured: a rack on its
# PBox behind simple_switch_grpc, 45 s an iteration against under 20 s without a window)
CURRENT_FILTER = 8
# A queue the window did not build does not drain when the window shrinks (another job's
# traffic through a shared software switch, a busy CPU). Once the window is at half of
# where it stood when the delay went over the target, and the average delay of
# FOLLOW_ROUNDS rounds there is still above FOLLOW_FRACTION of the average before, that
# delay is "foreign": it is taken off what the window steers on (and off what a timeout
# is judged on). A round whose delay is below it moves it FOREIGN_EASE of the way down:
# the other traffic went away (one round's dip alone is the path's spread). Without it a
# job whose round trips cross a shared switch several times yields to one that crosses
# it once: a rack on its PBox behind simple_switch_grpc, with a one-worker job busy on
# the same leaf, held at 1-8 positions, 24-32 s an iteration (see host-agent.md §5a).
FOLLOW_ROUNDS = 3
FOLLOW_FRACTION = 0.75
FOREIGN_EASE = 1 / 8


@dataclass(slots=True)
class _Episode:
    """Rounds since the delay went over the target: their delays summed, before the
    window came to half of ``window`` and since."""

    window: float
    before: float
    rounds_before: int
    at_half: float = 0.0
    rounds_at_half: int = 0


class CongestionWindow:
    """The delay-based window of one session on one aggregator, in positions (a float)."""

    def __init__(self, maximum: int, *, initial: float = INITIAL, target: float = TARGET) -> None:
        if maximum < 1 or target <= 0:
            raise ValueError(f"need maximum >= 1 ({maximum}) and target > 0 ({target})")
        self.maximum = maximum
        self.target = target
        self.cwnd = float(min(initial, maximum))
        self.base_rtt = np.inf  # the fastest round trip seen: no queue on the path
        self.slow_start = True
        self.cuts = 0  # halvings on timeouts
        self.backoffs = 0  # rounds whose queueing delay shrank the window
        self._next_cut = -np.inf  # no second halving before this
        self._round_start = -np.inf  # the round (one round trip of results) under way
        self._round_min = np.inf  # its fastest clean sample
        self._round_acked = 0  # its results
        self._recent = np.full(CURRENT_FILTER, np.inf)  # the latest clean samples, a ring
        self._recent_at = 0
        self.foreign = 0.0  # seconds of delay found not to follow the window (see above)
        self.foreigns = 0  # times the delay did not follow the window down
        self._episode: _Episode | None = None  # since the delay went over the target

    @property
    def limit(self) -> int:
        """Positions that may be in flight now (at least one)."""
        return max(1, int(self.cwnd))

    def resize(self, maximum: int) -> None:
        """The window may now hold at most ``maximum`` positions (its path got more or
        fewer slots)."""
        if maximum < 1:
            raise ValueError(f"need maximum >= 1 ({maximum})")
        self.maximum = maximum
        self._set(self.cwnd)

    def on_results(self, acked: int, samples: np.ndarray, now: float) -> None:
        """``acked`` results arrived at ``now``; ``samples``: the round trips of those
        that are clean (empty if none). The window moves once per round: after a round
        trip's worth of time, by the round's fastest clean sample, the one least
        disturbed by jitter or by a peer that sent late (Vegas takes the same minimum)."""
        if self._round_start == -np.inf:
            self._round_start = now
        self._round_acked += acked
        if samples.size:
            self._round_min = min(self._round_min, float(samples.min()))
            for sample in samples[-CURRENT_FILTER:]:
                self._recent[self._recent_at % CURRENT_FILTER] = sample
                self._recent_at += 1
        if now - self._round_start < self._round_min:  # inf while it has no clean sample
            return
        fastest = min(self._round_min, float(self._recent.min()))
        acked = self._round_acked
        self._round_start, self._round_min, self._round_acked = now, np.inf, 0
        self.base_rtt = min(self.base_rtt, fastest)
        delay = fastest - self.base_rtt
        if delay < self.foreign:  # it is not all there any more
            self.foreign += FOREIGN_EASE * (delay - self.foreign)
        self._steer(delay - self.foreign, acked)

    def _steer(self, delay: float, acked: int) -> None:
        if self.slow_start:
            if delay < self.target / 2:
                self._set(self.cwnd + SLOW_START_GROWTH * acked)
                return
            self.slow_start = False
        delay = self._judge(delay)
        off = min(max((self.target - delay) / self.target, -self.cwnd / 2), 1.0)
        change = GAIN * off * min(acked / self.cwnd, 1.0)
        if change < 0:
            self.backoffs += 1
        self._set(self.cwnd + change)

    def _judge(self, delay: float) -> float:
        """``delay``, less what turns out not to follow the window (FOLLOW_ROUNDS)."""
        episode = self._episode
        if episode is None:
            if delay > self.target:
                self._episode = _Episode(self.cwnd, delay, 1)
            return delay
        if self.cwnd > episode.window:
            self._episode = None  # the window grew past where it began: no queue to judge
            return delay
        if self.cwnd > max(1.0, episode.window / 2):
            episode.before += delay
            episode.rounds_before += 1
            return delay
        episode.at_half += delay
        episode.rounds_at_half += 1
        if episode.rounds_at_half < FOLLOW_ROUNDS:
            return delay
        self._episode = None
        half = episode.at_half / episode.rounds_at_half
        if half <= self.target or half < FOLLOW_FRACTION * episode.before / episode.rounds_before:
            return delay  # it followed the window down: the window's own queue
        self.foreign += half
        self.foreigns += 1
        return delay - half

    def on_timeout(self, now: float, srtt: float | None, fastest: float) -> None:
        """A position timed out (its result is overdue by a whole rto); ``fastest``: the
        fastest recent round trip of any result, retransmitted or not. A cut only if
        that shows a queue (even the fastest recent round trip is ``target`` above the
        base), or before any clean sample: a timeout while round trips stay short is a
        random loss, not congestion."""
        if now < self._next_cut:
            return
        if self.base_rtt < np.inf and fastest - self.base_rtt - self.foreign < self.target:
            return
        self.slow_start = False
        self.cuts += 1
        self._set(self.cwnd / 2)
        self._next_cut = now + (srtt if srtt is not None else 0.0)

    def restart(self) -> None:
        """The path changed (a resync: another aggregator, other links): forget the
        base round trip, which may no longer be reachable, and the recent samples."""
        self.base_rtt = np.inf
        self._recent[:] = np.inf
        self.foreign, self._episode = 0.0, None

    def _set(self, cwnd: float) -> None:
        self.cwnd = min(max(cwnd, 1.0), float(self.maximum))
