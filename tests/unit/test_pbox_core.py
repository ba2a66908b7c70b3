"""The PBox's sans-I/O control core in-process: every control request and every bad one,
the job mirror, summed stats, shard commands and the JSON-lines framing. No subprocess,
no sockets (except the last test, which puts the real core behind the TCP server for the
controller's client)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from p4hub.hosts.pbox.core import (
    MAX_CONTROL_LINE,
    TOO_LONG,
    ControlCore,
    LineBuffer,
    LocalShards,
    PBoxError,
    ShardCore,
    Shards,
    answer_line,
    encode_reply,
    merge_counters,
)
from p4hub.hosts.slot_groups import shard_of
from p4hub.hosts.wire import DEFAULT_LANES, Header, PacketType, decode, encode

SHARDS = 2


def contribution(job: int, rank: int, slot: int, value: int, shadow: int = 0) -> bytes:
    header = Header(type=PacketType.CONTRIB, job=job, rank=rank, slot=slot, position=slot,
                    nelem=DEFAULT_LANES, shadow=shadow)
    return encode(header, np.full(DEFAULT_LANES, value, np.int32))


def make(max_slots: int = 65536) -> tuple[ControlCore, list[ShardCore]]:
    shards = [ShardCore((i, SHARDS), max_slots, pid=100 + i) for i in range(SHARDS)]
    return ControlCore(LocalShards(shards)), shards


def deliver(shards: list[ShardCore], data: bytes, src: tuple, now: float) -> list:
    """What steering does: the datagram goes to the shard that owns its slot."""
    slot = int.from_bytes(data[8:12], "big")
    return shards[shard_of(slot, len(shards))].receive(data, src, now)


def add(core: ControlCore, job: int, world: int, base: int, count: int,
        lanes: int | None = None) -> dict:
    request = {"cmd": "add_job", "job": job, "world_size": world, "slot_base": base,
               "slot_count": count}
    if lanes is not None:
        request["lanes"] = lanes
    return core.control(request)


@pytest.fixture
def core() -> tuple[ControlCore, list[ShardCore]]:
    core, shards = make()
    assert add(core, 1, 2, 0, 8) == {"ok": True}
    return core, shards


# -- requests -----------------------------------------------------------------------------


def test_add_job_reaches_every_shard_and_the_mirror(core):
    core, shards = core
    assert add(core, 7, 4, 100, 10, lanes=256) == {"ok": True}
    assert core.control({"cmd": "list_jobs"}) == {"ok": True, "jobs": [
        {"job_id": 1, "world_size": 2, "slot_base": 0, "slot_count": 8, "lanes": 64},
        {"job_id": 7, "world_size": 4, "slot_base": 100, "slot_count": 10, "lanes": 256},
    ]}
    for shard in shards:
        assert [c.job_id for c in shard.aggregator.jobs()] == [1, 7]
    assert sorted(core.jobs) == [1, 7] and core.jobs[7].slot_base == 100


def test_a_jobs_precision_is_kept_listed_and_checked(core):
    core, _ = core
    request = {"cmd": "add_job", "job": 9, "world_size": 2, "slot_base": 200, "slot_count": 4}
    assert core.control({**request, "precision": 0.001}) == {"ok": True}
    (listed,) = [j for j in core.control({"cmd": "list_jobs"})["jobs"] if j["job_id"] == 9]
    assert listed["precision"] == 0.001
    for bad in (0, 1.5, "0.1", True):
        assert "precision" in core.control({**request, "job": 10, "precision": bad})["error"]
    assert 10 not in core.jobs
    core.control({"cmd": "remove_job", "job": 9})
    assert core.control({**request, "precision": None}) == {"ok": True}  # null: off
    (listed,) = [j for j in core.control({"cmd": "list_jobs"})["jobs"] if j["job_id"] == 9]
    assert "precision" not in listed


def test_a_jobs_float_route_slots_are_kept_listed_and_checked(core):
    core, _ = core
    request = {"cmd": "add_job", "job": 9, "world_size": 2, "slot_base": 200, "slot_count": 40,
               "precision": 0.001}
    assert core.control({**request, "floats": 32}) == {"ok": True}
    (listed,) = [j for j in core.control({"cmd": "list_jobs"})["jobs"] if j["job_id"] == 9]
    assert (listed["floats"], listed["slot_count"]) == (32, 40)
    bad = [{"floats": 41}, {"floats": -1}, {"floats": "8"}, {"floats": True},
           {"floats": 8, "precision": None}]
    for change in bad:
        assert "floats" in core.control({**request, "job": 10, **change})["error"], change
    assert 10 not in core.jobs
    core.control({"cmd": "remove_job", "job": 9})
    assert core.control({**request, "floats": 0}) == {"ok": True}  # 0: none
    (listed,) = [j for j in core.control({"cmd": "list_jobs"})["jobs"] if j["job_id"] == 9]
    assert "floats" not in listed


def test_contributions_complete_on_their_shard_and_stats_sum_the_shards(core):
    core, shards = core
    core.control({"cmd": "remove_job", "job": 1})
    assert add(core, 1, 2, 64, 32) == {"ok": True}  # slot groups 4 and 5: one per shard
    a, b = ("10.0.0.1", 5000), ("10.0.0.2", 5000)
    for slot in (64, 65, 80, 81):  # two slots of each shard's group
        assert deliver(shards, contribution(1, 0, slot, 1), a, now=slot - 54.0) == []
        replies = deliver(shards, contribution(1, 1, slot, 2), b, now=slot - 44.0)
        assert [dst for _, dst in replies] == [a, b]
        header, lanes = decode(replies[0][0])
        assert header.type == PacketType.RESULT and header.slot == slot and lanes[0] == 3
    deliver(shards, b"junk", a, now=30.0)  # socket 0 gets what is too short to steer
    reply = core.control({"cmd": "stats"})
    assert list(reply) == ["ok", "jobs", "global", "workers"] and reply["ok"] is True
    job = reply["jobs"]["1"]
    assert job["contributions"] == 8 and job["completions"] == 4 and job["results_sent"] == 8
    assert job["last_seen"] == 37.0  # the latest over the shards, not a sum
    assert reply["global"]["malformed"] == 1
    assert reply["global"]["send_errors"] == 0 and reply["global"]["internal_errors"] == 0
    workers = reply["workers"]
    assert [(w["shard"], w["pid"]) for w in workers] == [(0, 100), (1, 101)]
    assert [w["jobs"]["1"]["contributions"] for w in workers] == [4, 4]
    assert all(shard.running for shard in shards)


def test_open_cells_are_the_rounds_in_progress_over_every_shard(core):
    core, shards = core
    assert add(core, 2, 3, 8, 6) == {"ok": True}
    a, b = ("10.0.0.1", 5000), ("10.0.0.2", 5000)
    deliver(shards, contribution(2, 0, 9, 1, shadow=1), a, now=1.0)  # shard 1
    deliver(shards, contribution(2, 2, 9, 1, shadow=1), b, now=1.0)
    deliver(shards, contribution(2, 1, 12, 1), b, now=1.0)  # shard 0
    deliver(shards, contribution(1, 0, 0, 1), a, now=1.0)  # another job
    deliver(shards, contribution(1, 1, 0, 1), b, now=1.0)  # ... and complete
    assert core.control({"cmd": "open_cells", "job": 2}) == {
        "ok": True, "cells": [[9, 1, 0b101, 2], [12, 0, 0b010, 1]]}
    assert core.control({"cmd": "open_cells", "job": 1}) == {"ok": True, "cells": []}


def test_remove_job_returns_the_summed_final_counters(core):
    core, shards = core
    for slot in (0, 1):
        deliver(shards, contribution(1, 0, slot, 1), ("10.0.0.1", 1), now=5.0)
    reply = core.control({"cmd": "remove_job", "job": 1})
    assert reply["ok"] is True and reply["stats"]["contributions"] == 2
    assert reply["stats"]["last_seen"] == 5.0 and "rejected" in reply["stats"]
    assert core.control({"cmd": "list_jobs"}) == {"ok": True, "jobs": []}
    assert all(shard.aggregator.jobs() == [] for shard in shards)
    assert core.control({"cmd": "stats"})["jobs"] == {}


def test_final_stats_stop_the_shards(core):
    core, shards = core
    final = core.stats(final=True)
    assert "1" in final["jobs"] and len(final["workers"]) == SHARDS
    assert not any(shard.running for shard in shards)


BAD_REQUESTS = [
    ([1, 2], "a request must be a JSON object"),
    ("stats", "a request must be a JSON object"),
    (None, "a request must be a JSON object"),
    ({}, "unknown cmd None (add_job, remove_job, stats, list_jobs, open_cells)"),
    ({"cmd": "fly"}, "unknown cmd 'fly' (add_job, remove_job, stats, list_jobs, open_cells)"),
    ({"cmd": ["stats"]}, "unknown cmd ['stats']"),
    ({"cmd": "add_job", "job": 4, "world_size": 2, "slot_base": 0},
     "field 'slot_count' must be an integer, got None"),
    ({"cmd": "add_job", "job": 4, "world_size": True, "slot_base": 0, "slot_count": 1},
     "field 'world_size' must be an integer, got True"),
    ({"cmd": "add_job", "job": 4, "world_size": 2.0, "slot_base": 0, "slot_count": 1},
     "field 'world_size' must be an integer, got 2.0"),
    ({"cmd": "add_job", "job": "4", "world_size": 2, "slot_base": 0, "slot_count": 1},
     "field 'job' must be an integer, got '4'"),
    ({"cmd": "add_job", "job": 4, "world_size": 2000, "slot_base": 0, "slot_count": 1},
     "world size 2000"),
    ({"cmd": "add_job", "job": 4, "world_size": 0, "slot_base": 0, "slot_count": 1},
     "world size 0"),
    ({"cmd": "add_job", "job": 4, "world_size": 2, "slot_base": 0, "slot_count": 0}, ""),
    ({"cmd": "add_job", "job": 4, "world_size": 2, "slot_base": 0, "slot_count": 1,
      "lanes": 128}, "lane count 128 is not one of (64, 256)"),
    ({"cmd": "add_job", "job": 4, "world_size": 2, "slot_base": 0, "slot_count": 1,
      "lanes": "256"}, "'lanes' must be an integer"),
    ({"cmd": "add_job", "job": 4, "world_size": 2, "slot_base": -1, "slot_count": 4}, ""),
    ({"cmd": "add_job", "job": 4, "world_size": 2, "slot_base": 2**32 - 2, "slot_count": 4}, ""),
    ({"cmd": "add_job", "job": 1, "world_size": 2, "slot_base": 0, "slot_count": 1}, ""),
    ({"cmd": "add_job", "job": 5, "world_size": 2, "slot_base": 0, "slot_count": 10**6}, ""),
    ({"cmd": "remove_job", "job": 3}, "no job 3"),
    ({"cmd": "remove_job"}, "field 'job' must be an integer, got None"),
    ({"cmd": "remove_job", "job": False}, "field 'job' must be an integer, got False"),
    ({"cmd": "open_cells", "job": 3}, "no job 3"),
    ({"cmd": "open_cells"}, "field 'job' must be an integer, got None"),
]


@pytest.mark.parametrize(("request_", "message"), BAD_REQUESTS, ids=range(len(BAD_REQUESTS)))
def test_bad_requests_get_one_error_and_change_nothing(core, request_, message):
    core, shards = core
    before = core.control({"cmd": "list_jobs"})
    reply = core.control(request_)
    assert list(reply) == ["error"] and reply["error"], reply
    assert message in reply["error"]
    assert core.control({"cmd": "list_jobs"}) == before
    for shard in shards:
        assert [c.job_id for c in shard.aggregator.jobs()] == [1]


def test_a_job_refused_by_one_shard_is_undone_on_the_others():
    # Shards that disagree (they never do in the PBox): shard 1 has room for fewer slots.
    shards = [ShardCore((0, 2), 1000), ShardCore((1, 2), 10)]
    core = ControlCore(LocalShards(shards))
    reply = add(core, 3, 2, 0, 100)
    assert list(reply) == ["error"]
    assert core.jobs == {} and all(s.aggregator.jobs() == [] for s in shards)
    with pytest.raises(PBoxError):
        core.add_job(3, 2, 0, 100)
    core.add_job(3, 2, 0, 10)
    assert sorted(core.jobs) == [3]


class GoneShards(Shards):
    """The link to workers that are gone (typed against the Shards Protocol)."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def fan_out(self, cmd: str, arg: object = None) -> list[dict]:
        raise self.exc

    def ask(self, index: int, cmd: str, arg: object = None) -> dict:
        raise self.exc


