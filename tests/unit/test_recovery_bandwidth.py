"""Retransmission timers on links with a bandwidth: a full window queues behind itself.

The other session tests move every datagram in one hop of latency. Real links
serialize: a window of W packets leaves a host one transmission time after another, so
the last result of a window comes back about W transmission times after its send, and a
first timeout shorter than that fires for every slot at once. This simulation gives each
worker an uplink and a downlink that send one datagram per ``tx`` seconds (a FIFO, no
loss; tests/unit/lossy_links.py), with an instantaneous aggregator, driven by an explicit
clock and an event heap.
"""

from __future__ import annotations

from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.session import Session
from tests.unit.lossy_links import LinkModel, SerialLossyNet
from tests.unit.test_session import gradients, reference_sum

JOB = 7


def test_a_window_that_queues_behind_itself_is_not_retransmitted_over_and_over():
    """4 workers, a window of 32, 1 ms per datagram on every link and a first timeout of
    5 ms: a full window's results take ~32 ms. The first tensor pays for learning that
    (a few windows of resends); after it, resends stay a small fraction and a tensor takes
    about its serialization time. Before the floor: 3.8 resends per packet sent, in every
    tensor, since no round ever ended without a resend and so none was ever measured."""
    n, window, tx = 4, 32, 0.001
    sessions = [Session(JOB, r, n, 0, window, window, rto=0.005, rto_max=1.0, deadline=30.0)
                for r in range(n)]
    agg = Aggregator()
    agg.add_job(JOB, n, 0, window)
    net = SerialLossyNet(sessions, agg, LinkModel(tx=tx))  # no loss, no jitter
    for tensor in range(3):
        inputs = gradients(n, 64 * 600, seed=tensor)
        start, resent, sent = net.now, _total(sessions, "retransmitted"), _total(sessions, "sent")
        for r, s in enumerate(sessions):
            s.start(tensor, inputs[r], start)
        net.run(until=start + 60.0)
        expected = reference_sum(inputs)
        for r in range(n):
            assert net.events[r].pop().result.tobytes() == expected.tobytes()
        resent, sent = _total(sessions, "retransmitted") - resent, _total(sessions, "sent") - sent
        assert resent <= (0.5 if tensor == 0 else 0.03) * sent, (tensor, resent, sent)
        if tensor:
            positions = sent // n
            finished = max(s._timers.sent_at.max() for s in sessions)  # its last packet's send
            assert finished - start < 1.15 * positions * tx, (finished - start, positions)
    assert all(s._timers.rto > window * tx for s in sessions)


def _total(sessions: list[Session], counter: str) -> int:
    return sum(getattr(s.stats, counter) for s in sessions)
