"""The job API (controller.api) and the p4hub CLI, end to end in process:
p4lite's P4Runtime server running aggregate.p4, the controller, the API on port 0."""

from __future__ import annotations

import json
import threading

import grpc
import numpy as np
import pytest

from p4hub.controller import api, cli
from p4hub.controller import client as client_mod
from p4hub.controller.core import program as p
from p4hub.controller.core import topology
from p4hub.controller.driver import Controller
from p4hub.hosts.wire import DEFAULT_LANES
from p4lite.switch.core.switch import Switch
from p4lite.switch.p4runtime.device import Device
from p4lite.switch.p4runtime.server import serve as serve_p4runtime
from tests.support.api_auth import ADMIN, admin_cli_env, credentials
from tests.unit.test_aggregate_p4 import contrib, udp_frame
from tests.unit.test_controller_driver import RACK, pipeline  # noqa: F401 (fixture)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def stack(pipeline, monkeypatch, tmp_path):  # noqa: F811
    """The controller, its API (plaintext, the unit tests' administrator token) and an
    administrator's client; the CLI, through the environment, is the administrator too."""
    admin_cli_env(monkeypatch, tmp_path)
    device = Device(0, Switch)
    p4rt, p4rt_port = serve_p4runtime(device, "127.0.0.1:0")
    raw = dict(RACK, switches={"s1": {**RACK["switches"]["s1"], "grpc_addr": f"127.0.0.1:{p4rt_port}"}},
               controller={"worker_timeout": 10.0})
    topo = topology.from_dict(raw)
    ctl = Controller(topo, pipeline)
    ctl.start(now=0.0)
    clock = Clock()
    service = api.JobService(ctl, clock, credentials=credentials())
    server, port = api.serve(service, "127.0.0.1:0")
    client = client_mod.JobClient(f"127.0.0.1:{port}", timeout=5.0, auth=ADMIN)
    yield device, topo, ctl, service, clock, client, f"127.0.0.1:{port}"
    client.close()
    server.stop(grace=None)
    ctl.close()
    p4rt.stop(grace=None)


def test_join_barrier_show_and_kill(stack):
    device, topo, ctl, service, clock, client, _ = stack
    first = client.join("resnet", 2, 0, "10.0.0.1:4001")
    second = client.join("resnet", 2, 1, "10.0.0.2:4002")
    assert first["job_id"] == second["job_id"] == 1
    assert first["aggregator"] == "10.0.0.100:48879" and first["where"] == "switch"
    assert (first["lanes"], first["window"], first["slot_count"]) == (64, 32, 32)

    results: list = []
    waiter = threading.Thread(target=lambda: results.append(client.barrier(1, 0, timeout=5)))
    waiter.start()
    while not ctl.registry.jobs[1].barrier_waiting:  # rank 0 is inside the barrier
        threading.Event().wait(0.01)
    assert client.barrier(1, 1, timeout=5) == {"generation": 0}
    waiter.join(5)
    assert results == [{"generation": 0}]

    pbox = topo.pboxes["pb1"]
    for rank in (0, 1):
        h = topo.hosts[f"h{rank + 1}"]
        frame = udp_frame((h.mac, h.ip, 4001 + rank), (pbox.mac, pbox.ip, p.AGG_UDP_PORT),
                          contrib(1, rank, 0, values=np.ones(DEFAULT_LANES)))
        device.receive(frame, rank + 1)
    shown = client.call("ShowJob", job_id=1)
    assert shown["counters"]["contributions"]["packets"] == 2
    assert shown["counters"]["completions"]["packets"] == 1
    assert [w["address"] for w in shown["worker_list"]] == ["10.0.0.1:4001", "10.0.0.2:4002"]
    assert client.call("ListJobs")["jobs"][0]["name"] == "resnet"
    view = client.call("ShowSwitch", name="s1")
    assert view["groups"]["1"] == [{"port": 1, "rid": 32}, {"port": 2, "rid": 33}]
    assert view["ports"]["1"]["rx"]["packets"] == 1
    assert any(e["table"] == p.JOBS for e in view["entries"])
    client.call("KillJob", job_id=1)
    assert client.call("Status")["switches"]["s1"]["free_slots"] == 32


