"""Rebuilding the job registry after a controller restart, from what the switches and
PBoxes hold: every switch's jobs, members and result_dst entries (controller/core/jobs.py
lists what they carry), and each PBox's list_jobs. Jobs over racks are put back together
from their root spine's jobs entry and their leaves' (controller/core/tree.py); under a root
PBox, from its leaf's job_on_pbox entry and the leaves' partials addressed to it."""

from __future__ import annotations

from p4hub.controller.core import program as p
from p4hub.controller.core import rack
from p4hub.controller.core.errors import SwitchStateError
from p4hub.controller.core.job import ON_PBOX, ON_SWITCH, Job, JobError, Part, Worker, valid_epoch
from p4hub.controller.core.job_writes import part_write
from p4hub.controller.core.jobs import JobRegistry
from p4hub.controller.core.slots import SlotError, SlotRange
from p4hub.controller.core.topology import Topology, aggregator_address, parse_ipv4
from p4hub.controller.core.tree import TreeError, plan, plan_under_pbox
from p4hub.controller.core.updates import DELETE, MODIFY, Entry, TableWrite, Update


def rebuild_from_entries(
    topo: Topology, entries: dict[str, list[Entry]], now: float, epoch_seed: int = 1,
    pbox_jobs: dict[str, list[dict]] | None = None,
) -> tuple[JobRegistry, list[Update]]:
    """Rebuild the registry from the table entries read back from each switch, and
    the jobs each PBox reports (``pbox_jobs``: PBox -> its ``list_jobs``; a job's PBox
    ranges are there only: a PBox missing from it contributes none, and a PBox job's
    jobs-entry range is then taken to be on the rack's first PBox).

    Returns the registry and the repair writes: static rack entries that are
    missing, member/result entries that belong to no job (deleted), and a
    PBoxJobWrite MODIFY ("make sure it is there") per PBox range. Every
    rebuilt worker counts as seen at ``now``; barriers start over. Raises
    ``SwitchStateError`` naming the switch when its jobs entries make no sense
    (overlapping slots, a job on two switches, a PBox job on a rack without a PBox).
    """
    registry = JobRegistry(topo, epoch_seed)
    repairs: list[Update] = []
    max_epoch = 0
    spines = set(topo.spines())
    tables, found = _by_table(topo, entries)
    roots: dict[int, tuple[str, Entry]] = {}  # jobs over racks: job id -> its root entry
    leaves: dict[int, list[tuple[str, Entry]]] = {}  # ... and its leaves' entries
    rooted = {e.match_value(p.JOBS_JOB) for switch, e in found if switch in spines}
    under_pbox = _pbox_roots(topo, found, pbox_jobs or {})
    root_leaf = {job_id: topo.pboxes[name].switch for job_id, name in under_pbox.items()}
    rooted |= under_pbox.keys()
    for switch, entry in found:
        job_id = entry.match_value(p.JOBS_JOB)
        if switch in spines or root_leaf.get(job_id) == switch:
            roots[job_id] = (switch, entry)
        elif entry.action == p.ACT_JOB_ON_LEAF or job_id in rooted:
            # a leaf of a tree: it aggregates (job_on_leaf), or its rack's PBox does
            leaves.setdefault(job_id, []).append((switch, entry))
        else:
            try:
                job = _rebuild_job(registry, switch, entry)
            except (JobError, SlotError) as exc:
                raise SwitchStateError(f"switch {switch}: cannot rebuild job {job_id} from its "
                                       f"entries: {exc}") from None
            max_epoch = max(max_epoch, job.epoch)
    for job_id in sorted(roots.keys() | leaves.keys()):
        try:
            job = _rebuild_tree(registry, job_id, roots.get(job_id), leaves.get(job_id, []),
                                tables, under_pbox.get(job_id, ""))
        except (JobError, SlotError, TreeError) as exc:
            raise SwitchStateError(f"cannot rebuild job {job_id} over racks from its entries: "
                                   f"{exc}") from None
        max_epoch = max(max_epoch, job.epoch)
    for switch, switch_entries in sorted(entries.items()):
        repairs += _rebuild_workers(registry, switch, tables[switch], now)
        repairs += rack.reconcile(topo, switch, switch_entries)
    registry._next_epoch = valid_epoch(max(registry._next_epoch, max_epoch + 1))
    registry._last_job_id = max(registry.jobs, default=0)
    repairs += _rebuild_pbox_ranges(registry, pbox_jobs)
    return registry, repairs


