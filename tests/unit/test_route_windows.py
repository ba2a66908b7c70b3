"""A congestion window per aggregator of a job's map (hosts/route_windows.py): which
slots each window limits, what it admits, and sessions split over two PBoxes of
different speeds on a simulated network."""

from __future__ import annotations

import numpy as np
import pytest

from bench._bottleneck import FrozenWindow, PBoxesNet, exact
from p4hub.hosts.congestion import INITIAL
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.route_windows import UNLIMITED, RouteWindows
from p4hub.hosts.routes import Route, RouteMap
from p4hub.hosts.session import Session

JOB = 7


def _windows(routes: list[Route], slots: int = 16, cap: int = 16,
             before: RouteWindows | None = None) -> RouteWindows:
    return RouteWindows(RouteMap(routes, slots, slots), cap, before)


def test_routes_to_one_aggregator_share_its_window():
    w = _windows([Route("a", 0, 4, True), Route("b", 8, 8, True), Route("a", 4, 4, True)])
    assert w.aggregators == ("a", "b")
    assert w.slots.tolist() == [8, 8]
    assert w.of_slot.tolist() == [0] * 4 + [1] * 8 + [0] * 4
    assert [x.maximum for x in w.windows] == [8, 8]  # no more than its slots


def test_each_aggregator_admits_its_own_first_slots_then_the_credit_the_first_of_those():
    w = _windows([Route("a", 0, 8, True), Route("b", 8, 8, True)])
    slots = np.array([0, 8, 1, 9, 2, 10, 3])  # in sending order: a, b, a, b, ...
    budget = np.array([2, 3])
    assert slots[w.admit(slots, budget, None)].tolist() == [0, 8, 1, 9, 10]
    assert budget.tolist() == [0, 0]
    budget = np.array([2, 3])
    assert slots[w.admit(slots, budget, 3)].tolist() == [0, 8, 1]
    assert budget.tolist() == [0, 2]  # only what went out is spent
    budget = np.array([-1, UNLIMITED])  # a window already over its limit admits none
    assert slots[w.admit(slots, budget, None)].tolist() == [8, 9, 10]


def test_a_window_counts_all_its_positions_while_answered_and_only_young_ones_in_silence():
    w = _windows([Route("a", 0, 8, True), Route("b", 8, 8, True)])
    w.touch(0.0)
    assert w.budgets(np.array([0, 1, 8]), np.array([0.0, 0.1, 0.0]), 1.0, 0.5) == \
        (pytest.approx([INITIAL - 2, INITIAL - 1]), 1.0)  # answering: everything counts
    w.progress[1] = -5.0  # b has been silent for longer than a hold
    budget, wake = w.budgets(np.array([0, 1, 8, 9]), np.array([0.0, 0.1, -2.0, 0.2]), 1.0, 0.5)
    assert budget.tolist() == [INITIAL - 2, INITIAL - 1] and wake == 1.0  # b: 9 is young
    for x in w.windows:
        x.cwnd = 8.0  # as large as its slots: no limit
    assert w.budgets(np.array([0]), np.array([0.0]), 1.0, 0.5) == (None, np.inf)


def test_a_window_keeps_its_size_on_a_new_map_of_its_aggregator_and_counts_never_go_back():
    old = _windows([Route("a", 0, 8, True), Route("b", 8, 8, True)])
    old.windows[0].cwnd, old.windows[1].cwnd = 6.0, 7.0
    old.windows[1].cuts = 3
    new = _windows([Route("a", 8, 2, True), Route("c", 16, 14, True)], before=old)
    assert new.windows[0] is old.windows[0] and new.windows[0].limit == 2  # resized to its slots
    assert new.windows[1].limit == INITIAL  # a new aggregator starts afresh
    assert new.cuts == 3  # b's cuts are still counted


def test_ranks_held_to_different_windows_on_two_pboxes_still_finish():
    """The argument against ranks waiting on each other for ever holds per aggregator:
    every rank has a window of its own size on each PBox, rank 0's first sends are lost."""
    n, sizes = 3, ((1, 5), (3, 1), (7, 2))
    routes = [Route("fast", 0, 8, True), Route("slow", 8, 8, True)]
    sessions = [Session(JOB, r, n, 0, 16, 16, route_map=routes, deadline=30.0) for r in range(n)]
    for s, size in zip(sessions, sizes, strict=True):
        assert s._cwnd is not None
        s._cwnd.windows[:] = [FrozenWindow(8, initial=k) for k in size]
    net = _net(sessions, slow_tx=0.002)
    inputs = _inputs(n, 3, 120)
    for t, x in enumerate(inputs):
        net.start(t, x)
    sessions[0].routed_packets(0.0)  # into a void
    net.run(until=300.0)
    assert not net.failures() and exact(net, inputs)
    assert [s.stats.cwnd for s in sessions] == [sum(k) for k in sizes]


def test_each_pbox_is_served_at_its_own_links_pace():
    """Two PBoxes, one behind a link 4x slower: each window steers on its own queue (the
    slow one's stays smaller), each path has its own timers (no resend of a slow-path
    position because a fast-path one came back first), and each route's rate, results
    over busy seconds, is its own link's, not the turn it got in a window shared with
    the other."""
    n = 4
    routes = [Route("fast", 0, 16, True), Route("slow", 16, 16, True)]
    sessions = [Session(JOB, r, n, 0, 32, 32, route_map=routes, deadline=30.0) for r in range(n)]
    net = _net(sessions, slow_tx=0.001)
    inputs = _inputs(n, 3, 300)
    for t, x in enumerate(inputs):
        net.start(t, x)
        net.run(until=300.0, completions=n * (t + 1))
    assert not net.failures() and exact(net, inputs)
    for s in sessions:
        assert s._cwnd is not None
        fast, slow = s._cwnd.windows
        assert slow.limit < fast.limit
        (n_fast, busy_fast), (n_slow, busy_slow) = s.route_service()[1]
        # a round of the fast PBox takes 1 ms on its link, of the slow one 4 ms
        assert 3.5 < (n_fast / busy_fast) / (n_slow / busy_slow) < 5
        assert s._timers.early_resends == 0


def _net(sessions: list[Session], slow_tx: float) -> PBoxesNet:
    """The fast PBox serves a round of 4 workers' datagrams in 1 ms, the slow one at
    ``slow_tx`` per datagram; the workers' links are faster than either."""
    n = len(sessions)
    half = sessions[0].window // 2
    pboxes = {"fast": Aggregator(), "slow": Aggregator()}
    pboxes["fast"].add_job(JOB, n, 0, half)
    pboxes["slow"].add_job(JOB, n, half, half)
    return PBoxesNet(sessions, pboxes, {"fast": 0.00025, "slow": slow_tx}, worker_tx=0.0002)


def _inputs(n: int, tensors: int, blocks: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(3)
    return [[rng.integers(-9, 9, 64 * blocks, dtype=np.int32) for _ in range(n)]
            for _ in range(tensors)]

