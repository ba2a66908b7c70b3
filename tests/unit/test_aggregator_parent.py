"""The PBox core as a rack's first level of a job over racks (hosts/pbox/aggregator.py with a
Parent): it sums its rack, sends one PARTIAL up, stores the parent's RESULT and sends it
to the rack, as a leaf switch does (p4src/aggregate.p4 job_on_leaf)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from p4hub.hosts import wire
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.pbox.job_config import AggregatorError, Parent
from p4hub.hosts.wire import DEFAULT_LANES, NO_RANK, Header, PacketType

JOB, BASE, N = 7, 16, 5
ROOT = ("10.0.0.241", 48879)
RACK = {2: ("10.0.0.3", 47002), 4: ("10.0.0.5", 47004)}  # ranks 2 and 4 of 5 sit here


def agg() -> Aggregator:
    a = Aggregator()
    a.add_job(JOB, N, BASE, 8, DEFAULT_LANES, parent={"address": list(ROOT), "child": 1, "rack_size": 2})
    return a


def contrib(rank: int, values, position: int = 3, slot: int = BASE + 1, exp: int = 0,
            ptype=PacketType.CONTRIB, retransmit: bool = False) -> bytes:
    header = Header(type=ptype, job=JOB, rank=rank, slot=slot, position=position, nelem=DEFAULT_LANES,
                    exp=exp, count=1, retransmit=retransmit)
    return wire.encode(header, np.asarray(values, np.int64).astype(np.uint32).view(np.int32))


def result(values, position: int = 3, slot: int = BASE + 1, exp: int = 9) -> bytes:
    header = Header(type=PacketType.RESULT, job=JOB, rank=NO_RANK, slot=slot, position=position,
                    nelem=DEFAULT_LANES, exp=exp, count=N)
    return wire.encode(header, np.asarray(values, np.int32))


def test_a_completed_rack_goes_up_as_one_partial_and_the_result_comes_down_to_it():
    a = agg()
    rng = np.random.default_rng(1)
    x2, x4 = rng.integers(-1000, 1000, (2, DEFAULT_LANES))
    assert a.receive(contrib(2, x2, exp=4), RACK[2], 0.0) == []
    ((partial, to),) = a.receive(contrib(4, x4, exp=-1), RACK[4], 0.0)
    header, lanes = wire.decode(partial)
    assert to == ROOT
    assert (header.type, header.rank, header.count, header.exp, header.slot, header.position) == \
        (PacketType.PARTIAL, 1, 2, 4, BASE + 1, 3)
    np.testing.assert_array_equal(lanes, x2 + x4)
    total = rng.integers(-5000, 5000, DEFAULT_LANES)
    out = a.receive(result(total), ROOT, 0.0)
    assert sorted(dst for _, dst in out) == sorted(RACK.values())
    for datagram, _ in out:
        got, lanes = wire.decode(datagram)
        assert (got.type, got.count, got.exp) == (PacketType.RESULT, N, 9)
        np.testing.assert_array_equal(lanes, total)
    stats = a.job_stats(JOB)
    assert (stats.partials_sent, stats.parent_results) == (1, 1)
    # a repeat of the RESULT finds no waiting cell; a resend gets the stored one
    assert a.receive(result(total), ROOT, 0.0) == [] and a.job_stats(JOB).parent_dropped == 1
    ((again, to),) = a.receive(contrib(4, x4, exp=-1, retransmit=True), RACK[4], 0.0)
    assert to == RACK[4]
    np.testing.assert_array_equal(wire.decode(again)[1], total)


def test_before_the_result_only_the_lowest_ranks_resend_goes_up_again():
    a = agg()
    a.receive(contrib(2, np.ones(DEFAULT_LANES)), RACK[2], 0.0)
    a.receive(contrib(4, np.ones(DEFAULT_LANES)), RACK[4], 0.0)
    assert a.receive(contrib(4, np.ones(DEFAULT_LANES), retransmit=True), RACK[4], 0.0) == []
    ((partial, to),) = a.receive(contrib(2, np.ones(DEFAULT_LANES), retransmit=True), RACK[2], 0.0)
    header, lanes = wire.decode(partial)
    assert to == ROOT and header.retransmit and header.count == 2
    np.testing.assert_array_equal(lanes, np.full(DEFAULT_LANES, 2))
    assert a.job_stats(JOB).partials_resent == 1


def test_a_prime_round_goes_up_a_prime():
    a = agg()
    a.receive(contrib(2, np.arange(DEFAULT_LANES), ptype=PacketType.PRIME, exp=-128), RACK[2], 0.0)
    ((partial, _),) = a.receive(contrib(4, np.arange(DEFAULT_LANES)[::-1], ptype=PacketType.PRIME, exp=-128),
                                RACK[4], 0.0)
    header, lanes = wire.decode(partial)
    assert header.type == PacketType.PRIME and header.count == 2
    np.testing.assert_array_equal(lanes, np.maximum(np.arange(DEFAULT_LANES), np.arange(DEFAULT_LANES)[::-1]))


def test_results_from_anyone_but_the_parent_or_for_another_round_reach_nobody():
    a = agg()
    a.receive(contrib(2, np.ones(DEFAULT_LANES)), RACK[2], 0.0)
    assert a.receive(result(np.ones(DEFAULT_LANES)), ("10.0.0.9", 48879), 0.0) == []
    assert a.job_stats(JOB).rejected["type"] == 1
    assert a.receive(result(np.ones(DEFAULT_LANES)), ROOT, 0.0) == []  # the round is still open here
    a.receive(contrib(4, np.ones(DEFAULT_LANES)), RACK[4], 0.0)
    assert a.receive(result(np.ones(DEFAULT_LANES), position=11), ROOT, 0.0) == []  # another round
    assert a.job_stats(JOB).parent_dropped == 2


def test_a_parent_must_fit_the_job():
    with pytest.raises(AggregatorError, match="rack size"):
        Aggregator().add_job(1, 2, 0, 4, DEFAULT_LANES, Parent(ROOT, 0, 3))
    with pytest.raises(AggregatorError, match="a parent is"):
        Aggregator().add_job(1, 2, 0, 4, DEFAULT_LANES, {"address": "nowhere"})


def test_the_pbox_control_channel_configures_a_parent_on_every_shard():
    from p4hub.hosts.pbox.core import ControlCore, LocalShards, ShardCore

    control = ControlCore(LocalShards([ShardCore((i, 2), 1024) for i in range(2)]))
    reply = control.control({"cmd": "add_job", "job": JOB, "world_size": N, "slot_base": BASE,
                             "slot_count": 8, "parent": {"address": "10.0.0.241:48879",
                                                         "child": 1, "rack_size": 2}})
    assert reply == {"ok": True}
    (listed,) = control.control({"cmd": "list_jobs"})["jobs"]
    assert listed["parent"] == {"address": ROOT, "child": 1, "rack_size": 2}
    bad = control.control({"cmd": "add_job", "job": 8, "world_size": 2, "slot_base": 0,
                           "slot_count": 4, "parent": {"address": "x", "child": 0,
                                                       "rack_size": 1}})
    assert "not ip:port" in bad["error"]


def test_the_controller_configures_a_first_level_pbox_and_modify_keeps_it():
    from p4hub.controller.core.updates import INSERT, MODIFY, PBoxJobWrite
    from p4hub.hosts.pbox.core import ControlCore, LocalShards, ShardCore
    from tests.support.pbox_control import pbox_control

    core = ControlCore(LocalShards([ShardCore((0, 1), 1024)]))
    write = PBoxJobWrite("pb1", INSERT, JOB, N, BASE, 8, 64, parent="10.0.0.241:48879",
                         child=1, rack_size=2)
    with pbox_control(core) as (control, _):
        control(write)
        assert core.jobs[JOB].parent == Parent(ROOT, 1, 2)
        assert control(replace(write, op=MODIFY)) is False  # there as described
        assert control(replace(write, op=MODIFY, child=0)) is True
        assert core.jobs[JOB].parent == Parent(ROOT, 0, 2)


def test_a_job_of_1024_workers_sums_exactly_over_32_leaves_of_32_and_a_root():
    """The largest two-level tree (wire.MAX_WORLD_SIZE): rack r holds ranks r, r + 32, ...
    (not contiguous: a leaf numbers its rack by ``Parent.ranks``); every leaf's PARTIAL
    counts its 32 workers at the root, whose RESULT carries count 1024 and the int32 sum
    of all 1024 contributions, which every leaf passes to its whole rack."""
    n, racks, lanes, slot = wire.MAX_WORLD_SIZE, 32, DEFAULT_LANES, BASE
    root_addr = ("10.0.1.1", 48879)
    root = Aggregator()
    root.add_job(JOB, n, BASE, 4, lanes)
    leaves = []
    for r in range(racks):
        leaf = Aggregator()
        leaf.add_job(JOB, n, BASE, 4, lanes, parent=Parent(
            root_addr, r, n // racks, tuple(range(r, n, racks))))
        leaves.append(leaf)
    rng = np.random.default_rng(1024)
    values = rng.integers(-(2**20), 2**20, (n, lanes))
    up = []
    for rank in range(n):
        leaf = leaves[rank % racks]
        out = leaf.receive(contrib(rank, values[rank], slot=slot), (f"10.1.{rank // 256}.{rank % 256}", 40000), 0.0)
        up += [(datagram, rank % racks) for datagram, to in out if to == root_addr]
    assert len(up) == racks
    results = []
    for datagram, r in up:
        results += root.receive(datagram, (f"10.0.2.{r}", 48879), 0.0)
    assert len(results) == racks  # one RESULT per leaf
    header, lanes_out = wire.decode(results[0][0])
    assert (header.type, header.count) == (PacketType.RESULT, n)
    np.testing.assert_array_equal(lanes_out, values.sum(axis=0).astype(np.int32))
    down = leaves[5].receive(results[0][0], root_addr, 0.0)
    assert len(down) == n // racks and all(d == results[0][0] for d, _ in down)


def test_a_leaf_of_a_job_over_32_workers_needs_its_ranks_and_takes_only_them():
    a = Aggregator()
    with pytest.raises(AggregatorError, match="needs its rack's ranks"):
        a.add_job(JOB, 64, BASE, 8, DEFAULT_LANES, parent=Parent(ROOT, 0, 2))
    for bad in [(40, 40), (40,), (40, 64), (-1, 3)]:
        with pytest.raises(AggregatorError, match="parent ranks"):
            a.add_job(JOB, 64, BASE, 8, DEFAULT_LANES, parent=Parent(ROOT, 0, 2, bad))
    a.add_job(JOB, 64, BASE, 8, DEFAULT_LANES, parent={"address": list(ROOT), "child": 0,
                                                        "rack_size": 2, "ranks": [40, 63]})
    header = Header(type=PacketType.CONTRIB, job=JOB, rank=41, slot=BASE, position=1,
                    nelem=DEFAULT_LANES, exp=0, count=1)
    assert a.receive(wire.encode(header, np.zeros(DEFAULT_LANES, np.int32)), ("h", 1), 0.0) == []
    assert a.job_stats(JOB).rejected["rank"] == 1 and a.job_stats(JOB).contributions == 0
    with pytest.raises(AggregatorError, match="world size 1025"):
        Aggregator().add_job(JOB, wire.MAX_WORLD_SIZE + 1, BASE, 8)