def _by_table(topo: Topology, entries: dict[str, list[Entry]],
              ) -> tuple[dict[str, dict[str, list[Entry]]], list[tuple[str, Entry]]]:
    """Each switch's entries by table, and every jobs entry with its switch."""
    tables: dict[str, dict[str, list[Entry]]] = {}
    found: list[tuple[str, Entry]] = []
    for switch, switch_entries in sorted(entries.items()):
        if switch not in topo.switches:
            raise SwitchStateError(f"entries for switch {switch!r}, which the topology does not "
                                   "have")
        by_table = tables[switch] = {}
        for entry in switch_entries:
            by_table.setdefault(entry.table, []).append(entry)
        found += [(switch, entry) for entry in by_table.get(p.JOBS, [])]
    return tables, found


def _rebuild_pbox_ranges(registry: JobRegistry,
                         pbox_jobs: dict[str, list[dict]] | None) -> list[Update]:
    """Every job's PBox ranges (a one-rack job's from ``pbox_jobs``), under a new epoch
    if it has any, and the writes that make sure the PBoxes hold them."""
    repairs: list[Update] = []
    for job in sorted(registry.jobs.values(), key=lambda j: j.job_id):
        if job.tree is None:
            _rebuild_parts(registry, job, pbox_jobs)
        if job.parts:  # their epoch is in no entry; the agents resync once, needlessly
            job.epoch = registry.take_epoch()
        repairs += [part_write(job, part, MODIFY) for part in job.parts]
        repairs += registry.rack_pbox_writes(job, MODIFY)
    return repairs


def _pbox_roots(topo: Topology, found: list[tuple[str, Entry]],
                pbox_jobs: dict[str, list[dict]]) -> dict[int, str]:
    """Jobs over racks rooted at a PBox: job id -> the PBox, which a leaf's partials
    (job_on_leaf's up_ip) or a rack PBox's parent address name."""
    by_ip = {pb.ip: pb.name for pb in topo.pboxes.values()}
    out = {e.match_value(p.JOBS_JOB): by_ip[e.param("up_ip")] for _, e in found
           if e.action == p.ACT_JOB_ON_LEAF and e.param("up_ip") in by_ip}
    for listed in (job for jobs in pbox_jobs.values() for job in jobs):
        parent = listed.get("parent")
        if not isinstance(parent, dict):
            continue
        address = parent.get("address")
        host = address[0] if isinstance(address, list | tuple) else str(address).rpartition(":")[0]
        try:
            name = by_ip.get(parse_ipv4(str(host)))
        except ValueError:
            continue
        if name is not None:
            out.setdefault(int(listed["job_id"]), name)
    return out


def _rebuild_parts(registry: JobRegistry, job: Job, pbox_jobs: dict[str, list[dict]] | None,
                   ) -> None:
    """The job's PBox ranges: those its rack's PBoxes report (a PBox job's entry range
    at least, on the PBox that has it, else on the rack's first). PBoxes that did not
    answer (absent from ``pbox_jobs``; None: nothing is known of any) are noted in
    ``job.unheard``: the agents' map fills them in (``recover_unheard``)."""
    found: dict[str, tuple[int, int, int]] = {}  # PBox -> (base, count, floats)
    if pbox_jobs is not None:
        job.unheard = tuple(pb.name for pb in registry.topo.pboxes_of(job.switch)
                            if pb.name not in pbox_jobs)
    pbox_jobs = pbox_jobs or {}
    for pb in registry.topo.pboxes_of(job.switch):
        for listed in pbox_jobs.get(pb.name, []):
            if listed.get("job_id") == job.job_id and listed.get("world_size") == job.world_size:
                found[pb.name] = (int(listed["slot_base"]), int(listed["slot_count"]),
                                  int(listed.get("floats") or 0))
                if isinstance(listed.get("precision"), int | float):
                    job.precision = float(listed["precision"])  # only PBoxes keep it
    if job.where == ON_PBOX:
        entry_range = (job.slots.base, job.slots.count, 0)
        holder = next((name for name, got in found.items() if got == entry_range), None)
        if holder is None:
            holder = registry.topo.pboxes_of(job.switch)[0].name
            found[holder] = entry_range
        job.pbox = holder
    parts = []
    for pbox, (base, count, floats) in found.items():
        owner = (job.job_id, pbox, 0)
        try:
            got = registry.pbox_pools[pbox].reserve(owner, base, count)
        except SlotError as exc:
            raise SwitchStateError(f"job {job.job_id}: PBox {pbox}'s range {base}+{count} "
                                   f"cannot be rebuilt: {exc}") from None
        parts.append(Part(pbox, got, owner, floats if job.where == ON_SWITCH else 0))
    job.parts = tuple(sorted(parts, key=lambda part: part.slots.base))


