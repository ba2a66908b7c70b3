"""Jobs over racks: the registry places a job whose workers sit in several racks of a
leaf-spine fabric as a two-level tree (controller/core/tree.py), and the controller, over
P4Runtime to three p4lite switches wired by the topology's links, makes them sum
exactly across racks, under loss too, and rebuilds such a job after a restart."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from bench import _frames as frames
from p4hub.controller.core import program as p
from p4hub.controller.core import topology
from p4hub.controller.core.job import ON_SWITCH, JobError
from p4hub.controller.core.jobs import JobRegistry
from p4hub.controller.core.rebuild import rebuild_from_entries
from p4hub.controller.core.updates import (
    DELETE,
    INSERT,
    MODIFY,
    GroupWrite,
    PBoxJobWrite,
    TableWrite,
)
from p4hub.controller.driver import Controller, PipelineConfig
from p4hub.controller.pbox_control import PBoxControlError
from p4hub.hosts import wire
from p4hub.hosts.wire import DEFAULT_LANES, Header, PacketType
from tests.support.fabric import Fabric, compile_pipeline

AGENT_PORT = 47000


def fabric_topo(racks: int = 2, per_rack: int = 2, spines: int = 1, job_slots: int = 16):
    addrs = [f"127.0.0.1:{50051 + i}" for i in range(racks + spines)]
    return topology.from_dict(topology.fabric_dict(racks, per_rack, spines, addrs,
                                                   job_slots=job_slots))


def join_all(registry: JobRegistry, name: str, ranks: list[int], world: int | None = None):
    updates, replies = [], []
    for rank, k in enumerate(ranks):
        reply, ups = registry.join(name, world or len(ranks), rank, (f"10.0.0.{k + 1}",
                                   AGENT_PORT + k), now=0.0)
        replies.append(reply)
        updates.append(ups)
    return replies, updates


# -- the registry, sans I/O -----------------------------------------------------------------


def test_a_job_over_two_racks_waits_for_its_workers_then_becomes_a_tree():
    topo = fabric_topo()
    registry = JobRegistry(topo)
    replies, updates = join_all(registry, "wide", [0, 1, 2, 3])
    job = registry.job(replies[0].job_id)
    # until the last worker is in, only member entries, each on the worker's own leaf
    for rank, ups in enumerate(updates[:3]):
        assert {(u.switch, u.entry.table) for u in ups} == \
            {(f"s{rank // 2 + 1}", p.MEMBERS), (f"s{rank // 2 + 1}", p.RESULT_DST)}
    last = updates[3]
    jobs = {u.switch: u.entry for u in last if isinstance(u, TableWrite) and u.entry.table == p.JOBS}
    assert jobs["t1"].action == p.ACT_JOB_ON_SWITCH and jobs["t1"].param("world_size") == 4
    for child, leaf in enumerate(("s1", "s2")):
        entry = jobs[leaf]
        assert entry.action == p.ACT_JOB_ON_LEAF
        assert (entry.param("world_size"), entry.param("total_size"), entry.param("child"),
                entry.param("up_port")) == (2, 4, child, topo.port_to(leaf, "t1"))
        assert entry.param("slot_base") == entry.param("up_slot_base") == jobs["t1"].param("slot_base")
    groups = {u.switch: u.replicas for u in last if isinstance(u, GroupWrite)}
    assert groups["t1"] == ((1, p.result_rid(job.job_id, 0)), (2, p.result_rid(job.job_id, 1)))
    assert groups["s2"] == ((1, p.result_rid(job.job_id, 2)), (2, p.result_rid(job.job_id, 3)))
    assert job.tree is not None and job.switch == "t1" and job.fabric == ("t1", "s1", "s2")
    # every rank's map sends to its own rack's aggregator address, at one slot base
    assert [r.aggregator_ip for r in [registry.reply(job, k) for k in range(4)]] == \
        ["10.0.0.100", "10.0.0.100", "10.0.0.101", "10.0.0.101"]
    assert {registry.routes(job, k)[0]["slot_base"] for k in range(4)} == {job.slots.base}
    # a leaf has no scatter rounds: no rank is told to send SCATTERs
    assert not any(r.scatter for r in [*replies, *[registry.reply(job, k) for k in range(4)]])


def test_a_job_in_one_rack_of_a_fabric_is_an_ordinary_switch_job_on_its_leaf():
    topo = fabric_topo()
    registry = JobRegistry(topo)
    replies, updates = join_all(registry, "narrow", [2, 3])
    job = registry.job(replies[0].job_id)
    assert (job.switch, job.where, job.fabric, job.tree) == ("s2", ON_SWITCH, (), None)
    # scatter rounds on its leaf, but the first rank was answered before that was known
    assert [r.scatter for r in replies] == [False, True] and registry.reply(job, 0).scatter
    assert {u.switch for u in updates[1]} == {"s2"}
    # the spine and the other leaf gave the range back
    assert registry.switch_pools["t1"].free_slots() == registry.switch_pools["s1"].free_slots() \
        == topo.switches["t1"].slots


def test_jobs_over_racks_take_one_base_free_everywhere_and_give_it_all_back():
    topo = fabric_topo(job_slots=16)
    registry = JobRegistry(topo)
    narrow, _ = join_all(registry, "narrow", [0, 1])  # s1's first 16 slots
    wide, _ = join_all(registry, "wide", [1, 2], world=2)
    job = registry.job(wide[0].job_id)
    assert job.slots.base == 16  # s1 has 0..15 taken, so the common base is past it
    updates = registry.kill(job.job_id)
    deletes = {(u.switch, u.entry.table) for u in updates if isinstance(u, TableWrite)}
    assert deletes >= {("t1", p.JOBS), ("s1", p.JOBS), ("s2", p.JOBS), ("t1", p.MEMBERS),
                       ("s1", p.MEMBERS), ("s2", p.RESULT_DST)}
    assert all(u.op == DELETE for u in updates)
    assert {u.switch for u in updates if isinstance(u, GroupWrite)} == {"t1", "s1", "s2"}
    for name in ("t1", "s2"):
        assert registry.switch_pools[name].free_slots() == topo.switches[name].slots
    assert registry.job(narrow[0].job_id).slots.base == 0


def test_a_job_still_waiting_for_workers_ends_without_writing_entries_it_never_made():
    registry = JobRegistry(fabric_topo())
    replies, _ = join_all(registry, "wide", [0, 2], world=3)
    updates = registry.kill(replies[0].job_id)
    assert {u.entry.table for u in updates} == {p.MEMBERS, p.RESULT_DST}
    assert all(pool.free_slots() == pool.size for pool in registry.switch_pools.values())


def test_expected_entries_are_what_the_tree_wrote_and_rebuild_gives_the_tree_back():
    topo = fabric_topo()
    registry = JobRegistry(topo)
    replies, updates = join_all(registry, "wide", [0, 1, 3])
    written: dict[str, set] = {}
    for u in [u for ups in updates for u in ups if isinstance(u, TableWrite)]:
        assert u.op == INSERT
        written.setdefault(u.switch, set()).add(u.entry)
    entries = {name: registry.expected_entries(name) for name in topo.switches}
    for name, got in written.items():
        assert got <= set(entries[name])
    rebuilt, repairs = rebuild_from_entries(topo, entries, now=5.0)
    job, again = registry.job(replies[0].job_id), rebuilt.job(replies[0].job_id)
    assert (again.tree, again.fabric, again.slots, again.epoch, again.world_size) == \
        (job.tree, job.fabric, job.slots, job.epoch, job.world_size)
    assert {r: (w.ip, w.port, w.switch) for r, w in again.workers.items()} == \
        {r: (w.ip, w.port, w.switch) for r, w in job.workers.items()}
    assert not [u for u in repairs if isinstance(u, TableWrite) and u.op == DELETE]
    assert rebuilt.switch_pools["t1"].owners() == registry.switch_pools["t1"].owners()


def small_spine_topo(pbox_slots: int = 4096):
    raw = topology.fabric_dict(2, 2, 1, [f"127.0.0.1:{50051 + i}" for i in range(3)],
                               job_slots=16, pbox_slots=pbox_slots)
    raw["switches"]["t1"].update(slots=8, job_slots=8)  # no job's 16 fit on the spine
    return topology.from_dict(raw)


def test_a_fabric_whose_spine_has_no_room_roots_the_job_at_its_racks_pbox():
    topo = small_spine_topo()
    registry = JobRegistry(topo)
    replies, updates = join_all(registry, "wide", [0, 1, 2, 3])  # w1, w2 on s1; w3, w4 on s2
    job = registry.job(replies[0].job_id)
    tree = job.tree
    assert tree is not None and (tree.root, tree.root_pbox, job.switch) == ("s1", "pbox", "s1")
    # s2 sums its rack and sends its partials to the PBox as rank 2, its lowest, over t1
    (leaf,) = tree.leaves
    assert (leaf.switch, leaf.child, leaf.ranks, leaf.pbox) == ("s2", 2, 2, "")
    pbox1 = topo.pboxes["pbox"]
    jobs = {u.switch: u.entry for u in updates[-1]
            if isinstance(u, TableWrite) and u.entry.table == p.JOBS}
    assert set(jobs) == {"s1", "s2"} and jobs["s1"].action == p.ACT_JOB_ON_PBOX
    assert (jobs["s2"].action, jobs["s2"].param("up_ip"), jobs["s2"].param("up_mac"),
            jobs["s2"].param("up_port"), jobs["s2"].param("child")) == \
        (p.ACT_JOB_ON_LEAF, pbox1.ip, pbox1.mac, topo.port_to("s2", "t1"), 2)
    # the root leaf takes the rack's partials as member rank 2 from pbox2's address, on
    # its port to the spine; the PBox answers them itself (no result_dst, no group)
    members = [u.entry for u in updates[-1] if isinstance(u, TableWrite)
               and u.entry.table == p.MEMBERS and u.switch == "s1"]
    assert [(m.match_value(p.MEMBERS_RANK), m.match_value(p.MEMBERS_SRC),
             m.match_value(p.MEMBERS_PORT)) for m in members] == \
        [(2, topo.pboxes["pbox2"].ip, topo.port_to("s1", "t1"))]
    assert not [u for u in updates[-1] if isinstance(u, TableWrite)
                and u.entry.table == p.RESULT_DST and u.switch == "s1"]
    assert {u.switch for u in updates[-1] if isinstance(u, GroupWrite)} == {"s2"}
    (write,) = [u for u in updates[-1] if isinstance(u, PBoxJobWrite)]
    assert (write.pbox, write.op, write.world_size, write.slot_base, write.parent) == \
        ("pbox", INSERT, 4, job.slots.base, "")
    assert job.fabric == ("s2",) and not registry.switch_pools["t1"].owners()
    assert {registry.routes(job, k)[0]["slot_base"] for k in range(4)} == {job.slots.base}
    assert registry.routes(job)[0]["aggregator"] == "10.0.0.100:48879"
    assert registry.expected_groups("s1") == {p.FLOOD_GROUP: registry.expected_groups("s1")[
        p.FLOOD_GROUP]}
    # a restarted controller puts the same tree back, keeps the partials' member entry
    # and tells the PBox again
    entries = {name: registry.expected_entries(name) for name in topo.switches}
    rebuilt, repairs = rebuild_from_entries(topo, entries, now=1.0)
    again = rebuilt.job(job.job_id)
    assert (again.tree, again.fabric, again.epoch, sorted(again.workers)) == \
        (job.tree, job.fabric, job.epoch, [0, 1, 2, 3])
    assert [u for u in repairs if isinstance(u, PBoxJobWrite)] == [replace(write, op=MODIFY)]
    assert not [u for u in repairs if isinstance(u, TableWrite) and u.op == DELETE]
    assert rebuilt.pbox_pools["pbox"].owners()
    updates = registry.kill(job.job_id)
    assert replace(write, op=DELETE) in updates
    assert not registry.pbox_pools["pbox"].owners() and not registry.switch_pools["s2"].owners()


def test_with_the_spine_and_both_leaves_full_both_racks_aggregate_on_their_pboxes():
    registry = JobRegistry(fabric_topo(job_slots=1024))
    join_all(registry, "first", [0, 2])  # over both racks: t1, s1 and s2 are full
    replies, updates = join_all(registry, "second", [1, 3])
    job = registry.job(replies[0].job_id)
    assert job.tree is not None and job.tree.root_pbox == "pbox"
    assert [(leaf.switch, leaf.child, leaf.pbox) for leaf in job.tree.leaves] == \
        [("s2", 1, "pbox2")]
    writes = {u.pbox: u for u in updates[-1] if isinstance(u, PBoxJobWrite)}
    assert (writes["pbox"].parent, writes["pbox2"].parent, writes["pbox2"].child) == \
        ("", "10.0.0.100:48879", 1)
    assert job.fabric == ()
    # the PBox that roots it says so when the controller restarts
    topo = registry.topo
    entries = {name: registry.expected_entries(name) for name in topo.switches}
    listed = {"pbox2": [{"job_id": job.job_id, "world_size": 2, "slot_base": job.slots.base,
                         "slot_count": job.slots.count,
                         "parent": {"address": ["10.0.0.100", 48879], "child": 1,
                                    "rack_size": 1}}]}
    rebuilt, _ = rebuild_from_entries(topo, entries, now=1.0, pbox_jobs=listed)
    assert rebuilt.job(job.job_id).tree == job.tree


def test_a_new_job_over_racks_is_not_rooted_at_a_spine_that_is_down():
    registry = JobRegistry(fabric_topo(spines=2))
    registry.unreachable.add("t1")  # the driver could not reach it
    replies, _ = join_all(registry, "wide", [0, 2])
    assert registry.job(replies[0].job_id).tree.root == "t2"
    registry.unreachable.add("t2")
    replies, _ = join_all(registry, "wider", [1, 3])
    tree = registry.job(replies[0].job_id).tree
    assert tree is not None and tree.root_pbox == "pbox"


def test_a_fabric_whose_spine_and_pboxes_have_no_room_refuses_the_job():
    registry = JobRegistry(small_spine_topo(pbox_slots=8))
    with pytest.raises(JobError, match="no 16 free slots at one base on the spine t1 "
                                       r"\(nor on rack s1's PBox pbox\)"):
        join_all(registry, "wide", [0, 2])


def full_s2_topo():
    raw = topology.fabric_dict(2, 2, 1, [f"127.0.0.1:{50051 + i}" for i in range(3)],
                               job_slots=16)
    raw["switches"]["s2"]["slots"] = 16
    return topology.from_dict(raw)


def test_a_rack_whose_leaf_is_full_aggregates_on_its_pbox_under_the_same_root():
    topo = full_s2_topo()
    registry = JobRegistry(topo)
    join_all(registry, "narrow", [2, 3])  # s2's 16 slots
    replies, updates = join_all(registry, "wide", [0, 1, 2, 3])
    job = registry.job(replies[0].job_id)
    assert job.tree is not None and [leaf.pbox for leaf in job.tree.leaves] == ["", "pbox2"]
    assert job.fabric == ("t1", "s1")
    last = updates[-1]
    jobs = {u.switch: u.entry for u in last if isinstance(u, TableWrite) and u.entry.table == p.JOBS}
    assert (jobs["s1"].action, jobs["s2"].action) == (p.ACT_JOB_ON_LEAF, p.ACT_JOB_ON_PBOX)
    (pbox,) = [u for u in last if isinstance(u, PBoxJobWrite)]
    assert (pbox.pbox, pbox.op, pbox.parent, pbox.child, pbox.rack_size, pbox.world_size,
            pbox.slot_base) == ("pbox2", INSERT, "10.0.0.241:48879", 1, 2, 4, job.slots.base)
    assert {u.switch for u in last if isinstance(u, GroupWrite)} == {"t1", "s1"}
    # every rank, on its leaf or its PBox, runs one map at one base
    assert {registry.routes(job, k)[0]["slot_base"] for k in range(4)} == {job.slots.base}
    assert registry.pbox_pools["pbox2"].owners()
    # a restarted controller puts the same tree back, and tells the PBox again
    entries = {name: registry.expected_entries(name) for name in topo.switches}
    rebuilt, repairs = rebuild_from_entries(topo, entries, now=1.0)
    again = rebuilt.job(job.job_id)
    assert (again.tree, again.fabric, [p.slots for p in again.rack_pboxes]) == \
        (job.tree, job.fabric, [p.slots for p in job.rack_pboxes])
    assert [u for u in repairs if isinstance(u, PBoxJobWrite)] == [replace(pbox, op=MODIFY)]
    # a rank leaving a rack on its PBox writes no group there (the leaf has none)
    left = registry.leave(job.job_id, 3)
    assert {(type(u).__name__, u.switch) for u in left} == {("TableWrite", "s2")}
    # ... nor when it joins again
    _, back = registry.join("wide", 4, 3, ("10.0.0.4", AGENT_PORT + 3), now=1.0)
    assert {(type(u).__name__, u.switch) for u in back} == {("TableWrite", "s2")}
    updates = registry.kill(job.job_id)
    assert replace(pbox, op=DELETE, world_size=4) in [
        replace(u, world_size=4) for u in updates if isinstance(u, PBoxJobWrite)]
    assert not registry.pbox_pools["pbox2"].owners()


def test_a_rack_on_its_pbox_moves_onto_its_leaf_once_the_leaf_has_room():
    topo = full_s2_topo()
    registry = JobRegistry(topo)
    narrow, _ = join_all(registry, "narrow", [2, 3])  # s2's 16 slots
    replies, _ = join_all(registry, "wide", [0, 1, 2, 3])
    job = registry.job(replies[0].job_id)
    assert registry.promote(now=1.0) == []  # s2 is still full
    registry.kill(narrow[0].job_id)
    epoch = job.epoch
    updates = registry.promote(now=2.0)
    assert job.tree is not None and [leaf.pbox for leaf in job.tree.leaves] == ["", ""]
    assert job.epoch != epoch and job.moves[-1].reason.startswith("leaf s2 has free slots")
    assert isinstance(updates[0], GroupWrite) and (updates[0].switch, updates[0].op) == \
        ("s2", INSERT)
    modified = {u.switch: u.entry for u in updates if isinstance(u, TableWrite)}
    assert modified["s2"].action == p.ACT_JOB_ON_LEAF
    assert {e.param("epoch") for e in modified.values()} == {job.epoch}
    assert set(modified) == {"t1", "s1", "s2"}
    assert [(u.pbox, u.op) for u in updates if isinstance(u, PBoxJobWrite)] == \
        [("pbox2", DELETE)]
    assert not registry.pbox_pools["pbox2"].owners() and job.fabric == ("t1", "s1", "s2")
    assert {e.table for e in registry.expected_entries("s2")} >= {p.JOBS}
    assert job.job_id in registry.expected_groups("s2")
    assert registry.promote(now=3.0) == []
    registry.kill(job.job_id)
    assert not any(registry.switch_pools[s].owners() for s in ("t1", "s1", "s2"))


def test_a_lost_pbox_of_a_tree_moves_its_rack_onto_its_leaf_or_ends_the_job():
    topo = full_s2_topo()
    registry = JobRegistry(topo)
    narrow, _ = join_all(registry, "narrow", [2, 3])
    replies, _ = join_all(registry, "wide", [0, 1, 2, 3])
    job_id = replies[0].job_id
    updates = registry.pbox_lost(job_id, "pbox2", 1.0, "PBox pbox2 is unreachable (gone)")
    assert job_id not in registry.jobs and registry.ended[job_id].cause == "aggregator-lost"
    assert "leaf s2 has no 16 free slots" in registry.ended[job_id].reason
    assert not [u for u in updates if isinstance(u, PBoxJobWrite) and u.pbox == "pbox2"]
    assert not registry.pbox_pools["pbox2"].owners()
    # with room on the leaf, the rack moves there instead
    replies, _ = join_all(registry, "wide2", [0, 1, 2, 3])
    registry.kill(narrow[0].job_id)
    updates = registry.pbox_lost(replies[0].job_id, "pbox2", 2.0, "gone")
    job = registry.job(replies[0].job_id)
    assert job.tree is not None and job.tree.leaves[1].pbox == ""
    assert not [u for u in updates if isinstance(u, PBoxJobWrite)]


def test_a_lost_root_pbox_ends_its_job():
    registry = JobRegistry(small_spine_topo())
    replies, _ = join_all(registry, "wide", [0, 1, 2, 3])
    job_id = replies[0].job_id
    updates = registry.pbox_lost(job_id, "pbox", 1.0, "PBox pbox is unreachable (gone)")
    assert registry.ended[job_id].reason.endswith("it was the root of the job")
    assert not [u for u in updates if isinstance(u, PBoxJobWrite)]
    assert not registry.pbox_pools["pbox"].owners() and not registry.switch_pools["s2"].owners()


def test_one_rack_whose_leaf_is_full_is_an_ordinary_pbox_job():
    topo = full_s2_topo()
    registry = JobRegistry(topo)
    join_all(registry, "narrow", [2, 3])
    replies, updates = join_all(registry, "again", [2, 3])
    job = registry.job(replies[0].job_id)
    assert (job.where, job.switch, job.pbox, job.tree, job.rack_pboxes) == \
        ("pbox", "s2", "pbox2", None, ())
    assert [u.parent for u in updates[-1] if isinstance(u, PBoxJobWrite)] == [""]


# -- the controller and three p4lite switches over P4Runtime ------------------------------


def contribution(job_id: int, rank: int, slot: int, values, position: int,
                 retransmit: bool = False) -> bytes:
    header = Header(type=PacketType.CONTRIB, job=job_id, rank=rank, slot=slot, position=position,
                    nelem=DEFAULT_LANES, exp=0, count=1, retransmit=retransmit)
    return wire.encode(header, np.asarray(values, np.int32))


class Wired:
    """A fabric of ``racks`` x ``per_rack`` workers (default 2x4; one spine) of p4lite
    switches run by the real controller."""

    def __init__(self, pipeline: PipelineConfig, spine_slots: int | None = None,
                 racks: int = 2, per_rack: int = 4) -> None:
        self.net = Fabric(1, spine_slots, racks, per_rack)
        self.ctl = Controller(self.net.topo, pipeline)
        self.ctl.start(now=0.0)
        self.topo = self.net.topo

    def join(self, name: str, ranks: list[int]):
        replies = []
        for rank, k in enumerate(ranks):
            replies.append(self.ctl.join(name, len(ranks), rank,
                                         (f"10.0.0.{k + 1}", AGENT_PORT + k), 0.0))
        return replies

    def send(self, k: int, reply, payload: bytes) -> list[tuple]:
        """Worker w{k+1}'s datagram to the aggregator address its join reply gave; the
        endpoints (switch, port) it reached."""
        host = self.topo.hosts[f"w{k + 1}"]
        pbox = next(pb for pb in self.topo.pboxes.values()
                    if topology.format_ipv4(pb.ip) == reply.aggregator_ip)
        frame = frames.udp_frame((host.mac, host.ip, AGENT_PORT + k),
                                 (pbox.mac, pbox.ip, p.AGG_UDP_PORT), payload)
        return self.net.send(host.switch, host.port, frame)[:-1]

    def lose(self, probability: float, seed: int) -> None:
        """Drop each frame any switch sends with ``probability``, from now on."""
        rnd = random.Random(seed)
        for device in self.net.devices.values():
            def lossy(port: int, frame: bytes, send=device.transmit) -> None:
                if rnd.random() >= probability:
                    send(port, frame)

            device.transmit = lossy

    def close(self) -> None:
        self.ctl.close()
        self.net.close()


@pytest.fixture(scope="module")
def pipeline() -> PipelineConfig:
    return compile_pipeline()


@pytest.fixture
def wired(pipeline):
    net = Wired(pipeline)
    yield net
    net.close()


def test_the_controller_makes_three_switches_sum_across_racks(wired):
    ranks = [0, 1, 4, 5]  # w1, w2 on s1; w5, w6 on s2
    replies = wired.join("wide", ranks)
    job_id, base = replies[0].job_id, replies[0].slot_base
    assert [r.aggregator_ip for r in replies] == ["10.0.0.100"] * 2 + ["10.0.0.101"] * 2
    values = np.random.default_rng(2).integers(-(2**20), 2**20, (4, DEFAULT_LANES))
    out = []
    for rank, k in enumerate(ranks):
        out = wired.send(k, replies[rank], contribution(job_id, rank, base + 1, values[rank], 1))
    assert out == [("s1", 1), ("s1", 2), ("s2", 1), ("s2", 2)]
    tree = {t["switch"]: t for t in wired.ctl.tree_counters(job_id)}
    assert tree["t1"]["counters"]["contributions"] == 2
    assert tree["t1"]["counters"]["completions"] == 1
    assert [tree[s]["counters"]["partials_up"] for s in ("s1", "s2")] == [1, 1]
    assert [tree[s]["counters"]["results_down"] for s in ("s1", "s2")] == [1, 1]


def test_a_restarted_controller_rebuilds_the_tree_from_the_switches(wired):
    replies = wired.join("wide", [0, 4, 5])
    before = wired.ctl.registry.job(replies[0].job_id)
    wired.ctl.close()
    wired.ctl = Controller(wired.topo, wired.ctl.pipeline)
    assert wired.ctl.start(now=1.0) == dict.fromkeys(wired.topo.switches, "rebuilt")
    job = wired.ctl.registry.job(replies[0].job_id)
    assert (job.tree, job.slots, job.epoch) == (before.tree, before.slots, before.epoch)
    assert sorted(job.workers) == [0, 1, 2]


def exact_rounds(wired: Wired, ranks: list[int], replies: list, rounds: int,
                 arrived: Callable[[], list[tuple[str, int, bytes]]] | None = None) -> None:
    """``rounds`` positions of the job: every rank sends its contribution and resends it
    until its RESULT arrives, which must be the exact sum. ``arrived``: the frames that
    reached an endpoint since the last call (default: the fabric's deliveries)."""
    job_id, base = replies[0].job_id, replies[0].slot_base
    workers = {(h.switch, h.port): int(h.name[1:]) - 1 for h in wired.topo.hosts.values()}

    def delivered() -> list[tuple[str, int, bytes]]:
        frames_out = list(wired.net.delivered)
        wired.net.delivered.clear()
        return frames_out

    for position in range(rounds):
        values = np.random.default_rng(position).integers(-(2**20), 2**20, (len(ranks), DEFAULT_LANES))
        done: set[int] = set()
        for attempt in range(60):
            for rank, k in enumerate(ranks):
                if rank in done:
                    continue
                wired.send(k, replies[rank], contribution(
                    job_id, rank, base + position, values[rank], position, attempt > 0))
                for switch, port, frame in (arrived or delivered)():
                    if (switch, port) not in workers:
                        continue
                    header, lanes = wire.decode(frame[42:])
                    assert (header.type, header.count) == (PacketType.RESULT, len(ranks))
                    # else the worker's kernel drops it (a PBox's kernel sets one)
                    assert frames.udp_checksum_ok(frame), "a RESULT with a wrong UDP checksum"
                    np.testing.assert_array_equal(lanes, values.sum(axis=0))
                    done.add(ranks.index(workers[(switch, port)]))
            if len(done) == len(ranks):
                break
        assert done == set(range(len(ranks))), f"position {position}"


def test_loss_on_every_hop_is_repaired_by_resends(wired):
    """A few rounds with 15% loss on every hop, the workers resending until each has
    its result: every worker gets the exact sum."""
    ranks = [0, 3, 4, 7]
    replies = wired.join("lossy", ranks)
    wired.lose(0.15, seed=3)
    exact_rounds(wired, ranks, replies, 6)
    counters = [t["counters"] for t in wired.ctl.tree_counters(replies[0].job_id)]
    assert sum(c.get("partials_resent", 0) + c["resent"] for c in counters) > 0  # loss was repaired


def test_a_pbox_job_on_a_fabric_takes_workers_of_every_rack_through_the_spine():
    """The single-PBox baseline across racks: one rack's PBox serves them all; workers
    of other racks are members on the PBox's leaf at its port to the flood root."""
    topo = fabric_topo()
    registry = JobRegistry(topo)
    replies = []
    for rank, k in enumerate([0, 2, 3]):
        reply, updates = registry.join("ps", 3, rank, (f"10.0.0.{k + 1}", AGENT_PORT + k), 0.0,
                                       placement="pbox")
        replies.append(reply)
        assert {u.switch for u in updates if isinstance(u, TableWrite)} <= {"s1"}
    job = registry.job(replies[0].job_id)
    assert job.where == "pbox" and job.fabric == ()
    ports = {w.rank: (w.switch, w.switch_port) for w in job.workers.values()}
    uplink = topo.port_to("s1", "t1")
    assert ports == {0: ("s1", 1), 1: ("s1", uplink), 2: ("s1", uplink)}
    assert {r.aggregator_ip for r in replies} == {"10.0.0.100"}


def test_the_pbox_path_across_racks_reaches_the_pbox(wired):
    replies = []
    for rank, k in enumerate([0, 5]):
        replies.append(wired.ctl.join("ps", 2, rank, (f"10.0.0.{k + 1}", AGENT_PORT + k), 0.0,
                                      placement="pbox"))
    job_id, base = replies[0].job_id, replies[0].slot_base
    pbox = wired.topo.pboxes["pbox"]
    for rank, k in enumerate([0, 5]):
        assert wired.send(k, replies[rank], contribution(job_id, rank, base, np.ones(DEFAULT_LANES), 0)) == \
            [(pbox.switch, pbox.port)]


def test_a_restarted_leaf_gives_the_whole_tree_a_new_epoch(wired):
    ranks = [0, 1, 4, 5]
    replies = wired.join("wide", ranks)
    job_id, base = replies[0].job_id, replies[0].slot_base
    before = wired.ctl.registry.job(job_id).epoch
    wired.net.restart("s2")
    deadline = time.monotonic() + 5
    while wired.ctl.clients["s2"].alive and time.monotonic() < deadline:
        time.sleep(0.02)
    assert wired.ctl.check_switches() == {"s2": "reconfigured"}
    job = wired.ctl.registry.job(job_id)
    assert job.epoch != before and "switch s2 restarted" in job.moves[-1].reason
    for name in ("t1", "s1", "s2"):  # every switch of the tree has the new epoch
        (entry,) = [e for e in wired.ctl.read_entries(name)
                    if e.table == p.JOBS and e.match_value(p.JOBS_JOB) == job_id]
        assert entry.param("epoch") == job.epoch, name
    values = np.random.default_rng(4).integers(-(2**20), 2**20, (4, DEFAULT_LANES))
    out = []
    for rank, k in enumerate(ranks):
        out = wired.send(k, replies[rank], contribution(job_id, rank, base + 2, values[rank], 2))
    assert out == [("s1", 1), ("s1", 2), ("s2", 1), ("s2", 2)]


def test_job_show_prints_the_tree_with_each_switchs_counters(wired, capsys, monkeypatch,
                                                            tmp_path):
    from p4hub.controller import api, cli
    from tests.support.api_auth import admin_cli_env, credentials

    admin_cli_env(monkeypatch, tmp_path)
    ranks = [0, 1, 4, 5]
    replies = wired.join("wide", ranks)
    job_id, base = replies[0].job_id, replies[0].slot_base
    values = np.ones((4, DEFAULT_LANES), np.int32)
    for rank, k in enumerate(ranks):
        wired.send(k, replies[rank], contribution(job_id, rank, base, values[rank], 0))
    service = api.JobService(wired.ctl, time.monotonic, credentials=credentials())
    server, port = api.serve(service, "127.0.0.1:0")
    try:
        assert cli.main(["--controller", f"127.0.0.1:{port}", "job", "show", str(job_id)]) == 0
    finally:
        server.stop(grace=None)
    out = capsys.readouterr().out
    assert "aggregation tree" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.split() and line.split()[0] in ("t1", "s1", "s2")}
    # switch level child members contribs complete up "up again" down resent
    assert rows["t1"][1:6] == ["root", "-", "2", "2", "1"]
    assert rows["s1"][1:7] == ["leaf", "0", "2", "2", "1", "1"]
    assert rows["s2"][1:7] == ["leaf", "1", "2", "2", "1", "1"]


