"""Build a scenario's network: nodes, links and every switch's forwarding table.

Names: workers ``w1..wN`` (rank k is ``w{k+1}``; rack r holds ranks r*W..r*W+W-1),
leaves ``s1..sR`` (a rack is leaf ``s1``), spines ``t1..tS``, PBoxes ``p{r}.{i}`` (rack r's
i-th, both 1-based). Links and their classes (what the byte counters are grouped by):

* worker <-> leaf: ``host_up`` (towards the leaf) and ``host_down``, at the host rate;
* PBox <-> leaf: ``pbox_up``/``pbox_down``, at the host rate;
* leaf <-> spine: ``spine_up``/``spine_down``, at the fabric rate (``fabric_bandwidth``,
  or the host rate x workers per rack / (spines x oversubscription)).

Every port has the scenario's buffer, delay and impairments. Forwarding: a leaf reaches
its own hosts and PBoxes on their ports and everything else over its uplinks (ECMP by
flow); a spine reaches each rack's nodes, and the leaf itself, on that leaf's port.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from p4hub.sim.engine import Engine
from p4hub.sim.network import WIRE_OVERHEAD, Impairments, Node, Port, connect
from p4hub.sim.nodes.pbox import PBox
from p4hub.sim.nodes.switch import Switch


@dataclass
class Fabric:
    """The built network. Workers are attached later (``attach_worker``): each run of
    a path makes its own hosts on the same switches and PBoxes."""

    engine: Engine
    racks: int
    workers_per_rack: int
    leaves: list[Any]  # Switch (the model) or P4Switch (tier P): forwarding nodes
    spines: list[Any]
    pboxes: list[list[PBox]]  # per rack
    ports: list[Port] = field(default_factory=list)
    rng: random.Random = field(default_factory=random.Random)
    link_args: dict[str, Any] = field(default_factory=dict)
    # tier P: the controller's topology, every endpoint's addresses, PBox names
    controller_topo: Any = None
    book: Any = None
    pbox_names: dict[str, str] = field(default_factory=dict)

    @property
    def workers(self) -> int:
        return self.racks * self.workers_per_rack

    def rack_of(self, rank: int) -> int:
        return rank // self.workers_per_rack

    def leaf_of(self, rank: int) -> Any:
        return self.leaves[self.rack_of(rank)]

    def all_pboxes(self) -> list[PBox]:
        return [p for rack in self.pboxes for p in rack]

    def attach_worker(self, rank: int, node: Node) -> None:
        """Link host ``node`` (rank ``rank``) to its leaf and make it reachable."""
        leaf = self.leaf_of(rank)
        self._link(node, leaf, ("host_up", "host_down"), self.link_args["host_rate"])
        self._reach(node.name, leaf, len(leaf.ports) - 1)

    def _link(self, a: Node, b: Node, classes: tuple[str, str], rate: float) -> None:
        args = self.link_args
        slow = args.get("slow", {})
        rate /= slow.get(a.name, 1.0) * slow.get(b.name, 1.0)  # a straggler's link
        self.ports += connect(self.engine, a, b, rate_bps=rate, delay=args["delay"],
                              buffer_bytes=args["buffer"], impairments=args["impair"],
                              rng=self.rng, classes=classes, overhead=args["overhead"])

    def _reach(self, name: str, leaf: Any, port: int) -> None:
        """``name`` hangs off ``leaf``'s ``port``: every switch learns its way there."""
        leaf.routes[name] = [port]
        rack = self.leaves.index(leaf)
        for other in self.leaves:
            if other is not leaf:
                other.routes[name] = self._uplinks(other)
        for spine in self.spines:
            spine.routes[name] = [rack]  # spine port r leads to leaf r (links made in order)

    def _uplinks(self, leaf: Any) -> list[int]:
        return [i for i, p in enumerate(leaf.ports) if p.link_class == "spine_up"]

    def bytes_by_class(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.ports:
            out[p.link_class] = out.get(p.link_class, 0) + p.counters.bytes
        return out

    def drops(self) -> dict[str, int]:
        queue = sum(p.counters.dropped_queue for p in self.ports)
        loss = sum(p.counters.dropped_loss for p in self.ports)
        return {"queue": queue, "loss": loss}


def build(engine: Engine, *, racks: int, workers_per_rack: int, spines: int, pboxes: int,
          host_rate: float, fabric_rate: float, delay: float, buffer: int,
          impairments: Impairments, pipeline_latency: float, switch_slots: int,
          pbox_cores: int, pbox_packets_per_core: float, seed: int,
          make_switch: Callable[[str], Any] | None = None,
          overhead: int = WIRE_OVERHEAD, pbox_rate: float | None = None,
          slow: dict[str, float] | None = None) -> Fabric:
    """The switches, PBoxes and fabric links of a rack (``racks == 1``, no spines) or a
    leaf-spine fabric; workers come with ``Fabric.attach_worker``. ``make_switch``
    (name -> node) builds the switches instead of the model ``Switch`` (tier P's
    ``P4Switch``); ``pbox_rate``: the PBoxes' links (default: the hosts'); ``slow``:
    node -> factor, that node's link this many times slower (a link straggler)."""
    def model(name: str) -> Switch:
        return Switch(engine, name, pipeline_latency=pipeline_latency, slots=switch_slots)

    make = make_switch or model
    leaves = [make(f"s{r + 1}") for r in range(racks)]
    tops = [make(f"t{k + 1}") for k in range(spines if racks > 1 else 0)]
    boxes = [[PBox(engine, f"p{r + 1}.{i + 1}", cores=pbox_cores,
                   packets_per_core=pbox_packets_per_core) for i in range(pboxes)]
             for r in range(racks)]
    fabric = Fabric(engine, racks, workers_per_rack, leaves, tops, boxes,
                    rng=random.Random(seed),
                    link_args={"delay": delay, "buffer": buffer, "impair": impairments,
                               "host_rate": host_rate, "overhead": overhead,
                               "slow": dict(slow or {})})
    # spines first, so spine port r is leaf r (``_reach`` relies on it)
    for spine in tops:
        for r, leaf in enumerate(leaves):
            fabric._link(leaf, spine, ("spine_up", "spine_down"), fabric_rate)
            spine.routes[leaf.name] = [r]
    for leaf in leaves:
        for other in leaves:
            if other is not leaf:
                leaf.routes[other.name] = fabric._uplinks(leaf)
        for spine in tops:
            leaf.routes[spine.name] = [i for i, p in enumerate(leaf.ports)
                                       if p.link_class == "spine_up" and p.peer is spine]
    for r, rack in enumerate(boxes):
        for box in rack:
            fabric._link(box, leaves[r], ("pbox_up", "pbox_down"), pbox_rate or host_rate)
            fabric._reach(box.name, leaves[r], len(leaves[r].ports) - 1)
    return fabric
