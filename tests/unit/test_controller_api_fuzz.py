"""A seeded fuzz of the job API: random and malformed messages, wrong types, oversized
fields and random credentials, a few thousand of them over gRPC, while a job runs. The
controller must keep serving, answer none of them INTERNAL (nor hang), and leave the
running job as it was: its members, slots, epoch and the switch's entries, and its next
round summed exactly."""

from __future__ import annotations

import json
import random
import string
from typing import Any

import grpc
import numpy as np
import pytest

from p4hub.controller import api
from p4hub.controller import client as client_mod
from p4hub.controller.client import METHODS, SERVICE, ClientAuth
from p4hub.controller.core import program as p
from p4hub.hosts import wire
from p4hub.hosts.wire import DEFAULT_LANES, PacketType
from tests.support.api_auth import ADMIN_TOKEN, credentials
from tests.unit.test_aggregate_p4 import contrib, parse_frame, udp_frame
from tests.unit.test_controller_api import stack  # noqa: F401 (fixture)
from tests.unit.test_controller_driver import pipeline  # noqa: F401 (fixture)

REQUESTS = 3000
SEED = 36
FIELDS = ("name", "world_size", "rank", "address", "placement", "lanes", "precision", "job_id",
          "timeout", "settle", "sent", "retransmitted", "results", "epoch", "routes", "map")
# calls an administrator's fuzz may not make: they change the running job legitimately
CHANGING = ("JoinJob", "LeaveJob", "KillJob", "Heartbeat", "Barrier")


def value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(12 if depth < 3 else 8)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, 1, -1, 2, 63, 64, 256, 2**31, 2**63, -(2**70), 10**400 // 10**399])
    if kind == 3:
        return rng.choice([0.5, -0.0, 1e308, -1e-9, float("inf"), float("nan")])
    if kind == 4:
        return "".join(rng.choice(string.printable) for _ in range(rng.randrange(20)))
    if kind == 5:
        return rng.choice(["s1", "resnet", "10.0.0.1:4001", "auto", "pbox", "ip:port", ":",
                           "10.0.0.1:", "999.1.1.1:1", "\x00", "é" * 10])
    if kind == 6:
        return "x" * rng.choice([1000, 100_000])  # oversized
    if kind == 7:
        return rng.randrange(-5, 100)
    if kind in (8, 9):
        return [value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(FIELDS): value(rng, depth + 1) for _ in range(rng.randrange(4))}


# a well-formed request per method, of which the fuzz turns fields into wrong types
TEMPLATES: dict[str, dict[str, Any]] = {
    "JoinJob": {"name": "fuzz", "world_size": 1, "rank": 0, "address": "10.0.0.4:4000",
                "placement": "auto", "lanes": 64, "precision": 0.01},
    "LeaveJob": {"job_id": 1, "rank": 0}, "Barrier": {"job_id": 1, "rank": 0, "timeout": 0.01},
    "Heartbeat": {"job_id": 1, "rank": 0, "sent": 1, "retransmitted": 0, "results": 1,
                  "epoch": 1, "routes": [[1, 0.5]],
                  "map": [{"aggregator": "10.0.0.100:48879", "slot_base": 0, "count": 1}]},
    "ListJobs": {}, "Status": {}, "ShowJob": {"job_id": 1}, "KillJob": {"job_id": 1},
    "ShowSwitch": {"name": "s1"}, "Doctor": {"job_id": 1, "settle": 0},
}


def body(rng: random.Random, method: str) -> bytes:
    kind = rng.randrange(20)
    if kind >= 10:  # the method's own request, one or two fields of another type
        request = dict(TEMPLATES[method])
        for _ in range(rng.randrange(1, 3)):
            request[rng.choice([*request, *FIELDS[:3]])] = value(rng)
        return json.dumps(request).encode()
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(64)))  # not JSON
    if kind == 1:
        return json.dumps(value(rng)).encode()  # maybe not an object
    if kind == 2:
        return b'{"job_id": 1, "rank": '  # truncated
    if kind == 3:
        return b"[" * 100_000 + b"]" * 100_000  # nested past any recursion limit
    request = {rng.choice(FIELDS): value(rng) for _ in range(rng.randrange(6))}
    if rng.random() < 0.5:
        request["job_id"] = rng.choice([1, 1, 2, 0, -1, "1", 1.0, [1], None])
    return json.dumps(request).encode()


