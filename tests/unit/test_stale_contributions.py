"""Contributions that arrive after their sender moved on must not count in a later round.

A worker resends position g (its result is late), then the result arrives, the worker
moves on to g + W in the slot's other cell and then g + 2W back in g's cell, and the
late resend of g arrives only now. Without the cell's position it would count in the
cell's round g + 2W. Switch (aggregate.p4), PBox core and the tests' fake aggregator
keep each cell's position and drop it as stale. A newer position replaces a round that
is still open (which only happens after agents resynchronised onto fresh aggregator
state, see hosts/session.py ``resync``).
"""

from __future__ import annotations

import numpy as np
import pytest

from p4hub.hosts import wire
from p4hub.hosts.events import TensorCompleted
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.session import Session
from p4hub.hosts.wire import Header, PacketType
from tests.unit.fake_aggregator import FakeAggregator
from tests.unit.lossy_links import LinkModel, SerialLossyNet
from tests.unit.test_session import gradients, reference_sum

JOB, W = 5, 2
CORES = pytest.mark.parametrize("factory", [Aggregator, FakeAggregator], ids=["pbox-core", "fake"])


def packet(rank: int, position: int, value: int) -> bytes:
    header = Header(type=PacketType.CONTRIB, job=JOB, rank=rank, slot=position % W,
                    position=position, nelem=1, shadow=(position // W) % 2)  # fmt: skip
    return wire.encode(header, np.array([value], dtype=np.int32))


def results(out: list) -> list[tuple[int, int]]:
    return [(wire.decode(d)[0].position, int(wire.decode(d)[1][0])) for d, _ in out]


@CORES
def test_a_late_resend_after_the_next_round_started_is_not_counted(factory):
    agg = factory()
    agg.add_job(JOB, 2, 0, W)
    send = lambda rank, pos, value: agg.receive(packet(rank, pos, value), ("w", rank), 0.0)  # noqa: E731
    send(0, 0, 1)
    assert results(send(1, 0, 2)) == [(0, 3), (0, 3)]  # position 0 complete
    send(0, 2, 10)
    send(1, 2, 20)  # position 2 (the other cell): both bits in position 0's cell cleared
    # rank 0's resend of 0, overtaken: the cell's round is complete, so it is a duplicate
    assert results(send(0, 0, 1)) == [(0, 3)]
    send(1, 4, 200)  # the cell's next round opens
    assert results(send(0, 0, 1)) == []  # older than the open round: stale, dropped
    assert results(send(0, 4, 100)) == [(4, 300), (4, 300)]  # exactly 100 + 200


@CORES
def test_a_newer_round_abandons_an_open_one(factory):
    """g + 2W meets an open round g only after a resync (in one aggregator's life g + 2W
    needs g complete): the open round gives way, none of it counts in the new one, and
    its late contributions are stale."""
    agg = factory()
    agg.add_job(JOB, 2, 0, W)
    agg.receive(packet(0, 0, 1), ("w", 0), 0.0)
    assert agg.receive(packet(1, 4, 7), ("w", 1), 0.0) == []  # position 4 while 0 is open
    assert agg.receive(packet(1, 0, 2), ("w", 1), 0.0) == []  # 0 is older now: stale
    assert results(agg.receive(packet(0, 4, 5), ("w", 0), 0.0)) == [(4, 12), (4, 12)]
    stats = agg.job_stats(JOB) if isinstance(agg, Aggregator) else agg.jobs[JOB]
    assert (stats.abandoned, stats.stale) == (1, 1)


def test_sessions_stay_exact_when_the_uplinks_reorder_under_loss():
    """Resends delayed past their sender's later positions (up to 3 ms per datagram at
    1 ms per datagram, 5 % loss): every tensor exact and the same on every rank."""
    n = 4
    sessions = [Session(JOB, r, n, 0, 16, 16, rto=0.005) for r in range(n)]
    agg = Aggregator()
    agg.add_job(JOB, n, 0, 16)
    net = SerialLossyNet(sessions, agg, LinkModel(tx=0.001, loss=0.05, up_jitter=0.003, seed=3))
    inputs = [gradients(n, 64 * 200, seed=s) for s in range(3)]
    for tid, x in enumerate(inputs):
        net.start(tid, x)
    net.run(until=120.0)
    for r in range(n):
        got = {e.tensor_id: e.result for e in net.events[r] if isinstance(e, TensorCompleted)}
        for tid, x in enumerate(inputs):
            assert got[tid].tobytes() == reference_sum(x).tobytes(), (r, tid)
    assert agg.job_stats(JOB).duplicates > 0
