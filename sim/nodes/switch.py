"""A switch: forwards frames by destination node and sums the jobs placed on it.

Forwarding is a table from destination node to egress ports, built by
``p4hub.sim.fabric`` from the topology; where several ports lead on (a leaf's
uplinks to the spines), a flow (source, destination) takes one of them by a stable
hash, as ECMP does. Every frame spends the pipeline latency inside.

Aggregation: a frame addressed to the switch itself is aggregation traffic. Its
datagrams go through ``hosts.pbox.aggregator.Aggregator``, the PBox core, which is the
reference model of ``p4src/aggregate.p4``: the unit tests hold the two byte-identical
for the same datagrams (tests/unit/test_aggregate_p4.py), so these sums, results and
drops are the switch program's. The core's slot pool is the switch's (``slots``), so a
job that does not fit is refused as the switch would refuse it. What goes out (results
to members, a partial up to a tree's root) leaves as frames per destination, one per
run of datagrams, at the priority of the frame that caused it.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np

from p4hub.hosts import wire
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.sim.engine import Engine
from p4hub.sim.network import Frame, Node


class Switch(Node):
    """A leaf or spine switch."""

    def __init__(self, engine: Engine, name: str, *, pipeline_latency: float,
                 slots: int) -> None:
        super().__init__(name)
        self.engine = engine
        self.latency = pipeline_latency
        self.routes: dict[str, list[int]] = {}  # destination node -> egress ports
        self.aggregator = Aggregator(max_slots=slots)
        self.aggregated = 0  # datagrams summed here
        self.forwarded = 0  # frames forwarded

    def egress(self, src: str, dst: str) -> int:
        ports = self.routes[dst]
        if len(ports) == 1:
            return ports[0]
        return ports[zlib.crc32(f"{src}>{dst}".encode()) % len(ports)]

    def receive(self, frame: Frame, port: int) -> None:
        self.engine.call_later(self.latency, self._process, frame)

    def _process(self, frame: Frame) -> None:
        frame.tail += self.latency
        if frame.dst != self.name:
            self.forwarded += 1
            self.ports[self.egress(frame.src, frame.dst)].send(frame)
            return
        if frame.payload is None:
            return  # nothing to sum: not aggregation traffic (never sent by the nodes)
        self.aggregated += frame.count
        send_frames(self, self.aggregator, frame, self.engine.now, self._emit)

    def _emit(self, out: Frame) -> None:
        self.ports[self.egress(self.name, out.dst)].send(out)


def send_frames(node: Node, aggregator: Aggregator, frame: Frame, now: float,
                emit: Callable[[Frame], object]) -> None:
    """Feed ``frame``'s datagrams to ``aggregator`` as one batch (src: the frame's sender) and emit
    what it answers, one frame per destination, datagrams in the order produced."""
    assert frame.payload is not None
    rows = frame.payload
    size = rows.dtype.itemsize
    out: dict[str, list[bytes]] = {}
    # the run in one call: the core sums its ordinary contributions as whole arrays
    for datagram, address in aggregator.receive_many(rows, frame.count, size, (frame.src, 0), now):
        out.setdefault(address[0], []).append(datagram)
    if not out:
        return
    lanes = rows.dtype["values"].shape[0]
    dtype = wire.PACKET_DTYPES[lanes]
    for dst, datagrams in out.items():
        payload = np.frombuffer(b"".join(datagrams), dtype=dtype)
        out_frame = Frame(node.name, dst, size, len(datagrams), frame.priority, payload)
        out_frame.tail = max(now, frame.tail)  # a result cannot be out before its inputs
        emit(out_frame)
