"""Elastic load over the switch and several PBoxes (issue 11): placement, the map the
agents get, rebalancing by measured rates, a lost PBox, promotion and rebuild."""

from __future__ import annotations

import pytest

from p4hub.controller.core import elastic, topology, traffic
from p4hub.controller.core.job import ON_PBOX, ON_SWITCH, PLACE_PBOX, JobError
from p4hub.controller.core.job_writes import part_write
from p4hub.controller.core.jobs import JobRegistry
from p4hub.controller.core.rebuild import rebuild_from_entries, recover_unheard
from p4hub.controller.core.traffic import RouteService
from p4hub.controller.core.updates import DELETE, INSERT, MODIFY, GroupWrite, PBoxJobWrite

PBOXES = ("pbox", "pbox2", "pbox3")


def rack(switch_slots: int = 256, pboxes: int = 3) -> JobRegistry:
    raw = topology.rack_dict(4, "127.0.0.1:50051", slots=switch_slots, job_slots=128,
                             pboxes=pboxes, pbox_slots=1024)
    return JobRegistry(topology.from_dict(raw))


def join_all(reg: JobRegistry, name: str, placement: str = "auto", n: int = 2):
    replies = [reg.join(name, n, r, (f"10.0.0.{r + 1}", 4000 + len(reg.jobs)), 0.0, placement)
               for r in range(n)]
    return replies[-1][0], [u for _, ups in replies for u in ups]


def pbox_writes(updates) -> list[PBoxJobWrite]:
    return [u for u in updates if isinstance(u, PBoxJobWrite)]


def no_overlap(reg: JobRegistry) -> None:
    ranges = sorted((part.slots.base, part.slots.end) for job in reg.jobs.values()
                    for part in job.parts)
    assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:], strict=False)), ranges


# -- the split ------------------------------------------------------------------------------


def test_proportional_shares_keep_the_total_and_the_floor():
    assert elastic.proportional(128, [1.0, 1.0, 1.0], 0) == (43, 43, 42)
    assert elastic.proportional(128, [4.0, 4.0, 1.0], 6) == (55, 55, 18)
    assert sum(elastic.proportional(100, [3.3, 0.01, 7.7], 5)) == 100
    with pytest.raises(ValueError):
        elastic.proportional(10, [1.0] * 3, 4)


def test_plan_moves_work_off_a_straggler_and_keeps_a_probe_on_it():
    plan = elastic.plan([43, 43, 42], [400.0, 400.0, 100.0])
    assert plan is not None and plan.shares[2] < 20 and sum(plan.shares) == 128
    assert plan.shares[2] >= 6  # exploration: 5% of the share stays on it
    assert plan.makespan_new < 0.6 * plan.makespan_now
    assert "aggregator 2 held it up" in plan.reason


def test_plan_keeps_a_split_that_is_good_enough_or_unmeasured():
    assert elastic.plan([43, 43, 42], [400.0, 380.0, 410.0]) is None  # < 15% to gain
    assert elastic.plan([64, 64], [400.0, None]) is None
    assert elastic.plan([128], [400.0]) is None


# -- placement ------------------------------------------------------------------------------


def test_a_job_without_switch_room_spreads_evenly_over_the_racks_pboxes():
    reg = rack()
    reply, updates = join_all(reg, "p", PLACE_PBOX)
    job = reg.jobs[reply.job_id]
    assert job.where == ON_PBOX and job.shares() == {"pbox": 43, "pbox2": 43, "pbox3": 42}
    writes = pbox_writes(updates)
    assert {(w.pbox, w.op, w.slot_count) for w in writes} == {
        ("pbox", INSERT, 43), ("pbox2", INSERT, 43), ("pbox3", INSERT, 42)}
    assert [r["aggregator"] for r in reply.routes] == [
        "10.0.0.100:48879", "10.0.0.101:48879", "10.0.0.102:48879"]
    assert all(r["fallback"] for r in reply.routes)
    assert reply.slot_count == reply.window == 128
    # one PBox slot pool per rack: the ranges never share a slot number
    bases = sorted((r["slot_base"], r["count"]) for r in reply.routes)
    assert bases == [(0, 43), (43, 43), (86, 42)]


