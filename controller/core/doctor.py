"""``p4hub doctor``: why is a job stuck? Snapshots in, findings out (sans-I/O).

The controller (``controller/snapshot.py``) gathers one snapshot of everything that
says how a job is doing: its own view (members and when each was last heard from),
the switch's (the job's entries and multicast group, the per-job and per-switch
drop counters, and the slot registers over the job's slot range) and, for a job on
a PBox, the PBox's (its job configuration and counters). ``diagnose`` turns that into
findings in words; nothing here touches a socket or a clock.

How a cell reads (aggregate.p4, register index ``slot*2 + shadow set``): a cell whose
``slot_owner`` is not the job's epoch belongs to an earlier job (this one has not used
it); otherwise ``slot_counter`` is the contributions of the round in progress mod n,
so a counter of 0 is a complete (or idle) cell and any other value an *open* round,
whose ``slot_bitmap`` has a bit per rank that contributed to it. A rank missing from
open cells is what holds the job up. The registers do not say how old a round is, so
the cells are read twice, ``settle`` seconds apart: an open cell that did not change
in between is *stuck*, and a rank missing from every stuck cell is almost always a
dead or stalled worker (a rank merely behind the others fills its cells meanwhile).
Without a second read every open cell counts as stuck.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

ERROR = "error"  # the job cannot make progress, or the switch/PBox disagrees with us
WARNING = "warning"  # something is wrong or suspicious; the job may still progress
INFO = "info"  # context; does not make a job unhealthy
SEVERITIES = (ERROR, WARNING, INFO)

# A member silent for this long (or half its worker_timeout, if less) is named before
# worker_timeout ends its job: agents heartbeat every 1-2 s, so this is three or more
# missed beats.
SILENT_AFTER = 6.0
MANY_RESENDS = 0.25  # retransmissions per first transmission worth a warning
MAX_LISTED_CELLS = 8  # open cells spelled out in a finding's words (all are in ``cells``)


@dataclass(frozen=True)
class Member:
    rank: int
    address: str  # "ip:port"
    idle_s: float  # seconds since the controller last heard from it


@dataclass(frozen=True)
class JobView:
    """The controller's view of one job."""

    job_id: int
    name: str | None
    world_size: int
    where: str  # "switch" | "pbox"
    switch: str
    pbox: str | None
    slot_base: int
    slot_count: int
    epoch: int
    lanes: int
    worker_timeout: float
    members: tuple[Member, ...]
    # What the switch's jobs entry should say: action and parameters.
    expected_action: str
    expected_params: tuple[tuple[str, int], ...]
    expected_group: tuple[tuple[int, int], ...] | None  # (port, rid); None: PBox job
    # the job's aggregator changes, oldest first: (seconds ago or None, epoch, why)
    moves: tuple[tuple[float | None, int, str], ...] = ()
    # from its agents' heartbeats (controller/core/traffic.py): result bytes/s per worker and
    # retransmissions per first transmission; None when not reported
    service: tuple[float | None, float | None] = (None, None)


@dataclass(frozen=True)
class Cell:
    slot: int
    shadow: int
    owner: int  # slot_owner: the epoch of the job instance that last used the cell
    bitmap: int  # slot_bitmap
    counter: int  # slot_counter


@dataclass(frozen=True)
class SwitchView:
    """What the switch holds for the job; ``error`` when it could not be read at all."""

    error: str | None = None
    job_action: str | None = None  # the jobs entry's action; None: no entry
    job_params: tuple[tuple[str, int], ...] = ()
    member_ranks: frozenset[int] = frozenset()  # ranks with a members entry
    result_ranks: frozenset[int] = frozenset()  # ranks with a result_dst entry
    group: tuple[tuple[int, int], ...] | None = None  # the job's multicast group as read
    group_error: str | None = None  # why the group could not be read
    cells: tuple[Cell, ...] | None = None  # the job's cells; None: registers not read
    cells_error: str | None = None  # why not
    cells_before: tuple[Cell, ...] | None = None  # the same, read ``settle`` s earlier
    job_stats: dict[str, int] = field(default_factory=dict)  # kind -> packets (job_stats)
    agg_errors: dict[str, int] = field(default_factory=dict)  # reason -> packets (switch-wide)


