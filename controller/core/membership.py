"""Membership and liveness: joins, leaves, barriers, heartbeats, and the end of a job
(killed, left, silent, or its aggregator lost), as functions over the registry
(controller/core/ledger.py) that return the updates; sans-I/O, time is an argument.

Liveness: every member heartbeats over the job API (``heartbeat``; joins and
barriers count too). A member silent for ``worker_timeout`` ends its whole job
(``expire``): the survivors cannot complete a round without it, so keeping the job
would only hold its slots. The end is recorded (``JobEnd``: which rank, last heard
when) so that ShowJob says why the job is gone, and a restarted worker rejoining by
name creates a new job instance on the freed slots.
"""

from __future__ import annotations

from p4hub.controller.core import fabric_placement, job_entries, rack_placement
from p4hub.controller.core import program as p
from p4hub.controller.core.job import (
    END_KILLED,
    END_LEFT,
    END_SILENT,
    ON_PBOX,
    ON_SWITCH,
    PLACE_AUTO,
    PLACE_PBOX,
    PLACEMENTS,
    Job,
    JobEnd,
    JobError,
    JoinReply,
    Worker,
)
from p4hub.controller.core.job_writes import (
    free_bit,
    group_write,
    has_group,
    member_writes,
    rack_of_worker,
    tree_writes,
)
from p4hub.controller.core.ledger import Ledger
from p4hub.controller.core.slots import SlotRange
from p4hub.controller.core.topology import HostConf, aggregator_address, format_ipv4, parse_ipv4
from p4hub.controller.core.traffic import Counters, RouteService
from p4hub.controller.core.updates import (
    DELETE,
    INSERT,
    MODIFY,
    GroupWrite,
    PBoxJobWrite,
    TableWrite,
    Update,
)


def reply(reg: Ledger, job: Job, rank: int) -> JoinReply:
    pbox = reg.topo.pbox_of(rack_of(reg, job, rank))
    assert pbox is not None  # a job is only created on a rack with a PBox
    return JoinReply(
        job_id=job.job_id, world_size=job.world_size, rank=rank,
        aggregator_ip=format_ipv4(pbox.ip), aggregator_port=p.AGG_UDP_PORT,
        slot_base=job.slots.base, slot_count=job.window, lanes=job.lanes,
        window=job.window, where=job.where, epoch=job.epoch, routes=routes(reg, job, rank),
        precision=job.precision, scatter=not job.over_racks, gather=not job.over_racks,
    )


def routes(reg: Ledger, job: Job, rank: int | None = None) -> tuple[dict, ...]:
    """The job's map as rank ``rank``'s agent runs it (hosts/routes.py): the switch's
    range first (addressed to the rack's first PBox, whose address the switch answers
    for), then each PBox's, flagged so that the switch forwards them, then its float
    route if it has one (flagged, ``"float": true``). A job over a
    fabric has one route, to the rank's own rack (its leaf); without a rank, to the
    root spine's address."""
    if job.over_racks and rank is None:
        root = (reg.topo.pboxes[job.root_pbox] if job.root_pbox
                else reg.topo.switches[job.fabric[0]])
        return (_route(root.ip, job.slots, False),)
    out = []
    if job.where == ON_SWITCH:
        first = reg.topo.pbox_of(rack_of(reg, job, rank))
        assert first is not None
        out.append(_route(first.ip, job.slots, False))
    out += [_route(reg.topo.pboxes[part.pbox].ip, part.window_slots, True)
            for part in job.share_parts]
    floats = job.float_part
    if floats is not None:
        out.append({**_route(reg.topo.pboxes[floats.pbox].ip, floats.float_slots, True),
                    "float": True})
    return tuple(out)


def rack_of(reg: Ledger, job: Job, rank: int | None) -> str:
    """The switch rank ``rank`` hangs off (the job's, for one-rack jobs)."""
    worker = job.workers.get(rank) if rank is not None else None
    return rack_of_worker(job, worker) if worker is not None else job.switch


