"""``p4hub doctor`` end to end in process: p4lite's P4Runtime server running
aggregate.p4 (registers and counters read over P4Runtime), the controller, the job API
on port 0 and the CLI, with an explicit clock."""

from __future__ import annotations

import json

import grpc
import numpy as np
import pytest

from p4hub.controller import api, cli
from p4hub.controller.core import program as p
from p4hub.controller.core.credentials import LOCAL
from p4hub.controller.core.updates import DELETE, Entry, FieldMatch, TableWrite
from p4hub.hosts.pbox.core import ControlCore, LocalShards, ShardCore
from p4hub.hosts.wire import DEFAULT_LANES
from tests.support.pbox_control import pbox_control
from tests.unit.test_aggregate_p4 import contrib, udp_frame
from tests.unit.test_controller_api import stack  # noqa: F401 (fixture)
from tests.unit.test_controller_driver import pipeline  # noqa: F401 (fixture)


def send(device, topo, job_id: int, rank: int, slot: int, port: int = 4000) -> None:
    """Rank ``rank`` (host h<rank+1>, UDP port ``port + rank``) contributes to ``slot``."""
    h, pbox = topo.hosts[f"h{rank + 1}"], topo.pboxes["pb1"]
    frame = udp_frame((h.mac, h.ip, port + rank), (pbox.mac, pbox.ip, p.AGG_UDP_PORT),
                      contrib(job_id, rank, slot, values=np.ones(DEFAULT_LANES), position=slot))
    device.receive(frame, rank + 1)


def findings(reply: dict) -> dict[str, dict]:
    (report,) = reply["reports"]
    return {f["code"]: f for f in report["findings"]}


@pytest.fixture
def job3(stack):  # noqa: F811
    device, topo, ctl, service, clock, client, address = stack
    service.sleep = lambda seconds: None  # Doctor's wait between its two reads of the slots
    for rank in range(3):
        client.join("a", 3, rank, f"10.0.0.{rank + 1}:{4000 + rank}")
    return stack