@dataclass(frozen=True)
class PBoxView:
    """What the PBox holds for the job (a PBox job only)."""

    name: str
    error: str | None = None  # unreachable, or refused the request
    job: dict | None = None  # its list_jobs entry for the job; None: not configured
    stats: dict | None = None  # its per-job counters (hosts.pbox.job_config.JobStats.as_dict)
    cells: tuple[Cell, ...] | None = None  # its open cells (owner: the job's epoch)
    cells_error: str | None = None  # why they could not be read
    cells_before: tuple[Cell, ...] | None = None  # the same, read ``settle`` s earlier


@dataclass(frozen=True)
class Finding:
    severity: str  # ERROR | WARNING | INFO
    code: str  # a stable name for machines (``--json``)
    message: str  # the finding in words
    ranks: tuple[int, ...] = ()  # the ranks it is about, if any


@dataclass(frozen=True)
class OpenCell:
    slot: int
    shadow: int
    bitmap: int
    counter: int
    contributed: tuple[int, ...]
    missing: tuple[int, ...]
    stuck: bool  # unchanged since the earlier read (True when there was none)


@dataclass(frozen=True)
class Report:
    job_id: int
    healthy: bool
    findings: tuple[Finding, ...]
    open_cells: tuple[OpenCell, ...] | None  # None: the slot state could not be read

    def as_dict(self) -> dict:
        return asdict(self)


def diagnose(job: JobView, switch: SwitchView, pbox: PBoxView | None,
             silent_after: float = SILENT_AFTER, settle: float = 0.0) -> Report:
    """Everything wrong with ``job``, worst first; healthy when nothing is an error or a
    warning."""
    findings: list[Finding] = []
    findings += _members(job, silent_after)
    findings += _moves(job)
    findings += _service(job)
    findings += _switch_entries(job, switch)
    open_cells = None
    if job.where == "switch" and switch.error is None:
        open_cells = _open_cells(job, switch.cells, switch.cells_before)
        findings += _slots(job, open_cells, settle, f"the slot registers could not be read "
                                                    f"({switch.cells_error})")
    elif job.where != "switch":  # the switch's registers say nothing about a PBox job
        findings += _pbox(job, pbox)
        if pbox is not None and pbox.error is None and pbox.job is not None:
            open_cells = _open_cells(job, pbox.cells, pbox.cells_before)
            findings += _slots(job, open_cells, settle, f"PBox {pbox.name}'s slot state could "
                                                        f"not be read ({pbox.cells_error})")
    findings += _drops(job, switch)
    findings.sort(key=lambda f: SEVERITIES.index(f.severity))
    healthy = not any(f.severity in (ERROR, WARNING) for f in findings)
    if healthy:
        findings.insert(0, Finding(INFO, "healthy", f"job {job.job_id}: healthy"))
    return Report(job.job_id, healthy, tuple(findings),
                  tuple(open_cells) if open_cells is not None else None)


# -- the controller's view -------------------------------------------------------------


def _members(job: JobView, silent_after: float) -> list[Finding]:
    out = []
    joined = {m.rank for m in job.members}
    absent = [r for r in range(job.world_size) if r not in joined]
    if absent:
        out.append(Finding(ERROR, "ranks-not-joined",
                           f"{len(joined)} of {job.world_size} ranks joined; rank(s) "
                           f"{_ranks(absent)} never joined, so no round can complete",
                           tuple(absent)))
    threshold = min(silent_after, job.worker_timeout / 2)
    for m in sorted(job.members, key=lambda m: -m.idle_s):
        if m.idle_s > threshold:
            left = job.worker_timeout - m.idle_s
            out.append(Finding(ERROR, "worker-silent",
                               f"rank {m.rank} ({m.address}) has not been heard from for "
                               f"{m.idle_s:.1f} s; the controller ends the job after "
                               f"{job.worker_timeout:g} s ({max(left, 0.0):.1f} s left)",
                               (m.rank,)))
    return out


