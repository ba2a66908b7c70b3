"""Which ranks of a group are alive, and how far each has got: heartbeats in the store.

The switch sums silently: a missing contribution shows up only as a result that
never comes, and nothing on the data path says whose it is. So every rank beats in
the group's c10d store once per ``interval`` (``beat/<rank>``, a counter) and writes
the number of collectives it has started (``seq/<rank>``). Each tick also reads every
peer's counter; a counter that has not moved for ``dead_after`` seconds (of this
rank's clock: no clocks are compared across hosts) marks its rank as dead, and
``on_dead`` is told once, so the group can fail its collectives at once with the
rank named instead of waiting out the no-progress deadline. A rank that destroyed its
group says so (its ``seq`` becomes ``left:<n>`` when all n collectives it started had
completed, else ``left``) and is reported as gone, not dead: at once after a plain
``left``, but after ``left:<n>`` only once this rank waits on a collective past the n-th.
The first n are complete at the aggregator (every rank's contribution arrived, or the
departed rank would not have its results), so this rank will get its own results of
them: failing them would turn a peer that simply finished first into an error (issue
32: under CPU load the last step's result was still in a slower rank's socket when its
peers had finished and destroyed their groups).

``tick(now)`` is the whole logic (tests drive it with a fake store and clock); the
``start``ed thread only calls it every ``interval``. Heartbeats to the controller
(which would otherwise expire the job) ride on the same thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

LEFT = "left"  # seq/<rank> of a rank that left with collectives unfinished; "left:<n>"
# when it had finished all the n it started


class HeartbeatStore(Protocol):
    """What liveness uses of a c10d store (``dist.Store`` has it all)."""

    def add(self, key: str, amount: int) -> int: ...
    def set(self, key: str, value: str) -> None: ...
    def multi_get(self, keys: list[str]) -> list[bytes]: ...


class Store(HeartbeatStore, Protocol):
    """What the whole backend uses of a c10d store."""

    def get(self, key: str) -> bytes: ...
    def set_timeout(self, timeout: timedelta) -> None: ...


class Liveness:
    def __init__(self, store: HeartbeatStore, rank: int, world_size: int, who: Callable[[int], str], *,
                 interval: float = 1.0, dead_after: float = 8.0,
                 on_dead: Callable[[str], None] | None = None,
                 extra_beat: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store, self.rank, self.world_size, self.who = store, rank, world_size, who
        self.interval, self.dead_after = interval, dead_after
        self.on_dead, self.extra_beat, self.clock = on_dead, extra_beat, clock
        self.started = 0  # collectives this rank has started (set by the group)
        self.store_error: str | None = None
        self._beats = [-1] * world_size  # last counter seen per rank
        self._seqs = [0] * world_size
        self._left = [False] * world_size
        self._finished: list[int | None] = [None] * world_size  # the n of "left:<n>"
        self._changed = [clock()] * world_size  # when each counter last moved
        self._last_read = clock()  # the last round trip to the store that worked
        self._reported = False
        self._ticks = 0
        self._read_once = False  # no peer's progress known before the first read
        self._store_failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the logic -------------------------------------------------------------------

    def publish(self) -> None:
        """This rank's beat and progress (also called once before the group is used)."""
        self.store.add(f"beat/{self.rank}", 1)
        self.store.set(f"seq/{self.rank}", str(self.started))

    def tick(self, now: float) -> None:
        self._ticks += 1
        # A store that failed is tried again after 2, 4, 8 ... 32 ticks: each failure
        # costs a C++ warning with a stack trace in the log.
        if self._ticks % min(2**self._store_failures, 32) == 0:
            self._touch_store(now)
        if self.extra_beat is not None:
            try:
                self.extra_beat()
            except Exception:  # noqa: BLE001, S110 - a controller restart is not our failure
                pass
        gone = self.gone(now)
        if gone and not self._reported and self.on_dead is not None:
            self._reported = True
            self.on_dead(self.describe(gone, now))

    def _touch_store(self, now: float) -> None:
        try:
            self.publish()
            if self.store_error is not None:
                # Silence while the store was down proves nothing (the peers' beats
                # failed too): take the outage off every rank's silence, but keep what
                # was seen before it. Resetting instead let a store that fails every
                # few ticks (a loaded host) hide a dead rank for ever.
                outage = now - self._last_read
                self._changed = [min(now, t + outage) for t in self._changed]
            self._read_peers(now)
            self._last_read = now
            self.store_error, self._store_failures = None, 0
        except Exception as exc:  # noqa: BLE001 - the store's errors have no common type
            self.store_error = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
            self._store_failures += 1

    def _read_peers(self, now: float) -> None:
        """One round trip: every rank's beat counter and progress."""
        keys = [f"beat/{r}" for r in range(self.world_size)]
        keys += [f"seq/{r}" for r in range(self.world_size)]
        values = self.store.multi_get(keys)
        self._read_once = True
        for r in range(self.world_size):
            beat, seq = int(values[r]), values[self.world_size + r]
            if beat != self._beats[r]:
                self._beats[r], self._changed[r] = beat, now
            if seq.startswith(LEFT.encode()):
                self._left[r] = True
                finished = seq[len(LEFT) + 1:]
                self._finished[r] = int(finished) if finished else None
            else:
                self._seqs[r] = int(seq)

    def gone(self, now: float) -> list[int]:
        """Peers that left or whose heartbeat stopped (while the store is unreachable,
        only those that said they left: no news from the store is not news of death)."""
        silent_is_dead = self.store_error is None
        return [r for r in range(self.world_size) if r != self.rank and
                (self._abandoned(r) or (silent_is_dead and not self._left[r]
                                        and now - self._changed[r] > self.dead_after))]

    def _abandoned(self, r: int) -> bool:
        """Rank r left and this rank waits (or will) on a collective r never finished."""
        finished = self._finished[r]
        return self._left[r] and (finished is None or self.started > finished)

    def describe(self, gone: list[int], now: float) -> str:
        parts = []
        for r in gone:
            if self._left[r]:
                finished = self._finished[r]
                after = "" if finished is None else f" after finishing {finished} collectives"
                parts.append(f"{self.who(r)} left the group (destroyed its process group)"
                             f"{after}")
            else:
                parts.append(f"{self.who(r)} has sent no heartbeat for "
                             f"{now - self._changed[r]:.1f} s: it died or is frozen "
                             f"(it had started {self._seqs[r]} collectives)")
        return "; ".join(parts)

    def diagnose(self, now: float) -> str:
        """Why a collective may be stuck: dead or departed ranks, ranks behind this one,
        or the store being unreachable; '' if every rank looks alive and in step."""
        gone = self.gone(now)
        if gone:
            return self.describe(gone, now)
        parts = [f"{self.who(r)} is alive but has started only {self._seqs[r]} "
                 f"collectives (this rank: {self.started})"
                 for r in range(self.world_size)
                 if self._read_once and not self._left[r] and self._seqs[r] < self.started]
        parts += [f"{self.who(r)} left the group after finishing {self._finished[r]} "
                  f"collectives (this rank: {self.started})"
                  for r in range(self.world_size) if self._left[r]]
        if self.store_error is not None:  # also when it hides whether a lagging rank lives
            parts.append(f"the c10d store is unreachable ({self.store_error}): the process "
                         f"that hosts it (rank 0 or the torchrun agent) may have died")
        return "; ".join(parts)

    def mark_left(self, finished: bool = False) -> None:
        """Tell the peers this rank left; ``finished``: every collective it started had
        completed (the peers may still be collecting their results of the last ones)."""
        try:
            self.store.set(f"seq/{self.rank}", f"{LEFT}:{self.started}" if finished else LEFT)
        except Exception:  # noqa: BLE001, S110 - best effort when leaving
            pass

    # -- the thread ----------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"p4hub-liveness-{self.rank}",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick(self.clock())

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
