"""What the simulated networks of the tests and benchmarks share (tests/unit/lossy_links.py,
bench/_bottleneck.py): an event heap on an explicit clock over a list of
sans-I/O sessions, each session's timer as an event, and its events collected."""

from __future__ import annotations

import heapq
import itertools
from typing import Any

from p4hub.hosts.events import Event, TensorCompleted, TensorFailed
from p4hub.hosts.session import Session


class SessionSim:
    """Subclasses move datagrams (``_send`` of a rank, and the heap's other kinds);
    completions go to ``completions`` as (time, rank, tensor id)."""

    def __init__(self, sessions: list[Session],
                 completions: list[tuple[float, int, object]]) -> None:
        self.sessions = sessions
        self.heap: list = []
        self.seq = itertools.count()
        self.events: list[list[Event]] = [[] for _ in sessions]
        self.now = 0.0
        self._completions = completions

    def _push(self, t: float, kind: str, rank: int, data: object) -> None:
        heapq.heappush(self.heap, (t, next(self.seq), kind, rank, data))

    def _pump(self, r: int) -> None:
        """Rank r sends what it may now, its timer goes on the heap, its events are kept."""
        self._send(r)
        s = self.sessions[r]
        timer = s.get_timer()
        if timer is not None:
            self._push(timer, "timer", r, None)
        while (ev := s.next_event()) is not None:
            self.events[r].append(ev)
            if isinstance(ev, TensorCompleted):
                self._completions.append((self.now, r, ev.tensor_id))

    def _send(self, r: int) -> None:
        raise NotImplementedError

    def _deliver(self, kind: str, r: int, data: Any) -> None:
        """An event of the heap other than a timer (the subclass's kinds)."""
        raise NotImplementedError

    def run(self, until: float, completions: int | None = None) -> None:
        """Move traffic until nothing is left to do, the clock reaches ``until`` or
        ``completions`` tensors have completed (over all ranks, since the start)."""
        for r in range(len(self.sessions)):
            self._pump(r)
        done = self._completions
        while self.heap and self.now < until and (completions is None or len(done) < completions):
            self.now, _, kind, r, data = heapq.heappop(self.heap)
            if kind == "timer":
                self._timer(r)
            else:
                self._deliver(kind, r, data)

    def failures(self) -> list[str]:
        """The reasons of every TensorFailed so far."""
        return [e.reason for events in self.events for e in events if isinstance(e, TensorFailed)]

    def _timer(self, r: int) -> None:
        """A "timer" event of rank r: handled if it is still due (a later one may have
        replaced it), then the rank sends."""
        timer = self.sessions[r].get_timer()
        if timer is not None and self.now >= timer:
            self.sessions[r].handle_timer(self.now)
            self._pump(r)

    def start(self, tensor_id: object, inputs: list) -> None:
        for r, s in enumerate(self.sessions):
            s.start(tensor_id, inputs[r], self.now)
