"""The baselines in the same network: ring all-reduce and a sharded parameter server.

Both move sizes, not bytes (their arithmetic is plain float addition, exact by
construction), over the same links, queues and switches as in-network aggregation, so
a comparison differs only in what the paths do.

* ``RingCollective``: the ring as Gloo and NCCL run it: the tensor cut into N chunks,
  N-1 reduce-scatter steps and N-1 all-gather steps; in each step every rank sends one
  chunk to the next rank and starts the next step once the previous rank's chunk of this
  step has arrived. One collective at a time per rank, in start order (a process
  group's FIFO); a tensor's priority is ignored, as Gloo ignores it.
* ``ShardedPS``: a flat parameter server sharded over every PBox of the fabric: each
  rank pushes shard s of the tensor to server s, the server adds the N pushes (its CPU
  serves ``cores x packets_per_core`` datagrams/s, as for aggregation) and sends the
  summed shard back to every rank; a rank is done once every shard came back. Pushes
  go at the tensor's priority, so P3's ordering applies to it as in P3's own system.

Transport: datagrams of ``MSS`` bytes (a TCP segment's payload), in frames of up to
``macro`` datagrams. The model's transport is reliable: loss and duplication configured
on the links are not applied to these frames (TCP's loss recovery is not modelled; a
lossy scenario states it in its results).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Sequence

import numpy as np

from p4hub.sim.engine import Engine
from p4hub.sim.errors import SimError
from p4hub.sim.fabric import Fabric
from p4hub.sim.network import Frame, Node
from p4hub.sim.nodes.pbox import PBox

MSS = 1448  # TCP payload per segment on a 1500-byte MTU


def _frames(src: str, dst: str, nbytes: int, macro: int, priority: int,
            tag: object) -> list[Frame]:
    """``nbytes`` as datagrams of MSS bytes in frames of up to ``macro`` datagrams, the
    last datagram only as long as what is left (a TCP sender's last segment is short:
    padding it would charge small chunks up to a whole segment each)."""
    count = _datagrams(nbytes)
    last = max(1, nbytes - (count - 1) * MSS)
    full = count if last == MSS else count - 1
    frames = [Frame(src, dst, MSS, min(macro, full - lo), priority, None, tag)
              for lo in range(0, full, macro)]
    if full < count:
        frames.append(Frame(src, dst, last, 1, priority, None, tag))
    return frames


def _datagrams(nbytes: int) -> int:
    return max(1, -(-nbytes // MSS))


class _Host(Node):
    """A baseline rank's host: one port; frames it receives go to ``on_frame``."""

    def __init__(self, engine: Engine, name: str, on_frame: Callable[[Frame], None]) -> None:
        super().__init__(name)
        self.engine = engine
        self.on_frame = on_frame

    def receive(self, frame: Frame, port: int) -> None:
        if frame.dst == self.name:  # the run counts once its last datagram is in
            self.engine.call_at(frame.tail, self.on_frame, frame)


def _hosts_of(fabric: Fabric, ranks: Sequence[int] | None) -> list[int]:
    """The fabric's workers a collective runs on, rank order (default: all of them)."""
    return list(range(fabric.workers)) if ranks is None else list(ranks)


