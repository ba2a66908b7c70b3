"""Strict-priority egress queues with an explicit clock."""

from __future__ import annotations

import pytest

from p4lite.switch.core.queues import EgressQueues
from p4lite.switch.core.runtime_api import Queued


def item(port: int, prio: int, tag: str) -> Queued:
    return Queued(egress_port=port, priority=prio, length=64, state=tag)


def drain(q: EgressQueues, now: int) -> list[str]:
    out = []
    while (d := q.dequeue(now)) is not None:
        assert isinstance(d.item.state, str)  # item() below queues its tag as the state
        out.append(d.item.state)
    return out


def test_higher_priority_served_first_fifo_within_a_queue():
    q = EgressQueues(priorities=8)
    for tag, prio in [("a0", 0), ("b7", 7), ("c3", 3), ("d7", 7), ("e0", 0)]:
        assert q.enqueue(item(1, prio, tag), now_us=0)
    assert drain(q, 10) == ["b7", "d7", "c3", "a0", "e0"]
    assert len(q) == 0


def test_priority_out_of_range_and_tail_drop():
    q = EgressQueues(priorities=2, depth=2)
    assert not q.enqueue(item(1, 2, "x"), 0)
    assert q.enqueue(item(1, 1, "a"), 0) and q.enqueue(item(1, 1, "b"), 0)
    assert not q.enqueue(item(1, 1, "c"), 0)  # full: the newcomer is dropped
    assert q.enqueue(item(1, 0, "d"), 0)  # other queue unaffected
    assert q.dropped == 2
    assert drain(q, 0) == ["a", "b", "d"]


def test_queue_depths_and_timestamps():
    q = EgressQueues(priorities=1)
    q.enqueue(item(1, 0, "a"), now_us=100)
    q.enqueue(item(1, 0, "b"), now_us=150)
    first = q.dequeue(now_us=400)
    assert (first.enq_timestamp, first.enq_qdepth, first.deq_qdepth, first.deq_timedelta) == (100, 0, 1, 300)
    second = q.dequeue(now_us=500)
    assert (second.enq_qdepth, second.deq_qdepth, second.deq_timedelta) == (1, 0, 350)


def test_ports_round_robin():
    q = EgressQueues(priorities=1)
    for i in range(3):
        q.enqueue(item(1, 0, f"p1-{i}"), 0)
        q.enqueue(item(2, 0, f"p2-{i}"), 0)
    assert drain(q, 0) == ["p1-0", "p2-0", "p1-1", "p2-1", "p1-2", "p2-2"]


def test_rate_limit_makes_priority_visible_over_time():
    q = EgressQueues(priorities=8, rate_pps=1000)  # one packet per ms per port
    q.enqueue(item(1, 0, "low1"), 0)
    assert q.dequeue(0).item.state == "low1"
    assert q.dequeue(500) is None  # port busy until t=1000us
    q.enqueue(item(1, 0, "low2"), 600)
    q.enqueue(item(1, 5, "high"), 700)
    assert q.next_ready_us() == pytest.approx(1000)
    assert q.dequeue(1000).item.state == "high"
    assert q.dequeue(1500) is None
    assert q.dequeue(2000).item.state == "low2"


def test_bad_configuration_rejected():
    with pytest.raises(ValueError):
        EgressQueues(priorities=0)


@pytest.mark.parametrize(("priorities", "ports", "seed"),
                         [(1, 1, 1), (1, 3, 2), (4, 1, 3), (3, 4, 4), (8, 2, 5)])
def test_pop_all_is_repeated_dequeue(priorities: int, ports: int, seed: int):
    import random  # noqa: PLC0415

    rng = random.Random(seed)
    a, b = EgressQueues(priorities, depth=5), EgressQueues(priorities, depth=5)
    now = 0
    for _ in range(30):  # rounds of arrivals (some tail-dropped or out of range), then a service
        for k in range(rng.randint(0, 12)):
            now += rng.randint(0, 3)
            it = item(rng.randint(1, ports), rng.randint(0, priorities), f"{now}.{k}")
            assert a.enqueue(it, now) == b.enqueue(it, now)
        expected = []
        while (d := a.dequeue(now)) is not None:
            expected.append((d.item, d.enq_timestamp, d.enq_qdepth, d.deq_qdepth))
        assert b.pop_all() == expected
        assert len(a) == len(b) == 0 and a.dropped == b.dropped
    assert a.dropped > 0


def test_pop_all_refuses_a_rate_limit():
    with pytest.raises(ValueError):
        EgressQueues(rate_pps=1000.0).pop_all()
