"""Packets per second of p4lite's switch core, in-process, on one core.

Two programs from bench/programs/:

* ``l3_routing``: Ethernet/IPv4 parse, LPM on the destination with 1000
  routes installed, MAC rewrite, TTL decrement, IPv4 checksum update;
* ``register_lanes32``: 32 register read-add-write lanes per packet.

Each case compiles its program with p4lite, checks that one packet comes out
as expected (so a drop is never timed), warms up, then times a fixed number
of ``Switch.process`` calls with ``time.perf_counter`` over several
repetitions. The median is reported, with the best repetition and the rate
per second of process CPU time (``time.process_time``), which is steadier on a
machine shared with other jobs. Results: bench/results/switch_core.json.

Usage: ``python -m bench.switch_core [--reps 5] [--seconds 1.0]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from p4lite.compiler.driver import compile_file
from p4lite.switch.core import Switch
from p4lite.switch.runtime_api import ActionCall, MatchField, TableEntry

HERE = Path(__file__).parent
RESULTS = HERE / "results" / "switch_core.json"
N_ROUTES = 1000
N_FLOWS = 256  # distinct packets cycled through, so caches see some variety
WARMUP = 2000


@dataclass
class CaseResult:
    name: str
    packets_per_rep: int
    reps_pps: list[float]
    pps_median: float
    us_per_packet: float
    pps_best: float  # the least disturbed repetition: useful on a loaded machine
    cpu_pps_median: float  # packets per second of process CPU time (time.process_time)
    setup: str


def _ipv4_checksum(header: bytearray) -> int:
    total = sum(int.from_bytes(header[i:i + 2], "big") for i in range(0, 20, 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _ipv4_packet(dst: int, ttl: int = 64) -> bytes:
    eth = bytes.fromhex("00000000000a" "00000000000b" "0800")
    ip = bytearray.fromhex("45000032" "00010000") + bytes([ttl, 17, 0, 0])
    ip += (0x0A000001).to_bytes(4, "big") + dst.to_bytes(4, "big")
    ip[10:12] = _ipv4_checksum(ip).to_bytes(2, "big")
    return eth + bytes(ip) + bytes(30)  # 30 bytes of UDP-ish payload


def setup_l3() -> tuple[Switch, list[bytes], Callable[[list], None], str]:
    sw = Switch(compile_file(str(HERE / "programs" / "l3_routing.p4")).bmv2)
    table, action = "MyIngress.ipv4_lpm", "MyIngress.ipv4_forward"
    # 1000 routes: /24s under 10.0.0.0/8 plus a few shorter covering prefixes.
    for i in range(N_ROUTES - 8):
        prefix = 0x0A000000 | (i << 8)
        match = (MatchField("lpm", prefix, prefix_len=24),)
        params = (0x020000000000 | i, 0x0200000000FF, 1 + i % 8)
        sw.table_add(TableEntry(table, match, ActionCall(action, params)))
    for j in range(8):
        match = (MatchField("lpm", (11 + j) << 24, prefix_len=8),)
        sw.table_add(TableEntry(table, match, ActionCall(action, (j, 0x0200000000FF, 9))))
    packets = [_ipv4_packet(0x0A000000 | ((i * 7) % (N_ROUTES - 8)) << 8 | 5) for i in range(N_FLOWS)]

    def check(out: list) -> None:
        assert len(out) == 1, f"l3_routing: expected one packet out, got {out!r}"
        port, data = out[0]
        ip = bytearray(data[14:34])
        assert data[22] == 63, "TTL not decremented"
        stored = int.from_bytes(ip[10:12], "big")
        ip[10:12] = b"\0\0"
        assert stored == _ipv4_checksum(ip), "bad IPv4 checksum after update"

    return sw, packets, check, f"{N_ROUTES} LPM routes, {N_FLOWS} flows"


def setup_lanes() -> tuple[Switch, list[bytes], Callable[[list], None], str]:
    sw = Switch(compile_file(str(HERE / "programs" / "register_lanes32.p4")).bmv2)
    packets = []
    for i in range(N_FLOWS):
        lanes = b"".join((i * 32 + k).to_bytes(4, "big") for k in range(32))
        packets.append((i % 256).to_bytes(2, "big") + lanes)

    def check(out: list) -> None:
        assert len(out) == 1 and len(out[0][1]) == 2 + 128, f"register_lanes32: got {out!r}"

    return sw, packets, check, "32 x bit<32> lanes, 256 slots"


def time_case(name: str, setup: Callable, reps: int, seconds: float) -> CaseResult:
    sw, packets, check, desc = setup()
    process = sw.process
    check(process(packets[0], 1, 0))
    n = len(packets)
    start = time.perf_counter()
    for i in range(WARMUP):
        process(packets[i % n], 1, i)
    warm_rate = WARMUP / (time.perf_counter() - start)
    count = max(2000, min(200_000, int(warm_rate * seconds)))
    rates, cpu_rates = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(count):
            process(packets[i % n], 1, i)
        rates.append(count / (time.perf_counter() - t0))
        cpu_rates.append(count / max(time.process_time() - c0, 1e-9))
    median = statistics.median(rates)
    return CaseResult(name, count, [round(r, 1) for r in rates], round(median, 1),
                      round(1e6 / median, 3), round(max(rates), 1),
                      round(statistics.median(cpu_rates), 1), desc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0, help="target duration of one repetition")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    cases = [("l3_routing", setup_l3), ("register_lanes32", setup_lanes)]
    results = [time_case(name, setup, args.reps, args.seconds) for name, setup in cases]
    print(f"{'program':<18} {'packets/s':>12} {'us/packet':>10} {'best pps':>10} "
          f"{'CPU pps':>10} {'packets x reps':>16}  setup")
    for r in results:
        print(f"{r.name:<18} {r.pps_median:>12,.0f} {r.us_per_packet:>10.2f} {r.pps_best:>10,.0f} "
              f"{r.cpu_pps_median:>10,.0f} {r.packets_per_rep:>9} x {len(r.reps_pps):<4}  {r.setup}")
    doc = {
        "benchmark": "switch_core",
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "results": {r.name: asdict(r) for r in results},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
