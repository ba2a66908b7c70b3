"""Per-port strict-priority egress queues (``--priority-queues N``), sans-I/O.

Like simple_switch: the queue of a packet is ``standard_metadata.priority``;
a priority >= N is dropped; each queue holds at most ``depth`` packets and a
full queue drops the newcomer (tail drop); a port serves its highest non-empty
queue first. Ports are served round-robin so one busy port cannot starve the
others. An optional per-port rate (packets/s) holds packets back, which is what
makes priorities observable; without it a queue drains as fast as egress runs.
Time (microseconds) is always an argument.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from p4lite.switch.core.runtime_api import Queued


@dataclass(frozen=True, slots=True)
class Dequeued:
    item: Queued
    enq_timestamp: int  # us
    enq_qdepth: int  # packets in its queue when it arrived (itself excluded)
    deq_qdepth: int  # packets left in its queue when it left
    deq_timedelta: int  # us spent queued


@dataclass(slots=True)
class _PortQueues:
    queues: list[deque[tuple[Queued, int, int]]]
    next_send_us: float = 0.0
    size: int = 0  # packets in all of this port's queues


class EgressQueues:
    def __init__(self, priorities: int = 1, depth: int = 64, rate_pps: float | None = None) -> None:
        if priorities < 1 or depth < 1:
            raise ValueError("priorities and depth must be >= 1")
        self.priorities = priorities
        self.depth = depth
        self.rate_pps = rate_pps
        self.dropped = 0
        self._ports: dict[int, _PortQueues] = {}
        self._order: deque[int] = deque()  # round-robin over ports with packets
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def enqueue(self, item: Queued, now_us: int) -> bool:
        """Queue ``item``; False if it was dropped (priority out of range or queue full)."""
        if not 0 <= item.priority < self.priorities:
            self.dropped += 1
            return False
        port = self._ports.get(item.egress_port)
        if port is None:
            port = self._ports[item.egress_port] = _PortQueues(
                [deque() for _ in range(self.priorities)])
        queue = port.queues[item.priority]
        if len(queue) >= self.depth:
            self.dropped += 1
            return False
        queue.append((item, now_us, len(queue)))
        port.size += 1
        if port.size == 1:
            self._order.append(item.egress_port)
        self._count += 1
        return True

    def dequeue(self, now_us: int) -> Dequeued | None:
        """The next packet allowed to leave at ``now_us``, or None."""
        for _ in range(len(self._order)):
            port_no = self._order[0]
            port = self._ports[port_no]
            self._order.rotate(-1)
            if self.rate_pps is not None and now_us < port.next_send_us:
                continue
            return self._pop(port_no, port, now_us)
        return None

    def next_ready_us(self) -> float | None:
        """When the next packet may leave (None: nothing queued); with no rate, now."""
        if not self._order:
            return None
        if self.rate_pps is None:
            return 0.0
        return min(self._ports[p].next_send_us for p in self._order)

    def _pop(self, port_no: int, port: _PortQueues, now_us: int) -> Dequeued:
        for queue in reversed(port.queues):  # highest priority first
            if queue:
                item, enq_us, enq_depth = queue.popleft()
                break
        self._count -= 1
        port.size -= 1
        if self.rate_pps is not None:
            port.next_send_us = max(port.next_send_us, now_us) + 1e6 / self.rate_pps
        if port.size == 0:
            self._order.remove(port_no)
        return Dequeued(item, enq_us, enq_depth, len(queue), now_us - enq_us)

    def pop_all(self) -> list[tuple[Queued, int, int, int]]:
        """Without a rate limit: every queued packet, in the order repeated ``dequeue``
        calls would give them (ports round-robin, highest priority first), as
        (item, enq_timestamp, enq_qdepth, deq_qdepth) tuples; the queues end empty."""
        if self.rate_pps is not None:
            raise ValueError("pop_all needs queues without a rate limit")
        out: list[tuple[Queued, int, int, int]] = []
        order, ports = self._order, self._ports
        append = out.append
        if len(order) == 1:  # the common case: one busy port, its queues highest first
            port = ports[order.popleft()]
            for queue in reversed(port.queues):
                left = len(queue)
                for item, enq_us, enq_depth in queue:
                    left -= 1
                    append((item, enq_us, enq_depth, left))
                queue.clear()
            port.size = 0
        while order:
            port = ports[order[0]]
            order.rotate(-1)
            for queue in reversed(port.queues):
                if queue:
                    item, enq_us, enq_depth = queue.popleft()
                    append((item, enq_us, enq_depth, len(queue)))
                    break
            port.size -= 1
            if port.size == 0:
                order.pop()  # rotated: the port just served is last
        self._count = 0
        return out
