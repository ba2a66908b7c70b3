"""Rack placement: a new job's window on its rack, as many slots on the switch as it
has in one run and the rest in even shares over the rack's PBoxes (one range per PBox;
PBox slot numbers come from one pool per rack, so they never collide across its
PBoxes). Functions over the registry (controller/core/ledger.py)."""

from __future__ import annotations

from p4hub.controller.core import elastic
from p4hub.controller.core.job import ON_PBOX, ON_SWITCH, PLACE_AUTO, Job, JobError, Part
from p4hub.controller.core.job_writes import job_entry, part_write
from p4hub.controller.core.ledger import Ledger
from p4hub.controller.core.updates import INSERT, TableWrite, Update


def create(reg: Ledger, name: str, world_size: int, switch: str, placement: str, lanes: int,
          precision: float | None = None) -> tuple[Job, list[Update]]:
    """PLACE_AUTO: the whole window on the switch if it has room; else as many
    switch slots as it has in one run (at least an eighth of the window) and the
    rest in even shares over the rack's PBoxes; else all on the PBoxes.
    PLACE_PBOX: all on the PBoxes. With ``precision`` and switch slots, a float route
    on the rack's first PBox too."""
    tag = reg.free_tag(name)
    pboxes = reg.topo.pboxes_of(switch)
    if not pboxes:
        raise JobError(f"rack {switch} has no PBox, so no aggregator address")
    job_id = reg.free_job_id()
    want = reg.topo.switches[switch].job_slots
    got = None
    if placement == PLACE_AUTO:
        pool = reg.switch_pools[switch]
        take = min(want, pool.largest_free())
        if take >= max(1, want // 8):
            got = reg.allocate(pool, job_id, take)
    epoch = reg.take_epoch()  # the switch's cells and the agents' resyncs go by it
    rest = want - (got.count if got is not None else 0)
    floats = (pboxes[0].name, want) if precision is not None and got is not None else None
    parts = allocate_parts(reg, job_id, even([pb.name for pb in pboxes], rest), epoch,
                           floats)
    if parts is None:
        raise JobError(f"no room for {want} slots on switch {switch} or its PBoxes")
    if got is not None:
        where, slots, pbox = ON_SWITCH, got, pboxes[0].name
    else:
        where, slots, pbox = ON_PBOX, parts[0].slots, parts[0].pbox
    job = Job(job_id, name, tag, world_size, switch, where, slots, epoch, pbox, lanes,
              precision=precision, placement=placement, parts=parts)
    reg.add_job(job)
    updates: list[Update] = [TableWrite(switch, INSERT, job_entry(job))]
    updates += [part_write(job, part, INSERT) for part in parts]
    return job, updates


def allocate_parts(reg: Ledger, job_id: int, shares: dict[str, int], epoch: int,
                  floats: tuple[str, int] | None = None) -> tuple[Part, ...] | None:
    """A fresh range on each PBox of ``shares`` (PBox -> slots), held by (job, PBox,
    ``epoch``), by slot base, and ``floats`` (PBox, slots) as the float route at the
    end of that PBox's range (a PBox configures one range per job); None if the
    rack's PBox pool has no room."""
    counts = dict(shares)
    if floats is not None:
        counts[floats[0]] = counts.get(floats[0], 0) + floats[1]
    parts = []
    for pbox, count in counts.items():
        owner = (job_id, pbox, epoch)
        got = reg.allocate(reg.pbox_pools[pbox], owner, count)
        if got is None:
            return None
        parts.append(Part(pbox, got, owner, floats[1] if floats and floats[0] == pbox else 0))
    return tuple(sorted(parts, key=lambda part: part.slots.base))


def even(pboxes: list[str], count: int) -> dict[str, int]:
    """``count`` window slots in even shares over ``pboxes`` (the earlier ones take the
    remainder; a PBox with no slot gets no share)."""
    shares = elastic.proportional(count, [1.0] * len(pboxes), 0)
    return {pbox: n for pbox, n in zip(pboxes, shares, strict=True) if n}


