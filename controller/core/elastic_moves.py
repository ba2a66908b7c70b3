"""Elastic moves: the registry applying controller/core/elastic.py's plans to a job's
map. ``rebalance`` moves the PBox share between PBoxes by their measured rates (drain a
slow PBox, probe an unused one, re-split), ``promote`` moves a job onto the switch once
the switch has room for all of it (or grows its switch share); every change of the map
is a new epoch the agents learn from their heartbeats. A job with the precision option
keeps a float route on a PBox while it has switch slots. Functions over the registry
(controller/core/ledger.py); sans-I/O, time is an argument."""

from __future__ import annotations

from typing import Literal

from p4hub.controller.core import elastic, fabric_placement, rack_placement
from p4hub.controller.core.job import ON_SWITCH, PLACE_AUTO, Job, Part
from p4hub.controller.core.job_writes import group_write, job_entry, part_write
from p4hub.controller.core.ledger import Ledger
from p4hub.controller.core.slots import SlotRange
from p4hub.controller.core.updates import DELETE, INSERT, MODIFY, PBoxJobWrite, TableWrite, Update

GROW_STEP = 8  # a partly placed job's switch share grows by at least 1/GROW_STEP of its window


def promote(reg: Ledger, now: float | None) -> list[Update]:
    """Jobs that went to PBoxes because the switch was short of slots (PLACE_AUTO)
    move whole onto the switch once it has room for their window, oldest first
    (ATP's best effort: the switch aggregates whatever it can), and the PBoxes drop
    the job; short of that, such a job takes a larger switch range once the switch
    has one (``_grow_on_switch``)."""
    updates: list[Update] = []
    for job in sorted(reg.jobs.values(), key=lambda j: j.job_id):
        if not job.share_parts or job.placement != PLACE_AUTO:
            continue
        pboxes = ", ".join(part.pbox for part in job.share_parts)
        moved = whole_onto_switch(reg, job, now, f"switch {job.switch} has free slots "
                                                 f"again; moved off PBox {pboxes}")
        updates += moved if moved is not None else _grow_on_switch(reg, job, now) or []
    for job in sorted(reg.jobs.values(), key=lambda j: j.job_id):
        # racks of jobs over racks that aggregate on their PBox: back onto their leaf
        for leaf in job.tree.leaves if job.tree is not None else ():
            if leaf.pbox:
                updates += fabric_placement.rack_onto_leaf(reg, job, leaf, now, (
                    f"leaf {leaf.switch} has free slots again; rack moved off PBox "
                    f"{leaf.pbox}")) or []
    return updates


