"""p4hub.controller.pbox_control against the PBox's own control server (hosts.pbox.ControlServer)."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from p4hub.controller.core import topology
from p4hub.controller.core.updates import DELETE, INSERT, MODIFY, PBoxJobWrite
from p4hub.controller.pbox_control import PBoxControl, PBoxControlError
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.pbox.job_config import AggregatorError
from tests.support.pbox_control import pbox_control


class StubPBox:
    """PBox.control's request handling over a plain Aggregator (no worker processes)."""

    def __init__(self) -> None:
        self.agg = Aggregator()
        self.requests: list[dict] = []

    def control(self, request: dict) -> dict:
        self.requests.append(request)
        try:
            if request["cmd"] == "add_job":
                self.agg.add_job(request["job"], request["world_size"], request["slot_base"],
                                 request["slot_count"])
            elif request["cmd"] == "remove_job":
                self.agg.remove_job(request["job"])
            elif request["cmd"] == "list_jobs":
                return {"ok": True, "jobs": [
                    {k: v for k, v in asdict(c).items() if k != "parent" or v is not None}
                    for c in self.agg.jobs()]}
            return {"ok": True}
        except AggregatorError as exc:
            return {"error": str(exc)}


@pytest.fixture
def pbox():
    stub = StubPBox()
    with pbox_control(stub) as (control, server):
        yield stub, control, server


def test_insert_modify_delete_reach_the_pbox(pbox):
    stub, control, _ = pbox
    control(PBoxJobWrite("pb1", INSERT, 3, 4, 0, 32))
    assert [asdict(c) for c in stub.agg.jobs()] == [
        {"job_id": 3, "world_size": 4, "slot_base": 0, "slot_count": 32, "lanes": 64,
         "parent": None}]
    assert control.jobs("pb1") == [{"job_id": 3, "world_size": 4, "slot_base": 0, "slot_count": 32, "lanes": 64}]
    n = len(stub.requests)
    control(PBoxJobWrite("pb1", MODIFY, 3, 4, 0, 32))  # already there, as described: no change
    assert [r["cmd"] for r in stub.requests[n:]] == ["list_jobs"]
    control(PBoxJobWrite("pb1", MODIFY, 3, 4, 32, 16))  # described differently: replaced
    assert [(c.slot_base, c.slot_count) for c in stub.agg.jobs()] == [(32, 16)]
    control(PBoxJobWrite("pb1", MODIFY, 5, 2, 0, 8))  # missing: added
    control(PBoxJobWrite("pb1", DELETE, 3))
    assert [c.job_id for c in stub.agg.jobs()] == [5]


def test_refusals_and_unknown_pboxes_raise(pbox):
    _, control, _ = pbox
    with pytest.raises(PBoxControlError, match="refused remove_job"):
        control(PBoxJobWrite("pb1", DELETE, 99))
    with pytest.raises(PBoxControlError, match="no control address"):
        control(PBoxJobWrite("pb9", INSERT, 1, 1, 0, 1))


def test_a_dead_pbox_is_a_clear_error():
    topo = topology.from_dict({
        "switches": {"s1": {"grpc_addr": "127.0.0.1:1"}},
        "pboxes": {"pb1": {"ip": "10.0.0.100", "mac": "08:00:00:00:01:64", "switch": "s1",
                           "port": 9, "control": "127.0.0.1:1"}},
    })
    with pytest.raises(PBoxControlError, match="PBox at 127.0.0.1:1"):
        PBoxControl(topo, timeout=0.5)(PBoxJobWrite("pb1", INSERT, 1, 1, 0, 1))
