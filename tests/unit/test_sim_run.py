"""Whole simulations (sim/run.py) on small cases: the product's sessions and aggregators
under simulated time give exact sums under loss, duplication and reordering; runs are
reproducible from their seed; the tiers agree; the baselines take the time their
algorithms take; every datagram is accounted for. No wall-clock assertions."""

from __future__ import annotations

from typing import Any

import pytest

from p4hub.sim import scenario
from p4hub.sim.baselines import MSS
from p4hub.sim.collectives import run_sizes
from p4hub.sim.engine import Engine
from p4hub.sim.errors import BudgetExceeded, ScenarioError, SimError
from p4hub.sim.fabric import build
from p4hub.sim.network import WIRE_OVERHEAD, Impairments
from p4hub.sim.run import RunResult, run_scenario
from tests.support.sim_cases import scenario_from

BASE: dict[str, Any] = {
    "name": "t",
    "topology": {"kind": "rack", "workers": 4, "pboxes": 1},
    "links": {"bandwidth": "1Gbit", "delay": "5us", "queue": "512KB"},
    "switch": {"slots": 128},
    "job": {"model": "synthetic", "elements": 16384, "iterations": 2, "paths": ["switch"],
            "window": 32},
    "run": {"tier": "P", "seed": 1},
}


def make(**sections: dict[str, Any]) -> scenario.Scenario:
    return scenario_from(BASE, **sections)


def run(path: str = "switch", **sections: dict[str, Any]) -> RunResult:
    return run_scenario(make(**sections), path=path)


def check_accounting(result: RunResult) -> None:
    assert result.ok, result.failures
    assert result.iteration_times and all(t > 0 for t in result.iteration_times)


@pytest.mark.parametrize("path", ["switch", "pbox"])
@pytest.mark.parametrize("tier", ["P", "M"])
def test_sums_are_exact_under_loss_duplication_and_reordering(path: str, tier: str) -> None:
    r = run(path, links={"loss": 0.02, "duplicate": 0.01, "reorder": 0.02}, run={"tier": tier})
    check_accounting(r)
    assert r.exact is True and r.checked == 2  # one tensor an iteration, checked each time
    assert r.drops > 0 and r.resends > 0  # the loss happened and was recovered from


def test_a_two_level_tree_over_a_leaf_spine_is_exact() -> None:
    r = run("switch", topology={"kind": "leafspine", "workers": 3, "racks": 3, "spines": 2},
            links={"loss": 0.01, "oversubscription": 1.0})
    check_accounting(r)
    assert r.exact is True
    assert r.bytes_by_link_class.get("spine_up", 0) > 0
    # the leaves summed their racks and the root spine the racks
    assert sum(v for k, v in r.counters.items() if k.startswith("aggregated_s")) > 0
    assert sum(v for k, v in r.counters.items() if k.startswith("aggregated_t")) > 0


def test_the_tree_sends_one_partial_per_rack_up() -> None:
    """Two-level aggregation: spine uplinks carry what one worker sends per rack, not
    what all of its workers send."""
    r = run("switch", topology={"kind": "leafspine", "workers": 4, "racks": 2, "spines": 1},
            links={"oversubscription": 1.0})
    per_worker = r.bytes_by_link_class["host_up"] / 8
    assert r.bytes_by_link_class["spine_up"] == pytest.approx(2 * per_worker, rel=0.01)


def test_p3_with_a_profile_is_exact() -> None:
    r = run("switch", job={"model": "resnet50", "elements": 0, "scale": 0.001,
                           "schedule": "p3", "classes": 8, "class_window": 8},
            switch={"slots": 128})
    check_accounting(r)
    assert r.exact is True and r.checked > 8


def test_same_seed_same_run_other_seed_other_run() -> None:
    lossy = {"loss": 0.02, "reorder": 0.01}
    a = run(links=lossy, run={"seed": 3})
    b = run(links=lossy, run={"seed": 3})
    c = run(links=lossy, run={"seed": 4})
    assert (a.digest, a.iteration_times, a.drops) == (b.digest, b.iteration_times, b.drops)
    assert a.digest != c.digest