def test_a_switch_short_of_slots_takes_what_it_has_and_the_pboxes_the_rest():
    reg = rack(switch_slots=192)
    join_all(reg, "a")  # 128 of 192
    reply, _ = join_all(reg, "b")
    job = reg.jobs[reply.job_id]
    assert job.where == ON_SWITCH and job.shares() == {"s1": 64, "pbox": 22, "pbox2": 21,
                                                        "pbox3": 21}
    assert [r["fallback"] for r in reply.routes] == [False, True, True, True]
    assert reply.routes[0]["aggregator"] == "10.0.0.100:48879"  # the switch answers for it
    assert reply.window == 128


def test_too_few_switch_slots_are_left_alone():
    reg = rack(switch_slots=140)
    join_all(reg, "a")  # 12 left: less than an eighth of a window
    reply, _ = join_all(reg, "b")
    assert reg.jobs[reply.job_id].where == ON_PBOX and reg.switch_pools["s1"].free_slots() == 12


# -- rebalancing ------------------------------------------------------------------------------


def report(reg: JobRegistry, job_id: int, per_route: list[tuple[int, float]], now: float,
           ranks: int = 2) -> None:
    """Every rank reports cumulative (results, seconds busy) per route."""
    job = reg.jobs[job_id]
    for rank in range(ranks):
        reg.heartbeat(job_id, rank, now, service=RouteService(job.epoch, tuple(per_route)))


def measure(reg: JobRegistry, job, factor: float, victim: str, start: float) -> float:
    """Heartbeats under the job's map: a baseline, then ``elastic.MIN_SAMPLES`` intervals
    of 1 s with ``victim`` ``factor`` times slower; returns the time of the last."""
    report(reg, job.job_id, [(0, 0.0)] * len(job.shares()), start)
    for i in range(1, elastic.MIN_SAMPLES + 1):
        report(reg, job.job_id, slowed(job, factor, victim, float(i)), start + i)
    return start + elastic.MIN_SAMPLES


def slowed(job, factor: float, victim: str, seconds: float) -> list[tuple[int, float]]:
    """What the agents measure in ``seconds`` when ``victim`` serves each round
    ``factor`` times slower: a round takes 10 ms, results = slots * time / latency,
    every route busy all the time."""
    out = []
    for name, slots in job.shares().items():
        latency = 0.01 * (factor if name == victim else 1.0)
        out.append((int(slots * seconds / latency), seconds))
    return out


def test_a_pbox_four_times_slower_loses_most_of_its_share_once_then_holds():
    reg = rack()
    reply, _ = join_all(reg, "p", PLACE_PBOX)
    job = reg.jobs[reply.job_id]
    old_parts, old_epoch = job.parts, job.epoch
    assert measure(reg, job, 4.0, "pbox2", 1.0) == 4.0
    updates = reg.rebalance(now=4.0)
    assert job.epoch != old_epoch and job.shares()["pbox2"] < 20
    assert sum(job.shares().values()) == 128
    assert "rebalanced over PBoxes" in job.moves[-1].reason
    assert {(w.pbox, w.op) for w in pbox_writes(updates)} == {(p, MODIFY) for p in PBOXES}
    # fresh ranges: no slot serves another window index (hosts/routes.py)
    old = {(p.slots.base + i) for p in old_parts for i in range(p.slots.count)}
    assert not old & {(p.slots.base + i) for p in job.parts for i in range(p.slots.count)}
    assert reg.pbox_pools["pbox"].free_slots() == 1024 - 128
    # the new epoch starts its measurements afresh; inside the hold-down nothing moves
    epoch = job.epoch
    report(reg, job.job_id, [(0, 0.0)] * 3, 5.0)
    report(reg, job.job_id, slowed(job, 3.0, "pbox3", 1.0), 6.0)
    assert reg.rebalance(now=6.0) == []  # one interval measured: not enough
    for i in (2, 3):
        report(reg, job.job_id, slowed(job, 3.0, "pbox3", float(i)), 5.0 + i)
    assert reg.rebalance(now=4.0 + elastic.HOLD_DOWN - 0.1) == [] and job.epoch == epoch
    # giving pbox2 slots back reverses the first move: that waits twice the hold-down
    assert reg.rebalance(now=4.0 + elastic.HOLD_DOWN + 0.1) == [] and job.epoch == epoch
    assert reg.rebalance(now=4.0 + elastic.hold_down(0) + 0.1) and job.epoch != epoch
    assert "(reversal 1 in a row)" in job.moves[-1].reason and job.reversals == 1


