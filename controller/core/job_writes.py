"""The writes a job's state implies: its switches' jobs, members and result_dst
entries, its multicast groups, its PBoxes' configuration, its tree's entries
(controller/core/tree.py), and from them every entry and group a switch should hold
(for resynchronising it). Pure functions of a job (or of the registry, for the
expected state): the registry's concern modules return these as their updates."""

from __future__ import annotations

from p4hub.controller.core import job_entries, rack
from p4hub.controller.core import program as p
from p4hub.controller.core.job import ON_SWITCH, Job, Part, Worker
from p4hub.controller.core.ledger import Ledger
from p4hub.controller.core.tree import (
    Leaf,
    TreeJob,
    leaf_entry,
    pbox_leaf_entry,
    pbox_leaf_write,
    root_entries,
    root_job_entry,
    root_pbox_write,
    root_replicas,
)
from p4hub.controller.core.updates import (
    DELETE,
    INSERT,
    MODIFY,
    Entry,
    GroupWrite,
    PBoxJobWrite,
    TableWrite,
    Update,
)


def job_entry(job: Job) -> Entry:
    """The switch's jobs entry for ``job``."""
    if job.where == ON_SWITCH:
        return job_entries.on_switch(job.job_id, job.world_size, job.slots, job.lanes, job.tag,
                                     job.epoch)
    return job_entries.on_pbox(job.job_id, job.world_size, job.slots, job.lanes, job.tag)


def part_write(job: Job, part: Part, op: str) -> PBoxJobWrite:
    """Configure (INSERT; MODIFY: make sure it is there as described) the job on the
    PBox of ``part``, with that part's range."""
    return PBoxJobWrite(part.pbox, op, job.job_id, job.world_size, part.slots.base,
                        part.slots.count, job.lanes, precision=job.precision,
                        floats=part.floats)


def member_entry(job_id: int, worker: Worker, op: str) -> Entry:
    return job_entries.member(job_id, worker.rank, worker.ip, worker.port, worker.switch_port,
                              op, worker.bit)


def result_dst_entry(job_id: int, worker: Worker, op: str) -> Entry:
    return job_entries.result_dst(job_id, worker.bit, worker.mac, worker.ip, worker.port, op)


def free_bit(job: Job, switch: str, rank: int) -> int | None:
    """The bit a worker of rank ``rank`` joining on ``switch`` takes (Worker.bit): its
    rank if below MAX_WORKERS and free among the job's workers there, else the lowest
    free one; None if all MAX_WORKERS are taken."""
    taken = {w.bit for w in job.workers.values() if rack_of_worker(job, w) == switch}
    if rank < p.MAX_WORKERS and rank not in taken:
        return rank
    return next((bit for bit in range(p.MAX_WORKERS) if bit not in taken), None)


def rack_ranks(job: Job, switch: str) -> tuple[int, ...]:
    """The ranks of ``job``'s workers on ``switch`` in bit order: a rack PBox's member
    numbering (hosts/pbox/aggregator.py Parent.ranks), needed once ranks outgrow bits."""
    return tuple(w.rank for w in sorted(job.workers.values(), key=lambda w: w.bit)
                 if rack_of_worker(job, w) == switch)


def _rack_pbox_write(job: Job, leaf: Leaf, op: str) -> PBoxJobWrite:
    """The write of the PBox that is ``leaf``'s rack's first level, with its ranks."""
    assert job.tree is not None
    return pbox_leaf_write(tree_job(job), job.tree, leaf, op, rack_ranks(job, leaf.switch))


def tree_job(job: Job) -> TreeJob:
    return TreeJob(job.job_id, job.tag, job.epoch, job.lanes, job.world_size, job.slots)


def leaf_jobs_entry(job: Job, leaf: Leaf) -> Entry:
    """The jobs entry of a leaf of ``job``'s tree: it aggregates, or its rack's PBox."""
    assert job.tree is not None
    spec = tree_job(job)
    return pbox_leaf_entry(spec, leaf) if leaf.pbox else leaf_entry(spec, job.tree, leaf)


def rack_of_worker(job: Job, worker: Worker) -> str:
    return worker.switch or job.switch


