"""Per-slot retransmission timers: an RTT-driven timeout with per-position backoff, and
early loss detection from the order results come back in.

Time is an argument; nothing here reads a clock. Each of the window's slots holds at
most one position in flight, so the state is a few arrays indexed by slot.

The base timeout follows RFC 6298 (``srtt + 4 * rttvar``, clamped to ``[rto_min,
rto_max]``). The k-th retransmission of a position waits ``min(rto * 2**k, rto_max)``,
but at most ``2 * rto`` while the aggregator is answering (a result arrived within the
last ``rto``; see "Backoff" below). The backoff belongs to that position and never raises
the shared base.

The base has a floor: ``FLOOR_FACTOR`` times the shortest round trip among the last
``max(HISTORY, W)`` results of any kind, retransmitted or not. A result can come back
no sooner than the round trip of the position's first transmission, so that minimum is
never below what a round trip takes now, and it is not inflated by a loss (the fastest
of many rounds was not the one held up). Without the floor, a base below the time a full
window takes to drain through the links (W datagrams serialized one after another) made
every slot time out and every round end in a retransmission, so no usable sample ever
came (see below) and the base never grew: measured on 8 workers with 256-lane packets at
5 Mbit/s, 1 to 2.5 resends per packet sent for the whole run
(tests/unit/test_recovery_bandwidth.py reproduces it on a simulated link). A session
with a congestion window also keeps the base above ``srtt_floor`` (1.5) times ``srtt``:
each step of its window moves the round trip of every rank at once (hosts/congestion.py).

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

Early resends (RACK's idea, RFC 8985, applied to slots). A timeout is the slow way to learn
of a loss: results come back roughly in the order positions were sent, so when the result
of a position sent *after* slot k's has arrived and slot k's is still missing a little
longer than that newer round trip took, slot k's round has almost surely lost a datagram.
Precisely: let N be the latest-sent position (by this worker's send order) whose result
came back without this worker having resent it, and ``rtt_N`` its round trip. A position P
sent before N, never resent, is declared lost at ``sent(P) + rtt_N + allowance``, and
resent then, once: after that the timeout (from the resend, with no doubling for the early
one) and its backoff take over. The allowance is ``REORDER_FRACTION`` of the fastest recent
round trip (RFC 8985's min_RTT / 4) times a multiplier, capped at ``srtt``. A resend that
turns out needless (its round completed without any retransmission: the result was only
late, or reordered) raises the multiplier by one, up to ``REORDER_MULT_MAX``; after
``REORDER_DECAY`` early resends that a retransmission did complete it falls back to 1.

Who resends. Results are multicast, so every worker sees the same gap, and a worker cannot
tell its own loss (its contribution, or its copy of the result) from a peer's (the peer's
contribution, or the peer not yet sending it because it lost the previous result of that
slot): the aggregator answers a duplicate on an incomplete cell with silence and sends no
bitmap back. "Later positions of mine completed" is the same evidence on every worker
(a completion is everyone's): it proves the peers are past those positions, not that
they sent this one. So any rule on completions is the same rule everywhere: all resend,
or none. We let all resend, once per position: the timeout had every worker resend the
same positions anyway (2.45 resends per lost datagram with 4 workers at 10 % loss, before
and after), early detection only moves them earlier. Staggering by rank (rank r waits
(r + g) mod n round trips for position g, so one worker goes first and the completion
stops the rest) cut resends by 2-4 % and costs up to n - 1 round trips per gap: 3.70 s
and 3.88 s per tensor against 3.51 s without it (10 % loss, before the backoff cap),
so it was dropped. (Measurements: docs/notes/host-agent.md §5.)

Backoff. Exponential backoff is for silence: an aggregator or peer that answers nothing
should not be hammered. While results keep arriving (one within the last ``rto``), a
missing result is a random loss, and a position whose resends were lost twice should not
wait 4, 8, 16 rto while every other slot moves on: the whole tensor waits for its
slowest position. So while the aggregator answers, a position's backoff stops at one
doubling; with nothing arriving for ``rto`` it doubles as before, so a silent
aggregator or a dead peer (no cell completes without every rank) still gets the full
backoff. (Simulated, 4 workers, 10 % loss, per 1 MB tensor: the timeout alone 4.05 s,
early detection alone 4.65 s, this cap alone 3.95 s, both 3.19 s; 1.86 s without loss.)

Out of order. An all-gather's rounds (hosts/gather.py) complete when their slot's owner's
packet arrives, and each position has another owner, so their results come back in the
order of the owners' packets, not of this worker's sends: one owner's full packet queued
behind its others completes its position after the next owner's (at 5 Mbit/s a 1,044-byte
packet is 1.7 ms, several reorder allowances). ``unordered`` positions are therefore left
out of early detection both ways (their results are no evidence, and they are never
declared lost early): they wait for their timeout. (On the Mininet rack, FSDP with its
all-gathers in the network through the switch, 33 steps, one run each: 458-519 resends
per worker, 357-398 of them early, without this; 65-113, none early, with it; 24-43
with the all-gathers on the all-reduce.)

Held back. A position of a priority class held back by a more urgent one
(hosts/hold_back.py) waits for peers, not for a resend: ``suspend`` slows its timeout to
``rto_max`` with no backoff until ``release``, after which it waits one plain ``rto``;
early detection stays on, and a held-back round is no sample.

Paths. A job split over several aggregators (hosts/routes.py) reaches each over its own
path: the switch's round trip may be a tenth of a PBox's, and a PBox behind a shared link
queues for longer than its peers. One estimate over all of them is the fast paths'
(they return most results), and early detection compares a slow path's positions with a
fast path's newer results: slow-path positions looked lost. Measured on two simulated
PBoxes, one behind a link 4x slower (tests/unit/test_route_windows.py), 4 workers: with
one path 0.83-1.10 s a tensor and about 100 resends a tensor per rank (10 of them early),
and the slow PBox at 60-70% of its link; with a path per PBox 0.62 s, no resend after
the first tensor, and the slow PBox at 86-99% of its link. So each slot has a path (``set_paths``; the session gives each aggregator one) with its own
estimate, base and floor, and early detection's groups are (class, path). ``rto`` and
``srtt`` are the largest path's, for what the session times as a whole.
"""