def test_join_with_the_precision_option_gives_a_switch_job_a_float_route(stack):
    ctl, client = stack[2], stack[5]
    first = client.join("wide", 2, 0, "10.0.0.1:4001", precision=1e-3)
    second = client.join("wide", 2, 1, "10.0.0.2:4002", precision=1e-3)
    assert first["precision"] == second["precision"] == 1e-3
    assert first["where"] == "switch"  # the switch has room; float blocks go to the PBox
    switch, floats = first["routes"]
    assert not switch["fallback"] and "float" not in switch and switch["count"] == 32
    assert floats == {"aggregator": "10.0.0.100:48879", "slot_base": floats["slot_base"],
                      "count": 32, "fallback": True, "float": True}
    job = ctl.registry.jobs[first["job_id"]]
    assert job.window == 32 and job.shares() == {"s1": 32}
    assert job.float_part is not None and job.float_part.share == 0
    shown = client.call("ShowJob", job_id=first["job_id"])
    assert shown["precision"] == 1e-3
    assert shown["map"][-1]["float"] is True and shown["map"][-1]["count"] == 32
    text = cli.show_job(shown)
    assert "precision 0.001" in text and "(float blocks)" in text
    # placed on the PBox, its float blocks ride on its PBox route: no float route
    boxed = client.join("boxed", 1, 0, "10.0.0.2:4005", precision=1e-3, placement="pbox")
    assert boxed["where"] == "pbox" and [r["fallback"] for r in boxed["routes"]] == [True]
    assert not any(r.get("float") for r in boxed["routes"])
    for bad, why in ((dict(precision=5e-3), "has precision 0.001, not 0.005"),
                     (dict(), "has precision 0.001, not None")):
        with pytest.raises(grpc.RpcError) as info:
            client.join("wide", 2, 1, "10.0.0.3:4003", **bad)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and why in info.value.details()
    for value in (1.5, "tight", True):
        with pytest.raises(grpc.RpcError) as info:
            client.call("JoinJob", name="x", world_size=1, rank=0, address="10.0.0.4:1",
                        precision=value)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # without the option: a switch job, and the reply says so
    client.call("KillJob", job_id=first["job_id"])  # the switch's 32 slots are its
    plain = client.join("plain", 1, 0, "10.0.0.4:4004")
    assert (plain["where"], plain["precision"], plain["scatter"], plain["gather"]) == (
        "switch", None, True, True)
    assert ctl.registry.jobs[plain["job_id"]].precision is None


@pytest.mark.parametrize(("method", "request_", "code"), [
    ("ShowJob", {"job_id": 42}, grpc.StatusCode.NOT_FOUND),
    ("JoinJob", {"name": "x", "world_size": 2, "rank": 5, "address": "10.0.0.1:1"},
     grpc.StatusCode.INVALID_ARGUMENT),
    ("JoinJob", {"name": "x", "world_size": 2, "rank": 0, "address": "nowhere"},
     grpc.StatusCode.INVALID_ARGUMENT),
    ("LeaveJob", {"job_id": "1", "rank": 0}, grpc.StatusCode.INVALID_ARGUMENT),
    ("ShowSwitch", {"name": "s9"}, grpc.StatusCode.NOT_FOUND),
])
def test_refusals_carry_their_grpc_code(stack, method, request_, code):
    client = stack[5]
    with pytest.raises(grpc.RpcError) as info:
        client.call(method, **request_)
    assert info.value.code() == code


def test_a_request_that_is_not_json_is_invalid(stack):
    address = stack[6]
    channel = grpc.insecure_channel(address)
    call = channel.unary_unary(f"/{api.SERVICE}/Status")
    with pytest.raises(grpc.RpcError) as info:
        call(b"{nope", timeout=5)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    channel.close()


