"""p4hub.controller.core.jobs: the registry's events -> name-level updates, applied to a fake switch."""

from __future__ import annotations

import pytest

from p4hub.controller.core import ledger as jobs_mod
from p4hub.controller.core import program as p
from p4hub.controller.core import rack, topology
from p4hub.controller.core.job import END_KILLED, END_LEFT, END_SILENT, ON_PBOX, ON_SWITCH, JobError
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

RACK = {
    "switches": {"s1": {"grpc_addr": "127.0.0.1:50051", "slots": 64, "job_slots": 32}},
    "hosts": {
        f"h{i}": {"ip": f"10.0.0.{i}", "mac": f"08:00:00:00:01:{i:02x}", "switch": "s1", "port": i}
        for i in range(1, 7)
    },
    "pboxes": {"pb1": {"ip": "10.0.0.100", "mac": "08:00:00:00:01:64", "switch": "s1", "port": 9,
                       "slots": 32}},
    "controller": {"worker_timeout": 10.0},
}


class FakeSwitch:
    """Tables, groups and PBox jobs as the updates leave them; refuses what a real
    P4Runtime server refuses (duplicate INSERT, MODIFY/DELETE of nothing)."""

    def __init__(self) -> None:
        self.tables: dict[tuple, object] = {}
        self.groups: dict[int, tuple] = {}
        self.pbox_jobs: dict[int, PBoxJobWrite] = {}

    def apply(self, updates) -> None:
        for u in updates:
            if isinstance(u, TableWrite):
                self._apply(self.tables, (u.entry.table, u.entry.match), u.op, u.entry)
            elif isinstance(u, GroupWrite):
                self._apply(self.groups, u.group, u.op, u.replicas)
            else:
                self._apply(self.pbox_jobs, u.job_id, u.op, u)

    @staticmethod
    def _apply(store: dict, key, op: str, value) -> None:
        if op == INSERT:
            assert key not in store, f"duplicate INSERT {key}"
            store[key] = value
        elif op == MODIFY:
            assert key in store, f"MODIFY of missing {key}"
            store[key] = value
        else:
            assert key in store, f"DELETE of missing {key}"
            del store[key]

    def entries(self, table: str) -> list:
        return [e for (t, _), e in self.tables.items() if t == table]


@pytest.fixture
def topo():
    return topology.from_dict(RACK)


@pytest.fixture
def reg(topo):
    return JobRegistry(topo, epoch_seed=100)


def join_all(reg, sw, name, n, hosts=range(1, 7), now=0.0, port=40000, lanes=64):
    replies = []
    for rank, host in zip(range(n), hosts, strict=False):
        reply, updates = reg.join(name, n, rank, (f"10.0.0.{host}", port + rank), now,
                                  lanes=lanes)
        sw.apply(updates)
        replies.append(reply)
    return replies


def test_first_join_creates_a_switch_job(reg):
    reply, updates = reg.join("resnet", 4, 0, ("10.0.0.1", 40000), now=0.0)
    assert reply.job_id == 1 and reply.where == ON_SWITCH and reply.scatter and reply.gather
    assert (reply.slot_base, reply.slot_count, reply.window, reply.lanes) == (0, 32, 32, 64)
    assert (reply.aggregator_ip, reply.aggregator_port) == ("10.0.0.100", 48879)
    job_write, member, result, group = updates
    assert job_write == TableWrite("s1", INSERT, job_write.entry)
    assert job_write.entry.action == p.ACT_JOB_ON_SWITCH
    assert dict(job_write.entry.params) == {
        "world_size": 4, "slot_base": 0, "slot_count": 32, "lane_code": 0, "mcast_grp": 1,
        "name_tag": p.name_tag("resnet"), "epoch": 100,
    }
    assert [f.value for f in member.entry.match] == [1, 0, 0x0A000001, 40000, 1]  # + switch port
    assert result.entry.match[0].value == p.result_rid(1, 0) == 32
    assert dict(result.entry.params) == {"mac": 0x080000000101, "ip": 0x0A000001, "udp_port": 40000}
    assert group == GroupWrite("s1", INSERT, 1, ((1, 32),))


def test_later_joins_extend_the_group_and_retries_are_idempotent(reg):
    sw = FakeSwitch()
    join_all(reg, sw, "resnet", 3)
    assert sw.groups[1] == ((1, 32), (2, 33), (3, 34))
    reply, updates = reg.join("resnet", 3, 1, ("10.0.0.2", 40001), now=1.0)
    assert updates == [] and reply.rank == 1
    assert len(sw.entries(p.MEMBERS)) == 3 and len(sw.entries(p.RESULT_DST)) == 3