@pytest.mark.parametrize("bandwidth", ["5Mbit", "1Gbit"])
@pytest.mark.parametrize("path", ["switch", "pbox", "ring"])
def test_tier_m_is_within_five_percent_of_tier_p(bandwidth: str, path: str) -> None:
    common = {"links": {"bandwidth": bandwidth},
              "job": {"elements": 65536 if bandwidth == "1Gbit" else 32768, "iterations": 1}}
    p = run(path, **common, run={"tier": "P"})  # type: ignore[arg-type]
    m = run(path, **common, run={"tier": "M"})  # type: ignore[arg-type]
    if path == "pbox" and bandwidth == "5Mbit":
        # runs of two at 5 Mbit (MACRO_SECONDS), over the PBox's fan-in of 4: one
        # datagram a run, which is tier P (collectives.run_sizes)
        assert (m.events, m.iteration_times) == (p.events, p.iteration_times)
        return
    assert m.events < p.events
    assert m.iteration_times[0] == pytest.approx(p.iteration_times[0], rel=0.05)


def test_tier_m_sizes_a_shared_pbox_links_runs_by_its_fan_in() -> None:
    """PHub's balanced PBox: 8 ranks at 100 Mbit/s on a PBox with 8 links' worth. With
    whole runs of 16 (the host links' size) the ranks' runs went one at a time on the
    PBox's link and tier M was 22% slower than tier P; runs of 16 / 8 keep it within
    a few percent."""
    common = {"topology": {"workers": 8},
              "links": {"bandwidth": "100Mbit", "pbox_bandwidth": "800Mbit"},
              "switch": {"slots": 256},
              "job": {"elements": 131072, "iterations": 1, "window": 128, "lanes": 256}}
    p = run("pbox", **common, run={"tier": "P"})  # type: ignore[arg-type]
    m = run("pbox", **common, run={"tier": "M"})  # type: ignore[arg-type]
    assert m.exact is True and m.events < p.events
    assert m.iteration_times[0] == pytest.approx(p.iteration_times[0], rel=0.03)


def test_run_sizes_divide_the_macro_run_by_each_pboxs_fan_in() -> None:
    fabric = build(Engine(), racks=1, workers_per_rack=8, spines=0, pboxes=2, host_rate=1e9,
                   fabric_rate=1e9, delay=1e-6, buffer=1 << 20, impairments=Impairments(),
                   pipeline_latency=1e-6, switch_slots=64, pbox_cores=1,
                   pbox_packets_per_core=1e6, seed=0)
    # six ranks on the first PBox (two of them on the switch as well), two on the second
    targets = [{None: "p1.1"}] * 4 + [{1: "p1.1", 2: "s1"}] * 2 + [{None: "p1.2"}] * 2
    assert run_sizes(fabric, targets, 17) == {"p1.1": 2, "p1.2": 8}
    assert run_sizes(fabric, targets, 4) == {"p1.1": 1, "p1.2": 2}
    assert run_sizes(fabric, [{None: "s1"}] * 8, 17) == {}  # a switch: no shared link


