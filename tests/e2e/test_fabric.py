"""A leaf-spine fabric on Mininet (root): 2 racks x 2 workers, one PBox per rack, with
one spine and with two (topologies/rack.py RackConfig(racks=2, spines=S)).

Each P4 switch (leaves s1, s2; spines t1[, t2]) is its own p4lite-switch (or
simple_switch_grpc) process; p4hub-controller configures all of them with
controller/core/rack.py's static entries. Checked: the controller installed every static
entry on every switch, every worker reaches a worker of the other rack, a broadcast
reaches every other host exactly once and never enters a spine other than the flood
root (no loop with two spines), and a 2-process Gloo all-reduce across the racks gives
the float32 sum bit for bit. The fabric is torn down even on failure.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from p4hub.controller.core import program as p4
from p4hub.controller.core import rack as static
from p4hub.controller.core import topology
from p4hub.topologies.rack import PYTHON, Rack, RackConfig
from p4hub.workers import workload

pytestmark = pytest.mark.root

BCAST_PORT = 47999


@pytest.fixture(scope="module", params=[1, 2], ids=["one-spine", "two-spines"])
def fabric(request):
    config = RackConfig(workers=4, racks=2, spines=request.param, bw=None, p4=True,
                        grpc_port=50251, controller_port=50261, pcap=False,
                        run_name=f"fabric-e2e-{request.param}", lock_timeout=120.0)
    with Rack(config) as r:
        r.start_controller(r.controller_topology(slots=64, job_slots=32))
        yield r


def test_the_controller_installs_the_static_entries_on_every_switch(fabric):
    from p4hub.controller.client import JobClient

    topo = topology.from_dict(fabric.topology)
    assert topo.spines() == [f"t{k}" for k in range(1, fabric.config.spines + 1)]
    client = JobClient(fabric.controller_address, timeout=10.0)
    try:
        status = client.call("Status")["switches"]
        assert sorted(status) == sorted(fabric.config.switch_names)
        assert all(s["connected"] for s in status.values())
        for name in fabric.config.switch_names:
            view = client.call("ShowSwitch", name=name)
            have = sorted((e["table"], sorted(e["match"].items())) for e in view["entries"]
                          if e["table"] in (p4.L2_FWD, p4.AGGREGATORS, p4.AGG_SOURCES))
            want = sorted((e.table, sorted((f.name, f.value) for f in e.match))
                          for e in static.rack_entries(topo, name))
            assert have == want, name
    finally:
        client.close()


def test_every_worker_reaches_a_worker_in_the_other_rack(fabric):
    workers = fabric.workers
    half = len(workers) // 2
    for rank, host in enumerate(workers):
        peer = workers[(rank + half) % len(workers)]
        out = host.cmd("ping", "-c", "2", "-W", "2", "-i", "0.2", peer.IP())
        assert " 0% packet loss" in out, f"{host.name} -> {peer.name}: {out}"


def _tx_packets(intf: str) -> int:
    text = subprocess.run(["ip", "-s", "-j", "link", "show", intf], capture_output=True,
                          text=True, check=True).stdout
    return json.loads(text)[0]["stats64"]["tx"]["packets"]


def test_a_broadcast_reaches_every_other_host_once_and_skips_the_other_spines(fabric):
    listeners = [h for h in [*fabric.workers, *fabric.pbox_hosts] if h is not fabric.workers[0]]
    code = ("import socket,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);"
            "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
            f"s.bind(('',{BCAST_PORT}));s.settimeout(3);n=0;print('bound',flush=True)\n"
            "try:\n while True: s.recv(64); n+=1\nexcept socket.timeout: print(n)")
    procs = [fabric.popen(h, [PYTHON, "-c", code], f"bcast-{h.name}") for h in listeners]
    others = [f"t{k}-eth{r}" for k in range(2, fabric.config.spines + 1) for r in (1, 2)]
    before = {intf: _tx_packets(intf) for intf in others}
    for proc in procs:  # every listener bound before the broadcast goes out
        assert proc.stdout.readline().strip() == "bound"
    send = ("import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);"
            "s.setsockopt(socket.SOL_SOCKET,socket.SO_BROADCAST,1);"
            f"[s.sendto(b'hello',('10.0.0.255',{BCAST_PORT})) for _ in range(5)]")
    fabric.workers[0].cmd(PYTHON, "-c", f'"{send}"')
    counts = {h.name: int(p.communicate(timeout=30)[0].strip()) for h, p in zip(listeners, procs,
                                                                                strict=True)}
    assert counts == dict.fromkeys(counts, 5)  # each copy once: no loop, no duplicate
    assert {intf: _tx_packets(intf) - n for intf, n in before.items()} == dict.fromkeys(others, 0)


def test_a_gloo_all_reduce_across_the_racks_is_the_float32_sum(fabric):
    """Rank 0 on w1 (rack 1), rank 1 on w3 (rack 2): Gloo's sum of two float32 values is
    one correctly rounded addition, so the result is bit for bit a + b."""
    scale, iterations = 0.002, 2
    hosts = [fabric.workers[0], fabric.workers[2]]
    procs = [fabric.popen(host, [PYTHON, "-m", "p4hub.workers.worker", "--backend", "gloo",
                                 "--master", f"{hosts[0].IP()}:29500", "--rank", str(rank),
                                 "--world", "2", "--iterations", str(iterations),
                                 "--scale", str(scale), "--check", "--timeout", "60"],
                          f"gloo-{rank}")
             for rank, host in enumerate(hosts)]
    outputs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    sizes = workload.layer_sizes(workload.DEFAULT_MODEL, scale)
    for it in range(iterations):
        a, b = (np.concatenate(workload.gradients(sizes, 1, it, r)) for r in (0, 1))
        expected = workload.digest(a + b)
        for out in outputs:
            lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
            [line] = [x for x in lines if x.get("event") == "iteration" and x["iteration"] == it]
            assert line["digest"] == expected
