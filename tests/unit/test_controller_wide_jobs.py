"""Jobs of more than MAX_WORKERS (32) ranks: a tree over the racks of a leaf-spine fabric,
at most 32 workers a rack, where each worker's bit in its leaf's cells is not its rank
(controller/core/job.py ``Worker.bit``): the registry's entries, its refusals, a rebuild,
and the real controller making p4lite switches (and a rack's PBox) sum 40 ranks exactly
over P4Runtime."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from p4hub.controller.core import program as p
from p4hub.controller.core import topology
from p4hub.controller.core.job import PLACE_PBOX, JobError
from p4hub.controller.core.jobs import JobRegistry
from p4hub.controller.core.rebuild import rebuild_from_entries
from p4hub.controller.core.updates import GroupWrite, PBoxJobWrite, TableWrite
from p4hub.controller.driver import PipelineConfig
from tests.support.fabric import compile_pipeline
from tests.unit.test_controller_tree import (
    AGENT_PORT,
    PBoxCores,
    Wired,
    exact_rounds,
)


def wide_topo(racks: int, per_rack: int, *, leaf_slots: int = p.NUM_SLOTS,
              spine_slots: int = p.NUM_SLOTS) -> topology.Topology:
    raw = topology.fabric_dict(racks, per_rack, 1,
                               [f"127.0.0.1:{50051 + i}" for i in range(racks + 1)],
                               job_slots=16)
    for r in range(1, racks + 1):
        raw["switches"][f"s{r}"]["slots"] = leaf_slots
    raw["switches"]["t1"].update(slots=spine_slots, job_slots=min(16, spine_slots))
    return topology.from_dict(raw)


def join(registry: JobRegistry, name: str, world: int, hosts: list[int], now: float = 0.0,
         **kwargs):
    """Ranks 0.. of job ``name`` on hosts w{k+1} for k in ``hosts``, in that order."""
    replies, updates = [], []
    for rank, k in enumerate(hosts):
        reply, ups = registry.join(name, world, rank, (f"10.0.0.{k + 1}", AGENT_PORT + k),
                                   now=now, **kwargs)
        replies.append(reply)
        updates += ups
    return replies, updates


def table_writes(updates, table: str) -> list[TableWrite]:
    return [u for u in updates if isinstance(u, TableWrite) and u.entry.table == table]


def test_a_job_of_72_ranks_over_three_racks_numbers_each_racks_members_by_bit():
    topo = wide_topo(3, 24)
    registry = JobRegistry(topo)
    # ranks interleaved over the racks: rank r on rack r mod 3, so no rack's ranks are
    # 0..23 and most ranks are 32 or more
    hosts = [(r % 3) * 24 + r // 3 for r in range(72)]
    replies, updates = join(registry, "wide", 72, hosts)
    job = registry.job(replies[0].job_id)
    assert job.tree is not None and [leaf.ranks for leaf in job.tree.leaves] == [24, 24, 24]
    members = table_writes(updates, p.MEMBERS)
    by_switch: dict[str, list[tuple[int, int]]] = {}
    for write in members:
        by_switch.setdefault(write.switch, []).append(
            (write.entry.match_value(p.MEMBERS_RANK), write.entry.param("bit_index")))
    for leaf in ("s1", "s2", "s3"):
        bits = [bit for _, bit in by_switch[leaf]]
        assert len(set(bits)) == 24 and max(bits) < p.MAX_WORKERS, leaf
        for rank, bit in by_switch[leaf]:
            if rank < p.MAX_WORKERS:  # joined before any rank over 32 of its rack
                assert bit == rank
            assert job.workers[rank].bit == bit
    # the root's members are the leaves, by child index
    assert sorted(by_switch["t1"]) == [(0, 0), (1, 1), (2, 2)]
    # RESULT copies are keyed on (job, bit): distinct on every switch, and the
    # multicast groups name the same rids
    rids = Counter((w.switch, w.entry.match_value(p.RESULT_DST_RID))
                   for w in table_writes(updates, p.RESULT_DST))
    assert max(rids.values()) == 1 and len(rids) == 72 + 3
    groups = {u.switch: u.replicas for u in updates if isinstance(u, GroupWrite)
              and u.replicas}
    for leaf in ("s1", "s2", "s3"):
        assert sorted(rid for _, rid in groups[leaf]) == \
            sorted(p.result_rid(job.job_id, bit) for _, bit in by_switch[leaf])
    jobs = {w.switch: w.entry for w in table_writes(updates, p.JOBS)}
    assert jobs["t1"].param("world_size") == 72
    assert [jobs[s].param("total_size") for s in ("s1", "s2", "s3")] == [72] * 3
    # a restarted controller reads the same ranks and bits back
    entries = {name: registry.expected_entries(name) for name in topo.switches}
    rebuilt, repairs = rebuild_from_entries(topo, entries, now=1.0)
    again = rebuilt.job(job.job_id)
    assert {r: (w.bit, w.switch) for r, w in again.workers.items()} == \
        {r: (w.bit, w.switch) for r, w in job.workers.items()}
    assert not [u for u in repairs if isinstance(u, TableWrite)]  # no entry stale or missing
    # and a rank that leaves and joins again takes the lowest free bit of its rack
    gone = job.workers[40]
    registry.leave(job.job_id, 40)
    _, back = registry.join("wide", 72, 40, (topology.format_ipv4(gone.ip), gone.port), now=2.0)
    assert registry.job(job.job_id).workers[40].bit == gone.bit


def test_more_than_32_workers_of_a_job_on_one_leaf_are_refused():
    registry = JobRegistry(wide_topo(2, 40))
    join(registry, "wide", 60, list(range(32)))  # 32 on s1
    with pytest.raises(JobError, match="at most 32 members"):
        registry.join("wide", 60, 32, ("10.0.0.33", AGENT_PORT), now=0.0)  # w33: s1 too
    registry.join("wide", 60, 32, ("10.0.0.41", AGENT_PORT), now=0.0)  # w41 is on s2


def test_a_job_over_32_ranks_needs_a_fabric_a_switch_placement_and_a_spine_with_room():
    one_rack = topology.from_dict(topology.rack_dict(8, "127.0.0.1:50051"))
    with pytest.raises(JobError, match="one rack"):
        join(JobRegistry(one_rack), "wide", 40, [0])
    with pytest.raises(JobError, match="cannot be placed on a PBox"):
        join(JobRegistry(wide_topo(2, 20)), "wide", 40, [0], placement=PLACE_PBOX)
    with pytest.raises(JobError, match="cannot be placed on a PBox"):
        join(JobRegistry(wide_topo(2, 20)), "wide", 40, [0], precision=0.01)
    with pytest.raises(JobError, match="a spine with room"):
        join(JobRegistry(wide_topo(2, 20, spine_slots=8)), "wide", 40, [0])
    with pytest.raises(JobError, match="outside 1..1024"):
        join(JobRegistry(wide_topo(2, 20)), "wide", 1025, [0])
    # 32 ranks on one rack of a fabric stay an ordinary job there
    replies, _ = join(JobRegistry(wide_topo(2, 40)), "narrow", 32, list(range(32)))
    assert replies[0].world_size == 32


def test_a_rack_of_a_wide_job_on_its_pbox_is_told_its_ranks_in_bit_order():
    topo = wide_topo(2, 20, leaf_slots=16)
    registry = JobRegistry(topo)
    join(registry, "narrow", 1, [25])  # s2's 16 slots
    hosts = [(r % 2) * 20 + r // 2 for r in range(40)]  # even ranks on s1, odd on s2
    replies, updates = join(registry, "wide", 40, hosts)
    job = registry.job(replies[0].job_id)
    assert job.tree is not None and [leaf.pbox for leaf in job.tree.leaves] == ["", "pbox2"]
    (write,) = [u for u in updates if isinstance(u, PBoxJobWrite)]
    odd = sorted(range(1, 40, 2), key=lambda r: job.workers[r].bit)
    assert (write.pbox, write.rack_size, write.ranks) == ("pbox2", 20, tuple(odd))
    entries = {name: registry.expected_entries(name) for name in topo.switches}
    _, repairs = rebuild_from_entries(topo, entries, now=1.0)
    assert [u for u in repairs if isinstance(u, PBoxJobWrite)] == \
        [replace(write, op="MODIFY")]


# -- over P4Runtime: p4lite switches (and a PBox core) sum 40 ranks -------------------------


@pytest.fixture(scope="module")
def pipeline() -> PipelineConfig:
    return compile_pipeline()


def test_the_controller_makes_a_fabric_sum_40_ranks_exactly(pipeline):
    wired = Wired(pipeline, racks=2, per_rack=20)
    try:
        hosts = [(r % 2) * 20 + r // 2 for r in range(40)]
        replies = wired.join("wide", hosts)
        job = wired.ctl.registry.job(replies[0].job_id)
        assert job.tree is not None
        assert sum(w.bit != w.rank for w in job.workers.values()) == 8  # ranks 32..39
        # a second job on s2 whose RESULT copies' rids follow the wide job's: rids keyed
        # on ranks would have collided (job 1's rank 33 is job 2's rank 1)
        for rank in range(4):
            wired.ctl.join("narrow", 4, rank, (f"10.0.0.{21 + rank}", AGENT_PORT + 200), 0.0)
        assert wired.ctl.registry.job_by_name("narrow").job_id == job.job_id + 1
        wired.lose(0.05, seed=11)
        exact_rounds(wired, hosts, replies, 3)
        tree = {t["switch"]: t for t in wired.ctl.tree_counters(job.job_id)}
        assert tree["t1"]["counters"]["completions"] >= 3
    finally:
        wired.close()


def test_a_wide_jobs_rack_on_its_pbox_sums_with_the_other_leaf_over_p4runtime(pipeline):
    wired = Wired(pipeline, racks=2, per_rack=20)
    pboxes = PBoxCores(wired, "pbox2")
    wired.ctl.close()
    from p4hub.controller.driver import Controller

    wired.ctl = Controller(wired.topo, pipeline, pbox_sink=pboxes.sink)
    wired.ctl.start(now=0.0)
    try:
        for i in range(8):  # fill s2's 1,024 slots, 128 a job
            wired.ctl.join(f"narrow{i}", 1, 0, ("10.0.0.39", AGENT_PORT + 100 + i), 0.0)
        hosts = [(r % 2) * 20 + r // 2 for r in range(40)]
        replies = wired.join("wide", hosts)
        job = wired.ctl.registry.job(replies[0].job_id)
        assert job.tree is not None and job.tree.leaves[1].pbox == "pbox2"
        wired.lose(0.05, seed=12)
        exact_rounds(wired, hosts, replies, 3, pboxes.serve)
        assert pboxes.aggs["pbox2"].job_stats(job.job_id).partials_sent >= 3
    finally:
        wired.close()