def join(
    reg: Ledger, name: str, world_size: int, rank: int, address: tuple[str, int], now: float,
    placement: str = PLACE_AUTO, lanes: int = p.DEFAULT_LANES, precision: float | None = None,
) -> tuple[JoinReply, list[Update]]:
    """A worker joins job ``name``; creates the job on first join. Idempotent per
    (rank, address): a retried join gets the same reply and no updates.
    ``placement`` only matters to the join that creates the job: PLACE_AUTO takes
    switch slots when there are any (else the PBox, until ``promote`` finds room on
    the switch), PLACE_PBOX puts the job on the rack's PBox
    (to compare both paths on the same rack). ``lanes`` (64 or 256 int32 lanes per
    packet) is set by the join that creates the job; every later join must ask for
    the same, and so with ``precision`` (the precision option's relative error bound,
    0 < bound < 1, None: off): such a job's float blocks go to PBoxes, on its PBox
    routes and, while it has switch slots, on a float route it holds on one of its
    rack's PBoxes (hosts/routes.py); on a fabric it is placed wholly on its rack's
    PBoxes (PLACE_PBOX: a job over racks cannot carry float blocks)."""
    placement = _join_placement(reg, placement, lanes, precision)
    ip, port = _check_join(name, world_size, rank, address)
    host = reg.topo.host_by_ip(ip)
    if host is None:
        raise JobError(f"{format_ipv4(ip)} is not a host of the topology")
    job, updates = _job_to_join(reg, name, world_size, host.switch, placement, lanes,
                                precision)
    switch, switch_port = _attachment(reg, job, name, host, ip)
    known = job.workers.get(rank)
    if known is not None:
        if (known.ip, known.port) != (ip, port):
            raise JobError(f"rank {rank} of job {name!r} is already taken by "
                           f"{format_ipv4(known.ip)}:{known.port}")
        reg.assign(known, "last_seen", now)
        return reply(reg, job, rank), updates
    bit = free_bit(job, switch, rank)
    if bit is None:
        raise JobError(f"job {name!r} has {p.MAX_WORKERS} workers on switch {switch} "
                       f"already; a switch sums at most {p.MAX_WORKERS} members of a job "
                       f"(rank {rank} at {format_ipv4(ip)} is refused)")
    worker = Worker(rank, ip, port, host.mac, switch_port, now, switch=switch, bit=bit)
    reg.add_worker(job, worker)
    updates += member_writes(job, worker, INSERT)
    if job.over_racks and job.tree is None:
        if len(job.workers) == job.world_size:
            updates += fabric_placement.place_on_fabric(reg, job)
    elif has_group(job, switch):
        rack_size = sum(w.switch == switch for w in job.workers.values())
        op = INSERT if rack_size == 1 and job.tree is None else MODIFY
        updates.append(group_write(job, op, switch))
    return reply(reg, job, rank), updates


def _join_placement(reg: Ledger, placement: str, lanes: int, precision: float | None) -> str:
    """The placement a join asks for, checked with its lanes and precision: PLACE_PBOX
    for a job with the precision option on a fabric."""
    if placement not in PLACEMENTS:
        raise JobError(f"placement must be one of {PLACEMENTS}, not {placement!r}")
    if precision is not None:
        if not 0.0 < precision < 1.0:
            raise JobError(f"precision must be a relative error bound strictly between "
                           f"0 and 1, not {precision!r}")
        if reg.topo.spines():  # not over racks: float blocks need a PBox of its rack
            placement = PLACE_PBOX
    if lanes not in p.LANE_COUNTS:
        raise JobError(f"lanes must be one of {p.LANE_COUNTS}, not {lanes!r}")
    return placement