def test_the_first_join_sets_the_lane_count_and_later_joins_must_agree(reg):
    sw = FakeSwitch()
    reply = join_all(reg, sw, "bert", 1, lanes=256)[0]
    assert reply.lanes == 256 and dict(sw.entries(p.JOBS)[0].params)["lane_code"] == 1
    reg.join("two", 2, 0, ("10.0.0.2", 40000), now=0.0, lanes=256)
    with pytest.raises(JobError, match="has 256 lanes per packet, not 64"):
        reg.join("two", 2, 1, ("10.0.0.3", 40000), now=0.0)
    with pytest.raises(JobError, match=r"lanes must be one of \(64, 256\), not 128"):
        reg.join("odd", 1, 0, ("10.0.0.4", 40000), now=0.0, lanes=128)
    assert sorted(j.lanes for j in reg.jobs.values()) == [256, 256]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("resnet", 4, 1, ("10.0.0.9", 1)), "not a host"),
        (("resnet", 3, 1, ("10.0.0.2", 1)), "world size 4, not 3"),
        (("resnet", 4, 0, ("10.0.0.2", 1)), "already taken"),
        (("resnet", 4, 4, ("10.0.0.2", 1)), "rank 4 outside"),
        (("other", 33, 0, ("10.0.0.2", 1)), "world size 33"),
        (("", 2, 0, ("10.0.0.2", 1)), "job name"),
        (("other", 2, 0, ("bogus", 1)), "not an IPv4"),
        (("other", 2, 0, ("10.0.0.2", 0)), "UDP port 0"),
    ],
)
def test_bad_joins_are_refused_without_side_effects(reg, args, message):
    reg.join("resnet", 4, 0, ("10.0.0.1", 40000), now=0.0)
    with pytest.raises(JobError, match=message):
        reg.join(*args, now=0.0)
    assert list(reg.jobs) == [1] and list(reg.jobs[1].workers) == [0]


def test_full_switch_sends_the_job_to_the_pbox_and_then_refuses(reg):
    sw = FakeSwitch()
    a = join_all(reg, sw, "a", 2)[0]
    b = join_all(reg, sw, "b", 2, hosts=(3, 4))[0]
    c = join_all(reg, sw, "c", 2, hosts=(5, 6))[0]
    assert (a.where, a.slot_base, b.where, b.slot_base) == (ON_SWITCH, 0, ON_SWITCH, 32)
    assert c.where == ON_PBOX and (c.slot_base, c.slot_count) == (0, 32)
    assert c.aggregator_ip == a.aggregator_ip  # agents cannot tell
    on_pbox = [e for e in sw.entries(p.JOBS) if e.match[0].value == c.job_id][0]
    assert on_pbox.action == p.ACT_JOB_ON_PBOX
    assert sw.pbox_jobs[c.job_id] == PBoxJobWrite("pb1", INSERT, c.job_id, 2, 0, 32)
    assert c.job_id not in sw.groups
    with pytest.raises(JobError, match="no room"):
        reg.join("d", 2, 0, ("10.0.0.1", 50000), now=0.0)


def test_leave_shrinks_the_group_and_the_last_leave_frees_everything(reg):
    sw = FakeSwitch()
    join_all(reg, sw, "a", 3)
    sw.apply(reg.leave(1, 1))
    assert sw.groups[1] == ((1, 32), (3, 34))
    assert len(sw.entries(p.MEMBERS)) == 2
    sw.apply(reg.leave(1, 0))
    sw.apply(reg.leave(1, 2))
    assert sw.tables == {} and sw.groups == {} and reg.jobs == {}
    assert reg.switch_pools["s1"].free_slots() == 64
    # the same range goes to the next job, under a new epoch and a new job id
    reply, updates = reg.join("b", 2, 0, ("10.0.0.1", 1), now=5.0)
    assert reply.slot_base == 0 and dict(updates[0].entry.params)["epoch"] == 101
    assert reply.job_id == 2


def test_job_ids_are_reused_as_late_as_possible(reg, monkeypatch):
    monkeypatch.setattr(p, "MAX_JOBS", 4)  # ids 1..3
    assert reg.join("a", 1, 0, ("10.0.0.1", 1), now=0.0)[0].job_id == 1
    assert reg.join("b", 1, 0, ("10.0.0.1", 2), now=0.0)[0].job_id == 2
    reg.kill(1)
    assert reg.join("c", 1, 0, ("10.0.0.1", 3), now=0.0)[0].job_id == 3  # not the freed 1
    assert reg.join("d", 1, 0, ("10.0.0.2", 9), now=0.0)[0].job_id == 1  # wraps to the freed id
    with pytest.raises(JobError, match="all 3 job ids"):
        reg.join("e", 1, 0, ("10.0.0.3", 9), now=0.0)