def _service(job: JobView) -> list[Finding]:
    rate, ratio = job.service
    if ratio is None or ratio < MANY_RESENDS:
        return []
    speed = "" if rate is None else f", {rate / 1e6:.3f} MB/s of results per worker"
    return [Finding(WARNING, "many-resends",
                    f"{100 * ratio:.0f}% of the job's packets are retransmissions (moving "
                    f"average over its workers' heartbeats{speed}): loss or congestion on its "
                    "path, or a rank holding rounds up")]


def _moves(job: JobView) -> list[Finding]:
    """The latest change of aggregator (restart or move): context for a stall around it
    (the agents resynchronise onto it within a heartbeat or two)."""
    if not job.moves:
        return []
    ago, epoch, why = job.moves[-1]
    when = "" if ago is None else f" {ago:.1f} s ago"
    more = f" ({len(job.moves)} changes in all)" if len(job.moves) > 1 else ""
    return [Finding(INFO, "aggregator-changed",
                    f"the job's aggregator state was lost or moved{when}: {why}; epoch {epoch},"
                    f" its agents resynchronise on their next heartbeat{more}")]


# -- the switch's entries and group ---------------------------------------------------------


def _switch_entries(job: JobView, sw: SwitchView) -> list[Finding]:
    if sw.error is not None:
        return [Finding(ERROR, "switch-unreachable",
                        f"switch {job.switch} could not be read: {sw.error}")]
    out = []
    if sw.job_action is None:
        out.append(Finding(ERROR, "job-entry-missing",
                           f"switch {job.switch} has no jobs entry for job {job.job_id}: every "
                           "contribution is dropped as an unknown job"))
    elif (sw.job_action, dict(sw.job_params)) != (job.expected_action,
                                                  dict(job.expected_params)):
        have = dict(sw.job_params)
        diff = ", ".join(f"{k}={have.get(k)} (want {v})" for k, v in job.expected_params
                         if have.get(k) != v)
        if sw.job_action != job.expected_action:
            diff = f"action {sw.job_action} (want {job.expected_action})" + (
                f", {diff}" if diff else "")
        out.append(Finding(ERROR, "job-entry-differs",
                           f"switch {job.switch}'s jobs entry for job {job.job_id} differs from "
                           f"the controller's: {diff}"))
    joined = sorted(m.rank for m in job.members)
    for present, code, table, effect in (
        (sw.member_ranks, "member-entry-missing", "members", "their contributions are rejected"),
        (sw.result_ranks, "result-entry-missing", "result_dst",
         "results are not delivered to them"),
    ):  # fmt: skip
        missing = [r for r in joined if r not in present]
        if missing:
            out.append(Finding(ERROR, code, f"switch {job.switch} has no {table} entry for "
                               f"rank(s) {_ranks(missing)}: {effect}", tuple(missing)))
    extra = sorted((sw.member_ranks | sw.result_ranks) - set(joined))
    if extra:
        out.append(Finding(WARNING, "stale-member-entries",
                           f"switch {job.switch} has entries for rank(s) {_ranks(extra)} of "
                           f"job {job.job_id}, which the controller does not know",
                           tuple(extra)))
    if job.expected_group is not None:
        if sw.group_error is not None:
            out.append(Finding(INFO, "group-unread",
                               f"multicast group {job.job_id} could not be read back: "
                               f"{sw.group_error}"))
        elif sw.group is None:
            out.append(Finding(ERROR, "group-missing",
                               f"switch {job.switch} has no multicast group {job.job_id}: "
                               "completed rounds reach nobody"))
        elif sorted(sw.group) != sorted(job.expected_group):
            out.append(Finding(ERROR, "group-differs",
                               f"multicast group {job.job_id} on {job.switch} has (port, rid) "
                               f"{sorted(sw.group)}, the controller wrote "
                               f"{sorted(job.expected_group)}"))
    return out


# -- slot state ------------------------------------------------------------------------