def test_two_pboxes_that_trade_places_wait_longer_each_time():
    """Noise makes pbox and pbox3 look twice as slow in turn: each re-split reverses the
    one before, and each waits twice as long as the one before (8, 16, 32 s), so a job
    whose PBoxes are really equal stops paying a resync every few seconds."""
    reg = rack()
    reply, _ = join_all(reg, "p", PLACE_PBOX)
    job = reg.jobs[reply.job_id]
    now = measure(reg, job, 2.0, "pbox", 1.0)
    assert reg.rebalance(now) and job.reversals == 0  # the first move is no reversal
    waits = []
    for k, victim in enumerate(("pbox3", "pbox", "pbox3")):
        moved_at = job.split_at
        now = measure(reg, job, 2.0, victim, now + 1.0)
        while not reg.rebalance(now):
            now = measure(reg, job, 2.0, victim, now + 1.0)
        waits.append(now - moved_at)
        assert job.reversals == k + 1
    assert [elastic.hold_down(k) <= w < elastic.hold_down(k) + 5 for k, w in enumerate(waits)] \
        == [True] * 3, waits
    assert elastic.hold_down(10) == elastic.MAX_HOLD_DOWN


def test_a_balanced_job_is_not_moved():
    reg = rack()
    reply, _ = join_all(reg, "p", PLACE_PBOX)
    job = reg.jobs[reply.job_id]
    measure(reg, job, 1.0, "pbox2", 1.0)
    assert reg.rebalance(now=10.0) == [] and len(job.moves) == 0


def test_the_switch_share_stays_and_only_the_pbox_share_is_rebalanced():
    reg = rack(switch_slots=192)
    join_all(reg, "a")
    reply, _ = join_all(reg, "b")
    job = reg.jobs[reply.job_id]
    reg.rebalance(now=measure(reg, job, 4.0, "pbox3", 1.0))
    shares = job.shares()
    assert shares["s1"] == 64 and shares["pbox3"] < 10 and sum(shares.values()) == 128


# -- a lost PBox, promotion -------------------------------------------------------------------


def test_a_lost_pbox_share_goes_to_the_other_pboxes_and_it_is_not_written_to():
    reg = rack(switch_slots=128)
    join_all(reg, "a")  # the switch is full
    reply, _ = join_all(reg, "b")
    job = reg.jobs[reply.job_id]
    updates = reg.pbox_lost(job.job_id, "pbox2", 5.0, "PBox pbox2 is unreachable (refused)")
    assert set(job.shares()) == {"pbox", "pbox3"} and job.window == 128
    assert all(w.pbox != "pbox2" for w in pbox_writes(updates))
    assert "its share moved to PBox(es) pbox, pbox3" in job.moves[-1].reason
    no_overlap(reg)


def test_a_lost_pbox_moves_the_job_to_the_switch_when_it_has_room():
    reg = rack()
    reply, _ = join_all(reg, "p", PLACE_PBOX)
    job = reg.jobs[reply.job_id]
    updates = reg.pbox_lost(job.job_id, "pbox", 5.0, "PBox pbox is unreachable")
    assert job.where == ON_SWITCH and job.parts == () and job.shares() == {"s1": 128}
    assert {(w.pbox, w.op) for w in pbox_writes(updates)} == {("pbox2", DELETE),
                                                              ("pbox3", DELETE)}
    assert all(pool.free_slots() == 1024 for pool in reg.pbox_pools.values())


