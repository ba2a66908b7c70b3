"""Links, ports and frames: the network model under the simulated clock.

A ``Frame`` is what crosses a link as one event: one datagram (tier P) or a run of one
sender's datagrams to one destination (tier M, a *macro-packet*). Its ``payload`` is the
datagrams themselves, as a ``hosts.wire`` packet array (one row per datagram), so the
aggregators sum the real bytes; frames of the baselines carry no payload, only a size.

A ``Port`` is one direction of a full-duplex link: an egress with 8 strict-priority
drop-tail queues that share one byte limit (a switch's egress buffer), a serializer at
the link's rate and a propagation delay. Impairments apply per datagram as a frame
leaves: loss, duplication and reordering (a reordered datagram arrives one
serialization slot late, behind the next). A macro-packet loses the datagrams that
were dropped and keeps the others, so tiers P and M see the same loss process per
datagram (not the same draws: each tier draws per event).

Nothing here knows what a datagram means: nodes (``p4hub.sim.nodes``) do.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from p4hub.sim.engine import Engine

# On the wire around a datagram: Ethernet (14 + 4 FCS), IPv4 (20) and UDP (8) headers,
# and the preamble and inter-frame gap (8 + 12) a link spends per frame. A link may
# count otherwise (``links.overhead``): Linux's shapers, which set the emulator's
# rates, count the frame from its Ethernet header, 42 bytes around the datagram.
WIRE_OVERHEAD = 14 + 4 + 20 + 8 + 8 + 12
PRIORITIES = 8  # egress queues per port, strict priority, 7 most urgent


@dataclass(frozen=True)
class Impairments:
    """Per-datagram random events on a port (each a probability in [0, 1))."""

    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0

    @property
    def any(self) -> bool:
        return bool(self.loss or self.duplicate or self.reorder)


class Frame:
    """One event's worth of traffic from node ``src`` to node ``dst``."""

    __slots__ = ("src", "dst", "datagram_bytes", "count", "priority", "payload", "tag", "tail")

    def __init__(self, src: str, dst: str, datagram_bytes: int, count: int = 1,
                 priority: int = 0, payload: np.ndarray | None = None,
                 tag: object = None) -> None:
        self.src = src
        self.dst = dst
        self.datagram_bytes = datagram_bytes  # UDP payload of each datagram
        self.count = count  # datagrams in the frame (payload rows when there is one)
        self.priority = priority
        self.payload = payload
        self.tag = tag  # what a payload-less frame stands for (the baselines')
        # when its last datagram is (or will be) at the node that holds it: a frame moves
        # on from its first datagram's arrival (cut-through, as the datagrams of a run
        # would), and nothing may leave before it arrived (``Port``)
        self.tail = 0.0

    def wire_bytes(self, overhead: int = WIRE_OVERHEAD) -> int:
        """Bytes the frame occupies on a link that adds ``overhead`` per datagram."""
        return (self.datagram_bytes + overhead) * self.count

    def keep(self, mask: np.ndarray) -> Frame | None:
        """The frame with only the datagrams where ``mask`` is true (None if none)."""
        kept = int(mask.sum())
        if kept == 0:
            return None
        if kept == self.count:
            return self
        payload = None if self.payload is None else self.payload[mask]
        frame = Frame(self.src, self.dst, self.datagram_bytes, kept, self.priority, payload,
                      self.tag)
        frame.tail = self.tail
        return frame


