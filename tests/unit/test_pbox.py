"""The real p4hub-pbox process on loopback: steering, control channel, stats, robustness."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import psutil
import pytest

from p4hub.hosts import pbox, wire
from p4hub.hosts.slot_groups import shard_of
from p4hub.hosts.wire import DEFAULT_LANES, Header, PacketType


@dataclass
class PBoxProcess:
    proc: subprocess.Popen
    udp: tuple[str, int]
    control: tuple[str, int]
    ready: dict

    def request(self, req: object) -> dict:
        with socket.create_connection(self.control, timeout=5) as conn:
            data = (req if isinstance(req, bytes) else json.dumps(req).encode()) + b"\n"
            conn.sendall(data)
            return json.loads(conn.makefile("rb").readline())

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, list[dict]]:
        self.proc.send_signal(sig)
        out, _ = self.proc.communicate(timeout=10)
        return self.proc.returncode, [json.loads(line) for line in out.splitlines()]


def start_pbox(*args: str) -> PBoxProcess:
    cmd = [sys.executable, "-m", "p4hub.hosts.pbox.cli", "--listen", "127.0.0.1:0",
           "--control", "127.0.0.1:0", "--control-insecure", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None  # stdout=PIPE
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(f"p4hub-pbox did not start: {proc.communicate()[1]}")
    ready = json.loads(line)
    return PBoxProcess(proc, tuple(ready["listen"]), tuple(ready["control"]), ready)


@pytest.fixture
def box() -> Iterator[PBoxProcess]:
    handle = start_pbox("--workers", "2", "--job", "1:1", "--job", "2:3:0:64")
    try:
        yield handle
    finally:
        if handle.proc.poll() is None:
            handle.proc.kill()
            handle.proc.communicate()


def packet(job: int, rank: int, slot: int, values, shadow: int = 0, position: int = 0,
           ptype: PacketType = PacketType.CONTRIB) -> bytes:
    header = Header(type=ptype, job=job, rank=rank, slot=slot, position=position,
                    nelem=DEFAULT_LANES, shadow=shadow)
    return wire.encode(header, np.asarray(values, np.int32))


def client() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(3)
    return sock


def receive(sock: socket.socket, count: int) -> list[tuple[wire.Header, np.ndarray, tuple]]:
    out = []
    for _ in range(count):
        data, src = sock.recvfrom(2048)
        header, lanes = wire.decode(data)
        out.append((header, lanes.astype(np.int64), src))
    return out


def test_ready_line_reports_bpf_steering(box):
    assert box.ready["workers"] == 2 and box.ready["steering"] == "bpf"


def test_each_slot_is_steered_to_its_own_process(box):
    sock = client()
    odd = [s for s in range(64) if shard_of(s, 2) == 1]  # the odd slot groups: shard 1's
    for slot in odd:
        sock.sendto(packet(1, 0, slot, np.full(DEFAULT_LANES, slot)), box.udp)
    results = receive(sock, len(odd))
    assert sorted(h.slot for h, _, _ in results) == odd
    assert all(lanes[0] == h.slot for h, lanes, _ in results)
    assert all(src == box.udp for _, _, src in results)  # results come from the same port
    workers = {w["shard"]: w for w in box.request({"cmd": "stats"})["workers"]}
    assert workers[1]["jobs"]["1"]["contributions"] == len(odd)
    assert workers[0]["jobs"]["1"]["contributions"] == 0
    assert workers[0]["pid"] != workers[1]["pid"]
    for slot in range(64):
        if shard_of(slot, 2) == 0:
            sock.sendto(packet(1, 0, slot, np.full(DEFAULT_LANES, slot)), box.udp)
    receive(sock, 32)
    stats = box.request({"cmd": "stats"})
    workers = {w["shard"]: w for w in stats["workers"]}
    assert workers[0]["jobs"]["1"]["contributions"] == 32
    assert workers[1]["jobs"]["1"]["contributions"] == len(odd)
    # A misrouted slot would have been rejected by the shard that does not own it.
    assert stats["jobs"]["1"]["rejected"]["shard"] == 0


def test_three_workers_all_reduce_exactly_with_duplicates(box):
    socks = [client() for _ in range(3)]
    rng = np.random.default_rng(5)
    for round_ in range(2):
        inputs = rng.integers(-(2**24), 2**24, (3, 64, DEFAULT_LANES), dtype=np.int32)
        for rank, sock in enumerate(socks):
            for slot in range(64):
                data = packet(2, rank, slot, inputs[rank, slot], shadow=round_, position=slot)
                sock.sendto(data, box.udp)
                if slot % 8 == 0:
                    sock.sendto(data, box.udp)  # a duplicate before completion: only read
        expected = inputs.sum(axis=0, dtype=np.int64)
        # Rank 2 completes every slot; its duplicates then hit finished sets and get
        # the stored result back by unicast: 8 extra results for rank 2 alone.
        for sock, count in zip(socks, (64, 64, 72), strict=True):
            for header, lanes, _ in receive(sock, count):
                assert header.shadow == round_
                np.testing.assert_array_equal(lanes, expected[header.position])
    stats = box.request({"cmd": "stats"})["jobs"]["2"]
    assert stats["contributions"] == 2 * 3 * 64 and stats["completions"] == 128
    assert stats["results_sent"] == 3 * 128
    assert stats["duplicates"] == 2 * 3 * 8 and stats["resent_results"] == 2 * 8
    # a third round of PRIMEs (exponents + 128 in the lanes): the lane-wise maximum
    exps = rng.integers(0, 256, (3, 64, DEFAULT_LANES))
    for rank, sock in enumerate(socks):
        for slot in range(64):
            sock.sendto(packet(2, rank, slot, exps[rank, slot], position=64 + slot,
                               ptype=PacketType.PRIME), box.udp)
    for sock in socks:
        for header, lanes, _ in receive(sock, 64):
            assert header.type == PacketType.RESULT and header.shadow == 0
            np.testing.assert_array_equal(lanes, exps.max(axis=0)[header.position - 64])


def test_garbage_and_unknown_jobs_are_counted_and_the_box_keeps_serving(box):
    sock = client()
    rng = np.random.default_rng(6)
    garbage = [b"", b"\x01", rng.bytes(7), rng.bytes(wire.PACKET_LEN), rng.bytes(1400)]
    garbage += [packet(99, 0, s, np.zeros(DEFAULT_LANES)) for s in range(4)]
    for data in garbage:
        sock.sendto(data, box.udp)
    sock.sendto(packet(1, 0, 5, np.full(DEFAULT_LANES, 5)), box.udp)
    (header, lanes, _), = receive(sock, 1)
    assert header.slot == 5 and lanes[0] == 5
    glob = box.request({"cmd": "stats"})["global"]
    assert glob["unknown_job"] == 4
    assert glob["malformed"] + glob["unknown_job"] == len(garbage)
    assert glob["internal_errors"] == 0
    # Wrong rank / slot / address are counted for the job.
    sock.sendto(packet(2, 3, 0, np.zeros(DEFAULT_LANES)), box.udp)
    sock.sendto(packet(2, 0, 64, np.zeros(DEFAULT_LANES)), box.udp)
    sock.sendto(packet(1, 0, 6, np.zeros(DEFAULT_LANES)), box.udp)
    receive(sock, 1)  # the valid one; it also orders the check after the rejects
    other = client()
    other.sendto(packet(1, 0, 7, np.zeros(DEFAULT_LANES)), box.udp)  # rank 0 from a new address
    rejected = _wait_for(box, lambda s: s["jobs"]["1"]["rejected"]["address"] == 1)
    assert rejected["jobs"]["2"]["rejected"]["rank"] == 1
    assert rejected["jobs"]["2"]["rejected"]["slot"] == 1


def _wait_for(box: PBoxProcess, predicate, attempts: int = 50) -> dict:
    for _ in range(attempts):
        stats = box.request({"cmd": "stats"})
        if predicate(stats):
            return stats
        time.sleep(0.02)
    raise AssertionError(f"condition never held: {stats}")


def test_control_channel_jobs_and_bad_requests(box):
    assert {j["job_id"] for j in box.request({"cmd": "list_jobs"})["jobs"]} == {1, 2}
    assert box.request({"cmd": "add_job", "job": 3, "world_size": 2, "slot_base": 100,
                        "slot_count": 10}) == {"ok": True}
    jobs = box.request({"cmd": "list_jobs"})["jobs"]
    assert {"job_id": 3, "world_size": 2, "slot_base": 100, "slot_count": 10, "lanes": 64} in jobs
    sock = client()
    sock.sendto(packet(3, 0, 105, np.full(DEFAULT_LANES, 1)), box.udp)
    sock.sendto(packet(3, 1, 105, np.full(DEFAULT_LANES, 2)), box.udp)
    (_, lanes, _), (_, lanes2, _) = receive(sock, 2)
    assert lanes[0] == 3 and lanes2[0] == 3
    removed = box.request({"cmd": "remove_job", "job": 3})
    assert removed["ok"] and removed["stats"]["contributions"] == 2
    sock.sendto(packet(3, 0, 105, np.full(DEFAULT_LANES, 1)), box.udp)
    _wait_for(box, lambda s: s["global"]["unknown_job"] == 1)
    bad = [
        b"not json",
        b"[1, 2]",
        {"cmd": "fly"},
        {"cmd": "remove_job", "job": 3},
        {"cmd": "add_job", "job": 4, "world_size": 2, "slot_base": 0},
        {"cmd": "add_job", "job": 4, "world_size": True, "slot_base": 0, "slot_count": 1},
        {"cmd": "add_job", "job": 4, "world_size": 2000, "slot_base": 0, "slot_count": 1},
        {"cmd": "add_job", "job": 1, "world_size": 2, "slot_base": 0, "slot_count": 1},
        {"cmd": "add_job", "job": 5, "world_size": 2, "slot_base": 0, "slot_count": 10**6},
    ]
    for req in bad:
        reply = box.request(req)
        assert set(reply) == {"error"} and reply["error"], (req, reply)
    assert {j["job_id"] for j in box.request({"cmd": "list_jobs"})["jobs"]} == {1, 2}


def test_one_connection_serves_many_requests(box):
    with socket.create_connection(box.control, timeout=5) as conn:
        conn.sendall(b'{"cmd": "list_jobs"}\n\n{"cmd": "stats"}\n{"cmd"')
        reader = conn.makefile("rb")
        assert "jobs" in json.loads(reader.readline())
        assert "workers" in json.loads(reader.readline())
        conn.sendall(b': "list_jobs"}\n')
        assert json.loads(reader.readline())["ok"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_every_process_and_reports_final_counters(box, sig):
    pids = [w["pid"] for w in box.request({"cmd": "stats"})["workers"]]
    sock = client()
    sock.sendto(packet(1, 0, 3, np.full(DEFAULT_LANES, 3)), box.udp)
    receive(sock, 1)
    code, lines = box.stop(sig)
    assert code == 0
    assert lines[-1]["event"] == "exit"
    assert lines[-1]["jobs"]["1"]["contributions"] == 1
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_workers_exit_when_the_supervisor_is_killed():
    handle = start_pbox("--workers", "2")
    try:
        pids = [w["pid"] for w in handle.request({"cmd": "stats"})["workers"]]
        handle.proc.kill()
        handle.proc.communicate()
        gone, alive = psutil.wait_procs([psutil.Process(p) for p in pids], timeout=5)
        assert not alive
    finally:
        if handle.proc.poll() is None:
            handle.proc.kill()


def test_single_process_and_stats_interval():
    handle = start_pbox("--workers", "1", "--job", "1:1", "--stats-interval", "0.1")
    try:
        assert handle.ready["workers"] == 1 and handle.ready["steering"] == "none"
        sock = client()
        sock.sendto(packet(1, 0, 8, np.full(DEFAULT_LANES, 8)), handle.udp)
        receive(sock, 1)
        line = json.loads(handle.proc.stdout.readline())
        assert line["event"] == "stats" and "1" in line["jobs"]
    finally:
        handle.stop()


def test_bad_command_line_exits_with_a_clear_error():
    for args in (["--job", "1"], ["--job", "1:x"], ["--listen", "nope"]):
        proc = subprocess.run([sys.executable, "-m", "p4hub.hosts.pbox.cli", *args],
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2 and "error" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "p4hub.hosts.pbox.cli", "--listen", "127.0.0.1:0",
                           "--workers", "1", "--job", "1:2000"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 2 and "world size 2000" in proc.stderr


def test_failed_attach_falls_back_to_one_socket(caplog):
    def refuse(sock, n):
        raise OSError(1, "Operation not permitted")

    socks = pbox.open_sockets("127.0.0.1", 0, 4, attach=refuse)
    try:
        assert len(socks) == 1
        assert "falling back to one process" in caplog.text
    finally:
        for sock in socks:
            sock.close()


def test_steering_program_in_process():
    """Four reuseport sockets with the program: every slot lands on the socket of its
    slot group, (slot // 16) mod 4."""
    socks = pbox.open_sockets("127.0.0.1", 0, 4)
    try:
        assert len(socks) == 4
        target = socks[0].getsockname()
        sender = client()
        for slot in range(0, 128, 2):  # 8 slot groups of 8 datagrams: 2 groups each
            sender.sendto(packet(1, 0, slot, np.zeros(DEFAULT_LANES)), target)
        for index, sock in enumerate(socks):
            sock.settimeout(1)
            slots = [wire.decode(sock.recvfrom(2048)[0])[0].slot for _ in range(16)]
            assert all(shard_of(s, 4) == index for s in slots), (index, slots)
    finally:
        for sock in socks:
            sock.close()


def test_no_stray_processes_left(box):
    children = psutil.Process(box.proc.pid).children()
    assert len(children) == 2
    box.stop()
    assert all(not c.is_running() or c.status() == psutil.STATUS_ZOMBIE for c in children)
    assert os.getpid() != box.proc.pid