def test_a_precision_job_on_pboxes_moves_onto_the_switch_with_a_float_route():
    """A lost PBox moves a precision job placed on the PBoxes onto the switch, with its
    float route on another PBox; a lost float route moves on; with no PBox left for it,
    the job ends."""
    reg = rack()
    replies = [reg.join("w", 2, r, (f"10.0.0.{r + 1}", 4000), 0.0, PLACE_PBOX,
                        precision=1e-3)[0] for r in range(2)]
    job = reg.jobs[replies[0].job_id]
    assert job.where == ON_PBOX and replies[1].precision == 1e-3
    assert all(route["fallback"] for route in reg.routes(job)) and job.float_part is None
    updates = reg.pbox_lost(job.job_id, "pbox", 5.0, "PBox pbox is unreachable")
    assert job.where == ON_SWITCH and job.shares() == {"s1": 128} and job.window == 128
    floats = job.float_part
    assert floats is not None and (floats.pbox, floats.share, floats.floats) == ("pbox2", 0, 128)
    assert [(r["fallback"], r.get("float", False), r["count"]) for r in reg.routes(job)] == [
        (False, False, 128), (True, True, 128)]
    assert {(w.pbox, w.op, w.floats) for w in pbox_writes(updates)} == {
        ("pbox2", MODIFY, 128), ("pbox3", DELETE, 0)}
    assert reg.promote(6.0) == [] and reg.rebalance(60.0) == []  # nothing to move or split
    epoch = job.epoch
    updates = reg.pbox_lost(job.job_id, "pbox2", 7.0, "PBox pbox2 is unreachable")
    assert job.epoch != epoch and job.float_part is not None and job.float_part.pbox == "pbox3"
    assert job.shares() == {"s1": 128} and job.slots.count == 128
    assert {(w.pbox, w.op) for w in pbox_writes(updates)} == {("pbox3", MODIFY)}
    one = rack(pboxes=1)  # the switch has room, and the rack's one PBox holds the float route
    reply = one.join("w", 1, 0, ("10.0.0.1", 4000), 0.0, precision=1e-3)[0]
    assert reply.where == ON_SWITCH and one.jobs[reply.job_id].float_part is not None
    one.pbox_lost(reply.job_id, "pbox", 5.0, "PBox pbox is unreachable")
    assert reply.job_id not in one.jobs
    assert "no other PBox of the rack has room for its float route" in \
        one.ended[reply.job_id].reason
    assert all(pool.free_slots() == 256 for pool in one.switch_pools.values())
    with pytest.raises(JobError, match="strictly between 0 and 1"):
        reg.join("x", 1, 0, ("10.0.0.3", 4000), 0.0, precision=0.0)
    assert "x" not in {j.name for j in reg.jobs.values()}


def test_a_partly_placed_precision_job_holds_its_float_route_beside_a_share():
    """Switch short of slots: the job takes what the switch has, the rest over the PBoxes;
    the first PBox's range holds its share and then the float route (one range per PBox);
    re-splits, growth on the switch and promotion keep a float route, on fresh ranges."""
    reg = rack(switch_slots=192)
    join_all(reg, "a")  # 128 of the switch's 192
    replies = [reg.join("b", 2, r, (f"10.0.0.{r + 1}", 4100), 0.0, precision=1e-3)[0]
               for r in range(2)]
    job = reg.jobs[replies[0].job_id]
    assert job.shares() == {"s1": 64, "pbox": 22, "pbox2": 21, "pbox3": 21} and job.window == 128
    host = job.float_part
    assert host is not None and (host.pbox, host.share, host.floats) == ("pbox", 22, 128)
    assert host.slots.count == 150 and host.float_slots.base == host.slots.base + 22
    routes = reg.routes(job)
    assert [r["count"] for r in routes] == [64, 22, 21, 21, 128] and routes[-1]["float"]
    no_overlap(reg)
    # a re-split by the rates: fresh ranges, the float route still after pbox's share
    updates = reg._resplit(job, {"pbox": 10, "pbox2": 27, "pbox3": 27}, 10.0, "test")
    assert updates is not None and job.float_part is not None
    assert (job.float_part.pbox, job.float_part.share, job.float_part.floats) == ("pbox", 10, 128)
    assert host.slots.base not in {pt.slots.base for pt in job.parts}
    assert {w.pbox: w.floats for w in pbox_writes(updates)} == {"pbox": 128, "pbox2": 0,
                                                                "pbox3": 0}
    no_overlap(reg)
    # the other job ends: the switch has room for all of it, and it goes there whole
    reg.kill(next(j.job_id for j in reg.jobs.values() if j.name == "a"))
    updates = reg.promote(now=20.0)
    assert job.shares() == {"s1": 128} and job.float_part is not None
    assert [(pt.pbox, pt.share, pt.floats) for pt in job.parts] == [("pbox", 0, 128)]
    assert {(w.pbox, w.op) for w in pbox_writes(updates)} == {
        ("pbox", MODIFY), ("pbox2", DELETE), ("pbox3", DELETE)}
    assert reg.promote(now=30.0) == []
    reg.kill(job.job_id)
    assert all(pool.free_slots() == 1024 for pool in reg.pbox_pools.values())


