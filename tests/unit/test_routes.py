"""A job's window split over several aggregators (hosts/routes.py), and re-split mid-job.

The sessions run over simulated lossy links (tests/unit/lossy_links.py) with one PBox
core per destination; a re-split moves ranges between aggregators and ranks learn of it
at their own moments (resync), as they do from the controller's heartbeat replies.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from p4hub.hosts import wire
from p4hub.hosts.errors import SessionError
from p4hub.hosts.events import TensorFailed
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.routes import Route, RouteMap, from_wire, to_wire
from p4hub.hosts.session import Session
from tests.unit.lossy_links import LinkModel, SerialLossyNet
from tests.unit.test_session import gradients

JOB, N, W = 5, 4, 8
SIZES = (64 * 40, 64 * 3 + 5, 64 * 70, 7, 64 * 25)
SPLIT = [Route("sw", 0, 4), Route("pb1", 0, 2, fallback=True), Route("pb2", 100, 2, fallback=True)]


# -- the map ------------------------------------------------------------------------------


def test_one_route_maps_index_i_to_slot_base_plus_i():
    m = RouteMap([Route(None, 40, 12)], 12, 4)
    assert m.wire_slot.tolist() == list(range(40, 52))
    assert m.single and not m.flag.any()


def test_routes_take_every_class_in_the_same_proportions():
    m = RouteMap([Route("a", 0, 6), Route("b", 0, 6, fallback=True)], 12, 4)  # 3 classes of 4
    for c in range(3):
        assert m.route_of[c * 4 : c * 4 + 4].tolist() == [0, 0, 1, 1]
    assert sorted(m.wire_slot[m.route_of == 1].tolist()) == list(range(6))
    assert (m.flag[m.route_of == 1] == wire.FLAG_FALLBACK).all()


def test_a_smaller_window_uses_the_same_share_of_every_route():
    m = RouteMap([Route("a", 0, 64), Route("b", 500, 43), Route("c", 900, 21)], 126, 42)
    assert np.bincount(m.route_of).tolist() == [63, 42, 21]
    assert sorted(m.wire_slot[m.route_of == 1].tolist()) == list(range(500, 542))


def test_routes_from_a_controller_reply():
    routes = from_wire([{"aggregator": "10.0.0.101:48879", "slot_base": 4, "count": 9,
                         "fallback": True}])
    assert routes == [Route(("10.0.0.101", 48879), 4, 9, True)]
    assert from_wire([]) is None and from_wire(None) is None  # the one aggregator
    with pytest.raises(SessionError, match="malformed route"):
        from_wire([{"aggregator": "10.0.0.101", "slot_base": 4, "count": 9}])


def test_a_heartbeat_reports_the_map_as_the_controller_gave_it():
    reply = [{"aggregator": "10.0.0.100:48879", "slot_base": 0, "count": 20, "fallback": False},
             {"aggregator": "10.0.0.101:48879", "slot_base": 4, "count": 12, "fallback": True}]
    routes = from_wire(reply)
    assert routes is not None and to_wire(routes, ("10.0.0.9", 1)) == reply
    assert to_wire([Route(None, 7, 32)], ("10.0.0.100", 48879)) == [  # the one aggregator
        {"aggregator": "10.0.0.100:48879", "slot_base": 7, "count": 32, "fallback": False}]


def test_a_result_finds_its_index_by_flag_and_slot():
    m = RouteMap(SPLIT, W, W)
    flags = np.array([m.flag[i] | 1 for i in range(W)] + [0, wire.FLAG_FALLBACK], np.uint8)
    slots = np.concatenate((m.wire_slot, [99, 7]))
    assert m.index_of(flags, slots).tolist() == [*range(W), -1, -1]


@pytest.mark.parametrize("routes, match", [
    ([Route("a", 0, 4), Route("b", 2, 4)], "same slot"),
    ([Route("a", 0, 5)], "cover 5 slots, the window needs 8"),
    ([], "at least one"),
    ([Route("a", 2**32 - 2, 8)], "32-bit"),
])
def test_bad_maps_are_refused(routes, match):
    with pytest.raises(SessionError, match=match):
        RouteMap(routes, 8, 8)


# -- a split job under loss ---------------------------------------------------------------


def _aggs(routes: list[Route]) -> dict:
    aggs = {}
    for route in routes:
        agg = Aggregator()
        agg.add_job(JOB, N, route.slot_base, route.count)
        aggs[route.aggregator] = agg
    return aggs


def _start(routes: list[Route], seed: int, loss: float) -> tuple[SerialLossyNet, list]:
    sessions = [Session(JOB, r, N, 0, W, W, rto=0.005, deadline=5.0, route_map=routes)
                for r in range(N)]
    net = SerialLossyNet(sessions, None, LinkModel(tx=0.001, loss=loss, seed=seed),
                         aggs=_aggs(routes))
    inputs = [gradients(N, size, seed=seed * 10 + i) for i, size in enumerate(SIZES)]
    for tid, x in enumerate(inputs):
        for s in sessions:
            s.start(tid, x[s.rank], 0.0)
    return net, inputs


@pytest.mark.parametrize("seed", range(4))
def test_a_job_split_over_three_aggregators_is_exact_under_loss(seed):
    net, inputs = _start(SPLIT, seed, loss=0.05)
    net.run(until=60.0)
    net.assert_exact(inputs)
    assert net.misrouted == 0
    done = {to: agg.job_stats(JOB).completions for to, agg in net.aggs.items()}
    total = sum(done.values())
    # each aggregator carries its share of the window: 4/8, 2/8, 2/8 of the rounds
    assert abs(done["sw"] / total - 0.5) < 0.05
    assert abs(done["pb1"] / total - 0.25) < 0.05 and abs(done["pb2"] / total - 0.25) < 0.05


# every route whose window indices change gets fresh slots (RouteMap.reassigned)
RESPLITS = [
    [Route("sw", 0, 6), Route("pb1", 20, 2, fallback=True)],  # pb2 released
    [Route("sw", 0, 2), Route("pb1", 10, 3, fallback=True), Route("pb3", 0, 3, fallback=True)],
    [Route("pb2", 200, 8, fallback=True)],  # all on one PBox
]


def test_resplits_give_no_slot_to_another_index():
    old = RouteMap(SPLIT, W, W)
    for new in RESPLITS:
        assert RouteMap(new, W, W).reassigned(old) == []
    bad = RouteMap([Route("sw", 0, 6), Route("pb1", 0, 2, fallback=True)], W, W)
    assert bad.reassigned(old) == [("pb1", 0), ("pb1", 1)]  # pb1's slots 0-1 served 4-5


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("resplit", range(len(RESPLITS)))
def test_a_resplit_mid_job_finishes_exactly(seed, resplit):
    """The map changes while tensors are in flight: aggregators that lose a range drop
    the job, those that get one start fresh, every rank learns within 0.3 s."""
    rng = random.Random(seed)
    net, inputs = _start(SPLIT, seed, loss=0.05)
    at = rng.uniform(0.02, 0.2)
    net.run(until=at)
    new = RESPLITS[resplit]
    net.aggs = _aggs(new)
    for s in net.sessions:
        net.at(at + rng.uniform(0.0, 0.3), s.rank,
               lambda now, s=s: s.resync(now, epoch=2, route_map=new))
    net.run(until=60.0)
    net.assert_exact(inputs)
    assert all(s.routes == tuple(new) for s in net.sessions)


def test_a_stuck_split_job_names_the_silent_aggregator():
    net, _ = _start(SPLIT, 0, loss=0.0)
    del net.aggs["pb2"]  # that PBox is gone
    net.run(until=60.0)
    reasons = {e.reason for events in net.events for e in events if isinstance(e, TensorFailed)}
    assert reasons and all("on aggregator pb2" in r for r in reasons), reasons


def test_each_route_reports_its_results_and_time_in_flight():
    """The controller's measure of each aggregator: results per route in proportion to
    its slots, and the time they spent in flight."""
    net, inputs = _start(SPLIT, 1, loss=0.0)
    net.run(until=60.0)
    net.assert_exact(inputs)
    epoch, service = net.sessions[0].route_service()
    assert epoch == 0
    results = [n for n, _ in service]
    assert sum(results) == net.sessions[0].stats.results
    assert results[0] > results[1] > 0 and results[2] > 0
    assert all(busy > 0 for _, busy in service)
