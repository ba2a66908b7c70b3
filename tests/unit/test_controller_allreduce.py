"""The whole stack in one process, no root: real host agents all-reduce over UDP
through aggregate.p4 in p4lite's switch, configured by the controller over
P4Runtime after joining through the job API.

A shim stands in for the wire: each agent's datagrams (loopback UDP) become
Ethernet frames from that worker's rack address into the switch, and frames the
switch sends to a worker go back to that agent's socket; frames for the PBox go
to a PBox core (hosts.pbox.aggregator). The shim can lose datagrams at random in both
directions.
"""

from __future__ import annotations

import json
import random
import select
import socket
import threading

import numpy as np
import pytest

from p4hub.controller import api
from p4hub.controller import client as client_mod
from p4hub.controller.core import program as p
from p4hub.controller.core import topology
from p4hub.controller.core.updates import DELETE, INSERT, PBoxJobWrite
from p4hub.controller.driver import Controller, PipelineConfig
from p4hub.hosts.agent import Agent
from p4hub.hosts.pbox.aggregator import Aggregator
from p4lite.compiler import driver as compiler
from p4lite.switch.core.switch import Switch
from p4lite.switch.p4runtime.device import Device
from p4lite.switch.p4runtime.server import serve as serve_p4runtime
from tests.support.api_auth import ADMIN, credentials
from tests.unit.test_aggregate_p4 import PROGRAM, contrib, parse_frame, udp_frame

PBOX_PORT = 9
RACK = {
    "switches": {"s1": {"grpc_addr": "127.0.0.1:1", "slots": 32, "job_slots": 32}},
    "hosts": {
        f"h{i}": {"ip": f"10.0.0.{i}", "mac": f"08:00:00:00:01:{i:02x}", "switch": "s1", "port": i}
        for i in range(1, 8)
    },
    "pboxes": {"pb1": {"ip": "10.0.0.100", "mac": "08:00:00:00:01:64", "switch": "s1",
                       "port": PBOX_PORT}},
}
FABRIC_PORT = 40000  # worker i's UDP port on the rack is FABRIC_PORT + i


class Shim:
    """Loopback UDP <-> frames on the switch's ports, with optional random loss."""

    def __init__(self, topo: topology.Topology, loss: float, seed: int) -> None:
        self.topo = topo
        self.loss = loss
        self.rng = random.Random(seed)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.address = self.sock.getsockname()
        self.local_of: dict[tuple[int, int], int] = {}  # (rack ip, rack port) -> loopback port
        self.host_of: dict[int, int] = {}  # loopback port -> host index
        self.pbox = Aggregator()
        self.device: Device | None = None
        self.lock = threading.Lock()
        self._stop = False
        self.thread = threading.Thread(target=self._run, name="ctl-test-shim", daemon=True)

    def attach(self, host_index: int, local_port: int) -> None:
        ip = self.topo.hosts[f"h{host_index}"].ip
        self.local_of[(ip, FABRIC_PORT + host_index)] = local_port
        self.host_of[local_port] = host_index

    def pbox_sink(self, write: PBoxJobWrite) -> None:
        with self.lock:
            if write.op == INSERT:
                self.pbox.add_job(write.job_id, write.world_size, write.slot_base, write.slot_count)
            elif write.op == DELETE:
                self.pbox.remove_job(write.job_id)

    def transmit(self, port: int, frame: bytes) -> None:
        """The switch sent ``frame`` out of ``port`` (called under the device lock)."""
        f = parse_frame(frame)
        if port == PBOX_PORT:
            src = (topology.format_ipv4(f["src_ip"]), f["sport"])
            with self.lock:
                out = self.pbox.receive(f["payload"], src, 0.0)
            for data, (ip, udp_port) in out:
                self._deliver(topology.parse_ipv4(ip), udp_port, data)
        else:
            self._deliver(f["dst_ip"], f["dport"], f["payload"])

    def _deliver(self, ip: int, udp_port: int, data: bytes) -> None:
        local = self.local_of.get((ip, udp_port))
        if local is not None and self.rng.random() >= self.loss:
            self.sock.sendto(data, ("127.0.0.1", local))

    def _run(self) -> None:
        pbox = self.topo.pboxes["pb1"]
        while not self._stop:
            ready, _, _ = select.select([self.sock], [], [], 0.05)
            if not ready:
                continue
            data, (_, local) = self.sock.recvfrom(4096)
            index = self.host_of.get(local)
            if index is None or self.rng.random() < self.loss:
                continue
            h = self.topo.hosts[f"h{index}"]
            frame = udp_frame((h.mac, h.ip, FABRIC_PORT + index),
                              (pbox.mac, pbox.ip, p.AGG_UDP_PORT), data)
            assert self.device is not None  # set by the fixture before start()
            self.device.receive(frame, h.port)

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self._stop = True
        self.thread.join()
        self.sock.close()


