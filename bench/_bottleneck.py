"""n sessions, one aggregator and drop-tail queues of finite length, on an explicit clock.

Two shapes of the same rack, every link ``tx`` seconds per datagram:

* ``shared=True`` (a PBox): the aggregator is a host on one link. All n workers'
  contributions queue for its downlink (n datagrams per position) and all n unicast
  results for its uplink: the N:1 link of a job on a single PBox.
* ``shared=False`` (the switch): the aggregator sums in the fabric, so each worker's
  uplink and downlink carry one datagram per position: 1:1.

Every queue (a worker's uplink and downlink, the PBox's two directions) is a FIFO that
serializes one datagram per ``tx`` and drops a datagram that finds ``queue`` datagrams
waiting (drop-tail, like the rack's htb/pfifo qdiscs). ``loss`` drops each datagram with
that probability on each worker link, each direction (random, non-congestion loss).
``delay`` is the propagation per link. The aggregator is ``hosts.pbox.aggregator.Aggregator``
(the PBox core, sans-I/O) and answers at once. Sessions see only ``now`` arguments.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench._session_sim import SessionSim
from p4hub.hosts import wire
from p4hub.hosts.congestion import CongestionWindow
from p4hub.hosts.events import TensorCompleted
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.session import Session


class FrozenWindow(CongestionWindow):
    """A congestion window that stays where it is put (ranks held to different sizes)."""

    def _set(self, cwnd: float) -> None:
        pass


@dataclass
class Bottleneck:
    """The rack's links."""

    tx: float = 0.001  # seconds per datagram on every link
    shared: bool = True  # True: the aggregator's one link carries every worker's traffic
    queue: int = 1000  # datagrams a queue holds (drop-tail)
    loss: float = 0.0  # random loss per datagram, each worker link, each direction
    delay: float = 0.0001  # propagation per link
    seed: int = 0


@dataclass
class Queue:
    """A drop-tail FIFO that serializes one datagram per ``tx``."""

    tx: float
    limit: int
    free_at: float = 0.0  # when the datagram last queued has left
    dropped: int = 0

    def enqueue(self, now: float) -> float | None:
        """When a datagram offered at ``now`` has left, or None if the queue is full."""
        waiting = (self.free_at - now) / self.tx
        if waiting > self.limit - 1e-9:
            self.dropped += 1
            return None
        self.free_at = max(now, self.free_at) + self.tx
        return self.free_at


@dataclass
class Tally:
    up_sent: int = 0
    random_lost: int = 0
    completions: list[tuple[float, int, object]] = field(default_factory=list)


class BottleneckNet(SessionSim):
    """Sessions' datagrams through the queues above and an in-process aggregator."""

    def __init__(self, sessions: list[Session], agg: Aggregator, net: Bottleneck) -> None:
        self.tally = Tally()
        super().__init__(sessions, self.tally.completions)
        self.agg, self.net = agg, net
        n = len(sessions)
        self.up = [Queue(net.tx, net.queue) for _ in range(n)]
        self.down = [Queue(net.tx, net.queue) for _ in range(n)]
        self.agg_in = Queue(net.tx, net.queue)  # used when shared
        self.agg_out = Queue(net.tx, net.queue)
        self.rng = random.Random(net.seed)
        self.resent_per_tensor: list[float] = []  # run_job's: resends per datagram sent

    @property
    def dropped(self) -> int:
        """Datagrams the full queues dropped."""
        queues = [*self.up, *self.down, self.agg_in, self.agg_out]
        return sum(q.dropped for q in queues)

    def _lost(self) -> bool:
        if self.net.loss and self.rng.random() < self.net.loss:
            self.tally.random_lost += 1
            return True
        return False

    def _hop(self, queue: Queue, kind: str, rank: int, data: object) -> None:
        left = queue.enqueue(self.now)
        if left is not None:
            self._push(left + self.net.delay, kind, rank, data)

    def _send(self, r: int) -> None:
        for batch in self.sessions[r].packets_to_send(self.now):
            for d in wire.split_datagrams(batch):
                self.tally.up_sent += 1
                if not self._lost():
                    self._hop(self.up[r], "fabric" if self.net.shared else "agg", r, d)

    def _deliver(self, kind: str, r: int, data: Any) -> None:
        if kind == "fabric":  # a contribution reaches the PBox's link
            self._hop(self.agg_in, "agg", r, data)
        elif kind == "agg":
            for reply, dst in self.agg.receive(data, ("w", r), self.now):
                q = dst[1]
                if self.net.shared:
                    self._hop(self.agg_out, "leaf", q, reply)
                else:
                    self._hop(self.down[q], "result", q, reply)
        elif kind == "leaf":  # a result reaches its worker's link
            self._hop(self.down[r], "result", r, data)
        elif kind == "result" and not self._lost():
            self.sessions[r].receive(data, self.now)
            self._pump(r)