@pytest.mark.parametrize("exc", [EOFError(), BrokenPipeError(32, "Broken pipe")])
def test_a_dead_worker_is_an_error_reply(exc):
    core = ControlCore(GoneShards(exc))
    for request in ({"cmd": "stats"},
                    {"cmd": "add_job", "job": 1, "world_size": 1, "slot_base": 0, "slot_count": 1}):
        reply = core.control(request)
        assert list(reply) == ["error"] and reply["error"].startswith("a worker process is gone")
    assert core.control({"cmd": "list_jobs"}) == {"ok": True, "jobs": []}  # the mirror answers


# -- one shard ------------------------------------------------------------------------------


def test_shard_commands():
    shard = ShardCore((1, 4), 1000, pid=42)
    job = {"job_id": 2, "world_size": 3, "slot_base": 0, "slot_count": 16}
    assert shard.handle("add_job", job) == {"ok": True}
    assert shard.handle("add_job", job) == {"error": "job 2 already exists"}
    assert shard.handle("fly") == {"error": "unknown worker command 'fly'"}
    stats = shard.handle("stats")
    assert stats["shard"] == 1 and stats["pid"] == 42 and list(stats["jobs"]) == ["2"]
    assert shard.handle("remove_job", 2)["stats"]["contributions"] == 0
    assert "error" in shard.handle("remove_job", 2)
    assert shard.running
    shard.handle("stop")
    assert not shard.running