class RingCollective:
    def __init__(self, fabric: Fabric, *, macro: int,
                 on_complete: Callable[[int, Hashable, np.ndarray], None],
                 ranks: Sequence[int] | None = None) -> None:
        """``ranks``: the fabric's workers (0-based) of the job's ranks, in rank order
        (one of several jobs, sim/multijob.py); default: every worker."""
        self.fabric = fabric
        hosts = _hosts_of(fabric, ranks)
        self.n = n = len(hosts)
        if n < 2:
            raise SimError("a ring needs at least 2 workers")
        self.macro = macro
        self.on_complete = on_complete
        self.hosts = [_Host(fabric.engine, f"w{g + 1}", self._arrived_cb(r))
                      for r, g in enumerate(hosts)]
        for g, host in zip(hosts, self.hosts, strict=True):
            fabric.attach_worker(g, host)
        self.queue: list[deque[tuple[Hashable, np.ndarray]]] = [deque() for _ in range(n)]
        self.step = [-1] * n  # the step rank r sent last in its current collective (-1: idle)
        # datagrams received per rank, per (tensor, step), and the steps complete
        self.got: list[dict[tuple[Hashable, int], int]] = [{} for _ in range(n)]

    def start(self, rank: int, tensor_id: Hashable, array: np.ndarray, *, priority: int = 0,
              stream: int | None = None) -> None:
        self.queue[rank].append((tensor_id, array))
        if self.step[rank] < 0:
            self._begin(rank)

    def _chunk_bytes(self, array: np.ndarray) -> int:
        return -(-array.nbytes // self.n)

    def _begin(self, rank: int) -> None:
        if not self.queue[rank]:
            self.step[rank] = -1
            return
        self._send(rank, 0)
        self._advance(rank)

    def _send(self, rank: int, step: int) -> None:
        tensor_id, array = self.queue[rank][0]
        self.step[rank] = step
        nxt = (rank + 1) % self.n
        for f in _frames(self.hosts[rank].name, self.hosts[nxt].name,
                         self._chunk_bytes(array), self.macro, 0, (tensor_id, step)):
            self.hosts[rank].ports[0].send(f)

    def _arrived_cb(self, rank: int) -> Callable[[Frame], None]:
        def arrived(frame: Frame) -> None:
            key = frame.tag
            assert isinstance(key, tuple)
            self.got[rank][key] = self.got[rank].get(key, 0) + frame.count
            self._advance(rank)
        return arrived

    def _advance(self, rank: int) -> None:
        """Rank ``rank`` moves on while the previous rank's chunk of its step is in."""
        last = 2 * (self.n - 1) - 1
        while self.step[rank] >= 0 and self.queue[rank]:
            tensor_id, array = self.queue[rank][0]
            step = self.step[rank]
            key = (tensor_id, step)
            if self.got[rank].get(key, 0) < _datagrams(self._chunk_bytes(array)):
                return
            del self.got[rank][key]
            if step < last:
                self._send(rank, step + 1)
                continue
            self.queue[rank].popleft()
            self.on_complete(rank, tensor_id, array)
            if not self.queue[rank]:
                self.step[rank] = -1
                return
            self._send(rank, 0)


class ShardedPS:
    def __init__(self, fabric: Fabric, *, macro: int,
                 on_complete: Callable[[int, Hashable, np.ndarray], None],
                 ranks: Sequence[int] | None = None, serve: bool = True) -> None:
        """``ranks``: as for ``RingCollective``; ``serve``: make the PBoxes this PS's
        servers (False: several jobs' PSs share them, and their owner hands each pushed
        frame to its job's ``pushed_cb``)."""
        self.fabric = fabric
        hosts = _hosts_of(fabric, ranks)
        self.n = n = len(hosts)
        self.servers: list[PBox] = fabric.all_pboxes()
        if not self.servers:
            raise SimError("the ps path needs PBoxes to serve as servers (topology.pboxes >= 1)")
        self.macro = macro
        self.on_complete = on_complete
        self.hosts = [_Host(fabric.engine, f"w{g + 1}", self._pulled_cb(r))
                      for r, g in enumerate(hosts)]
        for g, host in zip(hosts, self.hosts, strict=True):
            fabric.attach_worker(g, host)
        if serve:
            for s, server in enumerate(self.servers):
                server.serve_plain = self.pushed_cb(s)
        self.pushed: dict[tuple[Hashable, int], int] = {}  # datagrams in, per (tensor, shard)
        self.pulled: list[dict[Hashable, int]] = [{} for _ in range(n)]
        self.arrays: list[dict[Hashable, tuple[np.ndarray, int]]] = [{} for _ in range(n)]

    def _shard_bytes(self, array: np.ndarray) -> int:
        return -(-array.nbytes // len(self.servers))

    def start(self, rank: int, tensor_id: Hashable, array: np.ndarray, *, priority: int = 0,
              stream: int | None = None) -> None:
        self.arrays[rank][tensor_id] = (array, priority)
        nbytes = self._shard_bytes(array)
        host = self.hosts[rank]
        for server in self.servers:
            for f in _frames(host.name, server.name, nbytes, self.macro, priority,
                             (tensor_id, nbytes, priority)):
                host.ports[0].send(f)

    def pushed_cb(self, shard: int) -> Callable[[Frame], list[Frame]]:
        def pushed(frame: Frame) -> list[Frame]:
            tag: tuple[Hashable, int, int] = frame.tag  # type: ignore[assignment]
            tensor_id, nbytes, priority = tag
            key = (tensor_id, shard)
            self.pushed[key] = self.pushed.get(key, 0) + frame.count
            if self.pushed[key] < self.n * _datagrams(nbytes):
                return []
            del self.pushed[key]
            server = self.servers[shard].name
            return [f for host in self.hosts
                    for f in _frames(server, host.name, nbytes, self.macro, priority,
                                     (tensor_id, nbytes, priority))]
        return pushed

    def _pulled_cb(self, rank: int) -> Callable[[Frame], None]:
        def pulled(frame: Frame) -> None:
            tag: tuple[Hashable, int, int] = frame.tag  # type: ignore[assignment]
            tensor_id, nbytes, _ = tag
            got = self.pulled[rank].get(tensor_id, 0) + frame.count
            if got < len(self.servers) * _datagrams(nbytes):
                self.pulled[rank][tensor_id] = got
                return
            self.pulled[rank].pop(tensor_id, None)
            array, _ = self.arrays[rank].pop(tensor_id)
            self.on_complete(rank, tensor_id, array)
        return pulled