def caller(rng: random.Random, token: str) -> tuple[tuple[str, str], ...]:
    kind = rng.randrange(6)
    if kind == 0:
        return ()
    if kind == 1:
        return (("p4hub-job-token", rng.choice(["", "x" * 43, "y" * 5000, "!#%" * 20, "a b" * 20,
                                                token[:-1] + "A"])),)
    if kind == 2:
        return (("p4hub-admin-token", rng.choice(["", "z" * 43, ADMIN_TOKEN[:-1]])),)
    if kind == 3:
        return (("p4hub-admin-token", ADMIN_TOKEN),)  # only read-only calls, see CHANGING
    if kind == 4:
        return (("p4hub-job-token", token),)  # the job's own: only read-only calls
    return (("authorization", "Bearer " + "q" * 43), ("p4hub-job-token", "x" * 43))


def job_state(ctl, job_id: int) -> tuple:
    job = ctl.registry.jobs[job_id]
    workers = {r: (w.ip, w.port, w.last_seen) for r, w in job.workers.items()}
    return (job.name, job.epoch, job.where, job.slots, job.parts, workers)


def entries(ctl) -> set[str]:
    return set(map(repr, ctl.registry.expected_entries("s1")))


@pytest.fixture
def fuzzed(stack):  # noqa: F811
    """Job "resnet" (two ranks) running; a service on the same controller whose Doctor
    does not sleep between its reads (the fuzz asks for it hundreds of times)."""
    device, topo, ctl, _, clock, admin, _ = stack
    joined = client_mod.JobClient(stack[6], auth=ClientAuth()).join("resnet", 2, 0,
                                                                     "10.0.0.1:4001")
    member = client_mod.JobClient(stack[6], auth=ClientAuth(job_token=joined["job_token"]))
    member.join("resnet", 2, 1, "10.0.0.2:4002")
    service = api.JobService(ctl, clock, sleep=lambda _: None, credentials=credentials())
    service.credentials.record(joined["job_id"], p.name_tag("resnet"), joined["job_token"])
    server, port = api.serve(service, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield device, topo, ctl, service, channel, joined
    channel.close()
    member.close()
    server.stop(grace=None)


def one_round(device, topo, job_id: int, slot: int) -> None:
    pbox = topo.pboxes["pb1"]
    for rank in (0, 1):
        h = topo.hosts[f"h{rank + 1}"]
        device.receive(udp_frame((h.mac, h.ip, 4001 + rank), (pbox.mac, pbox.ip, p.AGG_UDP_PORT),
                                 contrib(job_id, rank, slot,
                                         values=np.full(DEFAULT_LANES, rank + 1))), rank + 1)


def test_a_fuzzed_job_api_keeps_serving_and_never_answers_internal(fuzzed):
    device, topo, ctl, service, channel, joined = fuzzed
    job_id = joined["job_id"]
    one_round(device, topo, job_id, 0)
    before, held = job_state(ctl, job_id), entries(ctl)  # the job's and the rack's entries
    calls = {m: channel.unary_unary(f"/{SERVICE}/{m}") for m in METHODS}
    rng = random.Random(SEED)
    codes: dict[str, int] = {}
    for _ in range(REQUESTS):
        method = rng.choice(METHODS)
        metadata = caller(rng, joined["job_token"])
        trusted = any(v in (ADMIN_TOKEN, joined["job_token"]) for _, v in metadata)
        if trusted and method in CHANGING:
            metadata = ()
        try:
            calls[method](body(rng, method), timeout=10.0, metadata=metadata)
            code = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            code = exc.code()
        codes[code.name] = codes.get(code.name, 0) + 1
    assert "INTERNAL" not in codes and "UNKNOWN" not in codes, codes
    assert "DEADLINE_EXCEEDED" not in codes, codes  # nothing hung
    assert codes.get("INVALID_ARGUMENT", 0) > REQUESTS // 10, codes
    assert codes.get("UNAUTHENTICATED", 0) and codes.get("PERMISSION_DENIED", 0), codes
    assert service.internal_errors.counts == {}
    # still serving, the job as it was, its next round summed exactly
    admin = (("p4hub-admin-token", ADMIN_TOKEN),)
    assert json.loads(calls["Status"](b"{}", metadata=admin, timeout=5.0))["jobs"] >= 1
    assert job_state(ctl, job_id) == before
    assert held <= entries(ctl)  # (jobs the fuzz created add theirs)
    sent: list[tuple[int, bytes]] = []
    device.transmit = lambda port, frame: sent.append((port, frame))
    one_round(device, topo, job_id, 1)
    results = [wire.decode(parse_frame(frame)["payload"]) for _, frame in sent]
    assert sorted(port for port, _ in sent) == [1, 2]  # to its two members only
    for header, lanes in results:
        assert (header.type, header.job, header.slot) == (PacketType.RESULT, job_id, 1)
        np.testing.assert_array_equal(lanes, np.full(DEFAULT_LANES, 3))
