"""A fake clock and an agent that answers every all-reduce 1 ms after it started, for
driving ``workers/replay.py``'s ``replay_iteration`` without a network or real time."""

from __future__ import annotations

import numpy as np


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeHandle:
    def __init__(self, array: np.ndarray, done_at: float) -> None:
        self.array = array
        self.completed_at: float | None = done_at  # as replay.Waitable declares it

    def wait(self, timeout: float | None = None) -> np.ndarray:
        return self.array


class InstantAgent:
    """Every all-reduce is back 1 ms after it started (its sum: twice the array);
    records the start order as (size, priority)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.started: list[tuple[int, int]] = []

    def allreduce_async(self, array: np.ndarray, op: str = "sum", *, priority: int = 0,
                        stream: int | None = None) -> FakeHandle:
        self.started.append((array.size, priority))
        return FakeHandle(array * 2, self.clock.now + 1e-3)