def _open_cells(job: JobView, cells: tuple[Cell, ...] | None,
                before: tuple[Cell, ...] | None) -> list[OpenCell] | None:
    if cells is None:
        return None
    earlier = None if before is None else {(c.slot, c.shadow): c for c in before}
    everyone = set(range(job.world_size))
    out = []
    for c in sorted(cells, key=lambda c: (c.slot, c.shadow)):
        if c.owner != job.epoch or c.counter == 0:
            continue  # another job instance's cell, or no round in progress
        contributed = {r for r in everyone if c.bitmap >> r & 1}
        stuck = earlier is None or earlier.get((c.slot, c.shadow)) == c
        out.append(OpenCell(c.slot, c.shadow, c.bitmap, c.counter, tuple(sorted(contributed)),
                            tuple(sorted(everyone - contributed)), stuck))
    return out


def _slots(job: JobView, open_cells: list[OpenCell] | None, settle: float,
           unread: str) -> list[Finding]:
    if open_cells is None:
        return [Finding(INFO, "slots-unread",
                        f"{unread}; which ranks a round waits for is unknown")]
    if not open_cells:
        return []
    out = []
    stuck = [c for c in open_cells if c.stuck]
    if stuck:
        out += _waiting_for(job, stuck, settle)
    moving = [c for c in open_cells if not c.stuck]
    if moving:
        out.append(Finding(INFO, "rounds-in-flight",
                           f"{len(moving)} open cell(s) of job {job.job_id} progressed in the "
                           f"last {settle:g} s: rounds in flight"))
    return out


def _waiting_for(job: JobView, open_cells: list[OpenCell], settle: float) -> list[Finding]:
    """Which ranks the stuck cells wait for: those missing from every one are named."""
    lacking: dict[int, int] = {}
    for cell in open_cells:
        for r in cell.missing:
            lacking[r] = lacking.get(r, 0) + 1
    total = len(open_cells)
    everywhere = sorted(r for r, n in lacking.items() if n == total)
    listed = "; ".join(f"slot {c.slot}/{c.shadow}: has {_ranks(c.contributed) or 'none'}, "
                       f"waits for {_ranks(c.missing)}" for c in open_cells[:MAX_LISTED_CELLS])
    more = f"; ... {total - MAX_LISTED_CELLS} more" if total > MAX_LISTED_CELLS else ""
    still = f", unchanged for {settle:g} s" if settle else ""
    out = []
    if everywhere:
        out.append(Finding(ERROR, "ranks-not-contributing",
                           f"rank(s) {_ranks(everywhere)} have not contributed to any of the "
                           f"{total} open cell(s) of job {job.job_id}{still}: {listed}{more}"
                           "; if the process runs, `p4hub-selftest` on its host checks its "
                           "path to the aggregator", tuple(everywhere)))
    partly = sorted(r for r, n in lacking.items() if n < total)
    if partly:
        counts = ", ".join(f"rank {r}: {lacking[r]}" for r in partly)
        out.append(Finding(WARNING, "cells-stuck",
                           f"{total} open cell(s) of job {job.job_id}{still}; cells each rank "
                           f"has not contributed to: {counts}"
                           + ("" if everywhere else f" ({listed}{more})"), tuple(partly)))
    return out


# -- the PBox ---------------------------------------------------------------------------


