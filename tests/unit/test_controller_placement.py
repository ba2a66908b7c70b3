"""JoinJob placement: a job can be put on its rack's PBox although switch slots are free
(how `make run` and the benchmark compare the switch and PBox paths on one rack)."""

from __future__ import annotations

import pytest

from p4hub.controller.core import topology
from p4hub.controller.core.job import ON_PBOX, ON_SWITCH, JobError
from p4hub.controller.core.jobs import JobRegistry
from p4hub.controller.core.updates import PBoxJobWrite

RACK = topology.rack_dict(4, "127.0.0.1:50051", slots=256, job_slots=128)


@pytest.fixture
def registry() -> JobRegistry:
    return JobRegistry(topology.from_dict(RACK))


def test_auto_takes_switch_slots_then_the_pbox(registry: JobRegistry) -> None:
    wheres = [registry.join(f"j{i}", 1, 0, (f"10.0.0.{i + 1}", 4000), 0.0)[0].where
              for i in range(3)]
    assert wheres == [ON_SWITCH, ON_SWITCH, ON_PBOX]


def test_pbox_placement_leaves_the_switch_slots_free(registry: JobRegistry) -> None:
    reply, updates = registry.join("forced", 2, 0, ("10.0.0.1", 4000), 0.0, placement="pbox")
    assert reply.where == ON_PBOX
    assert reply.aggregator_ip == "10.0.0.100"
    assert [u for u in updates if isinstance(u, PBoxJobWrite)]
    # the second rank's join neither moves the job nor needs the placement again
    reply2, _ = registry.join("forced", 2, 1, ("10.0.0.2", 4000), 0.0)
    assert (reply2.where, reply2.slot_base) == (ON_PBOX, reply.slot_base)
    # both switch jobs still fit: the forced job took no switch slots
    assert registry.join("a", 1, 0, ("10.0.0.3", 4000), 0.0)[0].where == ON_SWITCH
    assert registry.join("b", 1, 0, ("10.0.0.4", 4000), 0.0)[0].where == ON_SWITCH


def test_unknown_placement_is_refused_and_changes_nothing(registry: JobRegistry) -> None:
    with pytest.raises(JobError, match="placement"):
        registry.join("x", 1, 0, ("10.0.0.1", 4000), 0.0, placement="tofino")
    assert not registry.jobs
