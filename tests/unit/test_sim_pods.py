"""Tier F's third level (sim/fluid.py): leaf-spine pods under a core. A pod's spine sums
its leaves and sends one partial up to the core, which sums the pods; the scenario
refuses pods anywhere but tier F's leaf-spines, and trees wider than the bitmaps."""

from __future__ import annotations

from typing import Any

import pytest

from p4hub.sim import scenario
from p4hub.sim.errors import ScenarioError
from p4hub.sim.fluid import ina_bytes
from p4hub.sim.run import RunResult, run_scenario
from tests.support.sim_cases import scenario_from

BASE: dict[str, Any] = {
    "name": "pods",
    "topology": {"kind": "leafspine", "workers": 4, "racks": 2, "spines": 2, "pboxes": 1,
                 "pods": 2},
    "links": {"bandwidth": "10Gbit", "delay": "1us", "oversubscription": 1.0},
    "switch": {"slots": 128},
    "job": {"model": "synthetic", "elements": 65536, "iterations": 2,
            "paths": ["switch", "pbox", "ring"], "window": 32},
    "run": {"tier": "F"},
}


def make(**sections: dict[str, Any]) -> scenario.Scenario:
    return scenario_from(BASE, **sections)


def run(path: str, **sections: dict[str, Any]) -> RunResult:
    result = run_scenario(make(**sections), path=path)
    assert result.ok, result.failures
    return result


def test_each_pod_sends_one_partial_to_the_core():
    """Three levels: the core's links carry what one worker sends per pod, the leaves'
    uplinks what one worker sends per rack."""
    r = run("switch")
    assert r.workers == 16
    per_worker = r.bytes_by_link_class["host_up"] / 16
    assert r.bytes_by_link_class["spine_up"] == pytest.approx(4 * per_worker, rel=1e-9)
    assert r.bytes_by_link_class["core_up"] == pytest.approx(2 * per_worker, rel=1e-9)
    assert r.bytes_by_link_class["core_down"] == pytest.approx(2 * per_worker, rel=1e-9)


def test_a_third_level_adds_its_hops_and_no_more_on_a_non_blocking_fabric():
    """Where no rank's window limits it (a window-limited rank slows with the longer
    round trip too, as it should), the core adds to an iteration exactly one chunk's
    store-and-forward over the pod's uplink and downlink and their two hops (the last
    chunk's: the others' pipeline behind it)."""
    unlimited = {"links": {"bandwidth": "1Gbit"}, "job": {"window": 128}}
    three = run("switch", **unlimited)
    two = run("switch", topology={"racks": 4, "pods": 1}, **unlimited)
    assert two.workers == three.workers == 16
    chunk = ina_bytes(128 * 64, 64, 66)  # a window of 64-lane datagrams, 66 B framing each
    core_rate = 1e9 / 8 * 4 / 2 * 2 * 2  # 4 workers' 1 Gbit over 2 spines: 2 uplinks; 2 racks
    hop = 1e-6 + 1e-6  # delay + pipeline
    for t3, t2 in zip(three.iteration_times, two.iteration_times, strict=True):
        assert t3 - t2 == pytest.approx(2 * (chunk / core_rate + hop), rel=1e-6)


def test_an_oversubscribed_core_slows_the_ring_not_the_switch_path():
    """The ring crosses the core with every step at the core link's share; the switch
    path sends one partial a pod, far below the core's rate."""
    slow = {"links": {"core_oversubscription": 16.0}}
    ring, ring_slow = run("ring"), run("ring", **slow)
    switch, switch_slow = run("switch"), run("switch", **slow)
    assert ring_slow.iteration_times[-1] > 1.5 * ring.iteration_times[-1]
    assert switch_slow.iteration_times[-1] < 1.05 * switch.iteration_times[-1]


def test_the_pbox_path_crosses_the_core_for_other_pods_ranks():
    r = run("pbox")
    per_worker = r.bytes_by_link_class["host_up"] / 16
    # the other pod's 8 ranks up into the PBox's pod and their 8 results back out
    assert r.bytes_by_link_class["core_up"] == pytest.approx(16 * per_worker, rel=1e-9)
    assert r.bytes_by_link_class["core_down"] == pytest.approx(16 * per_worker, rel=1e-9)


def refused(**sections: dict[str, Any]) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        make(**sections)
    return info.value


def test_pods_are_tier_fs_leaf_spines_only():
    error = refused(run={"tier": "M"})
    assert error.field == "topology.pods" and "tier F only" in error.reason
    error = refused(topology={"kind": "rack", "racks": 1, "spines": 1, "pods": 2},
                    links={"oversubscription": None})
    assert error.field == "topology.pods" and "leafspine" in error.reason
    error = refused(topology={"pods": 1}, links={"core_oversubscription": 2.0})
    assert error.field == "links.core_oversubscription"


def test_a_three_level_tree_holds_32_pods_of_32_racks_of_32():
    point = make(topology={"workers": 32, "racks": 32, "pods": 32}, job={"paths": ["switch"]})
    assert point.topology.total_workers == 32**3 and point.topology.total_racks == 1024
    error = refused(topology={"pods": 33}, job={"paths": ["switch"]})
    assert error.field == "topology.pods" and "at most 32 pods" in error.reason
    error = refused(topology={"racks": 33}, job={"paths": ["switch"]})
    assert error.field == "topology.racks" and "a pod's spine" in error.reason
    # without in-network paths there is no bitmap to outgrow
    assert make(topology={"pods": 33}, job={"paths": ["ring"]}).topology.pods == 33
