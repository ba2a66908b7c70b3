"""What the ranks of a p4hub process group must agree on (hosts/pytorch/rendezvous.py):
the job and its map's slot ranges, but not the aggregator address, which is each rank's
own rack's on a leaf-spine fabric."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from datetime import timedelta

from p4hub.hosts.pytorch.config import BackendConfig
from p4hub.hosts.pytorch.rendezvous import JobPlan, _static_plan, rendezvous


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


class Store:
    """The c10d store calls rendezvous makes."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def set_timeout(self, timeout) -> None:
        pass

    def set(self, key: str, value: str) -> None:
        self.data[key] = value.encode()

    def get(self, key: str) -> bytes:
        return self.data[key]


def test_scatter_rounds_only_where_every_rank_was_told_so():
    """A rank's plan says whether the job's aggregators run scatter rounds (a controller's
    join reply); in a fabric the first ranks are answered before the job knows its racks,
    so the group takes them only if every rank was told so (and still agrees on the job)."""
    config = BackendConfig.from_env({"P4HUB_AGGREGATOR": "127.0.0.1:48879",
                                     "P4HUB_DATA_IP": "127.0.0.1"})
    for peer_says, expected in ((True, True), (False, False)):
        store = Store()
        peer = replace(_static_plan(config), scatter=peer_says)
        store.set("member/1", json.dumps({"address": "127.0.0.1:9", "plan": asdict(peer)}))
        membership, lease = rendezvous(store, 0, 2, config, timedelta(seconds=1))
        assert lease is None and membership.plan.scatter is expected
        # gather rounds likewise (a controller that does not say so: none)
        store = Store()
        peer = replace(_static_plan(config), gather=peer_says)
        store.set("member/1", json.dumps({"address": "127.0.0.1:9", "plan": asdict(peer)}))
        membership, _ = rendezvous(store, 0, 2, config, timedelta(seconds=1))
        assert membership.plan.gather is expected and membership.plan.scatter