def test_kill_of_a_pbox_job_tells_the_pbox(reg):
    sw = FakeSwitch()
    join_all(reg, sw, "a", 1)
    join_all(reg, sw, "b", 1, hosts=(2,))
    c = join_all(reg, sw, "c", 2, hosts=(3, 4))[0]
    sw.apply(reg.kill(c.job_id))
    assert c.job_id not in sw.pbox_jobs
    assert reg.pbox_pools["pb1"].free_slots() == 32
    with pytest.raises(JobError, match="no job"):
        reg.kill(c.job_id)


def test_a_silent_member_ends_its_job_and_the_end_names_it(reg):
    sw = FakeSwitch()
    join_all(reg, sw, "a", 3, now=0.0)
    join_all(reg, sw, "b", 1, hosts=(4,), now=0.0)  # the switch's other 32 slots
    reg.heartbeat(1, 0, now=8.0)
    reg.heartbeat(1, 2, now=8.0)
    reg.heartbeat(2, 0, now=8.0)
    assert reg.expire(now=10.0) == []  # nobody silent for more than 10 s yet
    sw.apply(reg.expire(now=10.5))  # rank 1 of job 1 last heard at 0.0
    assert list(reg.jobs) == [2]  # the whole job ended, not just the rank
    assert list(sw.groups) == [2]  # job 2 is untouched
    assert {e.match[0].value for e in sw.entries(p.MEMBERS)} == {2}
    assert reg.switch_pools["s1"].free_slots() == 32
    end = reg.ended[1]
    assert (end.cause, end.rank, end.last_seen, end.ended_at) == (END_SILENT, 1, 0.0, 10.5)
    assert end.reason == "rank 1 (10.0.0.2:40001) sent no heartbeat for 10.5 s (worker_timeout 10 s)"
    with pytest.raises(JobError, match=r"no job 1 \(it ended: rank 1 "):
        reg.heartbeat(1, 0, now=11.0)  # a survivor's heartbeat says why


def test_the_longest_silent_member_is_named_and_the_others_listed(reg):
    sw = FakeSwitch()
    join_all(reg, sw, "a", 3, now=0.0)
    reg.heartbeat(1, 2, now=1.0)
    reg.heartbeat(1, 0, now=9.0)
    sw.apply(reg.expire(now=12.0))
    assert reg.ended[1].rank == 1
    assert reg.ended[1].reason.endswith("; also silent: rank(s) 2")


def test_a_restarted_worker_rejoins_a_new_instance_on_the_freed_slots(reg):
    sw = FakeSwitch()
    first = join_all(reg, sw, "a", 2, now=0.0)[0]
    join_all(reg, sw, "x", 1, hosts=(5,), now=0.0)  # the switch's other 32 slots
    reg.heartbeat(first.job_id, 0, now=10.0)
    sw.apply(reg.expire(now=10.5))
    again = join_all(reg, sw, "a", 2, now=11.0, port=50000)  # new addresses after a restart
    assert again[0].job_id != first.job_id and again[0].where == ON_SWITCH
    assert again[0].slot_base == first.slot_base
    assert len(reg.jobs[again[0].job_id].workers) == 2
    assert first.job_id in reg.ended and again[0].job_id not in reg.ended


def test_leave_and_kill_record_their_cause(reg):
    sw = FakeSwitch()
    join_all(reg, sw, "a", 1, now=0.0)
    join_all(reg, sw, "b", 1, hosts=(2,), now=0.0)
    sw.apply(reg.leave(1, 0, now=3.0))
    sw.apply(reg.kill(2, now=4.0))
    assert (reg.ended[1].cause, reg.ended[1].ended_at) == (END_LEFT, 3.0)
    assert reg.ended[1].reason == "its last worker (rank 0) left"
    assert (reg.ended[2].cause, reg.ended[2].ended_at) == (END_KILLED, 4.0)


def test_only_the_latest_ends_are_kept(reg, monkeypatch):
    monkeypatch.setattr(jobs_mod, "ENDED_KEPT", 3)
    sw = FakeSwitch()
    for i in range(5):
        job_id = join_all(reg, sw, f"j{i}", 1, now=0.0)[0].job_id
        sw.apply(reg.kill(job_id, now=float(i)))
    assert [end.ended_at for end in reg.ended.values()] == [2.0, 3.0, 4.0]


def test_barrier_releases_when_every_rank_arrived(reg):
    sw = FakeSwitch()
    join_all(reg, sw, "a", 3)
    tokens = [reg.barrier(1, rank, now=1.0) for rank in (0, 1)]
    assert tokens == [0, 0] and not reg.barrier_passed(1, 0)
    assert reg.barrier(1, 2, now=1.0) == 0
    assert reg.barrier_passed(1, 0)
    assert reg.barrier(1, 0, now=2.0) == 1 and not reg.barrier_passed(1, 1)
    with pytest.raises(JobError):
        reg.barrier(1, 7, now=2.0)