def test_a_partly_placed_job_moves_whole_onto_the_switch_when_it_frees():
    reg = rack(switch_slots=192)
    a, _ = join_all(reg, "a")
    b, _ = join_all(reg, "b")
    job = reg.jobs[b.job_id]
    old_switch = job.slots
    reg.kill(a.job_id)
    updates = reg.promote(now=9.0)
    assert job.shares() == {"s1": 128} and job.parts == ()
    assert not (set(range(old_switch.base, old_switch.end))
                & set(range(job.slots.base, job.slots.end)))  # a fresh switch range
    assert {w.op for w in pbox_writes(updates)} == {DELETE}
    assert reg.switch_pools["s1"].free_slots() == 192 - 128


def test_a_partly_placed_job_takes_a_larger_switch_range_when_one_frees():
    reg = rack(switch_slots=192)
    a, _ = join_all(reg, "a")
    b, _ = join_all(reg, "b")
    job = reg.jobs[b.job_id]
    old_switch, old_epoch = job.slots, job.epoch
    reg.kill(a.job_id)
    reg.switch_pools["s1"].allocate("filler", 28)  # 100 of a's 128 free in one run
    updates = reg.promote(now=9.0)
    assert job.shares() == {"s1": 100, "pbox": 10, "pbox2": 9, "pbox3": 9}
    assert job.epoch != old_epoch and "switch share 64 -> 100 of 128" in job.moves[-1].reason
    assert not (set(range(old_switch.base, old_switch.end))
                & set(range(job.slots.base, job.slots.end)))  # a fresh switch range
    assert {(u.pbox, u.op) for u in pbox_writes(updates)} == {
        ("pbox", MODIFY), ("pbox2", MODIFY), ("pbox3", MODIFY)}
    assert reg.switch_pools["s1"].free_slots() == 192 - 28 - 100
    assert sum(r["count"] for r in reg.routes(job)) == 128
    no_overlap(reg)
    assert reg.promote(now=10.0) == []  # nothing larger is free


def test_a_job_the_switch_had_no_room_for_takes_a_switch_range_when_one_frees():
    """The job was all on PBoxes: it gets a switch range and the multicast group; the
    PBox share shrinks onto its fastest PBoxes when the rest is too small for all."""
    reg = rack(switch_slots=128)
    a, _ = join_all(reg, "a")
    b, _ = join_all(reg, "b")
    job = reg.jobs[b.job_id]
    assert job.where == ON_PBOX
    report(reg, job.job_id, [(0, 0.0)] * 3, 1.0)
    for i in range(1, elastic.MIN_SAMPLES + 1):
        report(reg, job.job_id, [(100 * i, 1.0 * i), (300 * i, 1.0 * i), (200 * i, 1.0 * i)],
               1.0 + i)
    reg.kill(a.job_id)
    reg.switch_pools["s1"].allocate("filler", 2)  # 126 free in one run: 2 left for PBoxes
    updates = reg.promote(now=9.0)
    assert job.where == ON_SWITCH and job.shares() == {"s1": 126, "pbox2": 1, "pbox3": 1}
    assert any(isinstance(u, GroupWrite) and u.op == INSERT for u in updates)
    assert {(u.pbox, u.op) for u in pbox_writes(updates)} == {
        ("pbox", DELETE), ("pbox2", MODIFY), ("pbox3", MODIFY)}


def test_a_refused_resplit_leaves_everything_as_it_was():
    reg = rack()
    reply, _ = join_all(reg, "p", PLACE_PBOX)
    job = reg.jobs[reply.job_id]
    before = (job.parts, job.epoch, [pool.free_slots() for pool in reg.pbox_pools.values()])
    reg.begin()
    reg.pbox_pools["pbox"].allocate("filler", 1024 - 128)  # no fresh range left anywhere
    try:
        assert reg._resplit(job, {"pbox": 64, "pbox3": 64}, 1.0, "test") is None
    finally:
        reg.rollback()
    reg.pbox_pools["pbox"].free("filler")
    assert (job.parts, job.epoch, [p.free_slots() for p in reg.pbox_pools.values()]) == before


# -- rebuild ----------------------------------------------------------------------------------


