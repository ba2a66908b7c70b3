"""What the ranks of a p4hub process group must agree on (hosts/pytorch/rendezvous.py):
the job and its map's slot ranges, but not the aggregator address, which is each rank's
own rack's on a leaf-spine fabric."""

from __future__ import annotations

from dataclasses import replace

from p4hub.hosts.pytorch.rendezvous import JobPlan


def plan(aggregator: str = "10.0.0.100:48879", **changes) -> JobPlan:
    route = {"aggregator": aggregator, "slot_base": 0, "count": 32, "fallback": False}
    return replace(JobPlan(3, aggregator, 0, 32, 32, "switch", 256, (route,)), **changes)


def test_ranks_of_different_racks_agree_on_one_job():
    assert plan("10.0.0.100:48879").agreed() == plan("10.0.0.101:48879").agreed()


def test_another_job_or_another_map_is_a_disagreement():
    base = plan()
    assert plan(job_id=4).agreed() != base.agreed()
    assert plan(slot_base=32).agreed() != base.agreed()
    moved = {"aggregator": base.aggregator, "slot_base": 64, "count": 32, "fallback": False}
    assert plan(routes=(moved,)).agreed() != base.agreed()
    assert plan(lanes=64).agreed() != base.agreed()
