"""Tier F: chunks as fluid, the same paths and the same scheduling decisions.

Each slice a rank starts is one *chunk*: its bytes on the wire (datagrams, headers and
the link's per-datagram overhead, as tiers P and M send them) served whole by each
link it crosses, in strict priority order (the slice's header priority, P3's; FIFO
within a priority), one event per chunk per link instead of one per datagram. What is
left out: loss and retransmission, the sessions' windows beyond a rate cap (a rank
cannot have more than its window in flight per round trip), congestion windows, and
the macro-packets' pipelining inside a chunk (a chunk moves store-and-forward, so a
tier F time is a little longer where a chunk is long against its links'
serialization).

Paths, as tiers P and M run them:

* ``switch``: each rank's uplink serves its chunk; the leaf's sum of a chunk is ready
  when the last rank's copy is in; over racks the leaf's partial crosses its uplink to
  the root spine, which waits for every leaf, and the result crosses each leaf's
  downlink from the spine; then every rank's downlink serves the result. Over pods (a
  third level, modelled here only: leaf-spines under a core), a pod's spine sums its
  leaves and sends one partial over the pod's uplink to the core, which waits for every
  pod; the result comes down each pod's downlink, then its leaves'.
* ``pbox``: the chunk of every rank crosses the PBox's downlink (N chunks), its CPU
  (``cores x packets_per_core``) and its uplink back (N results), then each rank's
  downlink; over racks, ranks of other racks cross the fabric both ways too (and, from
  other pods, their pod's links to the core).
* ``ring``: 2(N-1) steps of a chunk's N-th part on every rank's link, one collective at
  a time per rank, each starting once every rank has started it (the ranks move in
  lock step); ``ps``: pushes on each rank's uplink to the PS shards' downlinks, the
  servers' CPU, the results back.

Nothing here sums anything: tier F's results are not checked (``exact`` is None).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import numpy as np

from p4hub.hosts import wire
from p4hub.sim.baselines import MSS
from p4hub.sim.engine import Engine
from p4hub.sim.errors import SimError

Done = Callable[[], None]


class FluidLink:
    """A link direction (or a CPU) serving whole chunks at ``rate`` bytes/s, most
    urgent priority first, then arrival order; ``latency`` added after each."""

    def __init__(self, engine: Engine, rate: float, latency: float) -> None:
        self.engine = engine
        self.rate = rate
        self.latency = latency
        self.queue: list[tuple[int, int, float, float, Done]] = []
        self.order = itertools.count()
        self.busy = False
        self.bytes = 0.0

    def send(self, nbytes: float, priority: int, done: Done,
             wire_bytes: float | None = None) -> None:
        """Serve ``nbytes``' time; ``wire_bytes``: what the link carries, when a
        window-limited rank's chunk takes longer than its bytes (default ``nbytes``)."""
        heapq.heappush(self.queue, (-priority, next(self.order), nbytes,
                                    nbytes if wire_bytes is None else wire_bytes, done))
        if not self.busy:
            self._next()

    def _next(self) -> None:
        if not self.queue:
            self.busy = False
            return
        _, _, nbytes, wire_bytes, done = heapq.heappop(self.queue)
        self.busy = True
        self.bytes += wire_bytes
        serve = nbytes / self.rate
        self.engine.call_later(serve + self.latency, done)
        self.engine.call_later(serve, self._next)


@dataclass
class FluidNet:
    """The links of a rack or fabric, by what they are."""

    engine: Engine
    ranks: int
    per_rack: int
    up: list[FluidLink]  # rank -> leaf
    down: list[FluidLink]  # leaf -> rank
    leaf_up: list[FluidLink]  # leaf -> spines (all uplinks as one)
    leaf_down: list[FluidLink]  # spines -> leaf
    pbox_in: list[FluidLink]  # leaf -> PBox, per PBox (rack-major)
    pbox_cpu: list[FluidLink]
    pbox_out: list[FluidLink]  # PBox -> leaf
    racks: int = 1  # in all pods
    pods: int = 1
    pod_up: list[FluidLink] = field(default_factory=list)  # pod -> core (all links as one)
    pod_down: list[FluidLink] = field(default_factory=list)  # core -> pod
    counters: dict[str, float] = field(default_factory=dict)

    def rack(self, rank: int) -> int:
        return rank // self.per_rack

    @property
    def racks_per_pod(self) -> int:
        return self.racks // self.pods

    def pod(self, rack: int) -> int:
        return rack // self.racks_per_pod

    def bytes_by_class(self) -> dict[str, int]:
        groups = {"host_up": self.up, "host_down": self.down, "spine_up": self.leaf_up,
                  "spine_down": self.leaf_down, "pbox_down": self.pbox_in,
                  "pbox_up": self.pbox_out, "core_up": self.pod_up, "core_down": self.pod_down}
        return {k: int(sum(link.bytes for link in v)) for k, v in groups.items() if v}