from __future__ import annotations

import numpy as np

MAX_BACKOFF_DOUBLINGS = 30
ALIVE_BACKOFF_DOUBLINGS = 1  # while results arrive, a position's timeout stops at 2 rto
HISTORY = 16  # results the floor looks back over (at least the window's)
FLOOR_FACTOR = 1.5  # the base stays above this times the fastest recent round trip
REORDER_FRACTION = 0.25  # the reorder allowance, in fastest recent round trips ...
REORDER_MULT_MAX = 8  # ... times a multiplier each needless early resend raises, up to this
REORDER_DECAY = 16  # needed early resends after which the multiplier falls back to 1


class SlotTimers:
    """Retransmission deadlines of a window of slots, with early loss detection."""

    def __init__(self, window: int, rto_min: float, rto_max: float, groups: int = 1,
                 in_flight: int | None = None) -> None:
        """``window`` slots in ``groups`` equal runs (a session's priority classes): early
        detection compares positions of one group only, and only a result of a
        position's own group shows that its round is moving (the backoff cap), because
        a less urgent class is held back, by design, while a more urgent one runs.
        All slots are on one path until ``set_paths``. ``in_flight``: the most
        positions in flight at once (default: every slot; a session with classes: its
        credit), which sets how many recent round trips the floor looks back over."""
        if not 0 < rto_min <= rto_max:
            raise ValueError(f"need 0 < rto_min ({rto_min}) <= rto_max ({rto_max})")
        if groups < 1 or window % groups:
            raise ValueError(f"{window} slots do not split into {groups} equal groups")
        self.rto_min = rto_min
        self.rto_max = rto_max
        self.srtt_floor = 0.0  # the base stays above this times srtt (a congestion window's)
        self.sent_at = np.zeros(window)  # first transmission of the position in flight
        self.deadline = np.full(window, np.inf)  # the timeout (inf: nothing in flight)
        self.retries = np.zeros(window, dtype=np.int64)
        self._class = np.arange(window) // (window // groups)  # each slot's class
        self._classes = groups
        self.path = np.zeros(window, dtype=np.int64)  # each slot's path ("Paths" above)
        self._group = self._class.copy()  # class * paths + path
        # per path: RFC 6298's estimate (srtt nan before the first sample), the base
        # timeout, and a ring of recent round trips of any kind for the floor
        self._srtt = np.full(1, np.nan)
        self._rttvar = np.zeros(1)
        self._estimate = np.full(1, rto_min)  # srtt + 4 rttvar, clamped; the base adds the floor
        self._rto = np.full(1, rto_min)
        self._recent = np.full((1, max(HISTORY, in_flight or window)), np.inf)
        self._recent_next = np.zeros(1, dtype=np.int64)  # where each path's next one goes
        # early loss detection ("Early resends" above)
        self.order = np.zeros(window, dtype=np.int64)  # send order of the first transmission
        self.lost_at = np.full(window, np.inf)  # when the position counts as lost, if ever
        self.early_used = np.zeros(window, dtype=bool)  # its one early resend went out
        self.reorder_mult = 1
        self.early_resends = 0
        self.needless_early = 0  # early resends whose round then completed without a resend
        self._fresh = np.zeros(window, dtype=bool)  # in flight and never resent
        self._first_lost = np.inf  # lost_at.min()
        self._sent_count = 0
        # per group: when a result last came; the latest-sent position answered with no
        # resend of ours and its round trip
        self._last_result = np.full(groups, -np.inf)
        self._newest_order = np.zeros(groups, dtype=np.int64)
        self._newest_rtt = np.zeros(groups)
        self._early_waiting = 0  # early-resent positions whose result has not come
        self._needed_since_raise = 0
        # held back ("Held back" above): the timeout waits for the release; ``waited``:
        # the round's time is a wait for peers, no sample (``wait_for_peers``)
        self.suspended = np.zeros(window, dtype=bool)
        self.waited = np.zeros(window, dtype=bool)
        # results out of send order ("Out of order" above): no early detection either way
        self.unordered = np.zeros(window, dtype=bool)

    @property
    def rto(self) -> float:
        """The base timeout (the largest path's)."""
        return float(self._rto.max())

    @property
    def srtt(self) -> float | None:
        """The smoothed round trip (the largest path's; None before the first sample)."""
        known = self._srtt[~np.isnan(self._srtt)]
        return float(known.max()) if known.size else None

    @property
    def rttvar(self) -> float:
        return float(self._rttvar.max())

    def path_srtt(self, path: int) -> float | None:
        """Path ``path``'s smoothed round trip (None before its first sample)."""
        srtt = float(self._srtt[path])
        return None if np.isnan(srtt) else srtt

    def path_fastest(self, path: int) -> float:
        """The fastest of path ``path``'s recent round trips of any kind, retransmitted
        or not (inf before the first)."""
        return float(self._recent[path].min())

    def set_paths(self, path: np.ndarray, carry: list[int | None]) -> None:
        """Slot k is on path ``path[k]`` (0..len(carry)-1) from now on. New path p keeps
        old path ``carry[p]``'s estimate and early-detection state (the same
        aggregator); with None it starts from the slowest old path's, a cautious base
        until its own samples come."""
        known = ~np.isnan(self._srtt)
        slowest = int(np.argmax(np.where(known, self._srtt, -np.inf))) if known.any() else 0
        source = np.array([slowest if c is None else c for c in carry], dtype=np.int64)
        old_paths = self._srtt.size
        self._srtt, self._rttvar = self._srtt[source], self._rttvar[source]
        self._estimate, self._rto = self._estimate[source], self._rto[source]
        self._recent, self._recent_next = self._recent[source], self._recent_next[source]
        # group (class c, path p) takes old group (c, source[p])
        old_group = (np.arange(self._classes)[:, None] * old_paths + source[None, :]).ravel()
        self._last_result = self._last_result[old_group]
        self._newest_order = self._newest_order[old_group]
        self._newest_rtt = self._newest_rtt[old_group]
        self.path = np.asarray(path, dtype=np.int64).copy()
        self._group = self._class * source.size + self.path
        self._mark_overdue()

    def move(self, slots: np.ndarray, path: np.ndarray | int) -> None:
        """``slots`` are on ``path`` (one per slot, or one for all) from now on: a position
        that goes elsewhere than its slot's aggregator (hosts/session.py: a float block on
        the float route) is timed on that path. Set before ``on_sent``."""
        self.path[slots] = path
        self._group[slots] = self._class[slots] * self._srtt.size + self.path[slots]

    def on_sent(self, slots: np.ndarray, now: float) -> None:
        """Positions went out for the first time in ``slots``, in this order."""
        self.sent_at[slots] = now
        self.retries[slots] = 0
        self.deadline[slots] = now + self._path_values(self._rto, slots)
        self.order[slots] = np.arange(self._sent_count + 1, self._sent_count + 1 + len(slots))
        self._sent_count += len(slots)
        self.early_used[slots] = False
        self._fresh[slots] = True
        self.suspended[slots] = False
        self.waited[slots] = False
        self.unordered[slots] = False

    def out_of_order(self, slots: np.ndarray) -> None:
        """The rounds of ``slots`` (just sent) may complete out of send order (an
        all-gather's): early detection leaves them out ("Out of order" above)."""
        self.unordered[slots] = True

    def wait_for_peers(self, slots: np.ndarray) -> None:
        """The rounds of ``slots`` (just sent) wait for peers more than for the path: no
        round-trip sample, and the session takes their timeouts as no sign of a queue
        (hosts/session.py: a PRIME waits for every rank to start its tensor)."""
        self.waited[slots] = True

    def suspend(self, slots: np.ndarray, now: float) -> None:
        """``slots``' positions are held back by a more urgent class: until ``release``
        they time out after ``rto_max`` only, and with no backoff (the bound on a wait
        for a peer that lost one of them; early detection still applies: it needs a
        newer result of their own class, which shows that the peers sent them)."""
        self.suspended[slots] = True
        self.waited[slots] = True
        self.deadline[slots] = now + self.rto_max

    def release(self, slots: np.ndarray, now: float) -> None:
        """``slots`` (suspended) are no longer held back: each waits one plain ``rto``
        from now, its backoff as it was before the hold (nothing was resent meanwhile)."""
        self.suspended[slots] = False
        self.deadline[slots] = now + self._path_values(self._rto, slots)

    def on_result(self, slots: np.ndarray, now: float, clean: np.ndarray | None = None) -> None:
        """Results arrived for ``slots``: stop their timers, learn the round trip, and
        mark the positions sent before the newest of them that are overdue.

        ``clean[i]`` is False for a result whose round was completed by a retransmission.
        """
        self.deadline[slots] = np.inf
        self._fresh[slots] = False
        times = now - self.sent_at[slots]
        first_try = self.retries[slots] == 0
        usable = first_try & ~self.waited[slots]  # a round that waited for peers
        if clean is not None:
            usable &= clean
        self.suspended[slots] = False
        if self._srtt.size == 1:
            self._learn(0, times, usable)
        else:
            paths = self.path[slots]
            for p in np.unique(paths).tolist():
                mine = paths == p
                self._learn(p, times[mine], usable[mine])
        groups = self._group[slots]
        self._last_result[groups] = now
        if self._early_waiting:
            self._judge_early(slots, clean)
        evidence = first_try & ~self.unordered[slots]
        if evidence.any():
            orders = np.where(evidence, self.order[slots], 0)
            for g in np.unique(groups[evidence]).tolist():
                mine = np.where(groups == g, orders, 0)
                newest = int(mine.argmax())
                if mine[newest] > self._newest_order[g]:
                    self._newest_order[g], self._newest_rtt[g] = mine[newest], times[newest]
        self._mark_overdue()

    def _path_values(self, values: np.ndarray, slots: np.ndarray) -> float | np.ndarray:
        """``values`` (one per path) of each of ``slots``' paths; one path: the scalar."""
        return float(values[0]) if values.size == 1 else values[self.path[slots]]

    def _learn(self, path: int, times: np.ndarray, usable: np.ndarray) -> None:
        """Path ``path``'s round trips ``times`` (``usable``: those the estimate takes)."""
        if usable.any():
            self._sample(path, times[usable])
        self._remember(path, times)
        srtt = self._srtt[path]
        floor = max(FLOOR_FACTOR * float(self._recent[path].min()),
                    self.srtt_floor * (0.0 if np.isnan(srtt) else float(srtt)))
        self._rto[path] = min(max(float(self._estimate[path]), floor), self.rto_max)

    def expired(self, now: float) -> np.ndarray:
        """Slots whose deadline has passed or whose position was detected lost."""
        if self._first_lost > now:
            return np.flatnonzero(self.deadline <= now)
        return np.flatnonzero((self.deadline <= now) | (self.lost_at <= now))

    def on_retransmitted(self, slots: np.ndarray, now: float) -> int:
        """``slots`` are resent at ``now``: back off each of them. Returns how many were
        early resends (detected lost before their timeout): those wait one plain ``rto``
        for their result, as a first transmission does, and later backoff skips them."""
        early = (self.lost_at[slots] <= now) & (self.deadline[slots] > now)
        self.early_used[slots[early]] = True
        self._fresh[slots] = False
        self.lost_at[slots] = np.inf
        self._first_lost = float(self.lost_at.min())
        self.retries[slots] += 1
        rto = self._path_values(self._rto, slots)
        answering = now - self._last_result[self._group[slots]] < rto
        most = np.where(answering, ALIVE_BACKOFF_DOUBLINGS, MAX_BACKOFF_DOUBLINGS)
        doublings = np.minimum(self.retries[slots] - self.early_used[slots], most)
        backoff = now + np.minimum(rto * np.exp2(doublings), self.rto_max)
        self.deadline[slots] = np.where(self.suspended[slots], now + self.rto_max, backoff)
        count = int(np.count_nonzero(early))
        self.early_resends += count
        self._early_waiting += count
        return count

    def stop(self, slots: np.ndarray | slice) -> None:
        self.deadline[slots] = np.inf
        self.suspended[slots] = False
        self.lost_at[slots] = np.inf
        self._fresh[slots] = False
        self._first_lost = float(self.lost_at.min())

    def next_deadline(self) -> float:
        if not self.deadline.size:
            return float("inf")
        return min(float(self.deadline.min()), self._first_lost)

    def reorder_allowance(self, path: int = 0) -> float:
        """How much longer than the newest answered round trip of its path an older
        position may still be on its way."""
        allowance = self.reorder_mult * REORDER_FRACTION * float(self._recent[path].min())
        srtt = self._srtt[path]
        return allowance if np.isnan(srtt) else min(allowance, float(srtt))

    def _mark_overdue(self) -> None:
        """RACK's rule: in flight, never resent, sent before the newest answered position
        of its group, and waiting longer than that one's round trip plus the allowance
        of its path: lost."""
        waiting = self._fresh & ~self.unordered & (self.order < self._newest_order[self._group])
        if self._srtt.size == 1:
            allowance: float | np.ndarray = self.reorder_allowance(0)
        else:
            allowance = np.array([self.reorder_allowance(p) for p in range(self._srtt.size)])
            allowance = allowance[self.path]
        overdue = self._newest_rtt[self._group] + allowance
        self.lost_at = np.where(waiting, self.sent_at + overdue, np.inf)
        self._first_lost = float(self.lost_at.min())

    def _judge_early(self, slots: np.ndarray, clean: np.ndarray | None) -> None:
        """An early-resent position whose round completed with no retransmission at all
        was only late: waiting would have cost nothing, so widen the allowance."""
        answered = self.early_used[slots]
        self._early_waiting -= int(np.count_nonzero(answered))
        judged = answered & (self.retries[slots] == 1)  # no timeout after the early resend
        if clean is None or not judged.any():
            return
        needless = int(np.count_nonzero(judged & clean))
        self.needless_early += needless
        if needless:
            self.reorder_mult = min(self.reorder_mult + 1, REORDER_MULT_MAX)
            self._needed_since_raise = 0
            return
        self._needed_since_raise += int(np.count_nonzero(judged))
        if self._needed_since_raise >= REORDER_DECAY:
            self.reorder_mult, self._needed_since_raise = 1, 0

    def _sample(self, path: int, samples: np.ndarray) -> None:
        m = samples.size
        mean = float(samples.sum()) / m
        srtt = float(self._srtt[path])
        if np.isnan(srtt):
            spread = float(np.abs(samples - mean).sum()) / m
            self._srtt[path], self._rttvar[path] = mean, max(mean / 2, spread)
        else:
            deviation = float(np.abs(samples - srtt).sum()) / m
            a, b = 1 - 0.875**m, 1 - 0.75**m
            self._rttvar[path] = (1 - b) * self._rttvar[path] + b * deviation
            self._srtt[path] = (1 - a) * srtt + a * mean
        estimate = float(self._srtt[path] + 4 * self._rttvar[path])
        self._estimate[path] = min(max(estimate, self.rto_min), self.rto_max)

    def _remember(self, path: int, times: np.ndarray) -> None:
        ring = self._recent[path]
        keep = ring.size
        if times.size >= keep:
            ring[:] = times[-keep:]
            return
        at = int(self._recent_next[path])
        first = min(times.size, keep - at)
        ring[at : at + first] = times[:first]
        ring[: times.size - first] = times[first:]
        self._recent_next[path] = (at + times.size) % keep
