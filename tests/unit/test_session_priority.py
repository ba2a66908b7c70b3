"""Priority classes in the session: urgent tensors overtake, every rank still agrees.

Same fake network and explicit clock as tests/unit/test_session.py.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from p4hub.hosts import congestion, wire
from p4hub.hosts.errors import SessionError
from p4hub.hosts.session import Session
from tests.unit.test_session import (
    AGGREGATORS,
    JOB,
    Link,
    Net,
    assert_all_equal_reference,
    gradients,
    reference_sum,
)

URGENT, BULK = 7, 0  # header priorities: higher is more urgent


def priority_net(n=2, window=4, classes=2, credit=None, factory=None, **links) -> Net:
    sessions = [
        Session(JOB, r, n, 100, window * classes, window, classes=classes, credit=credit)
        for r in range(n)
    ]
    net = Net(sessions, **({"factory": factory} if factory else {}), **links)
    net.agg.add_job(JOB, n, 100, window * classes)
    return net


def sent_batch(s: Session, now: float) -> list[wire.Header]:
    return [wire.decode(d)[0] for d in s.datagrams_to_send(now)]


def test_each_class_has_its_own_slots_and_position_stream():
    s = Session(JOB, 0, 2, 100, 8, 4, classes=2, credit=8, congestion=False)
    s.start("bulk", np.ones(64 * 3, dtype=np.int32), 0.0, priority=BULK)
    s.start("urgent", np.ones(64 * 2, dtype=np.int32), 0.0, priority=URGENT)
    headers = sent_batch(s, 0.0)
    urgent = [h for h in headers if h.priority == URGENT]
    bulk = [h for h in headers if h.priority == BULK]
    assert headers[: len(urgent)] == urgent  # the urgent class goes out first
    assert [(h.slot, h.position) for h in urgent] == [(104, 0), (105, 1)]
    assert [(h.slot, h.position) for h in bulk] == [(100, 0), (101, 1), (102, 2)]


def test_urgent_packets_overtake_queued_bulk_packets():
    """A late urgent tensor gets every credit that frees up; bulk waits, not recalled."""
    net = priority_net(n=2, window=4, classes=2, credit=4)
    bulk = [np.arange(64 * 40, dtype=np.int32) + r for r in range(2)]
    urgent = [np.full(64 * 6, r + 1, dtype=np.int32) for r in range(2)]
    for r, s in enumerate(net.sessions):
        s.start("bulk", bulk[r], 0.0, priority=BULK)
    net.step()  # bulk fills the credit and its results come back
    for r, s in enumerate(net.sessions):
        s.start("urgent", urgent[r], net.now, priority=URGENT)
    order = []
    hook = net.on_contribution = lambda rank, h: order.append(h.priority) if rank == 0 else None
    assert hook is not None
    net.run()
    first_bulk_after = order.index(BULK)
    assert order[:first_bulk_after] == [URGENT] * 6  # all six urgent blocks overtook
    assert order.count(URGENT) == 6
    for r in range(2):
        got = {e.tensor_id: e.result for e in net.events[r]}
        assert got["bulk"].tobytes() == (bulk[0] + bulk[1]).tobytes()
        assert got["urgent"].tobytes() == np.full(64 * 6, 3, dtype=np.int32).tobytes()


def test_ranks_that_give_credit_to_different_classes_still_finish():
    """Rank 0 commits its credit to bulk before it sees the urgent tensor, rank 1 the
    other way round: each waits for the other's packets, and the reserve breaks the
    wait."""
    net = priority_net(n=2, window=4, classes=2, credit=1)
    inputs = gradients(2, 64 * 30, seed=3)
    urgent = gradients(2, 64 * 9, seed=4)
    a, b = net.sessions
    a.start("bulk", inputs[0], 0.0, priority=BULK)
    a.datagrams_to_send(0.0)  # rank 0's credit goes to bulk (its PRIME); lost in a void
    a.start("urgent", urgent[0], 0.0, priority=URGENT)
    b.start("urgent", urgent[1], 0.0, priority=URGENT)
    b.datagrams_to_send(0.0)  # rank 1's goes to urgent, lost too
    b.start("bulk", inputs[1], 0.0, priority=BULK)
    net.run(until=30.0)
    assert_all_equal_reference(net, "bulk", reference_sum(inputs))
    assert_all_equal_reference(net, "urgent", reference_sum(urgent))


@AGGREGATORS
@pytest.mark.parametrize("seed", range(4))
def test_random_interleavings_across_classes_under_loss_are_exact(factory, seed):
    """Inside a class every rank starts the same tensors in the same order; across
    classes each rank interleaves its starts at random (as gradient-ready timings
    would): results are exact and the same bits everywhere."""
    rng = random.Random(seed)
    n, classes = 3, 4
    net = priority_net(n=n, window=4, classes=classes, credit=4, factory=factory,
                       up=Link(loss=0.05, rng=random.Random(seed)),
                       down=Link(loss=0.05, reorder=True, rng=random.Random(seed + 100)))  # fmt: skip
    tensors = {f"t{i}": (rng.randrange(8) , rng.choice([1, 70, 64 * 5 + 3, 64 * 70]))
               for i in range(10)}  # fmt: skip
    inputs = {tid: gradients(n, size, seed=seed * 100 + i) for i, (tid, (_, size)) in enumerate(tensors.items())}
    by_class: dict[int, list[str]] = {}
    for tid, (priority, _) in tensors.items():
        by_class.setdefault(net.sessions[0].class_of(priority), []).append(tid)
    for r, s in enumerate(net.sessions):
        queues = [list(q) for q in by_class.values()]
        while any(queues):
            q = rng.choice([q for q in queues if q])
            tid = q.pop(0)
            s.start(tid, inputs[tid][r], net.now, priority=tensors[tid][0])
            net.step()
            net.now += 1e-4
    net.run(until=120.0)
    for tid in tensors:
        assert_all_equal_reference(net, tid, reference_sum(inputs[tid]))


def test_one_class_is_the_plain_fifo_session():
    s = Session(JOB, 0, 2, 100, 8, 8, congestion=False)
    assert (s.classes, s.window, s.credit) == (1, 8, 8)
    s.start("a", np.ones(64 * 20, dtype=np.int32), 0.0, priority=URGENT)
    assert len(s.datagrams_to_send(0.0)) == 8  # the whole window, no credit below it
    s = Session(JOB, 0, 2, 100, 8, 8)  # a congestion window starts below it
    s.start("a", np.ones(64 * 20, dtype=np.int32), 0.0, priority=URGENT)
    assert len(s.datagrams_to_send(0.0)) == congestion.INITIAL


def test_classes_need_their_slots():
    with pytest.raises(SessionError, match="4 priority classes of 8 slots need 32 slots, the job has 16"):
        Session(JOB, 0, 2, 0, 16, 8, classes=4)
    with pytest.raises(SessionError, match="priority classes 65 outside 1..64"):
        Session(JOB, 0, 2, 0, 1024, classes=65)
    with pytest.raises(SessionError, match="class 4 outside 0..3"):
        Session(JOB, 0, 2, 0, 16, classes=4).start("t", np.ones(3, np.int32), 0.0, stream=4)
    assert Session(JOB, 0, 2, 0, 16, classes=4).window == 4