class PBoxCores:
    """The fabric's PBoxes ``names`` as PBox cores in process, configured by the
    controller's PBoxJobWrites; frames the fabric delivers to one are answered back into
    its leaf."""

    def __init__(self, wired: Wired, *names: str) -> None:
        from p4hub.hosts.pbox.aggregator import Aggregator

        self.wired = wired
        self.aggs = {name: Aggregator() for name in names}
        self.dead: set[str] = set()  # PBoxes that cannot be reached
        self.at = {(wired.topo.pboxes[n].switch, wired.topo.pboxes[n].port): n for n in names}

    def sink(self, write: PBoxJobWrite) -> bool:
        """As controller/pbox_control.py: True when a MODIFY had to add the job again."""
        if write.pbox in self.dead:
            raise PBoxControlError(f"{write.pbox}: connection refused")
        agg = self.aggs[write.pbox]
        if write.op == DELETE:
            agg.remove_job(write.job_id)
            return False
        if write.job_id in {c.job_id for c in agg.jobs()}:
            return False
        host, _, port = write.parent.rpartition(":")
        parent = {"address": (host, int(port)), "child": write.child,
                  "rack_size": write.rack_size, "ranks": write.ranks} if write.parent else None
        agg.add_job(write.job_id, write.world_size, write.slot_base, write.slot_count,
                    write.lanes, parent)
        return write.op == MODIFY

    def serve(self) -> list[tuple[str, int, bytes]]:
        """Answer every frame delivered to a PBox until none is left; every other frame
        that left the fabric meanwhile."""
        others: list[tuple[str, int, bytes]] = []
        while True:
            mine = [d for d in self.wired.net.delivered if d[:2] in self.at]
            others += [d for d in self.wired.net.delivered if d[:2] not in self.at]
            self.wired.net.delivered.clear()
            if not mine:
                return others
            for switch, port, frame in mine:
                self._answer(self.wired.topo.pboxes[self.at[switch, port]], frame)

    def _answer(self, conf, frame: bytes) -> None:
        src = (topology.format_ipv4(int.from_bytes(frame[26:30], "big")),
               int.from_bytes(frame[34:36], "big"))
        for datagram, (ip, port) in self.aggs[conf.name].receive(frame[42:], src, 0.0):
            dst_ip = topology.parse_ipv4(ip)
            mac = next((n.mac for n in self.wired.topo.all_endpoints() if n.ip == dst_ip),
                       None) or next(sw.mac for sw in self.wired.topo.switches.values()
                                     if sw.ip == dst_ip)
            out = frames.udp_frame((conf.mac, conf.ip, p.AGG_UDP_PORT),
                                   (mac, dst_ip, port), datagram, udp_checksum=None)
            self.wired.net.send(conf.switch, conf.port, out)