def test_a_restarted_controller_rebuilds_every_pbox_range_from_the_pboxes():
    reg = rack(switch_slots=192)
    join_all(reg, "a")
    reply, _ = join_all(reg, "b")
    job = reg.jobs[reply.job_id]
    entries = {"s1": reg.expected_entries("s1")}
    listed = {part.pbox: [{"job_id": job.job_id, "world_size": 2, "slot_base": part.slots.base,
                           "slot_count": part.slots.count, "lanes": 64}] for part in job.parts}
    rebuilt, repairs = rebuild_from_entries(reg.topo, entries, 1.0, 7, listed)
    again = rebuilt.jobs[job.job_id]
    assert again.shares() == job.shares() and again.window == 128
    assert [p.slots for p in again.parts] == [p.slots for p in job.parts]
    assert {(w.pbox, w.op) for w in pbox_writes(repairs)} == {(p, MODIFY) for p in PBOXES}
    assert again.epoch != job.epoch  # the PBox ranges' epoch is in no entry


def test_a_restarted_controller_gets_a_jobs_precision_and_float_route_back_from_its_pboxes():
    """The PBoxes keep a precision job's bound (add_job's ``precision``) and how much of
    its range is its float route (``floats``): the rebuilt job has both before any rank
    rejoins, so its map is the agents' and a lost PBox moves its float route, and a
    rejoin with another bound is refused."""
    reg = rack()
    reply = [reg.join("w", 2, r, (f"10.0.0.{r + 1}", 4000), 0.0, precision=1e-3)[0]
             for r in range(2)][0]
    job = reg.jobs[reply.job_id]
    writes = [part_write(job, part, INSERT) for part in job.parts]
    assert {(w.pbox, w.precision, w.floats) for w in writes} == {("pbox", 1e-3, 128)}
    listed = {w.pbox: [{"job_id": job.job_id, "world_size": 2, "slot_base": w.slot_base,
                        "slot_count": w.slot_count, "lanes": 64, "precision": w.precision,
                        "floats": w.floats}]
              for w in writes}
    rebuilt, repairs = rebuild_from_entries(reg.topo, {"s1": reg.expected_entries("s1")}, 1.0,
                                            7, listed)
    again = rebuilt.jobs[job.job_id]
    assert again.precision == 1e-3 and again.name is None
    assert rebuilt.routes(again) == reg.routes(job)
    assert {(w.precision, w.floats) for w in pbox_writes(repairs)} == {(1e-3, 128)}
    with pytest.raises(JobError, match="has precision 0.001, not None"):
        rebuilt.join("w", 2, 0, ("10.0.0.1", 4000), 2.0)
    rebuilt.pbox_lost(job.job_id, "pbox", 3.0, "PBox pbox is unreachable")
    assert again.where == ON_SWITCH and again.float_part is not None
    assert again.float_part.pbox == "pbox2"


def test_a_pbox_that_missed_the_rebuild_gets_its_range_back_from_the_agents_map():
    """pbox2 does not answer list_jobs when the controller restarts: the rebuilt job has
    no range there (its map would not cover the agents' window) until a heartbeat brings
    an agent's map, which gives pbox2's range back; a lost pbox2 is then handled as
    any lost PBox (the switch has room: the job moves there whole)."""
    reg = rack()
    reply, _ = join_all(reg, "p", PLACE_PBOX)
    job = reg.jobs[reply.job_id]
    agent_map = traffic.pbox_routes({"map": list(reg.routes(job, 0))})
    entries = {"s1": reg.expected_entries("s1")}
    listed = {part.pbox: [{"job_id": job.job_id, "world_size": 2, "slot_base": part.slots.base,
                           "slot_count": part.slots.count, "lanes": 64}]
              for part in job.parts if part.pbox != "pbox2"}
    rebuilt, _ = rebuild_from_entries(reg.topo, entries, 1.0, 7, listed)
    again = rebuilt.jobs[job.job_id]
    assert again.unheard == ("pbox2",) and "pbox2" not in again.shares()
    for bad in (None, [], [{"aggregator": "10.0.0.102:48879", "slot_base": -1, "count": 4}],
                ["pbox2"]):
        assert traffic.pbox_routes({"map": bad}) is None
    assert not recover_unheard(rebuilt, again, None)
    assert again.unheard == ("pbox2",)
    assert recover_unheard(rebuilt, again, agent_map)
    assert again.shares() == job.shares() and again.unheard == ()
    assert [(p.pbox, p.slots) for p in again.parts] == [(p.pbox, p.slots) for p in job.parts]
    assert not recover_unheard(rebuilt, again, agent_map)  # once
    rebuilt.pbox_lost(job.job_id, "pbox2", 5.0, "PBox pbox2 is unreachable")
    assert again.shares() == {"s1": job.window} and again.parts == ()
    no_overlap(rebuilt)


