"""Packets/s and latency through the ``p4lite-switch`` process, against the in-process core.

Two namespaces (p4lb1, p4lb2) hang off switch ports 1 and 2 by veth pairs; the
switch runs the L3 routing program (bench/programs/l3_routing.p4 compiled by
p4lite) with 1000 routes installed over P4Runtime. This process opens one raw socket
inside each namespace (setns) and:

* **burst**: sends N frames back to back into port 1 and counts what leaves
  port 2 -- forwarding rate (first to last frame out) and loss (in vs out), i.e.
  whether the switch keeps every frame the kernel handed it;
* **latency**: sends one frame at a time and times its arrival on the far side
  (one-way, same clock);
* **core**: ``Switch.process`` on the same program and frames, in process.

The ratio io/core is what the Linux I/O path costs. Needs root. Bounded to
well under 60 s; traffic never leaves the p4l* namespaces.
Results: bench/results/switch_io.json.  Usage: ``python -m bench.switch_io [--burst N]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import select
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from bench._common import ETH_P_ALL, free_tcp_port, in_netns, sh, start_p4lite_switch
from bench._frames import internet_checksum

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "switch_io.json"
NS = ("p4lb1", "p4lb2")
SW_IFACES = ("p4lbs-eth1", "p4lbs-eth2")
PACKET_OUTGOING = 4
H2_MAC = bytes.fromhex("080000000222")
ROUTER_MAC = bytes.fromhex("0800000000fe")
MAGIC = b"p4lbench"
N_ROUTES = 1000


# -- program --------------------------------------------------------------------

def load_program() -> tuple[dict, p4info_pb2.P4Info, str]:
    # The compiler ships in p4lite with the switch this benchmark drives, so it is always
    # there (the hand-built copy of this program in the test fixtures is for the tests).
    from p4lite.compiler.driver import compile_file

    result = compile_file(str(HERE / "programs" / "l3_routing.p4"))
    return result.bmv2, result.p4info, "bench/programs/l3_routing.p4 (p4lite-c)"


def route_updates(p4info: p4info_pb2.P4Info) -> list[p4runtime_pb2.Update]:
    table = next(t for t in p4info.tables if t.preamble.name.endswith("ipv4_lpm"))
    action = next(a for a in p4info.actions if a.preamble.name.endswith("ipv4_forward"))
    values = {"dstAddr": H2_MAC, "srcAddr": ROUTER_MAC, "port": b"\x02"}
    updates = []
    for i in range(N_ROUTES):
        prefix = bytes([10, 0, 2, 0]) if i == 0 else bytes([11, i >> 8, i & 0xFF, 0])
        te = p4runtime_pb2.TableEntry(table_id=table.preamble.id)
        fm = te.match.add(field_id=table.match_fields[0].id)
        fm.lpm.value, fm.lpm.prefix_len = prefix, 24
        te.action.action.action_id = action.preamble.id
        for param in action.params:
            te.action.action.params.add(param_id=param.id, value=values[param.name])
        updates.append(p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT,
                                            entity=p4runtime_pb2.Entity(table_entry=te)))
    return updates


def frame(seq: int) -> bytes:
    payload = MAGIC + seq.to_bytes(8, "big") + bytes(26)
    total = 20 + 8 + len(payload)
    ip = bytearray([0x45, 0, total >> 8, total & 0xFF, 0, 1, 0, 0, 64, 17, 0, 0,
                    10, 0, 1, 1, 10, 0, 2, 2])
    ip[10:12] = internet_checksum(bytes(ip)).to_bytes(2, "big")
    udp = (40000).to_bytes(2, "big") + (9999).to_bytes(2, "big") + (8 + len(payload)).to_bytes(2, "big") + b"\0\0"
    return ROUTER_MAC + bytes.fromhex("080000000111") + b"\x08\x00" + bytes(ip) + udp + payload


# -- namespaces and sockets -----------------------------------------------------

class Net:
    def __init__(self) -> None:
        self.close()
        for ns, sw in zip(NS, SW_IFACES, strict=True):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", sw, "type", "veth", "peer", "name", f"{ns}x")
            sh("ip", "link", "set", f"{ns}x", "netns", ns)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", f"{ns}x", "name", "eth0")
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
            sh("sysctl", "-qw", f"net.ipv6.conf.{sw}.disable_ipv6=1", check=False)
            sh("ip", "link", "set", sw, "up")

    def socket_in(self, ns: str) -> socket.socket:
        """A raw socket on eth0 of ``ns`` (this thread enters the namespace and comes back)."""
        with in_netns(ns):
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            sock.bind(("eth0", ETH_P_ALL))
            sock.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
            sock.setsockopt(socket.SOL_SOCKET, 32, 64 << 20)  # SO_SNDBUFFORCE
        return sock

    def close(self) -> None:
        for ns, sw in zip(NS, SW_IFACES, strict=True):
            sh("ip", "netns", "del", ns, check=False)
            sh("ip", "link", "del", sw, check=False)


def program_switch(port: int, bmv2: dict, p4info: p4info_pb2.P4Info) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=0, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = json.dumps(bmv2).encode()
        stub.SetForwardingPipelineConfig(req, timeout=30)
        updates = route_updates(p4info)
        for start in range(0, len(updates), 200):
            stub.Write(p4runtime_pb2.WriteRequest(device_id=0, updates=updates[start:start + 200]),
                       timeout=30)


# -- measurements ---------------------------------------------------------------

def receive_tagged(sock: socket.socket, want: int, idle: float, stamps: list[float]) -> None:
    while len(stamps) < want:
        if not select.select([sock], [], [], idle)[0]:
            return
        data, addr = sock.recvfrom(65535)
        if addr[2] != PACKET_OUTGOING and MAGIC in data:
            stamps.append(time.perf_counter())


def burst(tx: socket.socket, rx: socket.socket, count: int) -> dict:
    frames = [frame(i) for i in range(count)]
    stamps: list[float] = []
    receiver = threading.Thread(target=receive_tagged, args=(rx, count, 2.0, stamps))
    receiver.start()
    t0 = time.perf_counter()
    for f in frames:
        tx.send(f)
    t_sent = time.perf_counter()
    receiver.join(timeout=60)
    received = len(stamps)
    span = (stamps[-1] - stamps[0]) if received > 1 else float("nan")
    return {"sent": count, "received": received, "lost": count - received,
            "send_rate_pps": count / (t_sent - t0), "forward_pps": (received - 1) / span if received > 1 else 0.0,
            "drain_seconds": (stamps[-1] - t0) if stamps else None}


def latency(tx: socket.socket, rx: socket.socket, samples: int) -> dict:
    delays = []
    for i in range(samples):
        t0 = time.perf_counter()
        tx.send(frame(i))
        stamps: list[float] = []
        receive_tagged(rx, 1, 0.5, stamps)
        if stamps:
            delays.append((stamps[0] - t0) * 1e6)
    delays.sort()
    return {"samples": samples, "received": len(delays),
            "p50_us": statistics.median(delays) if delays else None,
            "p99_us": delays[int(len(delays) * 0.99) - 1] if delays else None,
            "mean_us": statistics.fmean(delays) if delays else None}


def core_pps(bmv2: dict, p4info: p4info_pb2.P4Info, seconds: float) -> float:
    from p4lite.switch.core.switch import Switch
    from p4lite.switch.p4runtime.device import Device
    from p4lite.switch.p4runtime.write import apply_update

    device = Device(0, lambda j: Switch(j))
    config = p4runtime_pb2.ForwardingPipelineConfig(p4_device_config=json.dumps(bmv2).encode())
    config.p4info.CopyFrom(p4info)
    device.set_pipeline(p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, config)
    pipeline = device.require_pipeline()  # set_pipeline just committed one
    for u in route_updates(p4info):
        apply_update(pipeline, u)
    core = pipeline.core
    frames = [frame(i) for i in range(256)]
    assert core.process(frames[0], 1), "the program dropped the benchmark frame"
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for f in frames:
            core.process(f, 1)
        n += len(frames)
    return n / (time.perf_counter() - t0)


def _switch_core_l3() -> dict | None:
    """The L3 case of bench/results/switch_core.json (``results["l3_routing"]``), if it ran."""
    path = HERE / "results" / "switch_core.json"
    try:
        case = json.loads(path.read_text()).get("results", {}).get("l3_routing")
    except (OSError, ValueError, AttributeError):
        return None
    return case if isinstance(case, dict) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=20000)
    parser.add_argument("--latency-samples", type=int, default=300)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench.switch_io needs root (network namespaces)", file=sys.stderr)
        return 1
    started = time.monotonic()
    bmv2, p4info, source = load_program()
    net = Net()
    proc = None
    log_path = Path("/tmp/p4lb-switch.log")
    try:
        port = free_tcp_port()
        proc = start_p4lite_switch(dict(enumerate(SW_IFACES, start=1)), port, log_path,
                                   wait_seconds=10)
        program_switch(port, bmv2, p4info)
        tx, rx = net.socket_in(NS[0]), net.socket_in(NS[1])
        latency(tx, rx, 20)  # warm-up
        lat = latency(tx, rx, args.latency_samples)
        bursts = [burst(tx, rx, n) for n in (1000, args.burst)]
        core = core_pps(bmv2, p4info, 2.0)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        net.close()
    io_pps = bursts[-1]["forward_pps"]
    result = {"program": source, "routes": N_ROUTES, "frame_bytes": len(frame(0)),
              "latency": lat, "bursts": bursts, "io_pps": io_pps, "core_pps": core,
              "io_over_core": io_pps / core if core else None,
              "switch_core_json": _switch_core_l3(),
              "host": {"python": platform.python_version(), "machine": platform.machine(),
                       "cpus": os.cpu_count(), "loadavg_1min": os.getloadavg()[0]},
              "seconds": time.monotonic() - started}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"p4lite-switch L3: {io_pps:,.0f} pkt/s through veths "
          f"({bursts[-1]['received']}/{bursts[-1]['sent']} of a burst delivered), "
          f"in-process core {core:,.0f} pkt/s, ratio {result['io_over_core']:.2f}; "
          f"latency p50 {lat['p50_us']:.0f} us, p99 {lat['p99_us']:.0f} us")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
