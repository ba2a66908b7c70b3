"""Which priority classes of a session are held back, and what that does to their timers.

A session (hosts/session.py) with several classes gives its credit to the most urgent
class with work first. The classes below it are *held back*: by design, not by a fault.
Every rank orders the classes alike, so while a rank holds class c back its peers do
too, and a position of c that this rank sent before the urgent work came (or with
credit the urgent class left unused) waits at the aggregator for the peers, which send
it only when their urgent work is done. Such a wait is not a loss, and its timeouts
were harmful in three ways (issue 31; docs/notes/priority.md has the measurements):

* the resends of positions that were only waiting took up the link, which delayed the
  results, which made more positions time out: a storm (about 60% of the datagrams
  resent on the rack's 5 Mbit/s links, iterations of 5-10 s against 2.1 s);
* the waits, as round trips, would inflate the estimate; resent, they gave none (Karn),
  so the estimate stayed below the round trips the storm made;
* the backoff counted the hold as silence: its class returned no results, so a
  position's timeout grew towards ``rto_max``, and a result lost when the peers
  finally sent the position waited out that backoff (tests/unit/test_p3_stall.py).

So the timeouts of a held-back class's positions are suspended (``SlotTimers.suspend``:
``rto_max`` each, no backoff, no sign of a queue: a peer's loss among them must not
hold them, and the congestion window they take a place in, for longer than that) and,
when the class is no longer held back (the more urgent work is done on this rank),
released: each waits one plain ``rto`` from then (``SlotTimers.release``). Resending
sooner what the peers lost in the meantime is the job of early detection, which stays
on: a newer result of the same class shows that the peers did send the position. A held-back round is no round-trip sample. The most urgent class is never
held back, so its losses are found as without classes, and it finishes; then the next
one is released: no position waits longer than the work more urgent than it. The
credit still counts a held-back position for two smoothed round trips at most, so ranks
that gave their credit to different classes cannot wait on each other for ever.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from p4hub.hosts.recovery import SlotTimers


class HoldBack:
    """The most urgent class with work, and the suspended timers of those below it."""

    def __init__(self, classes: int, window: int) -> None:
        self.classes, self.window = classes, window
        self.top = -1  # the most urgent class with work (-1: none)

    def holds(self, c: int) -> bool:
        """Whether class ``c`` is held back now."""
        return c < self.top

    def update(self, busy: Sequence[object], slot_pos: np.ndarray, timers: SlotTimers,
               now: float, again: bool = False) -> None:
        """``busy[c]``: whether class c has work. Suspends the timers of positions in
        flight that became held back and releases those no longer held back;
        ``again``: every timer restarted (a resync), so look at all of them."""
        if self.classes == 1:
            return
        top = max((c for c in range(self.classes) if busy[c]), default=-1)
        if top == self.top and not again:
            return
        self.top = top
        flight = slot_pos >= 0
        below = np.arange(flight.size) // self.window < top
        suspended = timers.suspended
        timers.suspend(np.flatnonzero(flight & below & ~suspended), now)
        timers.release(np.flatnonzero(flight & ~below & suspended), now)