def _pbox(job: JobView, pbox: PBoxView | None) -> list[Finding]:
    if pbox is None:
        return [Finding(INFO, "pbox-unread", f"PBox {job.pbox} has no control address: its "
                        "state is unknown")]
    if pbox.error is not None:
        return [Finding(ERROR, "pbox-unreachable", f"PBox {pbox.name}: {pbox.error}")]
    if pbox.job is None:
        return [Finding(ERROR, "pbox-job-missing",
                        f"PBox {pbox.name} does not have job {job.job_id}: contributions "
                        "forwarded to it are dropped (the controller re-asserts PBox jobs "
                        "every second; a PBox that keeps losing it is restarting)")]
    out = []
    want = {"world_size": job.world_size, "slot_base": job.slot_base,
            "slot_count": job.slot_count, "lanes": job.lanes}
    diff = {k: (pbox.job.get(k), v) for k, v in want.items() if pbox.job.get(k) != v}
    if diff:
        out.append(Finding(ERROR, "pbox-job-differs",
                           f"PBox {pbox.name} has job {job.job_id} as "
                           + ", ".join(f"{k}={have} (want {w})" for k, (have, w) in diff.items())))
    stats = pbox.stats or {}
    rejected = {k: v for k, v in (stats.get("rejected") or {}).items() if v}
    if rejected:
        out.append(Finding(WARNING, "pbox-rejected",
                           f"PBox {pbox.name} rejected packets of job {job.job_id}: "
                           + ", ".join(f"{v} for {k}" for k, v in sorted(rejected.items()))
                           + _PBOX_REASONS_HINT))
    return out


_PBOX_REASONS_HINT = (" (type: not a contribution; lanes: wrong lane count; rank/slot/count: "
                      "outside the job; address: a rank seen from another address; shard: "
                      "steered to the wrong core)")


# -- drop counters ----------------------------------------------------------------------


def _drops(job: JobView, sw: SwitchView) -> list[Finding]:
    if sw.error is not None:
        return []
    out = []
    stats = sw.job_stats
    rejected = stats.get("rejected", 0)
    if rejected:
        out.append(Finding(WARNING, "switch-rejected",
                           f"switch {job.switch} rejected {rejected} packet(s) of job "
                           f"{job.job_id}: not a member (wrong rank, source address or port), a "
                           "bad header (version, type, lane count, count) or a slot outside "
                           f"{job.slot_base}..{job.slot_base + job.slot_count - 1}"))
    new, dup = stats.get("contributions", 0), stats.get("duplicates", 0)
    if job.where == "switch" and new + dup and dup > new / 10:
        out.append(Finding(INFO, "retransmissions",
                           f"{dup} of {new + dup} contributions of job {job.job_id} were "
                           "retransmissions: packets are lost, or the agents' timeout is short"))
    if job.where == "switch" and not new and job.members:
        out.append(Finding(INFO, "no-contributions",
                           f"no contribution of job {job.job_id} has reached switch "
                           f"{job.switch} yet"))
    unknown = sw.agg_errors.get("unknown_job", 0)
    if unknown:
        out.append(Finding(INFO, "unknown-job-drops",
                           f"switch {job.switch} dropped {unknown} contribution(s) naming a job "
                           "it does not have (any job: stragglers of ended jobs, or a worker "
                           "using a wrong job id)"))
    spoofed = sw.agg_errors.get("spoofed_source", 0)
    if spoofed:
        out.append(Finding(WARNING, "spoofed-source",
                           f"switch {job.switch} dropped {spoofed} packet(s) carrying an "
                           "aggregator's source address from a port that is not the aggregator's"))
    return out


def _ranks(ranks: tuple[int, ...] | list[int]) -> str:
    return ", ".join(str(r) for r in ranks)


def render(report: dict) -> str:
    """A report (``Report.as_dict()``, as the job API sends it) for people: one line per
    finding, worst first, then the open cells' bitmaps."""
    marks = {ERROR: "ERROR", WARNING: "WARN ", INFO: "info "}
    lines = [f"{marks.get(f['severity'], f['severity'])}  {f['message']}"
             for f in report["findings"]]
    cells = report.get("open_cells") or []
    if cells:
        lines.append("open cells (slot/shadow  counter  bitmap  waiting for ranks):")
        lines += [f"  {c['slot']}/{c['shadow']}  {c['counter']}  {c['bitmap']:#010x}  "
                  f"{_ranks(c['missing'])}{'' if c['stuck'] else '  (moving)'}" for c in cells]
    return "\n".join(lines)


def ended_report(job_id: int, message: str, rank: int | None) -> Report:
    """The report on a job that has already ended (``message`` says why)."""
    return Report(job_id, False, (Finding(ERROR, "job-ended", message,
                                          () if rank is None else (rank,)),), None)
