"""n sessions and an aggregator over serialized, lossy, jittery links, on an explicit clock.

Each worker has an uplink and a downlink that carry one datagram per ``tx`` seconds (a
FIFO: a window queues behind itself, as on the rack's htb-shaped links) plus ``delay``
seconds of propagation, with instantaneous aggregators in the middle (one, or one per route destination of a
job split over several: ``aggs``). Every datagram,
in each direction, is lost with probability ``loss``: an uplink loss happens before the
link (the rack drops at the sender's egress hook, so the datagram costs no link time), a
downlink loss after it (the rack drops at the receiver's INPUT, so it did). ``jitter``
adds a uniform random 0..jitter seconds to each result's arrival after its
serialization, so results can overtake each other: reordering without loss.
``up_jitter`` does the same to contributions, so a worker's late resend of g can arrive
after its own g + W (the aggregators drop it as stale: docs/DESIGN.md §3).

Events and timers run from a heap in time order; sessions see only ``now`` arguments.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from bench._session_sim import SessionSim
from p4hub.hosts import wire
from p4hub.hosts.events import TensorCompleted, TensorFailed
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.session import Session


@dataclass
class LinkModel:
    """What every link of the simulated rack does to a datagram."""

    tx: float = 0.001  # seconds per datagram (size / bandwidth)
    delay: float = 0.0  # propagation, each way
    loss: float = 0.0  # probability, each datagram, each direction
    jitter: float = 0.0  # extra uniform 0..jitter seconds per result (reordering)
    up_jitter: float = 0.0  # the same per contribution: a late resend can be overtaken
    seed: int = 0


@dataclass
class Counts:
    """What the links did (datagrams)."""

    up_sent: int = 0
    up_lost: int = 0
    down_sent: int = 0
    down_lost: int = 0
    completions: list[tuple[float, int, object]] = field(default_factory=list)  # (t, rank, id)


class SerialLossyNet(SessionSim):
    """The sessions' traffic through per-worker serialized links and an aggregator."""

    def __init__(self, sessions: list[Session], agg: Aggregator | None, link: LinkModel,
                 aggs: dict[Hashable, Aggregator] | None = None) -> None:
        """``agg`` serves the default destination (a route's ``None``); ``aggs`` any
        others, by route destination."""
        self.counts = Counts()
        super().__init__(sessions, self.counts.completions)
        self.link = link
        self.aggs: dict[Hashable, Aggregator] = dict(aggs or {})
        if agg is not None:
            self.aggs[None] = agg
        self.misrouted = 0  # datagrams to a destination with no aggregator
        self.rng = random.Random(link.seed)
        self.up_free = [0.0] * len(sessions)
        self.down_free = [0.0] * len(sessions)

    @property
    def agg(self) -> Aggregator:
        return self.aggs[None]

    @agg.setter
    def agg(self, value: Aggregator) -> None:
        self.aggs[None] = value

    def _arrival(self, free: list[float], r: int, jitter: float = 0.0) -> float:
        free[r] = max(self.now, free[r]) + self.link.tx
        return free[r] + self.link.delay + (self.rng.uniform(0.0, jitter) if jitter else 0.0)

    def _send(self, r: int) -> None:
        for to, batch in self.sessions[r].routed_packets(self.now):
            for d in wire.split_datagrams(batch):
                self.counts.up_sent += 1
                if self.rng.random() < self.link.loss:
                    self.counts.up_lost += 1
                    continue
                self._push(self._arrival(self.up_free, r, self.link.up_jitter), "agg", r, (to, d))

    def at(self, t: float, rank: int, call: Callable[[float], None]) -> None:
        """Run ``call(now)`` at time ``t`` on rank ``rank``'s side (a control event such
        as a resync), then let that rank send what it wants."""
        self._push(t, "call", rank, call)

    def _deliver(self, kind: str, r: int, data: Any) -> None:
        if kind == "agg":
            to, datagram = data
            agg = self.aggs.get(to)
            if agg is None:
                self.misrouted += 1
                return
            for reply, dst in agg.receive(datagram, ("w", r), self.now):
                q = dst[1]
                self.counts.down_sent += 1
                at = self._arrival(self.down_free, q, self.link.jitter)
                if self.rng.random() < self.link.loss:
                    self.counts.down_lost += 1
                    continue
                self._push(at, "host", q, reply)
        elif kind == "host":
            self.sessions[r].receive(data, self.now)
            self._pump(r)
        elif kind == "call":
            data(self.now)
            self._pump(r)

    def total(self, counter: str) -> int:
        return sum(getattr(s.stats, counter) for s in self.sessions)

    def assert_exact(self, inputs: list) -> None:
        """No rank failed, and every rank got exactly the quantized sum of each
        ``inputs[tensor id]`` (one array per rank)."""
        from tests.unit.test_session import reference_sum

        for r, events in enumerate(self.events):
            failed = [e for e in events if isinstance(e, TensorFailed)]
            assert not failed, failed[0].reason
            got = {e.tensor_id: e.result for e in events if isinstance(e, TensorCompleted)}
            for tid, x in enumerate(inputs):
                assert got[tid].tobytes() == reference_sum(x).tobytes(), (r, tid)