def _rebuild_job(registry: JobRegistry, switch: str, entry: Entry) -> Job:
    job_id = entry.match_value(p.JOBS_JOB)
    base, count = entry.param("slot_base"), entry.param("slot_count")
    pbox = registry.topo.pbox_of(switch)
    if entry.action == p.ACT_JOB_ON_SWITCH:
        where, epoch = ON_SWITCH, entry.param("epoch")
        slots = registry.switch_pools[switch].reserve(job_id, base, count)
    elif entry.action == p.ACT_JOB_ON_PBOX and pbox is not None:
        # a PBox job's epoch is not in its entry: it gets a new one (_rebuild_parts)
        where, epoch = ON_PBOX, 0
        slots = SlotRange(base, count)
    else:
        raise JobError(f"jobs entry for job {job_id} on {switch} has action {entry.action!r}")
    if job_id in registry.jobs:
        raise JobError(f"job {job_id} appears on two switches")
    code = entry.param("lane_code")
    if code >= len(p.LANE_COUNTS):
        raise JobError(f"jobs entry for job {job_id} on {switch} has lane code {code}")
    job = Job(job_id, None, entry.param("name_tag"), entry.param("world_size"), switch, where,
              slots, epoch, pbox.name if pbox else None, p.LANE_COUNTS[code])
    registry.jobs[job_id] = job
    return job


def _rebuild_tree(registry: JobRegistry, job_id: int, root: tuple[str, Entry] | None,
                  leaves: list[tuple[str, Entry]],
                  tables: dict[str, dict[str, list[Entry]]], root_pbox: str) -> Job:
    """A job over racks from its root's jobs entry (a spine's, or a root PBox's leaf's)
    and its leaves' (whose parameters must say the same tree as ``tree.plan`` makes of
    them). A leaf with a job_on_pbox entry is a rack on its PBox: its workers are its
    member entries, its PBox range the tree's (the PBox is told again by the caller's
    repairs)."""
    if root is None or not leaves:
        raise JobError("its root's or its leaves' jobs entries are missing")
    spine, entry = root
    on_pbox = frozenset(leaf for leaf, e in leaves if e.action == p.ACT_JOB_ON_PBOX)
    ranks = {leaf: sorted(m.match_value(p.MEMBERS_RANK) for m in tables[leaf].get(p.MEMBERS, [])
                          if m.match_value(p.MEMBERS_JOB) == job_id) for leaf, _ in leaves}
    if root_pbox:
        planned = plan_under_pbox(registry.topo, root_pbox, ranks, on_pbox)
        on_pbox |= {spine}  # the root PBox's rack: its range is on the PBox
    else:
        sizes = {leaf: e.param("world_size") for leaf, e in leaves if leaf not in on_pbox}
        sizes.update((leaf, len(ranks[leaf])) for leaf in on_pbox)
        planned = plan(registry.topo, spine, sizes, on_pbox)
    base, count = entry.param("slot_base"), entry.param("slot_count")
    for leaf, e in leaves:
        node = planned.leaf(leaf)
        assert node is not None
        if leaf in on_pbox:
            same = (e.param("slot_base"), e.param("slot_count")) == (base, count)
        else:
            same = (e.param("child"), e.param("up_ip"), e.param("slot_base"),
                    e.param("slot_count"), e.param("total_size")) == (
                node.child, planned.root_ip, base, count, entry.param("world_size"))
        if not same:
            raise JobError(f"leaf {leaf}'s entry does not match the root {spine}'s")
    code = entry.param("lane_code")
    if code >= len(p.LANE_COUNTS):
        raise JobError(f"lane code {code}")
    switches = tuple(s for s in planned.switches if s not in on_pbox)
    for switch in switches:
        registry.switch_pools[switch].reserve(job_id, base, count)
    parts = []
    for name in [root_pbox] * bool(root_pbox) + [node.pbox for node in planned.leaves if node.pbox]:
        owner = (job_id, name, 0)
        parts.append(Part(name, registry.pbox_pools[name].reserve(owner, base, count), owner))
    first = registry.topo.pbox_of(planned.leaves[0].switch)
    # a root PBox's job_on_pbox entry has no epoch: the leaves' have it, or a new one
    epoch = (entry.param("epoch") if not root_pbox else
             next((e.param("epoch") for _, e in leaves if e.action == p.ACT_JOB_ON_LEAF),
                  registry.take_epoch()))
    job = Job(job_id, None, entry.param("name_tag"), entry.param("world_size"), spine, ON_SWITCH,
              SlotRange(base, count), epoch, first.name if first else None,
              p.LANE_COUNTS[code], fabric=switches, tree=planned, rack_pboxes=tuple(parts),
              root_pbox=root_pbox)
    registry.jobs[job_id] = job
    return job


