"""Fabric placement: a job on a leaf-spine fabric may span racks; it is then a
two-level tree (controller/core/tree.py, docs/DESIGN.md §3.1). ``create_on_fabric``
holds one range at the same base on every leaf and a root spine (or, with no spine
room, the rack's PBox) until all its workers have joined; ``place_on_fabric`` then
makes it an ordinary job of one rack or a tree over its racks, and gives back the rest.
A rack whose leaf had no room at that base aggregates on its first PBox, and moves onto
its leaf once the leaf has room (``rack_onto_leaf``). Functions over the registry
(controller/core/ledger.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from p4hub.controller.core import program as p
from p4hub.controller.core.job import ON_PBOX, ON_SWITCH, PLACE_PBOX, Job, JobError, Part
from p4hub.controller.core.job_writes import (
    group_write,
    job_entry,
    part_write,
    tree_job,
    tree_jobs_entries,
    tree_writes,
)
from p4hub.controller.core.ledger import Ledger
from p4hub.controller.core.slots import SlotPool, SlotRange, common_base, free_bases, is_free
from p4hub.controller.core.tree import Leaf, TreeError, pbox_leaf_write, plan, plan_under_pbox
from p4hub.controller.core.updates import DELETE, INSERT, MODIFY, TableWrite, Update


def create_on_fabric(reg: Ledger, name: str, world_size: int, leaf: str,
                    lanes: int) -> tuple[Job, list[Update]]:
    """A job on a leaf-spine fabric: one range at the same base on every leaf and on
    the spine with the most free slots (the root, if the job spans racks), held until
    all its workers are in and ``place_on_fabric`` knows its racks. Nothing is
    written yet: the agents' first packets find no job and are resent."""
    tag = reg.free_tag(name)
    if reg.topo.pbox_of(leaf) is None:
        raise JobError(f"rack {leaf} has no PBox, so no aggregator address")
    job_id = reg.free_job_id()
    want = reg.topo.switches[leaf].job_slots
    spines = [s for s in reg.topo.spines() if s not in reg.unreachable]
    root = min(spines, key=lambda s: (-reg.switch_pools[s].free_slots(), s), default="")
    pbox = reg.topo.pbox_of(leaf)
    assert pbox is not None
    base, on_pbox = (_fabric_base(reg, reg.switch_pools[root], reg.topo.leaves(), want)
                     if root else (None, ()))
    root_pbox = ""
    if base is None and world_size > p.MAX_WORKERS:
        where = f"the spine {root}" if root else "a spine that is up"
        raise JobError(f"no {want} free slots at one base on {where} for a job of "
                       f"{world_size} workers; a PBox root numbers at most {p.MAX_WORKERS} "
                       "ranks, so a job this wide needs a spine with room")
    if base is None:  # no spine has room (or none is up): the rack's PBox is the root
        base, on_pbox = _fabric_base(reg, reg.pbox_pools[pbox.name], reg.topo.leaves(),
                                     want)
        if base is None:
            where = f"the spine {root}" if root else "a spine that is up"
            raise JobError(f"no {want} free slots at one base on {where} (nor on rack "
                           f"{leaf}'s PBox {pbox.name}) and on every rack's leaf or PBox")
        # its rack's workers are the PBox's members (its leaf only holds the range
        # for a job that turns out to be this rack's alone)
        root, root_pbox = leaf, pbox.name
        on_pbox = (leaf, *(s for s in on_pbox if s != leaf))
    epoch = reg.take_epoch()
    holders = tuple(s for s in dict.fromkeys((root, *reg.topo.leaves()))
                    if s not in on_pbox)
    if root_pbox and is_free(reg.switch_pools[leaf], base, want):
        holders = (leaf, *holders)  # for a job that turns out to be this rack's alone
    for switch in holders:
        reg.reserve(reg.switch_pools[switch], job_id, base, want)
    parts = []
    for rack_leaf in on_pbox:
        first = reg.topo.pbox_of(rack_leaf)
        assert first is not None
        owner = (job_id, first.name, epoch)
        reg.reserve(reg.pbox_pools[first.name], owner, base, want)
        parts.append(Part(first.name, SlotRange(base, want), owner))
    job = Job(job_id, name, tag, world_size, leaf, ON_SWITCH, SlotRange(base, want), epoch,
              pbox.name, lanes, placement=PLACE_PBOX, fabric=holders,
              rack_pboxes=tuple(parts), root_pbox=root_pbox)
    reg.add_job(job)
    return job, []


def _fabric_base(reg: Ledger, root: SlotPool, leaves: Sequence[str],
                want: int) -> tuple[int | None, tuple[str, ...]]:
    """The lowest base free in the root's pool and on every one of ``leaves``;
    failing that, the base free at the root where the fewest racks must use their
    PBox instead of their leaf (the leaves without room there), and those leaves."""
    base = common_base([root, *(reg.switch_pools[s] for s in leaves)], want)
    if base is not None:
        return base, ()
    best: tuple[int, int, tuple[str, ...]] | None = None
    for candidate in free_bases(root, want):
        on_pbox = tuple(leaf for leaf in leaves
                        if not is_free(reg.switch_pools[leaf], candidate, want))
        if all(_rack_pbox_free(reg, leaf, candidate, want) for leaf in on_pbox):
            key = (len(on_pbox), candidate, on_pbox)
            best = key if best is None or key < best else best
    return (best[1], best[2]) if best is not None else (None, ())