def run_job(n: int, net: Bottleneck, *, window: int, tensors: int, elements: int,
            lanes: int = wire.DEFAULT_LANES, congestion: bool = True, seed: int = 0,
            until: float = 3600.0) -> tuple[BottleneckNet, list[list[np.ndarray]], list[float]]:
    """n workers all-reduce ``tensors`` random int32 tensors of ``elements`` one after
    the other (each starts when every rank has the previous one). Returns the net, the
    inputs (per tensor, per rank) and each tensor's simulated seconds (start to its last
    rank's completion)."""
    job = 7
    sessions = [Session(job, r, n, 0, window, window, lanes=lanes, deadline=60.0,
                        congestion=congestion) for r in range(n)]  # fmt: skip
    agg = Aggregator()
    agg.add_job(job, n, 0, window, lanes=lanes)
    sim = BottleneckNet(sessions, agg, net)
    rng = np.random.default_rng(seed)
    inputs, seconds = [], []
    for t in range(tensors):
        before = (sum(s.stats.retransmitted for s in sessions), sum(s.stats.sent for s in sessions))
        x = [rng.integers(-1000, 1000, elements, dtype=np.int32) for _ in range(n)]
        inputs.append(x)
        began = sim.now
        sim.start(t, x)
        sim.run(until, completions=n * (t + 1))  # the next starts once every rank has it
        done = [at for at, _, tid in sim.tally.completions if tid == t]
        if len(done) < n:
            break
        seconds.append(max(done) - began)
        resent = sum(s.stats.retransmitted for s in sessions) - before[0]
        sim.resent_per_tensor.append(resent / (sum(s.stats.sent for s in sessions) - before[1]))
    return sim, inputs, seconds


def exact(sim: SessionSim, inputs: list[list[np.ndarray]]) -> bool:
    """Every rank got every tensor's exact int32 sum (wrapping, as the aggregators)."""
    for events in sim.events:
        got = {e.tensor_id: e.result for e in events if isinstance(e, TensorCompleted)}
        for t, x in enumerate(inputs):
            want = np.sum(np.stack(x).astype(np.int64), axis=0).astype(np.int32)
            if t not in got or got[t].tobytes() != want.tobytes():
                return False
    return True


class PBoxesNet(SessionSim):
    """Sessions whose job is split over several PBoxes (hosts/routes.py), each a host on
    its own drop-tail link of ``tx[name]`` seconds per datagram; every worker has one
    uplink and one downlink of ``worker_tx``. Datagrams go where ``routed_packets`` says."""

    def __init__(self, sessions: list[Session], pboxes: dict[str, Aggregator],
                 tx: dict[str, float], worker_tx: float, queue: int = 1000,
                 delay: float = 0.0001) -> None:
        self.tally = Tally()
        super().__init__(sessions, self.tally.completions)
        self.pboxes, self.delay = pboxes, delay
        n = len(sessions)
        self.up = [Queue(worker_tx, queue) for _ in range(n)]
        self.down = [Queue(worker_tx, queue) for _ in range(n)]
        self.into = {name: Queue(tx[name], queue) for name in pboxes}
        self.out = {name: Queue(tx[name], queue) for name in pboxes}

    def _hop(self, queue: Queue, kind: str, rank: int, data: object) -> None:
        left = queue.enqueue(self.now)
        if left is not None:
            self._push(left + self.delay, kind, rank, data)

    def _send(self, r: int) -> None:
        for name, batch in self.sessions[r].routed_packets(self.now):
            for d in wire.split_datagrams(batch):
                self.tally.up_sent += 1
                self._hop(self.up[r], "fabric", r, (name, d))

    def _deliver(self, kind: str, r: int, data: Any) -> None:
        if kind == "fabric":  # a contribution reaches its PBox's link
            name, _ = data
            self._hop(self.into[name], "agg", r, data)
        elif kind == "agg":
            name, d = data
            for reply, dst in self.pboxes[name].receive(d, ("w", r), self.now):
                self._hop(self.out[name], "leaf", dst[1], reply)
        elif kind == "leaf":  # a result reaches its worker's link
            self._hop(self.down[r], "result", r, data)
        elif kind == "result":
            self.sessions[r].receive(data, self.now)
            self._pump(r)