class Node:
    """Anything with ports: a host, a PBox, a switch. Subclasses implement ``receive``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ports: list[Port] = []

    def receive(self, frame: Frame, port: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass
class PortCounters:
    """Every datagram offered to a port ends up in exactly one of: dropped_queue,
    dropped_loss, delivered (its copies counted in duplicated), or still queued or on
    the wire: tests/unit/test_sim_network.py holds the port to that."""

    offered: int = 0  # datagrams given to ``send``
    frames: int = 0
    datagrams: int = 0  # datagrams that left the port
    delivered: int = 0  # datagrams handed to the peer (duplicates included)
    bytes: int = 0  # wire bytes that left the port
    dropped_queue: int = 0  # datagrams refused by a full buffer (drop-tail)
    dropped_loss: int = 0  # datagrams lost on the link
    duplicated: int = 0
    reordered: int = 0
    max_queue_bytes: int = 0


class Port:
    """One direction of a link: ``owner``'s egress towards ``peer``'s ingress port."""

    def __init__(self, engine: Engine, owner: Node, rate_bps: float, delay: float,
                 buffer_bytes: int, impairments: Impairments, rng: random.Random,
                 link_class: str, overhead: int = WIRE_OVERHEAD) -> None:
        self.engine = engine
        self.overhead = overhead  # bytes the link carries per datagram besides its payload
        self.owner = owner
        self.rate = rate_bps / 8.0  # bytes per second
        self.delay = delay
        self.buffer_bytes = buffer_bytes
        self.impair = impairments
        self.rng = rng
        self.link_class = link_class  # what the link is ("host_up", "spine_down", ...)
        self.peer: Node | None = None
        self.peer_port = -1
        self.queues: list[deque[Frame]] = [deque() for _ in range(PRIORITIES)]
        self.queued_bytes = 0
        self.busy = False
        self.counters = PortCounters()
        self.on_idle: Callable[[], None] | None = None  # a sender waiting for room

    def connect(self, peer: Node, peer_port: int) -> None:
        self.peer, self.peer_port = peer, peer_port

    def serialization(self, frame: Frame) -> float:
        return frame.wire_bytes(self.overhead) / self.rate

    def send(self, frame: Frame) -> int:
        """Queue ``frame`` (or as many of its datagrams as the buffer holds); returns the
        datagrams dropped by the buffer."""
        self.counters.offered += frame.count
        size = frame.wire_bytes(self.overhead)
        room = self.buffer_bytes - self.queued_bytes
        dropped = 0
        # the baselines' frames (tagged) stand for a TCP stream, whose flow control keeps
        # a queue from overflowing: they wait rather than drop (sim/baselines.py)
        if size > room and (self.busy or self.queued_bytes) and frame.tag is None:
            per = frame.datagram_bytes + self.overhead
            fits = max(0, room // per)
            dropped = frame.count - fits
            self.counters.dropped_queue += dropped
            if fits == 0:
                return dropped
            mask = np.zeros(frame.count, dtype=bool)
            mask[:fits] = True  # drop-tail: the datagrams at the run's end find no room
            kept = frame.keep(mask)
            assert kept is not None
            frame, size = kept, kept.wire_bytes(self.overhead)
        self.queues[frame.priority].append(frame)
        self.queued_bytes += size
        if self.queued_bytes > self.counters.max_queue_bytes:
            self.counters.max_queue_bytes = self.queued_bytes
        if not self.busy:
            self._next()
        return dropped

    def _next(self) -> None:
        for q in reversed(self.queues):
            if q:
                frame = q.popleft()
                size = frame.wire_bytes(self.overhead)
                self.queued_bytes -= size
                self.busy = True
                # a run leaves at the link's rate but not before its datagrams got here:
                # its last one goes one datagram's time after it arrived
                one = (frame.datagram_bytes + self.overhead) / self.rate
                now = self.engine.now
                duration = max(size / self.rate, frame.tail + one - now)
                self._count(frame)
                self._deliver(frame, now + one, now + duration)
                self.engine.call_later(duration, self._next)
                return
        self.busy = False
        if self.on_idle is not None:
            self.on_idle()

    def _count(self, frame: Frame) -> None:
        c = self.counters
        c.frames += 1
        c.datagrams += frame.count
        c.bytes += frame.wire_bytes(self.overhead)

    def _deliver(self, frame: Frame, head: float, end: float) -> None:
        """``frame`` leaves from ``head`` (its first datagram) to ``end`` (its last): the
        peer gets it a delay after its head, its tail a delay after ``end``."""
        peer = self.peer
        assert peer is not None, "a port sent before it was connected"
        if not self.impair.any or frame.tag is not None:  # tagged: the baselines' reliable transport
            frame.tail = end + self.delay
            self.engine.call_at(head + self.delay, self._arrive, frame)
            return
        rng = self.rng
        imp = self.impair
        if imp.loss:
            if frame.count == 1:
                if rng.random() < imp.loss:
                    self.counters.dropped_loss += 1
                    return
            else:
                draws = np.frombuffer(rng.randbytes(8 * frame.count), dtype=np.uint64)
                mask = draws >= np.uint64(int(imp.loss * 2.0**64))
                self.counters.dropped_loss += frame.count - int(mask.sum())
                kept = frame.keep(mask)
                if kept is None:
                    return
                frame = kept
        delay = self.delay
        if imp.reorder and rng.random() < imp.reorder:
            # late by one and a half slots of its size: what follows at once overtakes it
            delay += 1.5 * frame.wire_bytes(self.overhead) / self.rate
            self.counters.reordered += frame.count
        frame.tail = end + delay
        self.engine.call_at(head + delay, self._arrive, frame)
        if imp.duplicate and rng.random() < imp.duplicate:
            self.counters.duplicated += frame.count
            self.engine.call_at(head + delay, self._arrive, frame)

    def _arrive(self, frame: Frame) -> None:
        self.counters.delivered += frame.count
        assert self.peer is not None
        self.peer.receive(frame, self.peer_port)

    @property
    def queued_datagrams(self) -> int:
        return sum(f.count for q in self.queues for f in q)


def connect(engine: Engine, a: Node, b: Node, *, rate_bps: float, delay: float,
            buffer_bytes: int, impairments: Impairments, rng: random.Random,
            classes: tuple[str, str], overhead: int = WIRE_OVERHEAD) -> tuple[Port, Port]:
    """A full-duplex link between ``a`` and ``b``: a port on each (a's towards b first).
    ``classes``: what each direction is, for the byte counters by link class;
    ``overhead``: bytes the link carries per datagram besides its UDP payload."""
    ab = Port(engine, a, rate_bps, delay, buffer_bytes, impairments, rng, classes[0], overhead)
    ba = Port(engine, b, rate_bps, delay, buffer_bytes, impairments, rng, classes[1], overhead)
    a.ports.append(ab)
    b.ports.append(ba)
    ab.connect(b, len(b.ports) - 1)
    ba.connect(a, len(a.ports) - 1)
    return ab, ba