def _grow_on_switch(reg: Ledger, job: Job, now: float | None) -> list[Update] | None:
    """A fresh switch range for ``job`` at least ``GROW_STEP`` of its window larger
    than the one it has, as large as the switch has in one run; the PBox share
    shrinks to the rest, split over the fastest of its PBoxes in proportion to their
    rates (even while unmeasured), each keeping at least the exploration share.
    None when the switch has no such run, or the PBox pool no fresh ranges."""
    have = job.slots.count if job.where == ON_SWITCH else 0
    take = min(reg.switch_pools[job.switch].largest_free(), job.window - 1)
    if take < have + max(1, job.window // GROW_STEP):
        return None
    shares = _shrunk_shares(job, job.window - take)
    epoch = reg.take_epoch()
    floats = _float_need(reg, job, on_switch=True)
    parts = (rack_placement.allocate_parts(reg, job.job_id, shares, epoch, floats)
             if floats is not False else None)
    got = _switch_range(reg, job, take) if parts is not None else None
    if parts is None or got is None:
        for part in parts or ():
            reg.free(reg.pbox_pools[part.pbox], part.owner)
        return None
    was_on_switch, old = job.where == ON_SWITCH, job.parts
    for part in old:
        reg.free(reg.pbox_pools[part.pbox], part.owner)
    reg.assign(job, "where", ON_SWITCH)
    reg.assign(job, "pbox", reg.topo.pbox_of(job.switch).name)  # type: ignore[union-attr]
    reg.assign(job, "slots", got)
    reg.set_parts(job, parts)
    reg.assign(job, "epoch", epoch)
    reg.assign(job, "split_at", now)
    reg.note_move(job, now, f"switch {job.switch} has {take} free slots in a run; "
                            f"switch share {have} -> {take} of {job.window}")
    updates: list[Update] = [TableWrite(job.switch, MODIFY, job_entry(job))]
    if job.workers and not was_on_switch:
        updates.append(group_write(job, INSERT))
    updates += [part_write(job, part, MODIFY) for part in parts]
    kept = {part.pbox for part in parts}
    updates += [PBoxJobWrite(part.pbox, DELETE, job.job_id) for part in old
                if part.pbox not in kept]
    return updates


def rebalance(reg: Ledger, now: float) -> list[Update]:
    """For every job with PBox ranges (controller/core/elastic.py): drain a PBox that stayed
    slow (scale in), probe a PBox of the rack it does not use (scale out), or re-split
    the PBox share by the measured rates; at most one change per
    ``elastic.HOLD_DOWN`` seconds a job."""
    updates: list[Update] = []
    for job in sorted(reg.jobs.values(), key=lambda j: j.job_id):
        if not job.share_parts:
            continue
        rates = job.rates(elastic.MIN_SAMPLES)[1 if job.where == ON_SWITCH else 0:]
        measured = all(r is not None for r in rates)
        if measured and len(job.share_parts) > 1:
            _count_slow(reg, job, [float(r) for r in rates if r is not None])
        if job.split_at is not None and now - job.split_at < elastic.HOLD_DOWN:
            continue
        moved = _scale_in(reg, job, rates, now) if measured else None
        if moved is None:
            moved = _probe(reg, job, now)
        if moved is None and measured and len(job.share_parts) > 1:
            moved = _replan(reg, job, rates, now)
        updates += moved or []
    return updates


def _count_slow(reg: Ledger, job: Job, rates: list[float]) -> None:
    slow = elastic.slow(rates)
    streaks = {part.pbox: job.slow_checks.get(part.pbox, 0) + 1 if is_slow else 0
               for part, is_slow in zip(job.share_parts, slow, strict=True)}
    reg.assign(job, "slow_checks", streaks)


def _scale_in(reg: Ledger, job: Job, rates: list[float | None], now: float) -> list[Update] | None:
    """Drain the slowest PBox if it was slow SCALE_IN_CHECKS checks in a row."""
    parts = job.share_parts
    if len(parts) < 2:
        return None
    values = [float(r) for r in rates if r is not None]
    victim = min(range(len(values)), key=lambda i: (values[i], i))
    name = parts[victim].pbox
    checks = job.slow_checks.get(name, 0)
    if checks < elastic.SCALE_IN_CHECKS:
        return None
    shares = elastic.drain([part.share for part in parts], values, victim)
    reg.assign(job, "left", {**job.left, name: now})
    return resplit(reg, job, {p.pbox: n for p, n in zip(parts, shares, strict=True) if n},
                   now, f"drained PBox {name} (scale in): {values[victim]:.0f} rounds/s, "
                   f"under {elastic.SCALE_IN_RATIO:.0%} of the best "
                   f"({max(values):.0f}) at {checks} checks in a row")


def _probe(reg: Ledger, job: Job, now: float) -> list[Update] | None:
    """Give a PBox of the rack the job does not use (drained, or lost and back) the
    exploration share, PROBE_AFTER seconds after it left (scale out)."""
    using = {part.pbox for part in job.share_parts}
    spare = [pb.name for pb in reg.topo.pboxes_of(job.switch) if pb.name not in using
             and now - job.left.get(pb.name, -float("inf")) >= elastic.PROBE_AFTER]
    if not spare:
        return None
    shares = elastic.probe({part.pbox: part.share for part in job.share_parts}, spare)
    if shares is None:
        return None
    reg.assign(job, "left", {k: v for k, v in job.left.items() if k not in spare})
    return resplit(reg, job, shares, now, f"probing PBox {', '.join(spare)} with "
                   f"{shares[spare[0]]} slots (scale out)")


def _replan(reg: Ledger, job: Job, rates: list[float | None], now: float) -> list[Update] | None:
    parts = job.share_parts
    plan = elastic.plan([part.share for part in parts], rates, elastic.PERSIST_GAIN)
    if plan is None:
        reg.assign(job, "gain_streak", None)
        return None
    take, streak = elastic.persisted(job.gain_streak, plan, job.epoch,
                                     parts[plan.slowest].pbox, now)
    reg.assign(job, "gain_streak", streak)
    if not take:
        return None
    old = {part.pbox: part.share for part in parts}
    shares = {part.pbox: n for part, n in zip(parts, plan.shares, strict=True)}
    reversal = elastic.reverses(old, shares, job.took_from)
    if reversal and job.split_at is not None and (
            now - job.split_at < elastic.hold_down(job.reversals)):
        return None
    held = (f" (under {elastic.MIN_GAIN:.0%}, predicted for {elastic.PERSIST_SECONDS:.0f} s)"
            if plan.gain < elastic.MIN_GAIN else "")
    updates = resplit(reg, job, shares, now, f"rebalanced over PBoxes: {plan.reason}{held}"
                      + (f" (reversal {job.reversals + 1} in a row)" if reversal else ""))
    if updates is not None:
        reg.assign(job, "reversals", job.reversals + 1 if reversal else 0)
        reg.assign(job, "took_from", elastic.losers(old, shares))
        reg.assign(job, "gain_streak", None)
    return updates


def resplit(reg: Ledger, job: Job, shares: dict[str, int], now: float | None, reason: str,
           dead: str | None = None) -> list[Update] | None:
    """Give the job's PBox share the new ``shares`` (PBox -> slots), each on a fresh
    range (a slot that served one window index must not serve another: hosts/
    routes.py), under a new epoch, and its float route too if it has one (on a
    fresh range, merged with its host's share); None if the rack's PBox pool has no
    room (or no PBox but ``dead`` can take the float route)."""
    floats = _float_need(reg, job, on_switch=job.where == ON_SWITCH, dead=dead)
    if floats is False:
        return None
    epoch = reg.take_epoch()
    parts = rack_placement.allocate_parts(reg, job.job_id, shares, epoch, floats)
    if parts is None:
        return None
    old = job.parts
    for part in old:
        reg.free(reg.pbox_pools[part.pbox], part.owner)
    reg.set_parts(job, parts)
    reg.assign(job, "epoch", epoch)
    reg.assign(job, "split_at", now)
    reg.note_move(job, now, reason)
    updates: list[Update] = [TableWrite(job.switch, MODIFY, job_entry(job))]
    updates += [part_write(job, part, MODIFY) for part in parts]
    kept = {part.pbox for part in parts}
    updates += [PBoxJobWrite(part.pbox, DELETE, job.job_id) for part in old
                if part.pbox not in kept and part.pbox != dead]
    return updates


def _switch_range(reg: Ledger, job: Job, count: int) -> SlotRange | None:
    """A new switch range of ``count`` slots for ``job``, disjoint from the one it
    has (a slot must not serve another window index: hosts/routes.py), which is
    freed; None if the switch has no room."""
    pool = reg.switch_pools[job.switch]
    if job.where != ON_SWITCH:
        return reg.allocate(pool, job.job_id, count)
    got = reg.allocate(pool, ("moving", job.job_id), count)
    if got is None:
        return None
    reg.free(pool, ("moving", job.job_id))
    reg.free(pool, job.job_id)
    pool.reserve(job.job_id, got.base, got.count)
    reg.record(lambda: pool.free(job.job_id))
    return got


def whole_onto_switch(reg: Ledger, job: Job, now: float | None, reason: str,
                     dead: str | None = None) -> list[Update] | None:
    """The whole window onto a fresh switch range, with a fresh float route for a job
    with the precision option; None, holding nothing new, when the switch has no room
    (or no PBox of the rack but ``dead`` has room for the float route)."""
    epoch = reg.take_epoch() if job.precision is not None else None
    floats = _float_part(reg, job, epoch, dead) if epoch is not None else None
    if epoch is not None and floats is None:
        return None
    got = _switch_range(reg, job, job.window)
    if got is None:
        if floats is not None:
            reg.free(reg.pbox_pools[floats.pbox], floats.owner)
        return None
    return _onto_switch(reg, job, got, now, reason, dead=dead, epoch=epoch, floats=floats)


def _onto_switch(reg: Ledger, job: Job, got: SlotRange, now: float | None,
                reason: str, dead: str | None = None, epoch: int | None = None,
                floats: Part | None = None) -> list[Update]:
    """The whole window onto the switch range ``got`` under ``epoch`` (a new one if
    None), with ``floats`` as its float route (a job with the precision option)."""
    was_on_switch = job.where == ON_SWITCH
    old = job.parts
    for part in old:
        reg.free(reg.pbox_pools[part.pbox], part.owner)
    reg.assign(job, "parts", (floats,) if floats is not None else ())
    reg.assign(job, "pbox", reg.topo.pbox_of(job.switch).name)  # type: ignore[union-attr]
    reg.assign(job, "where", ON_SWITCH)
    reg.assign(job, "slots", got)
    reg.assign(job, "epoch", reg.take_epoch() if epoch is None else epoch)
    reg.assign(job, "split_at", now)
    reg.note_move(job, now, reason)
    updates: list[Update] = [TableWrite(job.switch, MODIFY, job_entry(job))]
    if job.workers:
        updates.append(group_write(job, MODIFY if was_on_switch else INSERT))
    if floats is not None:
        updates.append(part_write(job, floats, MODIFY))
    updates += [PBoxJobWrite(part.pbox, DELETE, job.job_id) for part in old
                if part.pbox != dead and (floats is None or part.pbox != floats.pbox)]
    return updates


def _float_need(reg: Ledger, job: Job, on_switch: bool,
               dead: str | None = None) -> tuple[str, int] | None | Literal[False]:
    """(PBox, slots) of the float route ``job`` needs placed ``on_switch`` or not
    (None: none, without the precision option or switch slots; False: it needs one
    and no PBox of its rack but ``dead`` could hold it)."""
    if job.precision is None or not on_switch:
        return None
    host = _float_host(reg, job, dead)
    return (host, job.window) if host is not None else False


def _float_host(reg: Ledger, job: Job, dead: str | None = None) -> str | None:
    """Where a float route goes: the rack's first PBox the job did not leave (drained or
    lost), else its first; never ``dead``."""
    names = [pb.name for pb in reg.topo.pboxes_of(job.switch) if pb.name != dead]
    return min(names, key=lambda name: name in job.left) if names else None


def _float_part(reg: Ledger, job: Job, epoch: int, dead: str | None = None) -> Part | None:
    """A fresh range holding only ``job``'s float route, for a move onto the switch;
    None if no PBox of its rack (but ``dead``) has room."""
    host = _float_host(reg, job, dead)
    if host is None:
        return None
    owner = (job.job_id, host, epoch)
    got = reg.allocate(reg.pbox_pools[host], owner, job.window)
    return Part(host, got, owner, job.window) if got is not None else None


def _shrunk_shares(job: Job, rest: int) -> dict[str, int]:
    """``rest`` slots over the fastest of ``job``'s PBoxes, in proportion to their rates
    (alike while any is unmeasured), each at least the exploration share, in map order."""
    names = [part.pbox for part in job.share_parts]
    rates = job.rates(elastic.MIN_SAMPLES)[1 if job.where == ON_SWITCH else 0:]
    measured = len(rates) == len(names) and all(r is not None and r > 0 for r in rates)
    weights = [float(r) for r in rates if r is not None] if measured else [1.0] * len(names)
    floor = elastic.min_share(rest)
    fastest = sorted(range(len(names)), key=lambda i: (-weights[i], i))[: max(1, rest // floor)]
    keep = sorted(fastest)
    shares = elastic.proportional(rest, [weights[i] for i in keep], floor)
    return {names[i]: count for i, count in zip(keep, shares, strict=True)}


