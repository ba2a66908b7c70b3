"""``bench/switch_core.py``'s aggregation traffic: every cycle it replays must be new
rounds for aggregate.p4, not duplicates of the first (cells keep their round's position
since fbfbb08, so an unchanged replay only measured the duplicate path)."""

from __future__ import annotations

import pytest

from bench import switch_core
from bench._common import advance_position, result_key
from p4hub.controller.core import topology
from p4hub.hosts.pbox.aggregator import Aggregator


@pytest.fixture(scope="module")
def agg() -> switch_core.AggRack:
    return switch_core.AggRack(world_sizes=(2, 4), slots=8)


def test_advance_position_moves_only_the_position_and_wraps():
    datagram = bytes(range(24))
    moved = advance_position(datagram, 5)
    assert moved[:12] == datagram[:12] and moved[16:] == datagram[16:]
    assert int.from_bytes(moved[12:16], "big") == int.from_bytes(datagram[12:16], "big") + 5
    top = datagram[:12] + (0xFFFFFFFF).to_bytes(4, "big") + datagram[16:]
    assert advance_position(top, 2)[12:16] == (1).to_bytes(4, "big")


@pytest.mark.parametrize("n", [2, 4])
def test_every_cycle_aggregates_on_the_switch(agg: switch_core.AggRack, n: int):
    job = agg.jobs[n]
    sw = agg.switch()
    for c in range(4):  # cycle 1 is where the unchanged replay produced duplicates
        assert switch_core.check_cycle(sw, job, c) == len(job.frames)
    switch_core.check_stats(sw, job, 4 * len(job.frames))


def test_an_unchanged_replay_is_not_aggregation(agg: switch_core.AggRack):
    """What the bench measured before: the stats check catches it."""
    job = agg.jobs[2]
    sw = agg.switch()
    for port, frame in job.frames * 2:
        sw.process(frame, port, 0)
    assert switch_core.job_stats(sw, job)["duplicates"] == len(job.frames)
    with pytest.raises(AssertionError, match="job_stats"):
        switch_core.check_stats(sw, job, 2 * len(job.frames))


def test_sent_and_expected_follow_the_cycles_across_their_boundaries(agg: switch_core.AggRack):
    job = agg.jobs[4]
    size = len(job.frames)
    joined = job.cycle(0) + job.cycle(1) + job.cycle(2)
    for start, count in ((0, size), (3, size), (size - 4, 8), (5, 2 * size + 3)):
        assert job.sent(start, count) == joined[start:start + count]
    assert job.cycle(0) is job.frames
    assert len(job.expected_for(size - 4, 8)) == 2 * len(job.expected)


def test_the_moved_expectations_are_what_the_pbox_core_sends(agg: switch_core.AggRack):
    """The results of later cycles are cycle 0's with the position moved on: checked
    against hosts.pbox.aggregator fed the same three cycles."""
    job = agg.jobs[4]
    ref = Aggregator()
    ref.add_job(job.job_id, job.world_size, job.slot_base, job.slot_count, agg.lanes)
    sources = {}
    for rank in range(job.world_size):
        _, ip, port, switch_port = agg.worker(rank)
        sources[switch_port] = (topology.format_ipv4(ip), port)
    got = {}
    for port, frame in job.sent(0, 3 * len(job.frames)):
        for datagram, _ in ref.receive(frame[42:], sources[port], 0.0):
            got[result_key(datagram)] = datagram
    assert got == job.expected_for(0, 3 * len(job.frames))
