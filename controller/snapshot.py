"""The I/O half of ``p4hub doctor`` (controller/core/doctor.py is the other): one snapshot of a job, then ``doctor.diagnose``.

Reads, for one job: the controller's registry (members, when each was last heard
from), the switch over P4Runtime (every table entry, the job's multicast group, its
``job_stats`` cells and the switch's ``agg_errors``, and the ``slot_owner`` /
``slot_bitmap`` / ``slot_counter`` registers over the job's cells, in one
ReadRequest), and for a PBox job the PBox over its control channel (``list_jobs``,
``stats``). A read that fails becomes part of the snapshot (an error string), never
an exception: a doctor must speak most when things are broken.

Register reads: p4lite-switch serves RegisterEntry reads; real simple_switch_grpc
answers UNIMPLEMENTED ("Register reads are not supported yet"), and the report then
says the slot state is unknown (its multicast group reads work).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from p4.v1 import p4runtime_pb2

from p4hub.controller.core import program as p
from p4hub.controller.core.doctor import (
    INFO,
    Cell,
    Finding,
    JobView,
    Member,
    PBoxView,
    Report,
    SwitchView,
    diagnose,
)
from p4hub.controller.core.entries import decode_value
from p4hub.controller.core.errors import UnavailableError
from p4hub.controller.core.job import ON_SWITCH, Job, UnknownJobError
from p4hub.controller.core.job_writes import job_entry
from p4hub.controller.core.p4info_index import EntryError
from p4hub.controller.core.topology import format_ipv4
from p4hub.controller.driver import Controller, ControllerError
from p4hub.controller.p4rt_client import P4RuntimeError


class PBoxReader(Protocol):
    """What the doctor asks a PBox (``controller.pbox_control.PBoxControl``)."""

    def jobs(self, pbox: str) -> list[dict]: ...

    def stats(self, pbox: str) -> dict[str, dict]: ...

    def open_cells(self, pbox: str, job_id: int) -> list[tuple[int, int, int, int]]: ...


def doctor(ctl: Controller, job_id: int, clock: Callable[[], float],
           pboxes: PBoxReader | None = None, settle: float = 1.0,
           sleep: Callable[[float], None] = time.sleep) -> Report:
    """Diagnose one running job (UnknownJobError when there is none). The slot state is
    read twice, ``settle`` seconds apart (``sleep``, without holding the controller's
    lock), so that the diagnosis tells stuck rounds from rounds in flight."""
    with ctl.lock:
        job = ctl.registry.job(job_id)
        if job.over_racks:
            return Report(job_id, False, (Finding(
                INFO, "not-checked", f"job {job_id} spans racks (or waits for its workers to "
                "know its racks): the doctor reads one switch and does not check such jobs "
                "yet; `p4hub job show` gives the tree's per-switch counters"),), None)
        before = _read_cells(ctl, job)[0] if job.where == ON_SWITCH and settle else None
    pbox_before = None
    if job.where != ON_SWITCH and settle:
        first = read_pbox(pboxes, job)
        pbox_before = first.cells if first is not None else None
    if settle:
        sleep(settle)
    with ctl.lock:
        if ctl.registry.jobs.get(job_id) is not job:  # it ended meanwhile
            raise UnknownJobError(f"job {job_id} ended during the diagnosis")
        view = job_view(ctl, job, clock())
        switch = replace(read_switch(ctl, job), cells_before=before)
    pbox = read_pbox(pboxes, job) if job.where != ON_SWITCH else None
    if pbox is not None:
        pbox = replace(pbox, cells_before=pbox_before)
    return diagnose(view, switch, pbox, settle=settle)


def job_view(ctl: Controller, job: Job, now: float) -> JobView:
    entry = job_entry(job)
    group = None
    if job.where == ON_SWITCH:
        group = ctl.registry.expected_groups(job.switch).get(job.job_id, ())
    members = tuple(Member(w.rank, f"{format_ipv4(w.ip)}:{w.port}", now - w.last_seen)
                    for _, w in sorted(job.workers.items()))
    return JobView(job.job_id, job.name, job.world_size, job.where, job.switch, job.pbox,
                   job.slots.base, job.slots.count, job.epoch, job.lanes,
                   ctl.registry.timeout, members, entry.action, entry.params, group,
                   tuple((None if m.at is None else now - m.at, m.epoch, m.reason)
                         for m in job.moves), _service(job))


def _service(job: Job) -> tuple[float | None, float | None]:
    rates = job.service()
    return rates["result_bytes_per_s"], rates["resend_ratio"]


def read_switch(ctl: Controller, job: Job) -> SwitchView:
    """The switch's side of ``job``; a switch that cannot be read at all gives ``error``."""
    try:
        entries = ctl.read_entries(job.switch)
        stats = {kind: packets for kind, (packets, _) in ctl.job_counters(job.job_id).items()}
        errors = {name: ctl.counter(job.switch, p.AGG_ERRORS, i)["packets"]
                  for i, name in enumerate(p.AGG_ERROR_NAMES)}
    except ControllerError as exc:
        return SwitchView(error=str(exc))
    action: str | None = None
    params: tuple[tuple[str, int], ...] = ()
    members: set[int] = set()
    result_bits: set[int] = set()
    # result_dst is keyed on a member's bit index (program.result_rid): the members
    # entries (and the registry, for a result entry whose member entry is gone) say
    # whose; on one switch it is the rank (Worker.bit), the fallback for a stray entry
    rank_of_bit = {w.bit: w.rank for w in job.workers.values()}
    for e in entries:
        if e.table == p.JOBS and e.match_value(p.JOBS_JOB) == job.job_id:
            action, params = e.action, e.params
        elif e.table == p.MEMBERS and e.match_value(p.MEMBERS_JOB) == job.job_id:
            members.add(e.match_value(p.MEMBERS_RANK))
            rank_of_bit[e.param("bit_index")] = e.match_value(p.MEMBERS_RANK)
        elif e.table == p.RESULT_DST:
            owner, bit = p.split_rid(e.match_value(p.RESULT_DST_RID))
            if owner == job.job_id:
                result_bits.add(bit)
    results = {rank_of_bit.get(bit, bit) for bit in result_bits}
    group: tuple[tuple[int, int], ...] | None = None
    group_error: str | None = None
    if job.where == ON_SWITCH:
        group, group_error = _read_group(ctl, job.switch, job.job_id)
    cells, cells_error = _read_cells(ctl, job) if job.where == ON_SWITCH else (None, None)
    return SwitchView(job_action=action, job_params=params, member_ranks=frozenset(members),
                      result_ranks=frozenset(results), group=group, group_error=group_error,
                      cells=cells, cells_error=cells_error, job_stats=stats, agg_errors=errors)