def test_barrier_times_out_and_a_silent_worker_ends_its_job(stack, capsys):
    _, _, ctl, service, clock, client, address = stack
    client.join("a", 2, 0, "10.0.0.1:4001")
    client.join("a", 2, 1, "10.0.0.2:4002")
    with pytest.raises(grpc.RpcError) as info:
        client.barrier(1, 0, timeout=0.2)
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    clock.now = 9.0
    client.heartbeat(1, 0)
    clock.now = 10.0
    api.Expirer(service).tick()  # what the expiry thread runs every second
    assert list(ctl.registry.jobs) == [1]  # rank 1 silent for exactly 10 s: not yet
    clock.now = 15.0  # rank 1 silent for 15 s > 10 s
    api.Expirer(service).tick()
    assert ctl.registry.jobs == {}
    assert client.call("Status")["switches"]["s1"]["free_slots"] == 32
    clock.now = 20.0
    shown = client.call("ShowJob", job_id=1)
    assert (shown["state"], shown["cause"], shown["rank"]) == ("ended", "silent", 1)
    assert (shown["ended_s_ago"], shown["last_heard_s_ago"]) == (5.0, 20.0)
    with pytest.raises(grpc.RpcError) as info:
        client.heartbeat(1, 0)  # the survivor learns why
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert "rank 1 (10.0.0.2:4002) sent no heartbeat for 15.0 s" in info.value.details()
    assert cli.main(["--controller", address, "job", "show", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("job 1 a: ended 5.0 s ago: rank 1 (10.0.0.2:4002) sent no heartbeat")
    assert "its slots 0..31 on switch (rack s1) were freed" in out
    listed = client.call("ListJobs")
    assert listed["jobs"] == [] and [(e["job_id"], e["rank"]) for e in listed["ended"]] == [(1, 1)]
    assert cli.main(["--controller", address, "jobs"]) == 0
    assert capsys.readouterr().out == ("no jobs\nrecently ended:\n  1 a: 5.0 s ago: rank 1 "
                                       "(10.0.0.2:4002) sent no heartbeat for 15.0 s "
                                       "(worker_timeout 10 s)\n")
    again = client.join("a", 2, 1, "10.0.0.2:4010")  # the restarted worker: a new instance
    assert again["job_id"] == 2 and again["slot_base"] == 0 and again["where"] == "switch"


def test_cli_renders_and_prints_json(stack, capsys):
    client, address = stack[5], stack[6]
    client.join("bert", 1, 0, "10.0.0.3:5000")
    assert cli.main(["--controller", address, "jobs"]) == 0
    out = capsys.readouterr().out
    assert "bert" in out and "switch" in out
    assert cli.main(["--controller", address, "job", "show", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["worker_list"][0]["address"] == "10.0.0.3:5000"
    assert cli.main(["--controller", address, "--json", "status"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"] == 1
    assert cli.main(["--controller", address, "switch", "show", "s1"]) == 0
    assert "MyIngress.jobs" in capsys.readouterr().out
    assert cli.main(["--controller", address, "switch", "list"]) == 0
    assert "up" in capsys.readouterr().out
    assert cli.main(["--controller", address, "job", "kill", "1"]) == 0
    assert cli.main(["--controller", address, "job", "show", "1"]) == 0  # the end is kept
    assert "ended 0.0 s ago: killed by an operator (KillJob)" in capsys.readouterr().out
    assert cli.main(["--controller", address, "job", "show", "7"]) == 1
    assert "NOT_FOUND" in capsys.readouterr().err


def test_an_agent_client_waits_for_a_controller_that_starts_late(stack):
    service = stack[3]
    port = _free_port()
    client = client_mod.JobClient(f"127.0.0.1:{port}", timeout=10.0, wait_for_ready=True,
                                  auth=ADMIN)
    started: list = []
    timer = threading.Timer(0.5, lambda: started.append(api.serve(service, f"127.0.0.1:{port}")))
    timer.start()
    try:
        assert client.join("late", 1, 0, "10.0.0.4:4000")["job_id"] >= 1
    finally:
        timer.join()
        client.close()
        for server, _ in started:
            server.stop(grace=None)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_checks_a_topology_offline(tmp_path, capsys):
    good = tmp_path / "rack.json"
    good.write_text(json.dumps(RACK))
    assert cli.main(["check-topology", str(good)]) == 0
    assert "ok (1 switch(es), 4 host(s), 1 PBox(es))" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**RACK, "hosts": {"h1": {"ip": "10.0.0.1"}}}))
    assert cli.main(["check-topology", str(bad), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert not report["ok"] and "hosts.h1.mac: missing" in report["errors"]


def test_heartbeats_say_where_the_job_is_and_job_show_lists_its_moves(stack, capsys):
    _, _, ctl, _, clock, client, address = stack
    first = client.join("a", 1, 0, "10.0.0.1:4001")
    where = {"epoch": first["epoch"], "where": "switch", "slot_base": first["slot_base"],
             "slot_count": first["slot_count"], "routes": first["routes"]}
    assert first["routes"] == [{"aggregator": "10.0.0.100:48879", "slot_base": 0,
                                "count": first["slot_count"], "fallback": False}]
    assert client.heartbeat(1, 0) == where
    clock.now = 4.0
    with ctl.lock:
        ctl.registry.renew_epoch(ctl.registry.jobs[1], clock.now, "switch s1 restarted")
    clock.now = 6.5
    beat = client.heartbeat(1, 0)
    assert beat["epoch"] != first["epoch"] and beat == {**where, "epoch": beat["epoch"]}
    shown = client.call("ShowJob", job_id=1)
    assert shown["moves"] == [{"s_ago": 2.5, "epoch": beat["epoch"], "where": "switch",
                               "slot_base": first["slot_base"], "reason": "switch s1 restarted"}]
    assert cli.main(["--controller", address, "job", "show", "1"]) == 0
    out = capsys.readouterr().out
    assert f"epoch {beat['epoch']}; aggregator changes" in out and "switch s1 restarted" in out


def test_a_heartbeats_map_gives_back_a_range_the_rebuild_missed_before_it_answers(stack):
    """As after a restart whose list_jobs pb1 did not answer: the job has no PBox range
    until a heartbeat brings the agent's map, and that heartbeat's reply already has
    it back (an answer without it would fail the agents)."""
    _, _, ctl, _, _, client, _ = stack
    first = client.join("p", 1, 0, "10.0.0.1:4001", placement="pbox")
    job = ctl.registry.jobs[first["job_id"]]
    with ctl.lock:  # what rebuild_from_entries leaves when pb1 does not answer
        (part,) = job.parts
        ctl.registry.pbox_pools["pb1"].free(part.owner)
        job.parts, job.unheard = (), ("pb1",)
    beat = client.call("Heartbeat", job_id=job.job_id, rank=0, map=[{"bad": 1}])
    assert beat["routes"] == [] and job.unheard == ("pb1",)  # a malformed map: ignored
    beat = client.call("Heartbeat", job_id=job.job_id, rank=0, map=first["routes"])
    assert beat["routes"] == first["routes"] and job.unheard == ()


def test_a_controller_that_does_not_answer_is_told_apart_from_a_refusal(stack):
    _, _, _, _, _, client, address = stack
    with pytest.raises(grpc.RpcError) as refused:
        client.join("a", 0, 0, "10.0.0.1:4001")
    assert client_mod.explain(refused.value, address).startswith(
        f"the controller at {address} refused: ")
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    down = client_mod.JobClient(dead, timeout=0.5, auth=ADMIN)
    with pytest.raises(grpc.RpcError) as silent:
        down.call("Status")
    down.close()
    assert client_mod.explain(silent.value, dead) == (
        f"the controller at {dead} did not answer ({silent.value.code().name}): is "
        "p4hub-controller running and reachable there, and does this client speak its TLS "
        "(P4HUB_CA; P4HUB_INSECURE=1 for a controller started with --insecure)?")


def test_heartbeat_counters_give_the_job_show_service_rates(stack, capsys):
    _, _, _, _, clock, client, address = stack
    client.join("a", 1, 0, "10.0.0.1:4001")
    client.call("Heartbeat", job_id=1, rank=0, sent=0, retransmitted=0, results=0)
    clock.now = 2.0
    client.call("Heartbeat", job_id=1, rank=0, sent=1000, retransmitted=100, results=1000)
    shown = client.call("ShowJob", job_id=1)
    assert shown["worker_list"][0]["results_per_s"] == 500.0
    assert shown["worker_list"][0]["resend_ratio"] == 0.1
    assert shown["service"] == {"result_bytes_per_s": 500.0 * (20 + 4 * 64), "resend_ratio": 0.1}
    assert cli.main(["--controller", address, "job", "show", "1"]) == 0
    assert "service: 0.138 MB/s of results per worker, 10.0% resends" in capsys.readouterr().out


def test_the_expirer_looks_again_soon_while_a_switch_is_down(stack):
    _, _, ctl, service, _, _, _ = stack
    expirer = api.Expirer(service, interval=1.0)
    assert expirer.next_wait() == 1.0
    ctl.clients["s1"].stream_error = "the stream ended"  # as its stream thread records it
    assert expirer.next_wait() == api.DOWN_RECHECK