def build(engine: Engine, *, racks: int, per_rack: int, spines: int, pboxes: int,
          host_rate: float, fabric_rate: float, delay: float, pipeline: float,
          pbox_rate: float, pbox_link_rate: float | None = None, pods: int = 1,
          core_oversubscription: float = 1.0) -> FluidNet:
    """Rates in bit/s in, bytes/s inside (``pbox_rate``: the PBox CPU's, packets/s). A
    leaf's uplinks to its spines serve as one (``spines`` x ``fabric_rate``): ECMP
    spreads a job's flows over them. ``pbox_link_rate``: each PBox's link (default: the
    hosts'). ``pods`` > 1: ``racks`` (all of them) split into that many leaf-spines, each
    pod's uplinks to the core serving as one, at its leaves' uplinks' total over
    ``core_oversubscription``."""
    n = racks * per_rack
    host, fab = host_rate / 8, fabric_rate / 8
    box = host if pbox_link_rate is None else pbox_link_rate / 8
    hop = delay + pipeline

    def links(count: int, rate: float, latency: float) -> list[FluidLink]:
        return [FluidLink(engine, rate, latency) for _ in range(count)]

    if pods < 1 or racks % pods:
        raise SimError(f"{racks} racks do not split into {pods} pods")
    leaf_links = racks if racks > 1 else 0
    leaf_rate = fab * max(1, spines)
    core_links = pods if pods > 1 else 0
    core_rate = leaf_rate * (racks // pods) / core_oversubscription
    return FluidNet(
        engine, n, per_rack, links(n, host, hop), links(n, host, delay),
        links(leaf_links, leaf_rate, hop), links(leaf_links, leaf_rate, hop),
        links(racks * pboxes, box, delay), links(racks * pboxes, pbox_rate, 0.0),
        links(racks * pboxes, box, hop), racks=racks, pods=pods,
        pod_up=links(core_links, core_rate, hop), pod_down=links(core_links, core_rate, hop))


def ina_bytes(elements: int, lanes: int, overhead: int) -> float:
    """Wire bytes of a slice's datagrams (every block one datagram of ``lanes`` lanes)."""
    packets = -(-elements // lanes)
    return packets * (wire.packet_len(lanes) + overhead)


def tcp_bytes(nbytes: float, overhead: int) -> float:
    """Wire bytes of ``nbytes`` in segments of at most MSS bytes (as the baselines send
    them: the last one short)."""
    return max(nbytes, 1) + max(1, -(-nbytes // MSS)) * overhead


class _Counter:
    """Calls ``done`` on the ``need``-th call."""

    __slots__ = ("need", "done")

    def __init__(self, need: int, done: Done) -> None:
        self.need, self.done = need, done

    def __call__(self) -> None:
        self.need -= 1
        if self.need == 0:
            self.done()


class FluidCollective:
    """``start``/``on_complete`` as the other collectives; ``path`` one of switch, pbox,
    ring, ps."""

    def __init__(self, net: FluidNet, path: str, *, lanes: int, overhead: int,
                 window_rate: float | None, window_elements: int,
                 on_complete: Callable[[int, Hashable, np.ndarray], None]) -> None:
        if path in ("pbox", "ps") and not net.pbox_in:
            raise SimError(f"the {path} path needs PBoxes (topology.pboxes >= 1)")
        self.net, self.path = net, path
        self.lanes, self.overhead = lanes, overhead
        self.window_rate = window_rate  # bytes/s one rank's window allows, or None
        self.on_complete = on_complete
        self._arrived: dict[Hashable, list[int]] = {}  # (tensor, where) -> [needed, got]
        self._ring_started: dict[Hashable, int] = {}
        self._ring_queue: list[tuple[Hashable, int]] = []
        self._ring_busy = False
        self._arrays: dict[tuple[int, Hashable], np.ndarray] = {}
        self._ps_done: dict[tuple[Hashable, int], _Counter] = {}
        self._left: dict[tuple[int, Hashable], int] = {}  # pieces of a rank's slice not done
        self.piece = max(lanes, window_elements)  # elements per chunk

    def start(self, rank: int, tensor_id: Hashable, array: np.ndarray, *, priority: int = 0,
              stream: int | None = None) -> None:
        """Cut the slice into pieces of ``piece`` elements (the ring: one), each moved as a
        chunk of its own: a chunk crosses a link whole, so pieces as large as what a
        session keeps in flight keep the store-and-forward error to about one window."""
        size = array.size
        step = size if self.path == "ring" else self.piece
        pieces = [(i, min(step, size - lo)) for i, lo in enumerate(range(0, max(size, 1), step))]
        self._arrays[(rank, tensor_id)] = array
        self._left[(rank, tensor_id)] = len(pieces)
        run = getattr(self, f"_{self.path}")
        for i, elements in pieces:
            run(rank, (tensor_id, i), elements, priority)

    def _finish(self, rank: int, piece: Hashable) -> Done:
        tensor_id = piece[0]  # type: ignore[index]

        def done() -> None:
            key = (rank, tensor_id)
            self._left[key] -= 1
            if self._left[key] == 0:
                del self._left[key]
                self.on_complete(rank, tensor_id, self._arrays.pop(key))
        return done

    def _rank_bytes(self, nbytes: float) -> float:
        """A window-limited rank sends no faster than its window allows: its chunk
        takes at least as long as at that rate on the host link."""
        if self.window_rate is None:
            return nbytes
        host_rate = self.net.up[0].rate
        return nbytes * max(1.0, host_rate / self.window_rate)

    # -- in-network aggregation ---------------------------------------------------------

    def _switch(self, rank: int, tid: Hashable, elements: int, priority: int) -> None:
        net = self.net
        nbytes = ina_bytes(elements, self.lanes, self.overhead)
        r = net.rack(rank)
        leaf = self._arrived.setdefault((tid, r), [net.per_rack, 0])

        def to_ranks(rack: int) -> Done:
            def go() -> None:
                lo = rack * net.per_rack
                for k in range(lo, lo + net.per_rack):
                    net.down[k].send(self._rank_bytes(nbytes), priority, self._finish(k, tid),
                                     nbytes)
            return go

        def to_racks(pod: int) -> Done:
            def go() -> None:
                lo = pod * net.racks_per_pod
                for rr in range(lo, lo + net.racks_per_pod):
                    net.leaf_down[rr].send(nbytes, priority, to_ranks(rr))
            return go

        def at_core() -> None:
            core = self._arrived[(tid, "core")]
            core[1] += 1
            if core[1] < core[0]:
                return
            del self._arrived[(tid, "core")]
            for pod in range(net.pods):
                net.pod_down[pod].send(nbytes, priority, to_racks(pod))

        def at_root() -> None:  # the root spine, or over pods the pod's spine
            pod = net.pod(r)
            root = self._arrived[(tid, "root", pod)]
            root[1] += 1
            if root[1] < root[0]:
                return
            del self._arrived[(tid, "root", pod)]
            if net.pods == 1:
                to_racks(0)()
                return
            self._arrived.setdefault((tid, "core"), [net.pods, 0])
            net.pod_up[pod].send(nbytes, priority, at_core)

        def in_leaf() -> None:
            leaf[1] += 1
            if leaf[1] < leaf[0]:
                return
            del self._arrived[(tid, r)]
            if net.racks == 1:
                to_ranks(0)()
                return
            self._arrived.setdefault((tid, "root", net.pod(r)), [net.racks_per_pod, 0])
            net.leaf_up[r].send(nbytes, priority, at_root)

        net.up[rank].send(self._rank_bytes(nbytes), priority, in_leaf, nbytes)

    def _pbox(self, rank: int, tid: Hashable, elements: int, priority: int) -> None:
        net = self.net
        nbytes = ina_bytes(elements, self.lanes, self.overhead)
        packets = -(-elements // self.lanes)
        state = self._arrived.setdefault((tid, "pbox"), [net.ranks, 0])
        cross = net.racks > 1 and net.rack(rank) != 0

        def at_box() -> None:
            net.pbox_cpu[0].send(packets, priority, served)

        def served() -> None:
            state[1] += 1
            if state[1] < state[0]:
                return
            del self._arrived[(tid, "pbox")]
            for k in range(net.ranks):
                net.pbox_out[0].send(nbytes, priority, _back(k))

        def _back(k: int) -> Done:
            rack = net.rack(k)
            pod = net.pod(rack)

            def to_rank() -> None:
                net.down[k].send(nbytes, priority, self._finish(k, tid))

            def to_leaf() -> None:
                net.leaf_down[rack].send(nbytes, priority, to_rank)

            def into_pod() -> None:
                net.pod_down[pod].send(nbytes, priority, to_leaf)

            def go() -> None:
                if net.racks == 1 or rack == 0:
                    to_rank()
                elif pod == 0:
                    to_leaf()
                else:  # up the PBox's pod's links to the core, down the rank's pod's
                    net.pod_up[0].send(nbytes, priority, into_pod)
            return go

        def into_box() -> None:
            net.pbox_in[0].send(nbytes, priority, at_box)

        def to_box() -> None:
            if not cross:
                into_box()
                return
            rack = net.rack(rank)
            pod = net.pod(rack)
            if pod != 0:  # up its pod's links to the core, then down the PBox's pod's
                net.leaf_up[rack].send(nbytes, priority, lambda: net.pod_up[pod].send(
                    nbytes, priority, lambda: net.pod_down[0].send(nbytes, priority, into_box)))
            else:
                net.leaf_up[rack].send(nbytes, priority, into_box)

        net.up[rank].send(self._rank_bytes(nbytes), priority, to_box, nbytes)

    # -- the baselines -------------------------------------------------------------------

    def _ring(self, rank: int, tid: Hashable, elements: int, priority: int) -> None:
        started = self._ring_started.get(tid, 0) + 1
        self._ring_started[tid] = started
        if started < self.net.ranks:
            return
        del self._ring_started[tid]
        self._ring_queue.append((tid, elements))
        if not self._ring_busy:
            self._ring_next()

    def _ring_next(self) -> None:
        if not self._ring_queue:
            self._ring_busy = False
            return
        self._ring_busy = True
        tid, elements = self._ring_queue.pop(0)
        net = self.net
        chunk = tcp_bytes(elements * 4 / net.ranks, self.overhead)
        steps = 2 * (net.ranks - 1)
        link = net.up[0]
        # a step: every rank's chunk over its link to the next rank (through its leaf,
        # and through the fabric where the ring crosses racks: the slowest hop sets it)
        rate = link.rate
        if net.racks > 1:
            rate = min(rate, net.leaf_up[0].rate)
        if net.pods > 1:
            rate = min(rate, net.pod_up[0].rate)
        # the end's store-and-forward at the leaf: the chunk's last full segment (its short
        # last one waits behind it), or the whole chunk where it is one segment
        segment = min(chunk, MSS + self.overhead) / rate
        step = chunk / rate + link.latency + net.down[0].latency + segment
        for k in range(net.ranks):
            net.up[k].bytes += chunk * steps
            net.down[k].bytes += chunk * steps

        def done() -> None:
            for k in range(net.ranks):
                self._finish(k, tid)()
            self._ring_next()

        self.net.engine.call_later(steps * step, done)

    def _ps(self, rank: int, tid: Hashable, elements: int, priority: int) -> None:
        net = self.net
        shards = len(net.pbox_in)
        shard = tcp_bytes(elements * 4 / shards, self.overhead)
        packets = -(-shard // (MSS + self.overhead))
        self._ps_done[(tid, rank)] = _Counter(shards, self._finish(rank, tid))
        for s in range(shards):
            state = self._arrived.setdefault((tid, "ps", s), [net.ranks, 0])
            net.up[rank].send(shard, priority,
                              self._ps_push(tid, s, shard, packets, priority, state))

    def _ps_push(self, tid: Hashable, s: int, shard: float, packets: float, priority: int,
                 state: list[int]) -> Done:
        net = self.net

        def served() -> None:
            state[1] += 1
            if state[1] < state[0]:
                return
            del self._arrived[(tid, "ps", s)]
            for k in range(net.ranks):
                net.pbox_out[s].send(shard, priority, back(k))

        def back(k: int) -> Done:
            return lambda: net.down[k].send(shard, priority, self._ps_done[(tid, k)])

        def pushed() -> None:
            net.pbox_in[s].send(shard, priority,
                                lambda: net.pbox_cpu[s].send(packets, priority, served))

        return pushed