def test_a_datagram_that_makes_the_aggregator_raise_is_counted_and_logged_once(caplog):
    shard = ShardCore((0, 1), 100)

    def explode(data, src, now):
        raise RuntimeError("bug")

    shard.aggregator.receive = explode
    with caplog.at_level(logging.ERROR, logger="p4hub-pbox"):
        assert shard.receive(b"x" * 276, ("10.0.0.1", 1), 0.0) == []
        assert shard.receive(b"x" * 276, ("10.0.0.1", 1), 0.0) == []
    assert shard.internal_errors == 2
    assert caplog.text.count("aggregator raised") == 1
    assert shard.stats()["global"]["internal_errors"] == 2


def test_merge_counters_sums_nested_counters_and_keeps_the_latest_last_seen():
    total: dict = {}
    merge_counters(total, {"a": 1, "last_seen": 5.0, "rejected": {"rank": 1}})
    merge_counters(total, {"a": 2, "last_seen": 3.0, "rejected": {"rank": 2, "slot": 1}})
    assert total == {"a": 3, "last_seen": 5.0, "rejected": {"rank": 3, "slot": 1}}


# -- framing --------------------------------------------------------------------------------


def test_line_buffer_yields_whole_non_blank_lines():
    buffer = LineBuffer()
    assert buffer.feed(b'{"cmd": "list_jobs"}\n\n  \n{"cmd": "stats"}\n{"cmd"') == [
        b'{"cmd": "list_jobs"}', b'{"cmd": "stats"}']
    assert buffer.feed(b': "list') == []
    assert buffer.feed(b'_jobs"}\n') == [b'{"cmd": "list_jobs"}']
    assert not buffer.too_long