def test_a_float_route_host_that_missed_the_rebuild_gets_its_range_back_from_the_map():
    """A partly placed precision job: pbox holds its share and then the float route in one
    range. pbox does not answer list_jobs; the agents' map gives both back as that range."""
    reg = rack(switch_slots=192)
    join_all(reg, "a")
    replies = [reg.join("b", 2, r, (f"10.0.0.{r + 1}", 4100), 0.0, precision=1e-3)[0]
               for r in range(2)]
    job = reg.jobs[replies[0].job_id]
    host = job.float_part
    assert host is not None and host.pbox == "pbox" and host.share and host.floats == 128
    agent_map = traffic.pbox_routes({"map": list(reg.routes(job, 0))})
    assert agent_map is not None and [r[3] for r in agent_map] == [False, False, False, True]
    listed = {part.pbox: [{"job_id": job.job_id, "world_size": 2, "slot_base": part.slots.base,
                           "slot_count": part.slots.count, "lanes": 64, "precision": 1e-3}]
              for part in job.parts if part.pbox != "pbox"}
    rebuilt, _ = rebuild_from_entries(reg.topo, {"s1": reg.expected_entries("s1")}, 1.0, 7,
                                      listed)
    again = rebuilt.jobs[job.job_id]
    assert again.unheard == ("pbox",) and again.float_part is None
    assert recover_unheard(rebuilt, again, agent_map)
    assert [(p.pbox, p.slots, p.floats) for p in again.parts] == [
        (p.pbox, p.slots, p.floats) for p in job.parts]
    assert rebuilt.routes(again) == reg.routes(job)
    no_overlap(rebuilt)


def test_a_map_cannot_claim_a_range_another_job_holds():
    reg = rack()
    reply, _ = join_all(reg, "p", PLACE_PBOX)
    job = reg.jobs[reply.job_id]
    theirs = next(part for part in job.parts if part.pbox == "pbox2")
    listed = {"pbox": [], "pbox3": []}  # only they answered, and hold nothing
    rebuilt, _ = rebuild_from_entries(reg.topo, {"s1": reg.expected_entries("s1")}, 1.0, 7,
                                      listed)
    again = rebuilt.jobs[job.job_id]
    rebuilt.pbox_pools["pbox2"].reserve("someone", theirs.slots.base, theirs.slots.count)
    recover_unheard(rebuilt, again, traffic.pbox_routes({"map": list(reg.routes(job, 0))}))
    assert "pbox2" not in again.shares() and again.unheard == ()
    no_overlap(rebuilt)


# -- scale in and out -------------------------------------------------------------------------


def tick(reg: JobRegistry, job, factor: float, victim: str, start: float,
         seconds: int) -> float:
    """``seconds`` of the live loop: a heartbeat from every rank and a controller check
    every second, ``victim`` ``factor`` times slower; the counters restart with each
    new epoch, as the agents' do. Returns the time of the last check."""
    epoch, since = None, start
    for t in range(seconds):
        now = start + t
        if job.epoch != epoch:
            epoch, since = job.epoch, now
        report(reg, job.job_id, slowed(job, factor, victim, now - since), now)
        reg.rebalance(now)
    return start + seconds - 1


def test_a_pbox_that_stays_slow_is_drained_then_probed_again():
    reg = rack()
    reply, _ = join_all(reg, "p", PLACE_PBOX)
    job = reg.jobs[reply.job_id]
    end = tick(reg, job, 10.0, "pbox2", 1.0, 20)
    reasons = [m.reason for m in job.moves]
    assert "rebalanced" in reasons[0] and "drained PBox pbox2 (scale in)" in reasons[-1]
    assert set(job.shares()) == {"pbox", "pbox3"} and job.window == 128
    assert reg.pbox_pools["pbox2"].free_slots() == 1024 - 128  # released
    drained_at = job.moves[-1].at
    assert drained_at is not None and end - drained_at < elastic.PROBE_AFTER
    # the two left are balanced: nothing moves until pbox2 is due a probe
    before = len(job.moves)
    end = tick(reg, job, 1.0, "pbox", end + 1, int(drained_at + elastic.PROBE_AFTER - end - 1))
    assert len(job.moves) == before
    updates = reg.rebalance(drained_at + elastic.PROBE_AFTER)
    assert "probing PBox pbox2 with 6 slots (scale out)" in job.moves[-1].reason
    assert job.shares()["pbox2"] == 6 and sum(job.shares().values()) == 128
    assert ("pbox2", MODIFY) in {(w.pbox, w.op) for w in pbox_writes(updates)}