def _rebuild_workers(
    registry: JobRegistry, switch: str, by_table: dict[str, list[Entry]], now: float
) -> list[Update]:
    # a member and its RESULT copy pair up by (job, bit index): result_dst is keyed on
    # the bit (program.result_rid), the members entry carries it as is_member's parameter
    members = {
        (e.match_value(p.MEMBERS_JOB), _member_bit(e)): e
        for e in by_table.get(p.MEMBERS, [])
    }
    stale: list[Update] = []
    for entry in by_table.get(p.RESULT_DST, []):
        job_id, bit = p.split_rid(entry.match_value(p.RESULT_DST_RID))
        member = members.pop((job_id, bit), None)
        job = registry.jobs.get(job_id)
        if job is not None and job.tree is not None and switch == job.tree.root \
                and not job.tree.root_pbox:
            continue  # the root's members are the leaves (tree.root_entries), not workers
        host = registry.topo.host_by_ip(entry.param("ip"))
        on_it = job is not None and (job.switch == switch or switch in job.fabric
                                     or (job.tree is not None and switch in job.tree.switches))
        if job is None or not on_it or member is None or host is None:
            stale.append(TableWrite(switch, DELETE, Entry(entry.table, entry.match)))
            if member is not None:
                stale.append(TableWrite(switch, DELETE, Entry(member.table, member.match)))
            continue
        rank = member.match_value(p.MEMBERS_RANK)
        job.workers[rank] = Worker(rank, entry.param("ip"), entry.param("udp_port"),
                                   entry.param("mac"), host.port, now, switch=switch, bit=bit)
    for (job_id, _), member in members.items():  # members without a result_dst entry
        job = registry.jobs.get(job_id)
        rank = member.match_value(p.MEMBERS_RANK)
        if job is not None and job.tree is not None and job.tree.root_pbox \
                and switch == job.tree.root and any(leaf.child == rank for leaf in job.tree.leaves):
            continue  # a rack's partials into a root PBox (tree.root_entries)
        stale.append(TableWrite(switch, DELETE, Entry(member.table, member.match)))
    return stale


def _member_bit(entry: Entry) -> int:
    """A members entry's bit index (is_member's parameter)."""
    return entry.param("bit_index")


def recover_unheard(registry: JobRegistry, job: Job,
                    routes: list[tuple[str, int, int, bool]] | None) -> bool:
    """The PBox routes of a heartbeat's agent map (controller/core/traffic.py
    ``pbox_routes``: aggregator "ip:port", slot base, count, whether it is the float
    route) for a job rebuilt while some of its rack's PBoxes did not answer: its ranges
    on those PBoxes are the map's routes to them (a PBox's share and the float route
    after it make one range; a guessed jobs-entry range there is dropped first). Once a well-formed map
    came (``routes`` not None), the job has no unheard PBox left; a PBox that is still
    unreachable is then lost the ordinary way (``check_pboxes``). True when the job's
    parts changed."""
    if not job.unheard or routes is None:
        return False
    by_address = {aggregator_address(pb.ip): pb.name
                  for pb in registry.topo.pboxes_of(job.switch) if pb.name in job.unheard}
    before = job.parts
    kept: list[Part] = []
    for part in job.parts:
        if part.pbox in job.unheard:
            registry.pbox_pools[part.pbox].free(part.owner)
        else:
            kept.append(part)
    recovered: list[Part] = []
    for pbox, (base, count, floats) in _ranges_by_pbox(routes, by_address).items():
        owner = (job.job_id, pbox, 0)
        try:
            recovered.append(Part(pbox, registry.pbox_pools[pbox].reserve(owner, base, count),
                                  owner, floats))
        except SlotError:
            continue  # not this job's to claim; the agents' resync will show the gap
    job.parts = tuple(sorted((*kept, *recovered), key=lambda part: part.slots.base))
    job.unheard = ()
    if job.where == ON_PBOX:
        job.pbox = next((pt.pbox for pt in job.parts if pt.slots == job.slots), job.pbox)
    return [(pt.pbox, pt.slots) for pt in job.parts] != [(pt.pbox, pt.slots) for pt in before]



def _ranges_by_pbox(routes: list[tuple[str, int, int, bool]],
                    by_address: dict[str, str]) -> dict[str, tuple[int, int, int]]:
    """PBox -> (base, count, float slots) of its range, from its routes in an agent map:
    its share's route, the float route, or the share's followed by the float route (one
    range, as the controller allocates them); a PBox whose routes make no such range is
    left out (first routes kept)."""
    out: dict[str, tuple[int, int, int]] = {}
    for address, base, count, is_float in routes:
        pbox = by_address.get(address)
        if pbox is None:
            continue
        have = out.get(pbox)
        if have is None:
            out[pbox] = (base, count, count if is_float else 0)
        elif is_float and not have[2] and have[0] + have[1] == base:
            out[pbox] = (have[0], have[1] + count, count)
    return out