@pytest.fixture(scope="module")
def pipeline() -> PipelineConfig:
    result = compiler.compile_file(PROGRAM)
    return PipelineConfig(result.p4info, json.dumps(result.bmv2).encode())


@pytest.fixture(params=[0.0, 0.05], ids=["no-loss", "5%-loss"])
def rack(request, pipeline):
    shim = Shim(topology.from_dict(RACK), loss=request.param, seed=11)
    device = Device(0, Switch, transmit=shim.transmit)
    shim.device = device
    p4rt, p4rt_port = serve_p4runtime(device, "127.0.0.1:0")
    topo = topology.from_dict(dict(RACK, switches={"s1": {**RACK["switches"]["s1"],
                                                          "grpc_addr": f"127.0.0.1:{p4rt_port}"}}))
    shim.topo = topo
    ctl = Controller(topo, pipeline, pbox_sink=shim.pbox_sink)
    ctl.start(now=0.0)
    service = api.JobService(ctl, credentials=credentials())
    server, port = api.serve(service, "127.0.0.1:0")
    client = client_mod.JobClient(f"127.0.0.1:{port}", auth=ADMIN)
    shim.start()
    yield shim, device, ctl, client
    client.close()
    server.stop(grace=None)
    shim.close()
    ctl.close()
    p4rt.stop(grace=None)


def start_job(shim: Shim, client: client_mod.JobClient, name: str, hosts: list[int]) -> list[Agent]:
    agents = []
    for rank, index in enumerate(hosts):
        reply = client.join(name, len(hosts), rank, f"10.0.0.{index}:{FABRIC_PORT + index}")
        agent = Agent(reply["job_id"], rank, len(hosts), shim.address,
                      slot_base=reply["slot_base"], slot_count=reply["slot_count"],
                      window=reply["window"], timeout=20.0, rto=0.02, rto_max=0.2,
                      bind=("127.0.0.1", 0))
        shim.attach(index, agent.local_address[1])
        agents.append(agent)
    return agents


def run_allreduce(agents: list[Agent], arrays: list[np.ndarray]) -> list[np.ndarray]:
    results: list = [None] * len(agents)
    errors: list = []

    def work(i: int) -> None:
        try:
            results[i] = agents[i].allreduce(arrays[i])
        except Exception as exc:  # reported below, with the rank
            errors.append((i, exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(agents))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return results


def test_switch_job_and_pbox_job_run_side_by_side_with_exact_results(rack):
    shim, device, ctl, client = rack
    on_switch = start_job(shim, client, "resnet", [1, 2, 3, 4])
    on_pbox = start_job(shim, client, "bert", [5, 6])
    assert ctl.registry.jobs[1].where == "switch" and ctl.registry.jobs[2].where == "pbox"
    rng = np.random.default_rng(2)
    try:
        ints = [rng.integers(-(2**20), 2**20, 3000, dtype=np.int32) for _ in range(4)]
        floats = [rng.standard_normal(5000).astype(np.float32) for _ in range(2)]
        outcome: dict = {}
        side = threading.Thread(target=lambda: outcome.update(pbox=run_allreduce(on_pbox, floats)))
        side.start()
        # an outsider on the rack crafts contributions for the switch job meanwhile
        h7, pbox = shim.topo.hosts["h7"], shim.topo.pboxes["pb1"]
        for slot in range(4):
            forged = contrib(1, 0, slot, values=np.full(64, 10**6))
            device.receive(udp_frame((h7.mac, h7.ip, 5555), (pbox.mac, pbox.ip, p.AGG_UDP_PORT),
                                     forged), h7.port)
        sums = run_allreduce(on_switch, ints)
        side.join(60)
        for result in sums:
            np.testing.assert_array_equal(result, np.sum(ints, axis=0, dtype=np.int64))
        exact = np.sum(floats, axis=0, dtype=np.float64)
        for result in outcome["pbox"]:
            np.testing.assert_array_equal(result, outcome["pbox"][0])  # every worker, same bits
            np.testing.assert_allclose(result, exact, rtol=0, atol=1e-5 * np.abs(exact).max())
        counters = ctl.job_counters(1)
        assert counters["rejected"][0] == 4
        assert counters["completions"][0] >= (3000 + 63) // 64
        assert ctl.job_counters(2)["forwarded"][0] > 0
        retransmitted = sum(a.stats["retransmitted"] for a in on_switch)
        if shim.loss:  # losses were recovered by retransmission and stored-result resends
            assert retransmitted > 0 and counters["resent"][0] > 0
    finally:
        for agent in on_switch + on_pbox:
            agent.close()
