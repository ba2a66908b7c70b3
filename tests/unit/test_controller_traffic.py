"""p4hub.controller.core.traffic: service rates from the counters agents report in heartbeats."""

from __future__ import annotations

import pytest

from p4hub.controller.core.traffic import (
    EWMA_WEIGHT,
    Counters,
    RouteMeter,
    RouteService,
    TrafficMeter,
    job_rates,
    route_rates,
)


def test_rates_come_from_the_differences_between_heartbeats():
    meter = TrafficMeter()
    meter.update(Counters(sent=100, retransmitted=0, results=100), now=10.0)
    assert meter.results_per_s is None  # one report says nothing about a rate
    meter.update(Counters(sent=300, retransmitted=20, results=290), now=11.0)
    assert meter.results_per_s == pytest.approx(190.0)
    assert meter.resend_ratio == pytest.approx(0.1)
    meter.update(Counters(sent=500, retransmitted=20, results=490), now=13.0)  # 100/s, no resends
    assert meter.results_per_s == pytest.approx((1 - EWMA_WEIGHT) * 190 + EWMA_WEIGHT * 100)
    assert meter.resend_ratio == pytest.approx((1 - EWMA_WEIGHT) * 0.1)


def test_a_restarted_agent_starts_over_and_bad_reports_are_ignored():
    meter = TrafficMeter()
    meter.update(Counters(500, 10, 500), now=1.0)
    meter.update(Counters(5, 0, 4), now=2.0)  # counters went back: a new agent
    assert meter.results_per_s is None and meter.last == Counters(5, 0, 4)
    assert Counters.from_request({"sent": 1, "retransmitted": 0}) is None
    assert Counters.from_request({"sent": -1, "retransmitted": 0, "results": 0}) is None
    assert Counters.from_request({"sent": True, "retransmitted": 0, "results": 0}) is None
    assert Counters.from_request({"sent": 3, "retransmitted": 1, "results": 2}) == Counters(3, 1, 2)


def test_the_job_rate_is_the_mean_over_the_ranks_that_reported():
    a, b, silent = TrafficMeter(), TrafficMeter(), TrafficMeter()
    for meter, per_s in ((a, 100), (b, 300)):
        meter.update(Counters(0, 0, 0), now=0.0)
        meter.update(Counters(per_s, per_s // 10, per_s), now=1.0)
    rates = job_rates([a, b, silent], packet_len=1044)
    assert rates["result_bytes_per_s"] == pytest.approx(200 * 1044)
    assert rates["resend_ratio"] == pytest.approx(0.1)
    assert job_rates([silent], 276) == {"result_bytes_per_s": None, "resend_ratio": None}


# -- per route of a job's map -------------------------------------------------------------



def _service(epoch: int, *routes: tuple[int, float]) -> RouteService:
    return RouteService(epoch, tuple(routes))


def test_route_rates_are_results_over_busy_seconds_pooled_over_ranks():
    meters = [RouteMeter(), RouteMeter()]
    for m, busy in zip(meters, (0.25, 0.5), strict=True):
        m.update(_service(7, (0, 0.0), (0, 0.0)))
        m.update(_service(7, (100, busy), (50, 2.0)))
    rates = route_rates(meters, 7, 2)
    assert rates == pytest.approx([200 / 0.75, 25.0])
    assert route_rates(meters, 8, 2) == [None, None]  # another map's epoch
    assert route_rates(meters, 7, 2, min_samples=2) == [None, None]
    assert route_rates(meters, 7, 3) == [None, None, None]  # another map's length


def test_a_new_epoch_or_a_restarted_agent_starts_the_route_meter_over():
    m = RouteMeter()
    m.update(_service(1, (0, 0.0)))
    m.update(_service(1, (10, 0.1)))
    assert m.samples == 1
    m.update(_service(2, (3, 0.05)))  # a new map
    assert (m.samples, m.results) == (0, None)
    m.update(_service(2, (1, 0.01)))  # counters went back
    assert (m.samples, m.results) == (0, None)
    m.update(_service(2, (1, 0.01)))  # idle: nothing to fold
    assert m.samples == 0


def test_route_service_requests_are_checked():
    assert RouteService.from_request({"epoch": 3, "routes": [[1, 0.5], [2, 1]]}) == \
        _service(3, (1, 0.5), (2, 1.0))
    for bad in ({"routes": []}, {"epoch": 3, "routes": [[1]]}, {"epoch": 3, "routes": [[-1, 0]]},
                {"epoch": 3, "routes": "x"}, {"epoch": 3, "routes": [[1, 0]] * 65}):
        assert RouteService.from_request(bad) is None
