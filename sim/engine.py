"""The simulated clock: SimPy underneath, plain callbacks on the hot path.

The boundary between the project's cores and the network model has the shape of
ASTRA-sim's backend interface (get the time, schedule a callback after a delay, send,
receive): ``Engine`` gives the first two, ``p4hub.sim.network`` the last two, so another
backend (analytical, or a faster engine) could later sit under the same nodes.

Why callbacks and not SimPy processes: a generator process costs about twice a callback
per event, and a run has millions of per-datagram events; processes are kept for control
logic (a worker's training loop), which has a few events per layer.

Events at the same time run in the order they were scheduled (SimPy's (time, priority,
id) order), so a run is a function of its scenario and seed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy
from simpy.core import NORMAL


class Engine:
    """A SimPy environment with a cheap ``call_later`` and an event count."""

    def __init__(self) -> None:
        self.env = simpy.Environment()
        self.events = 0  # callbacks run so far (the engine's unit of work)

    @property
    def now(self) -> float:
        """Simulated seconds since the start."""
        return float(self.env.now)

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` ``delay`` simulated seconds from now (delay >= 0)."""
        event = simpy.Event(self.env)
        event._ok = True  # a triggered event without a value: SimPy runs its callbacks
        event._value = None
        event.callbacks.append(_Call(self, fn, args))
        self.env.schedule(event, NORMAL, delay)

    def call_at(self, when: float, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at simulated time ``when`` (now if it has passed)."""
        self.call_later(max(0.0, when - self.env.now), fn, *args)

    def process(self, generator: Any) -> simpy.Process:
        """A SimPy process (control logic with few events)."""
        return self.env.process(generator)

    def timeout(self, delay: float) -> simpy.Timeout:
        return self.env.timeout(delay)

    def event(self) -> simpy.Event:
        return self.env.event()

    def run(self, until: float | None = None,
            stop: Callable[[], bool] | None = None, check_every: int = 4096) -> None:
        """Run until nothing is scheduled, ``until`` (simulated s) or ``stop()`` is true
        (asked every ``check_every`` events: a progress report or a memory check)."""
        env = self.env
        step = env.step
        limit = float("inf") if until is None else until
        count = 0
        try:
            while env.peek() <= limit:
                step()
                count += 1
                if stop is not None and count % check_every == 0 and stop():
                    break
        except simpy.core.EmptySchedule:
            pass


class _Call:
    """A scheduled callback: counts itself, then calls."""

    __slots__ = ("engine", "fn", "args")

    def __init__(self, engine: Engine, fn: Callable[..., Any], args: tuple) -> None:
        self.engine, self.fn, self.args = engine, fn, args

    def __call__(self, _event: simpy.Event) -> None:
        self.engine.events += 1
        self.fn(*self.args)