def test_doctor_names_the_rank_that_holds_the_open_slots(job3, capsys):
    device, topo, ctl, service, clock, client, address = job3
    for slot in (0, 1):
        for rank in (0, 1):
            send(device, topo, 1, rank, slot)
    clock.now = 8.0
    client.heartbeat(1, 0)
    client.heartbeat(1, 1)
    reply = client.call("Doctor", job_id=1, settle=0)
    found = findings(reply)
    assert found["ranks-not-contributing"]["ranks"] == [2]
    assert found["worker-silent"]["ranks"] == [2]
    assert found["worker-silent"]["message"].startswith(
        "rank 2 (10.0.0.3:4002) has not been heard from for 8.0 s")
    cells = reply["reports"][0]["open_cells"]
    assert [(c["slot"], c["shadow"], c["bitmap"], c["counter"], c["missing"]) for c in cells] == [
        (0, 0, 0b011, 2, [2]), (1, 0, 0b011, 2, [2])]
    assert all(c["stuck"] for c in cells)  # no second read: every open cell counts as stuck

    assert cli.main(["--controller", address, "doctor", "1"]) == 2
    out = capsys.readouterr().out
    assert "ERROR  rank(s) 2 have not contributed to any of the 2 open cell(s) of job 1" in out
    assert "  0/0  2  0x00000003  2" in out
    assert cli.main(["--controller", address, "doctor", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["reports"][0]["healthy"] is False

    for slot in (0, 1):  # rank 2 catches up: the rounds complete
        send(device, topo, 1, 2, slot)
    client.heartbeat(1, 2)
    reply = client.call("Doctor")
    assert reply["reports"][0]["healthy"], reply
    assert reply["reports"][0]["open_cells"] == []
    assert cli.main(["--controller", address, "doctor"]) == 0
    assert capsys.readouterr().out.startswith("info   job 1: healthy")


def test_doctor_reads_the_slots_twice_and_names_only_stuck_cells(job3):
    device, topo, ctl, service, clock, client, address = job3
    send(device, topo, 1, 0, 0)
    send(device, topo, 1, 0, 1)
    send(device, topo, 1, 1, 1)
    waits: list[float] = []

    def rank_1_catches_up(seconds: float) -> None:
        waits.append(seconds)
        send(device, topo, 1, 1, 0)  # slot 0 moves between the reads; slot 1 does not

    service.sleep = rank_1_catches_up
    (report,) = client.call("Doctor", job_id=1, settle=0.5)["reports"]
    assert waits == [0.5]
    found = {f["code"]: f for f in report["findings"]}
    assert found["ranks-not-contributing"]["ranks"] == [2]
    assert found["ranks-not-contributing"]["message"].startswith(
        "rank(s) 2 have not contributed to any of the 1 open cell(s) of job 1, unchanged for "
        "0.5 s: slot 1/0")
    assert found["rounds-in-flight"]["severity"] == "info"
    assert [(c["slot"], c["stuck"]) for c in report["open_cells"]] == [(0, False), (1, True)]
    with pytest.raises(grpc.RpcError) as info:
        client.call("Doctor", job_id=1, settle=60)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_doctor_sees_a_missing_member_entry_and_rejected_packets(job3):
    device, topo, ctl, service, clock, client, address = job3
    h2 = topo.hosts["h2"]
    member = Entry(p.MEMBERS, (FieldMatch(p.MEMBERS_JOB, 1), FieldMatch(p.MEMBERS_RANK, 1),
                               FieldMatch(p.MEMBERS_SRC, h2.ip), FieldMatch(p.MEMBERS_SPORT, 4001),
                               FieldMatch(p.MEMBERS_PORT, h2.port)))
    ctl.apply([TableWrite("s1", DELETE, member)])  # behind the registry's back
    send(device, topo, 1, 1, 0)  # now rejected by the switch
    send(device, topo, 9, 0, 0)  # a job the switch does not have
    found = findings(client.call("Doctor", job_id=1))
    assert found["member-entry-missing"]["ranks"] == [1]
    assert "rejected 1 packet(s) of job 1" in found["switch-rejected"]["message"]
    assert "dropped 1 contribution(s) naming a job" in found["unknown-job-drops"]["message"]


def test_doctor_on_a_job_the_controller_ended_says_why(job3, capsys):
    device, topo, ctl, service, clock, client, address = job3
    clock.now = 9.0
    client.heartbeat(1, 0)
    client.heartbeat(1, 2)
    clock.now = 12.0
    ctl.expire(clock.now)  # rank 1 silent for 12 s > 10 s
    reply = client.call("Doctor", job_id=1)
    found = findings(reply)
    assert found["job-ended"]["ranks"] == [1]
    assert found["job-ended"]["message"].startswith(
        "job 1 ended 0.0 s ago: rank 1 (10.0.0.2:4001) sent no heartbeat for 12.0 s")
    assert client.call("Doctor") == {"reports": []}  # no running job
    assert cli.main(["--controller", address, "doctor"]) == 0
    assert capsys.readouterr().out.strip() == "no running jobs"


def test_doctor_reads_a_pbox_job_over_the_control_channel(stack):  # noqa: F811
    device, topo, ctl, service, clock, client, address = stack
    shard = ShardCore((0, 1), max_slots=1024)
    with pbox_control(ControlCore(LocalShards([shard]))) as (control, _):
        ctl.pbox_sink = control
        doctor_api = api.JobService(ctl, clock, pboxes=control, sleep=lambda seconds: None)

        def diagnose() -> dict:
            return findings(doctor_api.handle("Doctor", b'{"job_id": 1}', LOCAL))

        client.call("JoinJob", name="p", world_size=2, rank=0, address="10.0.0.1:4000",
                    placement="pbox")
        client.call("JoinJob", name="p", world_size=2, rank=1, address="10.0.0.2:4001",
                    placement="pbox")
        assert list(diagnose()) == ["healthy"]
        shard.receive(contrib(1, 0, 999), ("10.0.0.1", 4000), now=1.0)  # slot outside the job
        assert "rejected packets of job 1: 1 for slot" in diagnose()["pbox-rejected"]["message"]
        shard.receive(contrib(1, 0, 3, shadow=1), ("10.0.0.1", 4000), now=2.0)
        found = diagnose()
        assert list(found["ranks-not-contributing"]["ranks"]) == [1]
        assert "slot 3/1: has 0, waits for 1" in found["ranks-not-contributing"]["message"]
        control.channels["pb1"].request({"cmd": "remove_job", "job": 1})  # a PBox restart
        assert "does not have job 1" in diagnose()["pbox-job-missing"]["message"]
        ctl.pbox_sink = lambda write: None


def test_a_job_that_ends_while_the_doctor_waits_is_reported_ended(job3):
    device, topo, ctl, service, clock, client, address = job3
    service.sleep = lambda seconds: ctl.kill(1, clock.now)  # between the two reads
    found = findings(client.call("Doctor", job_id=1))
    assert found["job-ended"]["message"] == ("job 1 ended 0.0 s ago: killed by an operator "
                                             "(KillJob)")