def _read_group(ctl: Controller, switch: str,
                group_id: int) -> tuple[tuple[tuple[int, int], ...] | None, str | None]:
    entity = p4runtime_pb2.Entity()
    entity.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = group_id
    try:
        got = ctl.clients[switch].read([entity])
    except P4RuntimeError as exc:
        if exc.code == "NOT_FOUND":
            return None, None
        return None, str(exc)
    for e in got:
        group = e.packet_replication_engine_entry.multicast_group_entry
        if group.multicast_group_id == group_id:
            return tuple((_replica_port(r), r.instance) for r in group.replicas), None
    return None, None


def _replica_port(replica: p4runtime_pb2.Replica) -> int:
    if replica.WhichOneof("port_kind") == "port":
        return decode_value(replica.port)
    return replica.egress_port


CELL_REGISTERS = (p.SLOT_OWNER, p.SLOT_BITMAP, p.SLOT_COUNTER)


def _read_cells(ctl: Controller, job: Job) -> tuple[tuple[Cell, ...] | None, str | None]:
    """The job's 2 * slot_count cells, every register in one ReadRequest."""
    first, count = 2 * job.slots.base, 2 * job.slots.count
    try:
        entities = [ctl.codec.register_read(name, first + i)
                    for name in CELL_REGISTERS for i in range(count)]
        got = ctl.clients[job.switch].read(entities)
    except (P4RuntimeError, EntryError) as exc:
        return None, str(exc)
    ids = {ctl.codec.index.register(name).id: name for name in CELL_REGISTERS}
    values: dict[str, dict[int, int]] = {name: {} for name in CELL_REGISTERS}
    for e in got:
        name = ids.get(e.register_entry.register_id)
        if name is not None:
            values[name][e.register_entry.index.index] = decode_value(
                e.register_entry.data.bitstring)
    cells = []
    for index in range(first, first + count):
        if any(index not in values[name] for name in CELL_REGISTERS):
            return None, f"the switch's answer lacks register cell {index}"
        cells.append(Cell(index // 2, index % 2, values[p.SLOT_OWNER][index],
                          values[p.SLOT_BITMAP][index], values[p.SLOT_COUNTER][index]))
    return tuple(cells), None


def read_pbox(pboxes: PBoxReader | None, job: Job) -> PBoxView | None:
    if pboxes is None or job.pbox is None:
        return None
    try:
        configured = [j for j in pboxes.jobs(job.pbox) if j.get("job_id") == job.job_id]
        stats = pboxes.stats(job.pbox).get(str(job.job_id))
    except UnavailableError as exc:  # PBoxControlError: unreachable or refused
        return PBoxView(job.pbox, error=str(exc))
    if not configured:
        return PBoxView(job.pbox, None, None, stats)
    try:  # a PBox older than the open_cells command refuses it: slot state unknown
        cells = tuple(Cell(slot, shadow, job.epoch, bitmap, counter)
                      for slot, shadow, bitmap, counter in pboxes.open_cells(job.pbox, job.job_id))
    except UnavailableError as exc:
        return PBoxView(job.pbox, None, configured[0], stats, None, str(exc))
    return PBoxView(job.pbox, None, configured[0], stats, cells)
