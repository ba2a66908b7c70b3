"""A PBox: the PBox core (``hosts.pbox.aggregator.Aggregator``) behind one link, with
a CPU that serves ``cores x packets_per_core`` datagrams per second.

The service model is a single queue at the box's whole rate: the real PBox spreads
slots over cores (hosts/pbox/steering.py), which for a job's many slots spreads its
datagrams evenly, so the box drains at the sum of its cores' rates. A datagram's
answer leaves when its service ends; the link's own serialization comes after.
"""

from __future__ import annotations

from collections.abc import Callable

from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.sim.engine import Engine
from p4hub.sim.network import Frame, Node
from p4hub.sim.nodes.switch import send_frames


class PBox(Node):
    def __init__(self, engine: Engine, name: str, *, cores: int, packets_per_core: float,
                 slots: int = 65536) -> None:
        super().__init__(name)
        self.engine = engine
        self.per_datagram = 1.0 / (cores * packets_per_core)
        self.busy_until = 0.0
        self.aggregator = Aggregator(max_slots=slots)
        self.aggregated = 0
        self.busy_seconds = 0.0
        # a baseline's server logic for payload-less frames (sim/baselines.py ShardedPS):
        # what to send back for a frame, once the CPU has served it
        self.serve_plain: Callable[[Frame], list[Frame]] | None = None

    def receive(self, frame: Frame, port: int) -> None:
        if frame.dst != self.name:
            return  # a PBox answers only what is addressed to it
        if frame.payload is None and self.serve_plain is None:
            return
        # the CPU takes the run's datagrams as they come: its first when it arrives (or
        # the CPU frees up), its last no sooner than the last one's arrival
        per = self.per_datagram
        start = max(self.engine.now, self.busy_until)
        end = max(start + frame.count * per, frame.tail + per)
        self.busy_until = end
        self.busy_seconds += frame.count * per
        self.aggregated += frame.count
        frame.tail = end
        self.engine.call_at(start + per, self._serve, frame)

    def _serve(self, frame: Frame) -> None:
        if frame.payload is None:
            assert self.serve_plain is not None
            for out in self.serve_plain(frame):
                out.tail = frame.tail
                self.ports[0].send(out)
            return
        send_frames(self, self.aggregator, frame, self.engine.now, self.ports[0].send)
