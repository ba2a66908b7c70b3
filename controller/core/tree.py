"""A job that spans racks: two levels of aggregation over a leaf-spine fabric.

Each rack's leaf switch sums its own workers (``job_on_leaf``) and sends one PARTIAL
per completed cell up to the job's root, a spine, which sums the racks' partials like
workers' contributions (``job_on_switch``: its members are the leaves, rank = child
index, from the rack's aggregator address) and multicasts the RESULT down to the
leaves, which store it and multicast it to their workers. Loss anywhere is repaired
by the workers' retransmissions (p4src/aggregate.p4, docs/DESIGN.md §3.1).

When no spine has room, a PBox is the root (``plan_under_pbox``): the PBox of the rack
the job was created in. Its rack's workers are its ordinary members, their leaf
forwards to it (``job_on_pbox``), and every other rack's leaf sends its partials there
as that rack's lowest rank standing for the rack's workers (child = that rank, so the
PBox counts it like any contribution of ``count`` workers). The PBox sends its RESULT
to each rack's aggregator address, where the leaf stores it and multicasts it. No
program change: the root leaf checks the racks' partials as members arriving over the
flood root, the way a PBox job on a fabric takes remote workers.

The job holds the same slot range on every switch of its tree, so its agents run
one map whatever their rack; only the aggregator address (the rack's first PBox,
which the leaf answers for) differs by rack. This module only computes entries; the
registry (controller/core/jobs.py) decides when they are written.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4hub.controller.core import job_entries as entries
from p4hub.controller.core import program as p
from p4hub.controller.core.slots import SlotRange
from p4hub.controller.core.topology import Topology, aggregator_address
from p4hub.controller.core.updates import DELETE, Entry, PBoxJobWrite


@dataclass(frozen=True)
class Leaf:
    switch: str
    child: int  # its index among the root's children (its rank at the root)
    ranks: int  # the job's workers in this rack
    up_port: int  # the leaf's port to the root
    down_port: int  # the root's port to the leaf
    agg_ip: int  # the rack's aggregator address: its first PBox, answered by the leaf
    agg_mac: int
    pbox: str = ""  # the rack's first level is that PBox, not the leaf (no room there)


@dataclass(frozen=True)
class Tree:
    root: str  # the root spine; under a root PBox, the leaf of the PBox's rack
    root_ip: int  # where the leaves send their partials (the spine's or the PBox's)
    root_mac: int
    leaves: tuple[Leaf, ...]  # under a root PBox: the other racks
    root_pbox: str = ""  # the root is this PBox (no spine had room), not a spine

    @property
    def switches(self) -> tuple[str, ...]:
        return (self.root, *(leaf.switch for leaf in self.leaves))

    def leaf(self, switch: str) -> Leaf | None:
        return next((leaf for leaf in self.leaves if leaf.switch == switch), None)


class TreeError(ValueError):
    """The fabric cannot join these racks under that root (no link, no PBox)."""


def plan(topo: Topology, root: str, ranks_per_leaf: dict[str, int],
         on_pbox: frozenset[str] = frozenset()) -> Tree:
    """The tree of a job whose workers sit on the leaves of ``ranks_per_leaf``
    (leaf -> workers), children numbered in leaf-name order; the racks of ``on_pbox``
    aggregate on their first PBox (the rack's aggregator address) instead of their
    leaf. Raises TreeError."""
    sw = topo.switches[root]
    if not sw.ip or not sw.mac:
        raise TreeError(f"spine {root} has no aggregation address (ip, mac)")
    leaves = [_leaf(topo, name, child, ranks_per_leaf[name], root, topo.port_to(root, name),
                    on_pbox) for child, name in enumerate(sorted(ranks_per_leaf))]
    if len(leaves) > p.MAX_WORKERS:
        raise TreeError(f"{len(leaves)} racks; a root takes at most {p.MAX_WORKERS}")
    return Tree(root, sw.ip, sw.mac, tuple(leaves))


def plan_under_pbox(topo: Topology, root_pbox: str, ranks_per_leaf: dict[str, list[int]],
                    on_pbox: frozenset[str] = frozenset()) -> Tree:
    """The tree of a job rooted at PBox ``root_pbox``, over the other racks' leaves of
    ``ranks_per_leaf`` (leaf -> the job's ranks there; the PBox's own rack is not in
    it): each is the child of its lowest rank, its partials cross the flood root to the
    PBox's leaf. Raises TreeError."""
    pbox = topo.pboxes[root_pbox]
    spine = topo.flood_root()
    if spine is None:
        raise TreeError("the fabric has no spine to carry partials between racks")
    into = topo.port_to(pbox.switch, spine)  # where every rack's partials enter
    leaves = [_leaf(topo, name, min(ranks), len(ranks), spine, into, on_pbox)
              for name, ranks in sorted(ranks_per_leaf.items()) if name != pbox.switch]
    return Tree(pbox.switch, pbox.ip, pbox.mac, tuple(leaves), root_pbox)


def _leaf(topo: Topology, name: str, child: int, ranks: int, spine: str, down: int | None,
          on_pbox: frozenset[str]) -> Leaf:
    """Leaf ``name`` of a tree whose partials go up to ``spine`` and enter the root's
    switch (the spine, or a root PBox's leaf) on port ``down``."""
    up = topo.port_to(name, spine)
    first = topo.pbox_of(name)
    if up is None or down is None:
        raise TreeError(f"leaf {name} has no link to spine {spine}")
    if first is None:
        raise TreeError(f"rack {name} has no PBox, so no aggregator address")
    return Leaf(name, child, ranks, up, down, first.ip, first.mac,
                first.name if name in on_pbox else "")


@dataclass(frozen=True)
class TreeJob:
    """What the entries need to know of the job."""

    job_id: int
    tag: int
    epoch: int
    lanes: int
    world_size: int
    slots: SlotRange


def leaf_entry(job: TreeJob, tree: Tree, leaf: Leaf) -> Entry:
    """A leaf that sums its rack and sends its partials to the root."""
    return entries.on_leaf(job.job_id, leaf.ranks, job.world_size, job.slots, job.lanes,
                           job.tag, job.epoch, leaf.child,
                           (tree.root_ip, tree.root_mac, leaf.up_port))


def pbox_leaf_entry(job: TreeJob, leaf: Leaf) -> Entry:
    """A rack on its PBox: the leaf forwards the job's contributions to the PBox (and
    the parent's RESULTs, aggregate.p4 6a)."""
    return entries.on_pbox(job.job_id, job.world_size, job.slots, job.lanes, job.tag)


def pbox_leaf_write(job: TreeJob, tree: Tree, leaf: Leaf, op: str,
                    ranks: tuple[int, ...] = ()) -> PBoxJobWrite:
    """The job on a rack's PBox as that rack's first level: same range, the root as its
    parent (hosts/pbox/aggregator.py Parent); ``ranks``: the rack's ranks in bit order,
    given only to a job of more than MAX_WORKERS ranks (smaller ones number by rank)."""
    return PBoxJobWrite(leaf.pbox, op, job.job_id, job.world_size, job.slots.base,
                        job.slots.count, job.lanes,
                        parent=aggregator_address(tree.root_ip), child=leaf.child,
                        rack_size=leaf.ranks,
                        ranks=ranks if job.world_size > p.MAX_WORKERS else ())


def root_job_entry(job: TreeJob, tree: Tree) -> Entry:
    """The root's jobs entry: an ordinary switch job over all the job's workers, or,
    under a root PBox, its leaf's forwarding to it."""
    if tree.root_pbox:
        return entries.on_pbox(job.job_id, job.world_size, job.slots, job.lanes, job.tag)
    return entries.on_switch(job.job_id, job.world_size, job.slots, job.lanes, job.tag,
                             job.epoch)


def root_entries(job: TreeJob, tree: Tree, op: str) -> list[Entry]:
    """The root's jobs entry, and per leaf its member and result_dst entries (keys only
    for DELETE): a leaf is a member of rank ``child`` sending from its rack's aggregator
    address, and its RESULT copy goes back there (a root PBox sends its own: no
    result_dst)."""
    out = [entries.jobs_key(job.job_id) if op == DELETE else root_job_entry(job, tree)]
    for leaf in tree.leaves:
        out.append(entries.member(job.job_id, leaf.child, leaf.agg_ip, p.AGG_UDP_PORT,
                                  leaf.down_port, op, leaf.child))
        if not tree.root_pbox:
            out.append(entries.result_dst(job.job_id, leaf.child, leaf.agg_mac, leaf.agg_ip,
                                          p.AGG_UDP_PORT, op))
    return out


def root_pbox_write(job: TreeJob, tree: Tree, op: str) -> PBoxJobWrite:
    """The job on its root PBox: an ordinary PBox job over all its ranks (the racks'
    partials count as their lowest rank's, for the rack's workers)."""
    return PBoxJobWrite(tree.root_pbox, op, job.job_id, job.world_size, job.slots.base,
                        job.slots.count, job.lanes)


def root_replicas(job_id: int, tree: Tree) -> tuple[tuple[int, int], ...]:
    """The root's multicast group of the job: one copy per leaf (rid job*32 + child)."""
    return tuple((leaf.down_port, p.result_rid(job_id, leaf.child)) for leaf in tree.leaves)