def wired_with_pboxes(pipeline: PipelineConfig, *names: str,
                      spine_slots: int | None = None) -> tuple[Wired, PBoxCores]:
    """A Wired fabric whose controller writes to the PBox cores ``names``."""
    wired = Wired(pipeline, spine_slots)
    pboxes = PBoxCores(wired, *names)
    wired.ctl.close()
    wired.ctl = Controller(wired.topo, pipeline, pbox_sink=pboxes.sink)
    wired.ctl.start(now=0.0)
    return wired, pboxes


def full_s2_then_wide(wired: Wired):
    """Eight one-worker jobs fill s2's 1024 slots (128 a job); then job "wide" over w1,
    w2 (s1) and w5, w6 (s2): its ranks, join replies and registry job."""
    for i in range(8):
        wired.ctl.join(f"narrow{i}", 1, 0, ("10.0.0.8", AGENT_PORT + 100 + i), 0.0)
    ranks = [0, 1, 4, 5]
    replies = wired.join("wide", ranks)
    return ranks, replies, wired.ctl.registry.job(replies[0].job_id)


def test_a_rack_on_its_pbox_sums_with_a_leaf_under_the_spine_over_p4runtime(pipeline):
    wired, pbox = wired_with_pboxes(pipeline, "pbox2")
    try:
        ranks, replies, job = full_s2_then_wide(wired)
        assert job.tree is not None and job.tree.leaves[1].pbox == "pbox2"
        job_id = job.job_id
        wired.lose(0.1, seed=9)
        exact_rounds(wired, ranks, replies, 4, pbox.serve)
        stats = pbox.aggs["pbox2"].job_stats(job_id)
        assert stats.partials_sent >= 4 and stats.parent_results >= 4
    finally:
        wired.close()


