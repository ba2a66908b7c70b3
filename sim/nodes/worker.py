"""A worker host: the agent library's own ``Session`` behind one NIC, on the simulated
clock.

The node does for a ``Session`` what ``hosts/agent.py`` does with sockets and a
monotonic clock: it sends what ``routed_packets(now)`` gives, feeds results to
``receive_batch(..., now)``, runs ``handle_timer`` when ``get_timer`` says, and hands
``TensorCompleted``/``TensorFailed`` to its owner. So every window, credit, retransmission,
congestion and priority decision in a simulation is the session's own.

``macro``: datagrams per frame. 1 is tier P (one event per datagram); more is tier M,
where a batch's datagrams to one aggregator leave as runs of up to ``macro`` in one
frame (a run serializes as one transfer, which is how they leave a real NIC too: back
to back). ``runs``: a smaller run size towards some nodes (a PBox that the job's
ranks share, ``sim.collectives.run_sizes``). ``datagram_cost``: the host's CPU time per datagram sent or received (system
call and stack), spent on one core before the datagram reaches the NIC or the session.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from p4hub.hosts import wire
from p4hub.hosts.events import Event
from p4hub.hosts.session import Session
from p4hub.sim.engine import Engine
from p4hub.sim.network import Frame, Node


class Worker(Node):
    def __init__(self, engine: Engine, name: str, session: Session, *,
                 aggregators: dict[Hashable, str], macro: int, datagram_cost: float,
                 on_event: Callable[[Worker, Event], None],
                 runs: dict[str, int] | None = None) -> None:
        super().__init__(name)
        self.engine = engine
        self.session = session
        self.aggregators = aggregators  # a route's aggregator -> the node it names
        self.macro = max(1, macro)
        self.runs = {node: max(1, size) for node, size in (runs or {}).items()}
        self.cost = datagram_cost
        self.cpu_free = 0.0
        self.on_event = on_event
        self._timers: set[float] = set()
        self.sent = 0  # datagrams
        self.received = 0

    # -- what the training loop calls ------------------------------------------------

    def start(self, tensor_id: Hashable, array: np.ndarray, *, priority: int = 0,
              stream: int | None = None) -> None:
        self.session.start(tensor_id, array, self.engine.now, priority=priority, stream=stream)
        self._pump()

    def kick(self) -> None:
        """Send what the session has now (after a ``resync``: its resends)."""
        self._pump()

    # -- the network side ------------------------------------------------------------

    def receive(self, frame: Frame, port: int) -> None:
        if frame.payload is None:
            return
        # the session sees a run once its last datagram is in (and the CPU got to it)
        ready = max(self.engine.now, frame.tail)
        if self.cost:
            self.cpu_free = max(ready, self.cpu_free) + frame.count * self.cost
            ready = self.cpu_free
        if ready > self.engine.now:
            self.engine.call_at(ready, self._results, frame)
        else:
            self._results(frame)

    def _results(self, frame: Frame) -> None:
        self.received += frame.count
        payload = frame.payload
        assert payload is not None
        self.session.receive_batch(payload.view(np.uint8), frame.count, self.engine.now)
        self._pump()

    def _pump(self) -> None:
        now = self.engine.now
        session = self.session
        port = self.ports[0]
        for aggregator, batch in session.routed_packets(now):
            dst = self.aggregators[aggregator]
            priority = wire.priority_of(int(batch["hdr"]["flags"][0]))
            size = batch.dtype.itemsize
            step = self.runs.get(dst, self.macro)
            for lo in range(0, batch.size, step):
                run = batch[lo:lo + step]
                frame = Frame(self.name, dst, size, run.size, priority, run)
                self.sent += run.size
                if self.cost:
                    self.cpu_free = max(now, self.cpu_free) + run.size * self.cost
                    self.engine.call_at(self.cpu_free, port.send, frame)
                else:
                    port.send(frame)
        timer = session.get_timer()
        if timer is not None and timer not in self._timers:
            self._timers.add(timer)
            self.engine.call_at(timer, self._timer, timer)
        while (event := session.next_event()) is not None:
            self.on_event(self, event)

    def _timer(self, when: float) -> None:
        self._timers.discard(when)
        timer = self.session.get_timer()
        if timer is None or self.engine.now < timer:
            # a deadline the session has since moved or dropped: nothing is due, and the
            # pump that moved it armed the new one (every input ends in ``_pump``)
            return
        self.session.handle_timer(self.engine.now)
        self._pump()