def test_the_ring_takes_its_two_n_minus_one_steps() -> None:
    n, elements, rate = 4, 65536, 1e9
    r = run("ring", job={"elements": elements, "iterations": 1})
    chunk = elements * 4 // n
    datagrams = -(-chunk // MSS)
    wire = chunk + datagrams * WIRE_OVERHEAD  # full segments, the last one short
    segment = MSS + WIRE_OVERHEAD
    # a step: the chunk's serialization, then its end's way through the switch (two
    # links' delay, the pipeline, and one full segment's serialization on the way out:
    # the short last segment waits there behind the full one before it)
    step = wire * 8 / rate + 2 * 5e-6 + 1e-6 + segment * 8 / rate
    assert r.iteration_times[0] == pytest.approx(2 * (n - 1) * step, rel=1e-3)
    assert r.bytes_by_link_class["host_up"] == n * 2 * (n - 1) * wire


def test_the_sharded_ps_pushes_and_pulls_every_shard() -> None:
    r = run("ps", topology={"pboxes": 2}, job={"elements": 65536, "iterations": 1})
    assert r.ok and r.iteration_times
    assert r.bytes_by_link_class["pbox_down"] == r.bytes_by_link_class["pbox_up"]
    assert r.bytes_by_link_class["host_up"] == r.bytes_by_link_class["host_down"]


def test_the_switch_path_beats_the_ring_and_the_single_pbox_at_the_bandwidth_floor() -> None:
    times = {p: run(p, job={"elements": 65536, "iterations": 1}).iteration_times[0]
             for p in ("switch", "ring", "pbox")}
    assert times["switch"] < times["ring"] < times["pbox"]


def test_every_datagram_is_delivered_or_dropped_by_a_stated_rule() -> None:
    s = make(links={"loss": 0.03, "duplicate": 0.01, "queue": "8KB"},
             job={"elements": 32768, "window": 64}, switch={"slots": 128})
    from p4hub.sim import run as run_module

    ports: list = []
    real_build = run_module.build

    def build(*args: Any, **kwargs: Any):  # keep the fabric to read its ports afterwards
        fabric = real_build(*args, **kwargs)
        ports.append(fabric)
        return fabric

    run_module.build = build
    try:
        r = run_scenario(s)
    finally:
        run_module.build = real_build
    assert r.ok
    (fabric,) = ports
    for port in fabric.ports:
        c = port.counters
        assert c.offered == (c.dropped_queue + c.dropped_loss + c.delivered - c.duplicated
                             + port.queued_datagrams + (c.datagrams - c.dropped_loss
                                                        - c.delivered + c.duplicated))
        assert c.datagrams - c.dropped_loss - c.delivered + c.duplicated >= 0  # on the wire
    assert sum(p.counters.dropped_queue for p in fabric.ports) == r.drops_by_cause["queue"]


def test_a_job_larger_than_the_worker_bitmaps_is_refused_before_the_run() -> None:
    with pytest.raises(ScenarioError, match=r"topology.workers.*at most 32"):
        make(topology={"kind": "leafspine", "workers": 17, "racks": 2},
             links={"oversubscription": 1.0}, job={"paths": ["pbox"]})
    with pytest.raises(ScenarioError, match=r"topology.workers.*at most 32"):
        make(topology={"kind": "rack", "workers": 33})


def test_tier_p_runs_a_job_of_more_than_32_ranks_as_the_controllers_tree() -> None:
    """The controller places 34 ranks over two leaves (each worker a bit on its leaf, not
    its rank), and aggregate.p4 sums them exactly under loss."""
    r = run("switch", topology={"kind": "leafspine", "workers": 17, "racks": 2, "spines": 1},
            links={"loss": 0.01, "oversubscription": 1.0},
            job={"elements": 2048, "window": 16})
    check_accounting(r)
    assert r.exact is True and r.resends > 0
    assert sum(v for k, v in r.counters.items() if k.startswith("aggregated_t")) > 0


def test_a_spine_without_room_roots_the_tree_at_a_racks_pbox() -> None:
    """switch.spine_slots below the window: the controller's placement finds no spine
    room and roots the switch path's job at rack 1's PBox (bench/hierarchy.py's pbox-root
    path): rack 1's workers are that PBox's members, rack 2's leaf sums its rack and sends
    the PBox its partials, no spine aggregates, and the sums are exact under loss."""
    fabric = {"kind": "leafspine", "workers": 2, "racks": 2, "spines": 1}
    rooted = run("switch", topology=fabric, links={"loss": 0.01}, switch={"spine_slots": 1})
    check_accounting(rooted)
    assert rooted.exact is True and rooted.resends > 0
    aggregated = {k: v for k, v in rooted.counters.items() if k.startswith("aggregated_")}
    assert set(aggregated) == {"aggregated_p1.1", "aggregated_s2"}
    tree = run("switch", topology=fabric, switch={"spine_slots": 32})  # room: the spine root
    assert tree.counters.get("aggregated_t1", 0) > 0 and "aggregated_p1.1" not in tree.counters


def test_spine_slots_need_tier_ps_placement() -> None:
    point = make(topology={"kind": "leafspine", "workers": 2, "racks": 2, "spines": 1},
                 switch={"spine_slots": 1})
    with pytest.raises(SimError, match=r"spine_slots needs tier P"):
        run_scenario(point, tier="M")


def test_more_slots_than_the_switch_has_is_refused() -> None:
    with pytest.raises(ScenarioError, match=r"job.window.*switch has 128"):
        make(job={"window": 256})


@pytest.mark.parametrize("path", ["switch", "pbox", "ring"])
@pytest.mark.parametrize("kind", ["rack", "leafspine"])
def test_tier_f_is_within_ten_percent_of_tier_m(path: str, kind: str) -> None:
    topo = {"kind": kind, "workers": 4} if kind == "rack" else \
        {"kind": "leafspine", "workers": 2, "racks": 2, "spines": 2}
    links = {} if kind == "rack" else {"oversubscription": 1.0}
    common = {"topology": topo, "links": links, "job": {"elements": 131072}}
    m = run(path, **common, run={"tier": "M"})  # type: ignore[arg-type]
    f = run(path, **common, run={"tier": "F"})  # type: ignore[arg-type]
    assert f.events < m.events and f.exact is None
    assert f.iteration_times == pytest.approx(m.iteration_times, rel=0.10)


def test_tier_f_runs_a_thousand_workers_on_the_baselines() -> None:
    r = run("ring", topology={"kind": "leafspine", "workers": 32, "racks": 32, "spines": 4,
                              "pboxes": 1},
            links={"oversubscription": 1.0},
            job={"elements": 1 << 20, "iterations": 1, "paths": ["ring"]},
            run={"tier": "F"})
    assert r.ok and r.workers == 1024 and r.iteration_times[0] > 0


def test_an_unknown_tier_is_refused() -> None:
    with pytest.raises(SimError, match="tier"):
        run_scenario(make(), tier="Q")


def test_a_run_past_its_memory_budget_stops_with_a_message() -> None:
    with pytest.raises(BudgetExceeded, match="budget"):
        run(run={"memory": "1MiB"}, job={"elements": 2**20})


@pytest.mark.parametrize("rebalance", [False, True])
def test_the_controller_moves_the_share_off_a_straggling_pbox(rebalance: bool) -> None:
    """Tier P: the controller's own heartbeats and re-splits, in simulated time."""
    r = run("pbox", topology={"pboxes": 3},
            links={"bandwidth": "2.5Mbit", "pbox_bandwidth": "5Mbit", "overhead": "42B"},
            straggler={"node": "p1.2", "factor": 4.0},
            job={"elements": 32768, "iterations": 6, "lanes": 256, "rebalance": rebalance})
    assert r.ok and r.exact is True
    if rebalance:
        assert r.counters["moves"] >= 1 and r.counters["map_resyncs"] >= 4
        # the straggler ends with less of the job than either other PBox
        assert r.counters["aggregated_p1.2"] < min(r.counters["aggregated_p1.1"],
                                                   r.counters["aggregated_p1.3"])
    else:
        assert r.counters["moves"] == 0 and r.counters["map_resyncs"] == 0


@pytest.mark.parametrize("tier", ["M", "F"])
def test_a_slower_pbox_link_slows_the_pbox_path_in_every_tier(tier: str) -> None:
    """links.pbox_bandwidth is each PBox's link in tier F too, not the hosts' rate."""
    common = {"job": {"elements": 65536, "iterations": 1}, "run": {"tier": tier}}
    fast = run("pbox", **common)  # type: ignore[arg-type]
    slow = run("pbox", links={"pbox_bandwidth": "250Mbit"}, **common)  # type: ignore[arg-type]
    assert slow.iteration_times[0] > 2 * fast.iteration_times[0]


def test_tier_f_and_tier_m_agree_on_a_ring_of_chunks_shorter_than_a_segment() -> None:
    """16 ranks and a 2 KiB tensor: each step's chunk (128 B) is one short segment, so a
    step costs its own serialization, not a whole MSS's (tier F charged one)."""
    common = {"topology": {"kind": "rack", "workers": 16},
              "job": {"elements": 512, "iterations": 1, "paths": ["ring"]}}
    m = run("ring", **common, run={"tier": "M"})
    f = run("ring", **common, run={"tier": "F"})
    assert f.iteration_times == pytest.approx(m.iteration_times, rel=0.10)