def test_a_pbox_root_sums_with_a_leaf_over_p4runtime_under_loss(pipeline):
    wired, pboxes = wired_with_pboxes(pipeline, "pbox", spine_slots=64)  # no 128 on t1
    try:
        ranks = [0, 1, 4, 5]
        replies = wired.join("wide", ranks)
        job = wired.ctl.registry.job(replies[0].job_id)
        assert job.tree is not None and job.tree.root_pbox == "pbox"
        wired.lose(0.1, seed=5)
        exact_rounds(wired, ranks, replies, 4, pboxes.serve)
        stats = pboxes.aggs["pbox"].job_stats(job.job_id)
        assert stats.completions >= 4 and stats.contributions >= 4 * 3
        tree = {t["switch"]: t for t in wired.ctl.tree_counters(job.job_id)}
        assert tree["s2"]["counters"]["partials_up"] >= 4
    finally:
        wired.close()


def test_a_pbox_root_over_a_rack_on_its_pbox_over_p4runtime(pipeline):
    wired, pboxes = wired_with_pboxes(pipeline, "pbox", "pbox2", spine_slots=64)
    try:
        ranks, replies, job = full_s2_then_wide(wired)
        assert job.tree is not None and job.tree.root_pbox == "pbox"
        assert job.tree.leaves[0].pbox == "pbox2"
        wired.lose(0.1, seed=6)
        exact_rounds(wired, ranks, replies, 4, pboxes.serve)
        assert pboxes.aggs["pbox2"].job_stats(job.job_id).partials_sent >= 4
    finally:
        wired.close()