def test_line_buffer_flags_an_overlong_line():
    buffer = LineBuffer()
    assert buffer.feed(b"x" * MAX_CONTROL_LINE) == [] and not buffer.too_long
    assert buffer.feed(b"x") == [] and buffer.too_long
    assert encode_reply(TOO_LONG) == b'{"error": "request line too long"}\n'


def test_reply_lines_are_byte_for_byte_the_protocol(core):
    core, _ = core
    assert answer_line(core.control, b'{"cmd": "list_jobs"}') == (
        b'{"ok": true, "jobs": [{"job_id": 1, "world_size": 2, "slot_base": 0, '
        b'"slot_count": 8, "lanes": 64}]}\n')
    assert answer_line(core.control, b'{"cmd": "add_job", "job": 2, "world_size": 1, '
                       b'"slot_base": 8, "slot_count": 1}') == b'{"ok": true}\n'
    assert answer_line(core.control, b'{"cmd": "remove_job", "job": 9}') == (
        b'{"error": "no job 9"}\n')
    not_json = json.loads(answer_line(core.control, b"not json"))
    assert list(not_json) == ["error"] and not_json["error"].startswith("not JSON: Expecting value")
    assert answer_line(core.control, b"\xff").startswith(b'{"error": "not JSON: ')


# -- the real core behind the TCP server, for the controller's client -------------------


def test_the_controller_client_drives_the_real_core():
    from p4hub.controller.core.updates import DELETE, INSERT, MODIFY, PBoxJobWrite
    from p4hub.controller.pbox_control import PBoxControlError
    from tests.support.pbox_control import pbox_control

    core, shards = make()
    with pbox_control(core) as (control, _):
        control(PBoxJobWrite("pb1", INSERT, 3, 4, 0, 32))
        control(PBoxJobWrite("pb1", MODIFY, 3, 4, 32, 16))
        assert control.jobs("pb1") == [
            {"job_id": 3, "world_size": 4, "slot_base": 32, "slot_count": 16, "lanes": 64}]
        assert all([(c.slot_base, c.slot_count) for c in s.aggregator.jobs()] == [(32, 16)]
                   for s in shards)
        control(PBoxJobWrite("pb1", DELETE, 3))
        assert core.jobs == {}
        with pytest.raises(PBoxControlError, match="refused remove_job"):
            control(PBoxJobWrite("pb1", DELETE, 3))