def _rack_pbox_free(reg: Ledger, leaf: str, base: int, count: int) -> bool:
    first = reg.topo.pbox_of(leaf)
    return first is not None and is_free(reg.pbox_pools[first.name], base, count)


def place_on_fabric(reg: Ledger, job: Job) -> list[Update]:
    """All workers are in: one rack makes an ordinary switch job on its leaf; several
    make a tree under the root spine. Switches outside it give the range back."""
    racks: dict[str, int] = {}
    for worker in job.workers.values():
        racks[worker.switch] = racks.get(worker.switch, 0) + 1
    on_pbox = {_leaf_of_part(reg, part): part for part in job.rack_pboxes}
    if len(racks) == 1:
        (leaf,) = racks
        on_leaf = leaf in job.fabric
        _release_fabric(reg, job, (leaf,) if on_leaf else (), () if on_leaf else (leaf,))
        reg.assign(job, "fabric", ())
        reg.assign(job, "root_pbox", "")
        reg.assign(job, "switch", leaf)
        part = None if on_leaf else on_pbox.get(leaf)
        if part is None:
            return [TableWrite(leaf, INSERT, job_entry(job)), group_write(job, INSERT)]
        # one rack without room on its leaf: an ordinary PBox job there
        reg.assign(job, "rack_pboxes", ())
        reg.assign(job, "where", ON_PBOX)
        reg.assign(job, "pbox", part.pbox)
        reg.set_parts(job, (part,))
        return [TableWrite(leaf, INSERT, job_entry(job)), part_write(job, part, INSERT)]
    try:
        if job.root_pbox:
            ranks: dict[str, list[int]] = {}
            for worker in job.workers.values():
                ranks.setdefault(worker.switch, []).append(worker.rank)
            planned = plan_under_pbox(reg.topo, job.root_pbox, ranks,
                                      frozenset(racks) & set(on_pbox))
        else:
            planned = plan(reg.topo, job.fabric[0], racks, frozenset(racks) & set(on_pbox))
    except TreeError as exc:
        raise JobError(f"job {job.name!r} cannot span racks {', '.join(sorted(racks))}: "
                       f"{exc}") from None
    # a root PBox's leaf only forwards to it: the range it held goes back too
    _release_fabric(reg, job, tuple(s for s in planned.switches
                                    if not (s == planned.root and planned.root_pbox)),
                         planned.switches)
    reg.assign(job, "fabric", tuple(s for s in planned.switches if s not in on_pbox))
    reg.assign(job, "tree", planned)
    reg.assign(job, "switch", planned.root)
    return tree_writes(job, INSERT)


def _leaf_of_part(reg: Ledger, part: Part) -> str:
    return reg.topo.pboxes[part.pbox].switch


def _release_fabric(reg: Ledger, job: Job, switches: tuple[str, ...],
                   racks: tuple[str, ...]) -> None:
    """Give back the range on every switch but ``switches``, and on the PBox of every
    rack (leaf) but ``racks``."""
    for switch in job.fabric:
        if switch not in switches:
            reg.free(reg.switch_pools[switch], job.job_id)
    kept = []
    for part in job.rack_pboxes:
        if _leaf_of_part(reg, part) in racks:
            kept.append(part)
        else:
            reg.free(reg.pbox_pools[part.pbox], part.owner)
    reg.assign(job, "rack_pboxes", tuple(kept))


def rack_onto_leaf(reg: Ledger, job: Job, leaf: Leaf, now: float | None, reason: str,
                  dead: str = "") -> list[Update] | None:
    """The rack of ``leaf`` (on its PBox) aggregates on its leaf from now on, if the
    leaf has room at the job's base (None if not): a new epoch for the whole tree,
    since the PBox's rounds in flight are gone (``dead``: that PBox cannot be
    reached, it is not written to)."""
    assert job.tree is not None
    if not is_free(reg.switch_pools[leaf.switch], job.slots.base, job.slots.count):
        return None
    updates: list[Update] = []
    if leaf.pbox != dead:
        updates.append(pbox_leaf_write(tree_job(job), job.tree, leaf, DELETE))
    part = next(part for part in job.rack_pboxes if part.pbox == leaf.pbox)
    reg.free(reg.pbox_pools[part.pbox], part.owner)
    reg.reserve(reg.switch_pools[leaf.switch], job.job_id, job.slots.base,
                job.slots.count)
    reg.assign(job, "rack_pboxes", tuple(p for p in job.rack_pboxes if p is not part))
    reg.assign(job, "fabric", (*job.fabric, leaf.switch))
    reg.assign(job, "tree", replace(job.tree, leaves=tuple(
        replace(node, pbox="") if node is leaf else node for node in job.tree.leaves)))
    # the group first: the leaf multicasts as soon as its entry says it aggregates
    return [group_write(job, INSERT, leaf.switch),
            *renew_tree(reg, job, now, reason), *updates]


def renew_tree(reg: Ledger, job: Job, now: float | None, reason: str,
              skip: str = "") -> list[Update]:
    """A new epoch for a job over racks: its jobs entries on every switch of its tree
    but ``skip`` get it (every cell counts as fresh, the agents resynchronise)."""
    reg.renew_epoch(job, now, reason)
    return [TableWrite(name, MODIFY, entry)
            for name, entry in tree_jobs_entries(job) if name != skip]
