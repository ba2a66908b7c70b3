"""Fault handling: an aggregator that lost a job's state or cannot be reached. A
restarted switch or PBox gives its jobs a new epoch (the agents resynchronise); a lost
PBox's share moves to the switch or the rack's other PBoxes, a lost rack PBox of a tree
onto its leaf, and a job with nowhere to go ends (END_LOST). Functions over the registry
(controller/core/ledger.py); the dead PBox is never written to."""

from __future__ import annotations

from p4hub.controller.core import elastic_moves, fabric_placement, membership, rack_placement
from p4hub.controller.core.job import END_LOST, ON_SWITCH, Job
from p4hub.controller.core.ledger import Ledger
from p4hub.controller.core.updates import Update


def switch_restarted(reg: Ledger, switch: str, now: float | None) -> list[Update]:
    """``switch`` came back without its registers: each job aggregating on it gets a
    new epoch (its agents resynchronise, every cell counts as fresh). The other
    switches of a tree get their jobs entries rewritten with it; ``switch`` itself is
    the caller's to resynchronise (``expected_entries``)."""
    updates: list[Update] = []
    for job in sorted(reg.jobs.values(), key=lambda j: j.job_id):
        if job.tree is not None and switch in job.tree.switches:
            updates += fabric_placement.renew_tree(reg, job, now, f"switch {switch} restarted",
                                                   switch)
        elif job.switch == switch and job.where == ON_SWITCH and not job.over_racks:
            reg.renew_epoch(job, now, f"switch {switch} restarted")
    return updates


def tree_pbox_restarted(reg: Ledger, job: Job, pbox: str, now: float | None) -> list[Update]:
    """A PBox of ``job``'s tree had lost the job (it restarted; it has it again,
    empty): a new epoch, as for a restarted switch."""
    return fabric_placement.renew_tree(reg, job, now, f"PBox {pbox} had lost the job")


def pbox_lost(reg: Ledger, job_id: int, pbox: str, now: float | None, reason: str) -> list[Update]:
    """PBox ``pbox`` cannot be reached: the job moves whole to its rack's switch if
    the switch has room for its window, else that PBox's share goes to the rack's
    other PBoxes; with neither, the job ends (END_LOST). A job with the precision
    option goes to the switch only with its float route on another PBox, and a float
    route alone on the dead PBox moves to another. The dead PBox is not written to."""
    job = reg.job(job_id)
    if job.tree is not None:
        return _tree_pbox_lost(reg, job, pbox, now, reason)
    if all(part.pbox != pbox for part in job.parts):
        return []
    others = [pb.name for pb in reg.topo.pboxes_of(job.switch) if pb.name != pbox]
    reg.assign(job, "left", {**job.left, pbox: now if now is not None else 0.0})
    if all(part.pbox != pbox for part in job.share_parts):  # only its float route
        moved = elastic_moves.resplit(reg, job, {pt.pbox: pt.share for pt in job.share_parts}, now,
                                      f"{reason}; its float route moved", dead=pbox)
        return moved if moved is not None else membership.end(
            reg, job, now, END_LOST, f"{reason}; no other PBox of the rack has room for its "
            "float route (the precision option)", dead=pbox)
    moved = elastic_moves.whole_onto_switch(reg, job, now,
                                            f"{reason}; moved to switch {job.switch}", dead=pbox)
    if moved is not None:
        return moved
    if not others:
        return membership.end(reg, job, now, END_LOST, f"{reason}; switch {job.switch} has no "
                              f"{job.window} free slots to take the job over and the rack has "
                              "no other PBox", dead=pbox)
    total = sum(part.share for part in job.parts)
    updates = elastic_moves.resplit(reg, job, rack_placement.even(others, total), now,
                                    f"{reason}; its share moved to PBox(es) {', '.join(others)}",
                                    dead=pbox)
    if updates is None:
        return membership.end(reg, job, now, END_LOST, f"{reason}; the other PBoxes have no room",
                              dead=pbox)
    return updates


def _tree_pbox_lost(reg: Ledger, job: Job, pbox: str, now: float | None,
                   reason: str) -> list[Update]:
    """A PBox of a job over racks cannot be reached: a rack on it moves onto its leaf
    if the leaf has room at the job's base; a root PBox, or a rack whose leaf has
    none, ends the job (END_LOST)."""
    assert job.tree is not None
    leaf = next((leaf for leaf in job.tree.leaves if leaf.pbox == pbox), None)
    if leaf is not None:
        moved = fabric_placement.rack_onto_leaf(reg, job, leaf, now, f"{reason}; rack "
                                                f"{leaf.switch} moved onto its leaf", dead=pbox)
        if moved is not None:
            return moved
        return membership.end(reg, job, now, END_LOST, f"{reason}; leaf {leaf.switch} has no "
                              f"{job.slots.count} free slots at base {job.slots.base}", dead=pbox)
    if pbox == job.tree.root_pbox:
        return membership.end(reg, job, now, END_LOST, f"{reason}; it was the root of the job",
                              dead=pbox)
    return []


