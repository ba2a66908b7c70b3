"""A late rank must not make P3 slower than FIFO (issue 31): the congestion window's count.

When one rank's backward pass falls behind, its peers' positions wait at the aggregator
for it. Their windows counted those positions as queued, so a rank whose window was
full of held-back positions could not send the urgent positions that the late rank,
once it caught up and sent its urgent class first, waited for; each waited for the other
until a hold of silence. hosts/route_windows.py now counts a held-back position only
until this rank's own ordering evidence shows it has left the queues, and never against
the most urgent class; a timeout of a position that has left the queues cuts nothing.

The last test replays the bench's ResNet-50 iteration (bench/priority_sim.py, scaled
down to 0.2 % of the parameters, the compute with it) on simulated 5 Mbit/s links with
an explicit clock, each rank late by 50-150 ms at a layer with probability 0.1. Before
the change P3 took 1.460 simulated s against FIFO's 1.189 (x1.23); after, 1.189.
"""

from __future__ import annotations

import numpy as np
import pytest

from bench import priority_sim
from p4hub.hosts import wire
from p4hub.hosts.congestion import INITIAL
from p4hub.hosts.recovery import SlotTimers
from p4hub.hosts.route_windows import RouteWindows
from p4hub.hosts.routes import Route, RouteMap

BULK, URGENT = [0, 1, 2], 8  # window slots: class 0 is 0-7, class 1 is 8-15


def _setup(result_priority: int = 0) -> tuple[RouteWindows, SlotTimers, np.ndarray, np.ndarray]:
    """Bulk slots 0-2 sent at 0, 0.01, 0.02 and held back; urgent slot 8 at 0.03; the result
    of bulk slot 3, sent at 0.015 with ``result_priority``, back at 0.05."""
    w = RouteWindows(RouteMap([Route("a", 0, 16)], 16, 8), 16)
    timers = SlotTimers(16, rto_min=0.05, rto_max=1.0, groups=2)
    flight = np.array([*BULK, URGENT])
    sent = np.array([0.0, 0.01, 0.02, 0.03])
    for slot, at in zip(flight, sent, strict=True):
        timers.on_sent(np.array([slot]), float(at))
    timers.suspend(np.array(BULK), 0.03)
    w.touch(0.0)
    flags = np.array([result_priority << wire.PRIORITY_SHIFT], dtype=np.uint8)
    w.on_results(np.array([3]), np.array([0.05 - 0.015]), np.array([False]), 0.05, flags)
    return w, timers, flight, sent


def test_held_back_positions_that_left_the_queues_do_not_count():
    w, timers, flight, sent = _setup()
    budget, _ = w.budgets(flight, sent, 1.0, 0.06, None, timers)
    assert budget.tolist() == [INITIAL - 2]  # 0 and 1 were sent before 3, whose result came
    assert w.admit(np.arange(9, 16), budget.copy(), None, urgent=True).sum() == INITIAL - 1
    assert w.admit(np.arange(3, 8), budget.copy(), None).sum() == INITIAL - 2


def test_a_later_result_of_a_higher_priority_is_no_evidence():
    """It may have overtaken them in a strict priority queue."""
    w, timers, flight, sent = _setup(result_priority=5)
    flags = np.full(flight.size, 3 << wire.PRIORITY_SHIFT, dtype=np.uint8)
    budget, _ = w.budgets(flight, sent, 1.0, 0.06, flags, timers)
    assert budget.tolist() == [INITIAL - 4]  # all four count for a held-back class ...
    assert w.admit(np.arange(9, 16), budget, None, urgent=True).sum() == 3  # ... not urgent


def test_a_resent_position_gets_no_evidence():
    w, timers, flight, sent = _setup()
    timers.on_retransmitted(np.array([0]), 0.04)
    budget, _ = w.budgets(flight, sent, 1.0, 0.06, None, timers)
    assert budget.tolist() == [INITIAL - 3]  # its resent copy may still be queued


@pytest.mark.parametrize("slot, cuts", [(0, 0), (2, 1)])
def test_a_timeout_cuts_the_window_only_if_the_position_may_be_queued(slot, cuts):
    w, timers, _, _ = _setup()
    timers.on_retransmitted(np.array([slot]), 1.0)  # the session counts the resend first
    w.on_timeouts(np.array([slot]), 1.0, timers)
    assert w.cuts == cuts  # slot 0 left the queues (3 came back): a late peer or a loss


def test_a_late_rank_does_not_make_p3_slower_than_fifo():
    fifo = priority_sim.run("resnet50", "fifo", 0.1, 0, 0.0, 5.0, scale=0.002)
    p3 = priority_sim.run("resnet50", "p3", 0.1, 0, 0.0, 5.0, scale=0.002)
    assert fifo["complete"] and p3["complete"]
    print(f"FIFO {fifo['seconds']:.3f} s, P3 {p3['seconds']:.3f} s (simulated)")
    assert p3["seconds"] <= 1.02 * fifo["seconds"], (p3["seconds"], fifo["seconds"])