def test_a_lost_pbox_is_probed_once_back_and_grows_when_it_serves_faster():
    reg = rack(switch_slots=128)
    join_all(reg, "a")
    reply, _ = join_all(reg, "b")
    job = reg.jobs[reply.job_id]
    reg.pbox_lost(job.job_id, "pbox2", 5.0, "PBox pbox2 is unreachable")
    assert "pbox2" not in job.shares()
    assert reg.rebalance(5.0 + elastic.PROBE_AFTER - 1) == []
    reg.rebalance(5.0 + elastic.PROBE_AFTER)
    assert job.shares()["pbox2"] == 6
    # equal round times mean a balanced makespan whatever the shares; pbox2 grows once
    # its rounds are quicker than the loaded others' (the split's fixed point moves)
    now = measure(reg, job, 1.0, "pbox", 5.0 + elastic.PROBE_AFTER + elastic.HOLD_DOWN)
    assert reg.rebalance(now) == []
    tick(reg, job, 0.05, "pbox2", now + 1, 10)
    assert job.shares()["pbox2"] > 12


def test_a_smaller_gain_is_taken_once_it_persisted_with_the_same_straggler():
    """A PBox 1.4x slower predicts a cut under MIN_GAIN: it is not taken at once (noise
    that size is common), but once every check for PERSIST_SECONDS has seen the same PBox
    hold the makespan up."""
    reg = rack()
    reply, _ = join_all(reg, "p", PLACE_PBOX)
    job = reg.jobs[reply.job_id]
    epoch = job.epoch
    now = measure(reg, job, 1.4, "pbox2", 1.0)
    predicted = elastic.plan(list(job.shares().values()), job.rates(elastic.MIN_SAMPLES),
                             elastic.PERSIST_GAIN)
    assert predicted is not None and elastic.PERSIST_GAIN <= predicted.gain < elastic.MIN_GAIN
    assert reg.rebalance(now) == []
    start = now
    while now + 1.0 - start < elastic.PERSIST_SECONDS:
        now += 1.0
        report(reg, job.job_id, slowed(job, 1.4, "pbox2", now - 1.0), now)
        assert reg.rebalance(now) == [] and job.epoch == epoch
    now += 1.0
    report(reg, job.job_id, slowed(job, 1.4, "pbox2", now - 1.0), now)
    assert reg.rebalance(now) and job.epoch != epoch
    assert job.shares()["pbox2"] < min(job.shares()["pbox"], job.shares()["pbox3"])
    assert now - start == elastic.PERSIST_SECONDS
    assert "predicted for" in job.moves[-1].reason and job.gain_streak is None


def test_a_smaller_gain_restarts_its_wait_when_the_straggler_or_the_map_changes():
    """Noise moves which aggregator looks slowest: each change restarts the wait, so a
    gain under MIN_GAIN whose straggler keeps changing is never taken; one over it is."""
    def plan_with(gain: float, slowest: int) -> elastic.Plan:
        return elastic.Plan((1, 1), 1.0, 1.0 - gain, "", slowest)

    small, wait = plan_with(0.2, 1), elastic.PERSIST_SECONDS
    take, streak = elastic.persisted(None, small, 7, "pbox2", 10.0)
    assert not take and streak == elastic.Streak(7, "pbox2", 10.0)
    assert elastic.persisted(streak, small, 7, "pbox2", 10.0 + wait - 0.1) == (False, streak)
    assert elastic.persisted(streak, small, 7, "pbox2", 10.0 + wait) == (True, streak)
    # another straggler, or another map: the wait starts again from now
    for epoch, held_up in ((7, "pbox3"), (8, "pbox2")):
        take, again = elastic.persisted(streak, small, epoch, held_up, 10.0 + wait)
        assert not take and again == elastic.Streak(epoch, held_up, 10.0 + wait)
    # alternating stragglers, a check a second for four waits: never taken
    streak = None
    for k in range(int(4 * wait)):
        take, streak = elastic.persisted(streak, small, 7, ("pbox2", "pbox3")[k % 2], float(k))
        assert not take
    assert elastic.persisted(streak, plan_with(elastic.MIN_GAIN, 0), 7, "pbox", 0.0) == \
        (True, None)