def has_group(job: Job, switch: str) -> bool:
    """Whether ``switch`` holds the job's multicast group: it aggregates the job (a
    switch job, a tree's root or a leaf that is not on its PBox)."""
    if job.tree is not None:
        leaf = job.tree.leaf(switch)
        if switch == job.tree.root:
            return not job.tree.root_pbox
        return leaf is not None and not leaf.pbox
    return job.where == ON_SWITCH and not job.over_racks and switch == job.switch


def member_writes(job: Job, worker: Worker, op: str) -> list[Update]:
    switch = rack_of_worker(job, worker)
    return [
        TableWrite(switch, op, member_entry(job.job_id, worker, op)),
        TableWrite(switch, op, result_dst_entry(job.job_id, worker, op)),
    ]


def group_write(job: Job, op: str, switch: str | None = None) -> GroupWrite:
    """The job's multicast group on ``switch`` (default: the job's): its workers there."""
    switch = switch or job.switch
    replicas = tuple(
        (w.switch_port, p.result_rid(job.job_id, w.bit))
        for w in sorted(job.workers.values(), key=lambda w: w.bit)
        if rack_of_worker(job, w) == switch
    )
    return GroupWrite(switch, op, job.job_id, replicas)


def tree_jobs_entries(job: Job) -> list[tuple[str, Entry]]:
    assert job.tree is not None
    spec = tree_job(job)
    out = [(job.tree.root, root_job_entry(spec, job.tree))]
    out += [(leaf.switch, leaf_jobs_entry(job, leaf)) for leaf in job.tree.leaves]
    return out


def tree_writes(job: Job, op: str) -> list[Update]:
    """Every write of the job's tree but its workers' member entries: the root's
    entries and group, each leaf's jobs entry and group."""
    assert job.tree is not None
    spec = tree_job(job)
    updates: list[Update] = [TableWrite(job.tree.root, op, e)
                             for e in root_entries(spec, job.tree, op)]
    if job.tree.root_pbox:
        updates.append(root_pbox_write(spec, job.tree, op))
    else:
        updates.append(GroupWrite(job.tree.root, op, job.job_id,
                                  () if op == DELETE else root_replicas(job.job_id, job.tree)))
    for leaf in job.tree.leaves:
        entry = (job_entries.jobs_key(job.job_id) if op == DELETE
                 else leaf_jobs_entry(job, leaf))
        updates.append(TableWrite(leaf.switch, op, entry))
        if leaf.pbox:
            updates.append(_rack_pbox_write(job, leaf, op))
        else:
            updates.append(group_write(job, op, leaf.switch))
    return updates


def rack_pbox_writes(job: Job, op: str) -> list[Update]:
    """The writes of the PBoxes of ``job``'s tree: its root PBox, its racks' first
    levels."""
    if job.tree is None:
        return []
    spec = tree_job(job)
    root: list[Update] = [root_pbox_write(spec, job.tree, op)] if job.tree.root_pbox else []
    return root + [_rack_pbox_write(job, leaf, op) for leaf in job.tree.leaves if leaf.pbox]


def expected_entries(reg: Ledger, switch: str) -> list[Entry]:
    """Every entry ``switch`` should hold: the rack's static ones and the jobs'."""
    entries = rack.rack_entries(reg.topo, switch)
    for job in sorted(reg.jobs.values(), key=lambda j: j.job_id):
        if job.tree is not None:
            leaf = job.tree.leaf(switch)
            if switch == job.tree.root:
                entries += root_entries(tree_job(job), job.tree, INSERT)
            elif leaf is not None:
                entries.append(leaf_jobs_entry(job, leaf))
        elif job.switch == switch and not job.over_racks:
            entries.append(job_entry(job))
        for _, worker in sorted(job.workers.items()):
            if rack_of_worker(job, worker) == switch:
                entries.append(member_entry(job.job_id, worker, INSERT))
                entries.append(result_dst_entry(job.job_id, worker, INSERT))
    return entries


def expected_groups(reg: Ledger, switch: str) -> dict[int, tuple[tuple[int, int], ...]]:
    """Multicast groups ``switch`` should hold: flood, and one per switch job."""
    groups = {p.FLOOD_GROUP: rack.flood_group(reg.topo, switch).replicas}
    for job in reg.jobs.values():
        if job.tree is not None and switch == job.tree.root and not job.tree.root_pbox:
            groups[job.job_id] = root_replicas(job.job_id, job.tree)
        elif has_group(job, switch) and (job.tree is not None or job.workers):
            groups[job.job_id] = group_write(job, MODIFY, switch).replicas
    return groups