def _job_to_join(reg: Ledger, name: str, world_size: int, switch: str, placement: str,
                 lanes: int, precision: float | None) -> tuple[Job, list[Update]]:
    """Job ``name`` (created on the rack of ``switch`` if it has none, adopted if it was
    rebuilt nameless), and the updates creating it took; refused if it was created with
    another world size, lanes or precision."""
    updates: list[Update] = []
    job = reg.job_by_name(name)
    if job is None and world_size > p.MAX_WORKERS and not (reg.topo.spines()
                                                         and placement == PLACE_AUTO):
        raise JobError(f"world size {world_size}: a job of more than {p.MAX_WORKERS} workers "
                       "is a tree over the racks of a leaf-spine fabric (at most "
                       f"{p.MAX_WORKERS} workers a rack); "
                       + ("it cannot be placed on a PBox" if reg.topo.spines()
                          else "this topology is one rack"))
    if job is None and reg.topo.spines() and placement == PLACE_AUTO:
        job, updates = fabric_placement.create_on_fabric(reg, name, world_size, switch, lanes)
    elif job is None:
        job, updates = rack_placement.create(reg, name, world_size, switch, placement, lanes,
                                             precision)
    elif job.name is None:
        reg.assign(job, "name", name)  # adopted after a rebuild
        if job.precision is None:  # its PBoxes keep it; unless none answered the rebuild
            reg.assign(job, "precision", precision)
    if job.world_size != world_size:
        raise JobError(f"job {name!r} has world size {job.world_size}, not {world_size}")
    if job.lanes != lanes:
        raise JobError(f"job {name!r} has {job.lanes} lanes per packet, not {lanes}")
    if job.precision != precision:
        raise JobError(f"job {name!r} has precision {job.precision}, not {precision} "
                       "(every rank must ask for the same; None: off)")
    return job, updates


def _attachment(reg: Ledger, job: Job, name: str, host: HostConf, ip: int) -> tuple[str, int]:
    """The switch and port a worker on ``host`` is a member of ``job`` at: its own, or,
    for a PBox job of another rack of a fabric, the job's switch."""
    if job.switch == host.switch or job.over_racks:
        return host.switch, host.port
    if job.where != ON_PBOX or not reg.topo.spines():
        raise JobError(f"job {name!r} runs on rack {job.switch}; {format_ipv4(ip)} is "
                       f"on {host.switch} (one rack per job, but for a PBox job on a "
                       "fabric)")
    # a PBox job of another rack: its packets reach the PBox's leaf over the
    # flood root, the way its L2 goes (controller/core/rack.py)
    return job.switch, reg.topo.port_to(job.switch, reg.topo.flood_root() or "") or 0


def heartbeat(reg: Ledger, job_id: int, rank: int, now: float,
             counters: Counters | None = None, service: RouteService | None = None) -> None:
    """The rank is alive; ``counters``: its session's, for the service rates;
    ``service``: per route of the map, for rebalancing."""
    worker = reg.worker(job_id, rank)
    worker.last_seen = now
    if counters is not None:
        worker.traffic.update(counters, now)
    if service is not None:
        worker.routes.update(service)


def leave(reg: Ledger, job_id: int, rank: int, now: float | None = None) -> list[Update]:
    """A worker leaves; the job ends with its last worker."""
    job = reg.job(job_id)
    worker = reg.worker(job_id, rank)
    if len(job.workers) == 1:
        return end(reg, job, now, END_LEFT, f"its last worker (rank {rank}) left")
    reg.del_worker(job, rank)
    updates = member_writes(job, worker, DELETE)
    switch = rack_of_worker(job, worker)
    if has_group(job, switch):
        updates.append(group_write(job, MODIFY, switch))
    return updates


def kill(reg: Ledger, job_id: int, now: float | None = None,
        reason: str = "killed by an operator (KillJob)") -> list[Update]:
    """End a job: remove every entry, free its slots."""
    return end(reg, reg.job(job_id), now, END_KILLED, reason)


