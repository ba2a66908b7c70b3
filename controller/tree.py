"""A job that spans racks: two levels of aggregation over a leaf-spine fabric.

Each rack's leaf switch sums its own workers (``job_on_leaf``) and sends one PARTIAL
per completed cell up to the job's root, a spine, which sums the racks' partials like
workers' contributions (``job_on_switch``: its members are the leaves, rank = child
index, from the rack's aggregator address) and multicasts the RESULT down to the
leaves, which store it and multicast it to their workers. Loss anywhere is repaired
by the workers' retransmissions (p4src/aggregate.p4, docs/DESIGN.md §3.1).

The job holds the same slot range on every switch of its tree, so its agents run
one map whatever their rack; only the aggregator address (the rack's first PBox,
which the leaf answers for) differs by rack. This module only computes entries; the
registry (controller/jobs.py) decides when they are written.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller import job_entries as entries
from controller import program as p
from controller.slots import SlotRange
from controller.topology import Topology, format_ipv4
from controller.updates import DELETE, Entry, PBoxJobWrite


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
    root: str
    root_ip: int
    root_mac: int
    leaves: tuple[Leaf, ...]

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
    leaves = []
    for child, name in enumerate(sorted(ranks_per_leaf)):
        up, down = topo.port_to(name, root), topo.port_to(root, name)
        first = topo.pbox_of(name)
        if up is None or down is None:
            raise TreeError(f"leaf {name} has no link to spine {root}")
        if first is None:
            raise TreeError(f"rack {name} has no PBox, so no aggregator address")
        leaves.append(Leaf(name, child, ranks_per_leaf[name], up, down, first.ip, first.mac,
                           first.name if name in on_pbox else ""))
    if len(leaves) > p.MAX_WORKERS:
        raise TreeError(f"{len(leaves)} racks; a root takes at most {p.MAX_WORKERS}")
    return Tree(root, sw.ip, sw.mac, tuple(leaves))


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


def pbox_leaf_write(job: TreeJob, tree: Tree, leaf: Leaf, op: str) -> PBoxJobWrite:
    """The job on a rack's PBox as that rack's first level: same range, the root as its
    parent (hosts/aggregator.py Parent)."""
    return PBoxJobWrite(leaf.pbox, op, job.job_id, job.world_size, job.slots.base,
                        job.slots.count, job.lanes,
                        parent=f"{format_ipv4(tree.root_ip)}:{p.AGG_UDP_PORT}", child=leaf.child,
                        rack_size=leaf.ranks)


def root_job_entry(job: TreeJob) -> Entry:
    """The root's jobs entry: an ordinary switch job over all the job's workers."""
    return entries.on_switch(job.job_id, job.world_size, job.slots, job.lanes, job.tag,
                             job.epoch)


def root_entries(job: TreeJob, tree: Tree, op: str) -> list[Entry]:
    """The root's jobs entry, and per leaf its member and result_dst entries (keys only
    for DELETE): a leaf is a member of rank ``child`` sending from its rack's aggregator
    address, and its RESULT copy goes back there."""
    out = [entries.jobs_key(job.job_id) if op == DELETE else root_job_entry(job)]
    for leaf in tree.leaves:
        out.append(entries.member(job.job_id, leaf.child, leaf.agg_ip, p.AGG_UDP_PORT,
                                  leaf.down_port, op))
        out.append(entries.result_dst(job.job_id, leaf.child, leaf.agg_mac, leaf.agg_ip,
                                      p.AGG_UDP_PORT, op))
    return out


def root_replicas(job_id: int, tree: Tree) -> tuple[tuple[int, int], ...]:
    """The root's multicast group of the job: one copy per leaf (rid job*32 + child)."""
    return tuple((leaf.down_port, p.result_rid(job_id, leaf.child)) for leaf in tree.leaves)