def test_the_controller_watches_the_pboxes_of_a_tree(pipeline):
    """check_pboxes: a rack PBox that lost the job gets it back under a new epoch on
    every switch of the tree; one that cannot be reached, with its leaf full, ends it."""
    from p4hub.hosts.pbox.aggregator import Aggregator

    wired, pboxes = wired_with_pboxes(pipeline, "pbox2")
    try:
        _, _, job = full_s2_then_wide(wired)
        assert job.tree is not None and job.tree.leaves[1].pbox == "pbox2"
        assert wired.ctl.check_pboxes(now=1.0) == []
        pboxes.aggs["pbox2"] = Aggregator()  # pbox2 restarted
        before = job.epoch
        assert wired.ctl.check_pboxes(now=2.0) == [
            f"job {job.job_id}: PBox pbox2 had lost it: re-added, epoch {job.epoch}"]
        assert job.epoch != before
        s2 = [e for e in wired.ctl.read_entries("s2") if e.table == p.JOBS
              and e.match_value(p.JOBS_JOB) == job.job_id]
        assert [e.action for e in s2] == [p.ACT_JOB_ON_PBOX]
        others = [e for name in ("t1", "s1") for e in wired.ctl.read_entries(name)
                  if e.table == p.JOBS and e.match_value(p.JOBS_JOB) == job.job_id]
        assert [e.param("epoch") for e in others] == [job.epoch] * 2
        pboxes.dead.add("pbox2")
        (report,) = wired.ctl.check_pboxes(now=3.0)
        assert report.startswith(f"job {job.job_id} ended: PBox pbox2 is unreachable")
        assert not [e for name in ("t1", "s1", "s2") for e in wired.ctl.read_entries(name)
                    if e.table == p.JOBS and e.match_value(p.JOBS_JOB) == job.job_id]
    finally:
        wired.close()