def test_name_tag_collisions_are_refused(reg, monkeypatch):
    reg.join("a", 1, 0, ("10.0.0.1", 1), now=0.0)
    monkeypatch.setattr(p, "name_tag", lambda name: 42)
    reg.jobs[1].tag = 42
    with pytest.raises(JobError):  # "b" has the same tag as "a" but another name
        reg.join("b", 1, 0, ("10.0.0.2", 1), now=0.0)


def test_rebuild_from_entries_restores_jobs_and_keeps_them_running(topo, reg):
    sw = FakeSwitch()
    sw.apply(rack.rack_writes(topo, "s1"))
    join_all(reg, sw, "a", 2)
    join_all(reg, sw, "b", 2, hosts=(3, 4), lanes=256)
    join_all(reg, sw, "c", 1, hosts=(5,), lanes=256)  # on the PBox
    entries = {"s1": list(sw.tables.values())}
    rebuilt, repairs = rebuild_from_entries(topo, entries, now=50.0, epoch_seed=1)
    # only the flood group is rewritten (groups cannot be read back); the PBox job is re-asserted
    c_id = reg.job_by_name("c").job_id
    assert repairs == [GroupWrite("s1", MODIFY, p.FLOOD_GROUP, rack.flood_group(topo, "s1").replicas),
                       PBoxJobWrite("pb1", MODIFY, c_id, 1, 0, 32, 256)]
    sw.apply(repairs)
    assert sorted(rebuilt.jobs) == sorted(reg.jobs)
    for job_id, job in reg.jobs.items():
        again = rebuilt.jobs[job_id]
        assert (again.tag, again.world_size, again.where, again.slots, again.switch,
                again.lanes) == (job.tag, job.world_size, job.where, job.slots, job.switch,
                                 job.lanes)
        if job.where == ON_SWITCH:
            assert again.epoch == job.epoch
        assert {r: (w.ip, w.port, w.mac) for r, w in again.workers.items()} == {
            r: (w.ip, w.port, w.mac) for r, w in job.workers.items()}
        assert all(w.last_seen == 50.0 for w in again.workers.values())
    assert rebuilt.switch_pools["s1"].free_slots() == 0
    # a retried join by name finds the job again, with no writes
    reply, updates = rebuilt.join("a", 2, 1, ("10.0.0.2", 40001), now=51.0)
    assert updates == [] and reply.job_id == 1 and rebuilt.jobs[1].name == "a"
    # new epochs continue above every epoch in use
    sw.apply(rebuilt.kill(1))
    _, updates = rebuilt.join("d", 1, 0, ("10.0.0.1", 9), now=52.0)
    # (above the epochs left in switch registers: a PBox job's epoch is not in its entry)
    assert dict(updates[0].entry.params)["epoch"] > max(
        j.epoch for j in reg.jobs.values() if j.where == "switch")


def test_rebuild_repairs_orphans_and_missing_static_entries(topo, reg):
    sw = FakeSwitch()
    join_all(reg, sw, "a", 2)
    sw.apply(reg.kill(1)[:1])  # only the jobs entry got deleted before the crash
    rebuilt, repairs = rebuild_from_entries(topo, {"s1": list(sw.tables.values())}, now=0.0)
    assert rebuilt.jobs == {}
    deletes = [u for u in repairs if isinstance(u, TableWrite) and u.op == DELETE]
    assert {u.entry.table for u in deletes} == {p.MEMBERS, p.RESULT_DST} and len(deletes) == 4
    inserts = [u for u in repairs if isinstance(u, TableWrite) and u.op == INSERT]
    assert len(inserts) == len(rack.rack_entries(topo, "s1"))
    sw.groups[p.FLOOD_GROUP] = ()
    sw.apply(repairs)
    assert sorted(e.table for e in sw.tables.values()) == sorted(
        e.table for e in rack.rack_entries(topo, "s1"))


def test_rack_entries_forward_every_endpoint_and_flood_broadcasts(topo):
    entries = rack.rack_entries(topo, "s1")
    forwards = {e.match[0].value: e.param("port") for e in entries if e.action == p.ACT_FORWARD}
    assert forwards[0x080000000101] == 1 and forwards[0x080000000164] == 9 and len(forwards) == 7
    flood = [e for e in entries if e.action == p.ACT_FLOOD]
    assert flood[0].match[0].value == p.BROADCAST_MAC and flood[0].param("group") == p.FLOOD_GROUP
    agg = [e for e in entries if e.table == p.AGGREGATORS]
    assert agg[0].match[0].value == 0x0A000064
    assert rack.flood_group(topo, "s1").replicas == tuple((port, 0) for port in (1, 2, 3, 4, 5, 6, 9))