def expire(reg: Ledger, now: float) -> list[Update]:
    """End every job that has a member not heard from for more than ``worker_timeout``
    seconds (the longest-silent member is the one named)."""
    updates: list[Update] = []
    for job in list(reg.jobs.values()):
        silent = [w for w in job.workers.values() if now - w.last_seen > reg.timeout]
        if not silent:
            continue
        dead = min(silent, key=lambda w: (w.last_seen, w.rank))
        reason = (f"rank {dead.rank} ({format_ipv4(dead.ip)}:{dead.port}) sent no heartbeat "
                  f"for {now - dead.last_seen:.1f} s (worker_timeout {reg.timeout:g} s)")
        if len(silent) > 1:
            others = ", ".join(str(w.rank) for w in sorted(silent, key=lambda w: w.rank)
                               if w is not dead)
            reason += f"; also silent: rank(s) {others}"
        updates += end(reg, job, now, END_SILENT, reason, dead.rank, dead.last_seen)
    return updates


def end(reg: Ledger, job: Job, now: float | None, cause: str, reason: str,
       rank: int | None = None, last_seen: float | None = None,
       dead: str | None = None) -> list[Update]:
    """Remove every entry of ``job``, free its slots and record why it ended
    (``dead``: a PBox that is unreachable, not written to)."""
    reg.pop_job(job.job_id)
    reg.record_end(JobEnd(job.job_id, job.name, job.world_size, job.switch, job.where,
                          job.slots, cause, reason, now, rank, last_seen))
    updates: list[Update] = []
    if job.tree is not None:
        updates += [u for u in tree_writes(job, DELETE)
                    if not (isinstance(u, PBoxJobWrite) and u.pbox == dead)]
    elif not job.over_racks:
        updates.append(TableWrite(job.switch, DELETE, job_entries.jobs_key(job.job_id)))
    for worker in job.workers.values():
        updates += member_writes(job, worker, DELETE)
    for switch in job.fabric:
        reg.free(reg.switch_pools[switch], job.job_id)
    for part in job.rack_pboxes:
        reg.free(reg.pbox_pools[part.pbox], part.owner)
    if job.where == ON_SWITCH and not job.over_racks:
        reg.free(reg.switch_pools[job.switch], job.job_id)
        if job.workers:
            updates.append(GroupWrite(job.switch, DELETE, job.job_id))
    for part in job.parts:
        reg.free(reg.pbox_pools[part.pbox], part.owner)
        if part.pbox != dead:
            updates.append(PBoxJobWrite(part.pbox, DELETE, job.job_id))
    return updates


def barrier(reg: Ledger, job_id: int, rank: int, now: float) -> int:
    """Rank arrives at the job's barrier; returns the generation it waits on.
    The barrier is passed once ``barrier_passed(job_id, generation)``."""
    job = reg.job(job_id)
    reg.worker(job_id, rank).last_seen = now
    generation = job.barrier_generation
    job.barrier_waiting.add(rank)
    if len(job.barrier_waiting) == job.world_size:
        job.barrier_waiting.clear()
        job.barrier_generation += 1
    return generation


def barrier_passed(reg: Ledger, job_id: int, generation: int) -> bool:
    return reg.job(job_id).barrier_generation > generation


def _route(ip: int, slots: SlotRange, fallback: bool) -> dict:
    return {"aggregator": aggregator_address(ip), "slot_base": slots.base,
            "count": slots.count, "fallback": fallback}


def _check_join(name: str, world_size: int, rank: int, address: tuple[str, int]) -> tuple[int, int]:
    if not isinstance(name, str) or not 1 <= len(name) <= 255:
        raise JobError("a job name is 1..255 characters")
    if not isinstance(world_size, int) or not 1 <= world_size <= p.MAX_WORLD_SIZE:
        raise JobError(f"world size {world_size} outside 1..{p.MAX_WORLD_SIZE}")
    if not 0 <= rank < world_size:
        raise JobError(f"rank {rank} outside 0..{world_size - 1}")
    host, port = address
    try:
        ip = parse_ipv4(host)
    except ValueError as exc:
        raise JobError(str(exc)) from None
    if not 1 <= port <= 0xFFFF:
        raise JobError(f"UDP port {port} outside 1..65535")
    return ip, port


