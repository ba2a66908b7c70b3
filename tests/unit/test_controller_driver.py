"""controller.driver against p4lite's P4Runtime server running aggregate.p4 in process.

Covers the whole control path: pipeline push, static entries, job entries and
multicast groups written over P4Runtime, results on the wire, counters read
back, and a controller restart that rebuilds its jobs from the switch.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

import numpy as np
import pytest

from p4hub.controller.core import program as p
from p4hub.controller.core import topology
from p4hub.controller.core.job import ON_PBOX, ON_SWITCH
from p4hub.controller.core.updates import MODIFY, PBoxJobWrite
from p4hub.controller.driver import Controller, ControllerError, PipelineConfig
from p4hub.controller.p4rt_client import P4RuntimeClient, P4RuntimeError
from p4hub.controller.pbox_control import PBoxControlError
from p4hub.hosts import wire
from p4hub.hosts.wire import DEFAULT_LANES
from p4lite.compiler import driver as compiler
from p4lite.switch.core.switch import Switch
from p4lite.switch.p4runtime.device import Device
from p4lite.switch.p4runtime.server import serve
from tests.unit.test_aggregate_p4 import PROGRAM, contrib, parse_frame, udp_frame

RACK = {
    "switches": {"s1": {"grpc_addr": "127.0.0.1:1", "slots": 32, "job_slots": 32}},
    "hosts": {
        f"h{i}": {"ip": f"10.0.0.{i}", "mac": f"08:00:00:00:01:{i:02x}", "switch": "s1", "port": i}
        for i in range(1, 5)
    },
    "pboxes": {"pb1": {"ip": "10.0.0.100", "mac": "08:00:00:00:01:64", "switch": "s1", "port": 9}},
}


@pytest.fixture(scope="module")
def pipeline() -> PipelineConfig:
    result = compiler.compile_file(PROGRAM)
    return PipelineConfig(result.p4info, json.dumps(result.bmv2).encode())


@pytest.fixture
def switch():
    sent: list[tuple[int, bytes]] = []
    device = Device(0, Switch, transmit=lambda port, frame: sent.append((port, frame)))
    server, port = serve(device, "127.0.0.1:0")
    raw = dict(RACK, switches={"s1": {**RACK["switches"]["s1"], "grpc_addr": f"127.0.0.1:{port}"}})
    yield device, sent, topology.from_dict(raw)
    server.stop(grace=None)


def endpoint(topo, i, port):
    h = topo.hosts[f"h{i}"]
    return (h.mac, h.ip, port)


def test_controller_configures_runs_jobs_and_rebuilds_after_a_restart(switch, pipeline):
    device, sent, topo = switch
    pbox = topo.pboxes["pb1"]
    agg = (pbox.mac, pbox.ip, p.AGG_UDP_PORT)
    pbox_jobs = []
    ctl = Controller(topo, pipeline, pbox_sink=pbox_jobs.append, epoch_seed=5)
    assert ctl.start(now=0.0) == {"s1": "configured"}
    a = ctl.join("a", 2, 0, ("10.0.0.1", 4001), now=1.0)
    ctl.join("a", 2, 1, ("10.0.0.2", 4002), now=1.0)
    c = ctl.join("c", 1, 0, ("10.0.0.3", 4003), now=1.0)  # the switch is full: PBox
    assert (a.where, c.where) == (ON_SWITCH, ON_PBOX)
    assert [w.job_id for w in pbox_jobs] == [c.job_id]
    assert ctl.check_pboxes() == []
    assert pbox_jobs[-1] == PBoxJobWrite("pb1", MODIFY, c.job_id, 1, c.slot_base, c.slot_count)
    pbox_jobs.clear()

    def round_trip(value: int, position: int) -> list[tuple[int, bytes]]:
        sent.clear()
        for rank in (0, 1):
            pkt = contrib(a.job_id, rank, 0, shadow=position % 2, values=np.full(DEFAULT_LANES, value),
                          position=position)
            device.receive(udp_frame(endpoint(topo, rank + 1, 4001 + rank), agg, pkt), rank + 1)
        return list(sent)

    out = round_trip(3, position=0)
    assert sorted(port for port, _ in out) == [1, 2]
    for port, frame in out:
        f = parse_frame(frame)
        assert (f["dst_ip"], f["dport"]) == (topo.hosts[f"h{port}"].ip, 4000 + port)
        assert set(wire.decode(f["payload"])[1].tolist()) == {6}
    counters = ctl.job_counters(a.job_id)
    assert counters["contributions"][0] == 2 and counters["completions"][0] == 1
    ctl.close()

    # a new controller process: it finds the pipeline, rebuilds, and the job carries on
    again = Controller(topo, pipeline, pbox_sink=pbox_jobs.append, epoch_seed=1)
    assert again.start(now=100.0) == {"s1": "rebuilt"}
    assert sorted(again.registry.jobs) == sorted([a.job_id, c.job_id])
    assert [(w.op, w.job_id) for w in pbox_jobs] == [(MODIFY, c.job_id)]  # re-asserted
    assert again.join("a", 2, 1, ("10.0.0.2", 4002), now=101.0) == replace(a, rank=1)
    out = round_trip(5, position=1)
    assert sorted(port for port, _ in out) == [1, 2]
    assert set(wire.decode(parse_frame(out[0][1])["payload"])[1].tolist()) == {10}
    assert again.job_counters(a.job_id)["contributions"][0] == 4  # the rebuild kept them
    # ending the job removes it from the switch; its contributions become unknown
    again.kill(a.job_id)
    assert round_trip(1, position=0) == []
    again.kill(c.job_id)
    again.close()
    # a controller started afresh hands out ids from the first again: a new job with
    # the ended job's id counts from zero, not from that job's packets
    third = Controller(topo, pipeline, pbox_sink=pbox_jobs.append, epoch_seed=9)
    third.start(now=200.0)
    b = third.join("b", 1, 0, ("10.0.0.1", 4001), now=201.0)
    assert (b.job_id, b.where) == (a.job_id, ON_SWITCH)
    assert set(third.job_counters(b.job_id).values()) == {(0, 0)}
    third.close()


def test_unreachable_switch_is_a_controller_error(pipeline):
    raw = dict(RACK, switches={"s1": {"grpc_addr": "127.0.0.1:1"}})
    ctl = Controller(topology.from_dict(raw), pipeline,
                     client_factory=lambda conf: P4RuntimeClient(conf.grpc_addr, timeout=0.3))
    with pytest.raises(ControllerError, match="switch s1 at 127.0.0.1:1"):
        ctl.start(now=0.0)


def test_a_switch_running_another_program_gets_ours_pushed(switch, pipeline):
    _, _, topo = switch
    first = Controller(topo, pipeline)
    first.start(now=0.0)
    first.join("a", 1, 0, ("10.0.0.1", 4001), now=0.0)
    first.close()
    changed = PipelineConfig(pipeline.p4info, pipeline.bmv2_json + b" ")  # same tables, other bytes
    assert changed.cookie != pipeline.cookie
    second = Controller(topo, changed)
    assert second.start(now=1.0) == {"s1": "configured"}
    assert second.registry.jobs == {}
    assert not [e for e in second.read_entries("s1") if e.table == p.JOBS]
    second.close()


class FlakyClient(P4RuntimeClient):
    """Applies only the first ``keep`` updates of the next Write, then fails it."""

    keep: int | None = None

    def write(self, updates):
        if self.keep is None:
            return super().write(updates)
        keep, self.keep = self.keep, None
        super().write(updates[:keep])
        raise P4RuntimeError("UNKNOWN", "injected failure")


def in_line(ctl: Controller) -> bool:
    have = {(e.table, e.match, e.action, e.params) for e in ctl.read_entries("s1")}
    want = {(e.table, e.match, e.action, e.params) for e in ctl.registry.expected_entries("s1")}
    return have == want


def test_a_failed_write_rolls_the_registry_back_and_resyncs_the_switch(switch, pipeline):
    device, sent, topo = switch
    clients: list[FlakyClient] = []

    def factory(conf):
        clients.append(FlakyClient(conf.grpc_addr, conf.device_id, election_id=(0, 100)))
        return clients[-1]

    failures = []

    def pbox_sink(write):
        if failures:
            raise PBoxControlError(failures.pop())

    ctl = Controller(topo, pipeline, client_factory=factory, pbox_sink=pbox_sink)
    ctl.start(now=0.0)
    # the job's first join fails after its jobs entry went in
    clients[0].keep = 1
    with pytest.raises(ControllerError, match="injected"):
        ctl.join("a", 2, 0, ("10.0.0.1", 4001), now=0.0)
    assert ctl.registry.jobs == {} and in_line(ctl)
    a = ctl.join("a", 2, 0, ("10.0.0.1", 4001), now=0.0)
    # a second worker's join fails half way (member in, result_dst and group not)
    clients[0].keep = 1
    with pytest.raises(ControllerError):
        ctl.join("a", 2, 1, ("10.0.0.2", 4002), now=0.0)
    assert list(ctl.registry.jobs[a.job_id].workers) == [0] and in_line(ctl)
    ctl.join("a", 2, 1, ("10.0.0.2", 4002), now=0.0)
    assert in_line(ctl)
    # the multicast group was rewritten as the registry has it: both workers get results
    pbox = topo.pboxes["pb1"]
    sent.clear()
    for rank in (0, 1):
        h = topo.hosts[f"h{rank + 1}"]
        device.receive(udp_frame((h.mac, h.ip, 4001 + rank), (pbox.mac, pbox.ip, p.AGG_UDP_PORT),
                                 contrib(a.job_id, rank, 0, values=np.ones(DEFAULT_LANES))), rank + 1)
    assert sorted(port for port, _ in sent) == [1, 2]
    # a PBox that refuses a job: nothing of it stays on the switch
    failures.append("PBox says no")
    with pytest.raises(ControllerError, match="PBox pb1: PBox says no"):
        ctl.join("c", 1, 0, ("10.0.0.3", 4003), now=0.0)
    assert sorted(ctl.registry.jobs) == [a.job_id] and in_line(ctl)
    ctl.close()


def test_a_restarted_switch_is_reconfigured_from_the_registry(pipeline):
    def start_switch(address: str):
        sent: list = []
        device = Device(0, Switch, transmit=lambda port, frame: sent.append((port, frame)))
        server, port = serve(device, address)
        return device, sent, server, port

    device, sent, server, port = start_switch("127.0.0.1:0")
    topo = topology.from_dict(dict(RACK, switches={"s1": {"grpc_addr": f"127.0.0.1:{port}"}}))
    # 5 s per call: pushing aggregate.p4's pipeline to the fresh switch takes about a
    # second on a loaded 2-core CI machine (1 s made the test fail there now and then)
    ctl = Controller(topo, pipeline, client_factory=lambda conf: P4RuntimeClient(
        conf.grpc_addr, conf.device_id, election_id=(0, 100), timeout=5.0))
    ctl.start(now=0.0)
    a = ctl.join("a", 2, 0, ("10.0.0.1", 4001), now=0.0)
    ctl.join("a", 2, 1, ("10.0.0.2", 4002), now=0.0)
    assert ctl.check_switches() == {}
    server.stop(grace=None)  # the switch dies ...
    deadline = time.monotonic() + 5
    while ctl.clients["s1"].alive and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ctl.check_switches()["s1"].startswith("down")
    device, sent, server, _ = start_switch(f"127.0.0.1:{port}")  # ... and comes back empty
    try:
        assert ctl.check_switches() == {"s1": "reconfigured"}
        pbox = topo.pboxes["pb1"]
        for rank in (0, 1):
            h = topo.hosts[f"h{rank + 1}"]
            device.receive(udp_frame((h.mac, h.ip, 4001 + rank), (pbox.mac, pbox.ip, p.AGG_UDP_PORT),
                                     contrib(a.job_id, rank, 0, values=np.ones(DEFAULT_LANES))), rank + 1)
        assert sorted(port for port, _ in sent) == [1, 2]
        assert in_line(ctl)
    finally:
        ctl.close()
        server.stop(grace=None)


def test_a_bug_in_the_pbox_sink_is_not_relabelled_a_pbox_failure(switch, pipeline):
    """Only PBoxControlError is a PBox failure (ControllerError, UNAVAILABLE); whatever
    else the sink raises is a bug and goes up as it is, after the registry was rolled back."""
    _, _, topo = switch
    raised: list[Exception] = []

    def pbox_sink(write):
        if raised:
            raise raised.pop()

    ctl = Controller(topo, pipeline, pbox_sink=pbox_sink)
    ctl.start(now=0.0)
    try:
        raised.append(KeyError("a bug in the sink"))
        with pytest.raises(KeyError, match="a bug in the sink"):
            ctl.join("c", 1, 0, ("10.0.0.3", 4003), now=0.0, placement="pbox")
        assert ctl.registry.jobs == {} and in_line(ctl)
        raised.append(PBoxControlError("PBox at 10.0.0.100:7000: refused"))
        with pytest.raises(ControllerError, match="PBox pb1: PBox at"):
            ctl.join("c", 1, 0, ("10.0.0.3", 4003), now=0.0, placement="pbox")
        assert ctl.registry.jobs == {} and in_line(ctl)
    finally:
        ctl.close()


def test_a_restarted_switch_gives_its_jobs_a_new_epoch(pipeline):
    """Its registers are gone, so the rounds in flight are: the new epoch (in the
    heartbeat reply) tells the agents to resynchronise."""
    sent: list = []
    device = Device(0, Switch, transmit=lambda port, frame: sent.append((port, frame)))
    server, port = serve(device, "127.0.0.1:0")
    topo = topology.from_dict(dict(RACK, switches={"s1": {"grpc_addr": f"127.0.0.1:{port}"}}))
    ctl = Controller(topo, pipeline, client_factory=lambda conf: P4RuntimeClient(
        conf.grpc_addr, conf.device_id, election_id=(0, 100), timeout=5.0))
    ctl.start(now=0.0)
    a = ctl.join("a", 1, 0, ("10.0.0.1", 4001), now=0.0)
    server.stop(grace=None)
    deadline = time.monotonic() + 5
    while ctl.clients["s1"].alive and time.monotonic() < deadline:
        time.sleep(0.02)
    server, _ = serve(Device(0, Switch, transmit=lambda *_: None), f"127.0.0.1:{port}")
    try:
        assert ctl.check_switches() == {"s1": "reconfigured"}
        job = ctl.registry.jobs[a.job_id]
        assert job.epoch != a.epoch and job.where == ON_SWITCH
        assert [m.reason for m in job.moves] == ["switch s1 restarted"]
        entry = next(e for e in ctl.read_entries("s1") if e.table == p.JOBS)
        assert entry.param("epoch") == job.epoch
    finally:
        ctl.close()
        server.stop(grace=None)


class DyingPBox:
    """A pbox_sink whose PBox answers until ``dead`` is set, then refuses everything;
    ``lost`` makes the next MODIFY find the job missing (a restarted PBox)."""

    def __init__(self) -> None:
        self.dead = False
        self.lost = False
        self.writes: list[PBoxJobWrite] = []

    def __call__(self, write: PBoxJobWrite) -> bool:
        if self.dead:
            raise PBoxControlError("PBox at 10.0.0.100:7000: connection refused")
        self.writes.append(write)
        recreated, self.lost = self.lost, False
        return recreated


def test_a_job_whose_pbox_died_moves_to_the_switch(switch, pipeline):
    device, sent, topo = switch
    pbox_sink = DyingPBox()
    ctl = Controller(topo, pipeline, pbox_sink=pbox_sink, epoch_seed=5)
    ctl.start(now=0.0)
    try:
        c = ctl.join("c", 2, 0, ("10.0.0.3", 4003), now=0.0, placement="pbox")
        ctl.join("c", 2, 1, ("10.0.0.4", 4004), now=0.0, placement="pbox")
        pbox_sink.lost = True  # the PBox restarted: the job is re-added under a new epoch
        assert ctl.check_pboxes(now=1.0) == [f"job {c.job_id}: PBox pb1 had lost it: re-added, "
                                             f"epoch {ctl.registry.jobs[c.job_id].epoch}"]
        assert ctl.registry.jobs[c.job_id].epoch != c.epoch
        pbox_sink.dead = True
        report = ctl.check_pboxes(now=2.0)
        job = ctl.registry.jobs[c.job_id]
        assert report == [f"job {c.job_id}: PBox pb1 is unreachable (PBox pb1: PBox at "
                          f"10.0.0.100:7000: connection refused); moved to switch s1, epoch "
                          f"{job.epoch}"]
        assert job.where == ON_SWITCH and ctl.registry.pbox_pools["pb1"].free_slots() > 0
        assert [m.where for m in job.moves] == [ON_PBOX, ON_SWITCH] and in_line(ctl)
        # the switch now sums the job's contributions at its new slots
        pbox = topo.pboxes["pb1"]
        sent.clear()
        for rank in (0, 1):
            h = topo.hosts[f"h{rank + 3}"]
            device.receive(udp_frame((h.mac, h.ip, 4003 + rank), (pbox.mac, pbox.ip, p.AGG_UDP_PORT),
                                     contrib(c.job_id, rank, job.slots.base, values=np.ones(DEFAULT_LANES))),
                           rank + 3)
        assert sorted(port for port, _ in sent) == [3, 4]
        assert set(wire.decode(parse_frame(sent[0][1])["payload"])[1].tolist()) == {2}
    finally:
        ctl.close()


def test_a_job_whose_pbox_died_ends_when_the_switch_is_full(switch, pipeline):
    _, _, topo = switch
    pbox_sink = DyingPBox()
    ctl = Controller(topo, pipeline, pbox_sink=pbox_sink)
    ctl.start(now=0.0)
    try:
        ctl.join("a", 1, 0, ("10.0.0.1", 4001), now=0.0)  # takes every switch slot
        c = ctl.join("c", 1, 0, ("10.0.0.3", 4003), now=0.0)
        assert c.where == ON_PBOX
        pbox_sink.dead = True
        (report,) = ctl.check_pboxes(now=3.0)
        assert report.startswith(f"job {c.job_id} ended: PBox pb1 is unreachable")
        end = ctl.registry.ended[c.job_id]
        assert end.cause == "aggregator-lost" and "no 32 free slots" in end.reason
        assert c.job_id not in ctl.registry.jobs and in_line(ctl)
    finally:
        ctl.close()


def test_a_job_placed_on_the_pbox_for_want_of_switch_slots_moves_once_they_free_up(switch,
                                                                                    pipeline):
    _, _, topo = switch
    pbox_sink = DyingPBox()
    ctl = Controller(topo, pipeline, pbox_sink=pbox_sink)
    ctl.start(now=0.0)
    try:
        a = ctl.join("a", 1, 0, ("10.0.0.1", 4001), now=0.0)  # takes every switch slot
        c = ctl.join("c", 1, 0, ("10.0.0.3", 4003), now=0.0)
        d = ctl.join("d", 1, 0, ("10.0.0.4", 4004), now=0.0, placement="pbox")
        assert (c.where, d.where) == (ON_PBOX, ON_PBOX)
        assert ctl.promote(now=1.0) == []  # no room yet
        ctl.kill(a.job_id)
        (moved,) = ctl.promote(now=2.0)
        job = ctl.registry.jobs[c.job_id]
        assert moved == (f"job {c.job_id}: switch s1 has free slots again; moved off PBox pb1, "
                         f"epoch {job.epoch}")
        assert job.where == ON_SWITCH and job.epoch != c.epoch
        assert pbox_sink.writes[-1] == PBoxJobWrite("pb1", "DELETE", c.job_id)
        # asked for the PBox: stays there
        assert ctl.registry.jobs[d.job_id].where == ON_PBOX and in_line(ctl)
    finally:
        ctl.close()


def test_an_election_id_still_held_is_retried_until_its_stream_is_gone(switch):
    """A restarted controller's new stream may reach the switch before the switch has
    dropped its closed one (seen under load: 'election id 100 is already used'): the
    client retries until the id is free; held for good, it is the error after the
    timeout."""
    import threading

    _, _, topo = switch
    address = topo.switches["s1"].grpc_addr
    first = P4RuntimeClient(address, election_id=(0, 100))
    first.connect()
    second = P4RuntimeClient(address, election_id=(0, 100), timeout=0.5)
    with pytest.raises(P4RuntimeError) as info:
        second.connect()
    assert info.value.code == "INVALID_ARGUMENT" and "already" in info.value.message
    threading.Timer(0.4, first.close).start()
    third = P4RuntimeClient(address, election_id=(0, 100), timeout=10.0)
    third.connect()  # waited out the first client's stream
    assert third.alive
    third.close()
