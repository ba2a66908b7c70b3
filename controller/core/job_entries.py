"""The table entries that configure one job on a switch, by what they say rather than by
whom: the jobs entry (on the switch, on a PBox), a member and the copy of the RESULT
that goes back to it. The registry (controller/core/jobs.py) makes them for workers, the
tree (controller/core/tree.py) for a root's leaves and a leaf's parent; p4src/aggregate.p4
defines the tables and actions."""

from __future__ import annotations

from p4hub.controller.core import program as p
from p4hub.controller.core.slots import SlotRange
from p4hub.controller.core.updates import (
    DELETE,
    INSERT,
    CounterClear,
    Entry,
    FieldMatch,
    TableWrite,
    Update,
)


def jobs_key(job_id: int) -> Entry:
    """The jobs entry's key alone (for DELETE)."""
    return Entry(p.JOBS, (FieldMatch(p.JOBS_JOB, job_id),))


def _common(world_size: int, slots: SlotRange, lanes: int) -> tuple[tuple[str, int], ...]:
    return (("world_size", world_size), ("slot_base", slots.base),
            ("slot_count", slots.count), ("lane_code", p.lane_code(lanes)))


def on_switch(job_id: int, world_size: int, slots: SlotRange, lanes: int, tag: int,
              epoch: int) -> Entry:
    """job_on_switch: the switch sums ``world_size`` members in ``slots`` and multicasts
    the RESULT to group ``job_id``."""
    params = (*_common(world_size, slots, lanes), ("mcast_grp", job_id), ("name_tag", tag),
              ("epoch", epoch))
    return Entry(p.JOBS, jobs_key(job_id).match, p.ACT_JOB_ON_SWITCH, params)


def on_pbox(job_id: int, world_size: int, slots: SlotRange, lanes: int, tag: int) -> Entry:
    """job_on_pbox: the switch checks the members and forwards to the PBox."""
    return Entry(p.JOBS, jobs_key(job_id).match, p.ACT_JOB_ON_PBOX,
                 (*_common(world_size, slots, lanes), ("name_tag", tag)))


def on_leaf(job_id: int, rack_size: int, total: int, slots: SlotRange, lanes: int, tag: int,
            epoch: int, child: int, up: tuple[int, int, int]) -> Entry:
    """job_on_leaf: the switch sums its ``rack_size`` members and sends each completed
    cell up as child ``child``; ``up`` is the parent's (ip, mac, the leaf's port to it),
    its range the same as the leaf's."""
    up_ip, up_mac, up_port = up
    params = (*_common(rack_size, slots, lanes), ("mcast_grp", job_id), ("name_tag", tag),
              ("epoch", epoch), ("total_size", total), ("child", child),
              ("up_slot_base", slots.base), ("up_ip", up_ip), ("up_mac", up_mac),
              ("up_port", up_port))
    return Entry(p.JOBS, jobs_key(job_id).match, p.ACT_JOB_ON_LEAF, params)


def member(job_id: int, rank: int, ip: int, udp_port: int, switch_port: int, op: str,
           bit: int) -> Entry:
    """(job, rank, IPv4 source, UDP source port, ingress port) -> is_member(bit): the
    member's bit in the cells' bitmaps on this switch (0..MAX_WORKERS-1, distinct among
    the job's members there)."""
    if not 0 <= bit < p.MAX_WORKERS:
        raise ValueError(f"bit index {bit} outside 0..{p.MAX_WORKERS - 1}")
    match = (FieldMatch(p.MEMBERS_JOB, job_id), FieldMatch(p.MEMBERS_RANK, rank),
             FieldMatch(p.MEMBERS_SRC, ip), FieldMatch(p.MEMBERS_SPORT, udp_port),
             FieldMatch(p.MEMBERS_PORT, switch_port))
    if op == DELETE:
        return Entry(p.MEMBERS, match)
    return Entry(p.MEMBERS, match, p.ACT_IS_MEMBER, (("bit_index", bit),))


def result_dst(job_id: int, bit: int, mac: int, ip: int, udp_port: int, op: str) -> Entry:
    """The RESULT copy for the job's member of bit ``bit`` on this switch (egress_rid
    job*32 + bit) -> its destination."""
    match = (FieldMatch(p.RESULT_DST_RID, p.result_rid(job_id, bit)),)
    if op == DELETE:
        return Entry(p.RESULT_DST, match)
    params = (("mac", mac), ("ip", ip), ("udp_port", udp_port))
    return Entry(p.RESULT_DST, match, p.ACT_SET_RESULT_DST, params)


def clear_new_jobs_counters(batch: list[Update]) -> list[Update | CounterClear]:
    """``batch`` with, before each jobs entry it INSERTs, the clearing of that job id's
    job_stats and tree_stats cells on that switch: counters are per job id, and an id
    is reused after its job ends (or by a restarted controller), so without this
    ``p4hub job show`` would add an earlier job's packets to the new one's. A MODIFY
    (a new epoch) or a rebuilt controller keeps the job's counts."""
    out: list[Update | CounterClear] = []
    for write in batch:
        if isinstance(write, TableWrite) and write.op == INSERT and write.entry.table == p.JOBS:
            job_id = write.entry.match_value(p.JOBS_JOB)
            out += [CounterClear(write.switch, counter, job_id * kinds + i)
                    for counter, kinds in ((p.JOB_STATS, p.JOB_STAT_KINDS),
                                           (p.TREE_STATS, p.TREE_STAT_KINDS))
                    for i in range(kinds)]
        out.append(write)
    return out
