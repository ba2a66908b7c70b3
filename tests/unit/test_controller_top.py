"""``p4hub top`` (controller/top.py): the view read from an in-process controller (p4lite
switch over P4Runtime, the job API over gRPC, explicit clock), its JSON for scripts, the
rendered tables, and the live loop with a fake clock."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from p4hub.controller import cli, top
from p4hub.controller.core import program as p
from p4hub.hosts.wire import DEFAULT_LANES
from tests.support.running_job import run_one_round
from tests.unit.test_controller_api import stack  # noqa: F401 (fixture)
from tests.unit.test_controller_driver import pipeline  # noqa: F401 (fixture)

PACKET = p.P4HUB_HEADER_BYTES + 4 * DEFAULT_LANES


@pytest.fixture
def running(stack):  # noqa: F811
    """Job 1 "resnet" of two ranks on s1: one round done, rank 0's rates measured."""
    device, topo, _ctl, _service, clock, client, address = stack
    epoch = run_one_round(device, topo, clock, client)
    return client, address, epoch


def test_top_once_json_gives_jobs_aggregators_and_load(running, capsys):
    _, address, epoch = running
    assert cli.main(["--controller", address, "top", "--once", "--json"]) == 0
    v = json.loads(capsys.readouterr().out)
    (job,) = v["jobs"]
    assert (job["job_id"], job["name"], job["where"], job["switch"]) == (1, "resnet", "switch", "s1")
    assert (job["workers"], job["world_size"], job["epoch"], job["moves"]) == (2, 2, epoch, 0)
    assert job["slots"] == {"base": job["slots"]["base"], "count": 32, "window": 32}
    assert job["resend_ratio"] == 0.1 and job["result_bytes_per_s"] == 500.0 * PACKET
    (agg,) = job["map"]
    assert agg["aggregator"] == "s1" and agg["slots"] == 32 and agg["results_per_s"] > 0
    assert agg["bytes_per_s"] == pytest.approx(agg["results_per_s"] * PACKET, rel=1e-3)
    assert job["switch_resent"] == 0 and isinstance(job["findings"], list)
    s1 = v["load"]["switches"]["s1"]
    assert (s1["used"], s1["jobs"], s1["connected"]) == (32, 1, True)
    assert s1["results_per_s"] == agg["results_per_s"]
    assert v["load"]["pboxes"]["pb1"]["jobs"] == 0


def test_top_once_draws_the_tables(running):
    client, _, _ = running
    out = io.StringIO()
    assert top.run(client.call, once=True, as_json=False,
                   console=Console(file=out, width=200, color_system=None)) == 0
    text = out.getvalue()
    for needed in ("1 job(s)", "resnet", "2/2", "s1: switch", "w32", "10.0%",
                   "138.0 kB/s", "aggregators", "switch s1", "32/", "pbox pb1"):
        assert needed in text, (needed, text)


def test_findings_moves_and_ends_are_shown():
    status = {"switches": {"s1": {"slots": 64, "free_slots": 32, "connected": False}},
              "pboxes": {"pb1": {"slots": 128, "free_slots": 96}}, "jobs": 1}
    shown = [{"job_id": 3, "name": "bert", "where": "pbox", "switch": "s1", "pbox": "pb1",
              "workers": 1, "world_size": 2, "slot_base": 0, "slot_count": 32, "window": 32,
              "state": "running", "epoch": 4, "service": {}, "counters": {},
              "moves": [{"s_ago": 3.0, "epoch": 4, "where": "pbox", "slot_base": 0,
                         "reason": "switch s1 restarted"}],
              "map": [{"aggregator": "pb1", "count": 32, "rounds_per_s": None,
                       "bytes_per_s": None}]},
             {"job_id": 4, "state": "ended"}]
    findings = {3: [{"severity": "warning", "code": "silent", "message": "rank 1 silent 7 s",
                     "ranks": [1]}]}
    listed = {"ended": [{"job_id": 2, "name": "old", "reason": "killed"}]}
    v = top.view(status, listed, shown, findings)
    assert [j["job_id"] for j in v["jobs"]] == [3]
    assert v["load"]["pboxes"]["pb1"] == {"slots": 128, "used": 32, "jobs": 1,
                                          "results_per_s": 0.0, "bytes_per_s": 0.0}
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(top.render(v))
    text = out.getvalue()
    for needed in ("pbox (pb1)", "last move to pbox (epoch 4): switch s1 restarted",
                   "job 3: warning: rank 1 silent 7 s", "ended: job 2 old: killed", "down"):
        assert needed in text, (needed, text)


def test_the_live_view_redraws_and_asks_the_doctor_every_few_seconds(running):
    client, _, _ = running
    asked: list[str] = []

    settles: list[object] = []

    def ask(method: str, **request: object) -> dict:
        asked.append(method)
        if method == "Doctor":
            settles.append(request["settle"])
        return client.call(method, **request)

    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    out = io.StringIO()
    assert top.run(ask, once=False, as_json=False, interval=2.0, doctor_every=5.0,
                   doctor_settle=0.0, console=Console(file=out, width=200, color_system=None),
                   clock=lambda: now[0], sleep=sleep, frames=4) == 0
    assert asked.count("Status") == 4 and asked.count("ShowJob") == 4
    assert asked.count("Doctor") == 2  # at 0 s and 6 s (views at 0, 2, 4, 6 s)
    assert settles == [0.0, 0.0]
    assert now[0] == 6.0 and "resnet" in out.getvalue()


def test_bad_top_options_are_refused(capsys):
    for bad in (["--interval", "0"], ["--doctor-settle", "-1"]):
        assert cli.main(["--controller", "127.0.0.1:1", "top", *bad]) == 1
        assert "--interval must be > 0" in capsys.readouterr().err
