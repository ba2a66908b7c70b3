"""Host agents all-reducing through a real ``p4hub-pbox`` on loopback: MB/s per worker.

No Mininet and no links: N agent processes and the PBox (its worker processes and
its cBPF steering) on 127.0.0.1, so the figure is what the software path itself costs
(system calls, packet building, the PBox's aggregation), not a link's bandwidth. For
each lane count (64 and 256 by default) a PBox is started with one job of that lane
count, every agent all-reduces a float32 tensor of ``--mb`` MB ``--repeat`` times after
a warm-up, and a row reports the median time over all ranks' slowest, MB/s per worker
(tensor bytes / time), the resends per packet, and the CPU seconds each side used (the
machine has few cores: when agents plus PBox need more than there are, the row says
CPU-bound, and the figure is the cores' limit, not the design's).

    .venv/bin/python -m bench.pbox_loopback [--workers 4] [--mb 4] [--repeat 5]
                                            [--lanes 64,256] [--pbox-workers 2]

Writes bench/results/pbox_loopback.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil

RESULTS = Path(__file__).resolve().parent / "results" / "pbox_loopback.json"
JOB = 1
SLOTS = 64
MB = 1 << 20


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_pbox(port: int, workers: int, world: int, lanes: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "p4hub.hosts.pbox.cli", "--listen", f"127.0.0.1:{port}",
           "--workers", str(workers), "--job", f"{JOB}:{world}:0:{SLOTS}:{lanes}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline() or "{}")
    if ready.get("event") != "ready":
        proc.kill()
        raise RuntimeError(f"p4hub-pbox did not start: {proc.stderr.read() if proc.stderr else ''}")
    return proc


def agent_main(rank: int, world: int, port: int, lanes: int, elems: int, repeat: int,
               out: multiprocessing.Queue, start: threading.Barrier) -> None:
    from p4hub.hosts.agent import Agent

    x = np.random.default_rng(rank).standard_normal(elems).astype(np.float32)
    with Agent(JOB, rank, world, ("127.0.0.1", port), slot_count=SLOTS, lanes=lanes,
               timeout=60.0) as agent:
        agent.allreduce(x[: 64 * lanes])  # warm-up: timers learn the round trip
        times = []
        for _ in range(repeat):
            start.wait()
            t = time.perf_counter()
            agent.allreduce(x)
            times.append(time.perf_counter() - t)
        cpu = psutil.Process().cpu_times()
        out.put({"rank": rank, "times": times, "stats": agent.stats,
                 "cpu_s": cpu.user + cpu.system})


def bench_lanes(lanes: int, args: argparse.Namespace) -> dict:
    port = _free_port()
    pbox = start_pbox(port, args.pbox_workers, args.workers, lanes)
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.Queue = ctx.Queue()
    start = ctx.Barrier(args.workers)
    elems = int(args.mb * MB) // 4
    machine_before = psutil.cpu_times()
    pbox_procs = [psutil.Process(pbox.pid), *psutil.Process(pbox.pid).children(recursive=True)]
    pbox_before = sum(p.cpu_times().user + p.cpu_times().system for p in pbox_procs)
    wall = time.monotonic()
    procs = [ctx.Process(target=agent_main, args=(r, args.workers, port, lanes, elems,
                                                 args.repeat, out, start))
             for r in range(args.workers)]
    for p in procs:
        p.start()
    reports = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    wall = time.monotonic() - wall
    pbox_cpu = sum(p.cpu_times().user + p.cpu_times().system for p in pbox_procs) - pbox_before
    machine_after = psutil.cpu_times()
    pbox.terminate()
    pbox.wait(10)
    busy = (sum(machine_after) - machine_after.idle) - (sum(machine_before) - machine_before.idle)
    slowest = [max(r["times"][i] for r in reports) for i in range(args.repeat)]
    median = statistics.median(slowest)
    sent = sum(r["stats"]["sent"] for r in reports)
    resent = sum(r["stats"]["retransmitted"] for r in reports)
    cores_used = busy / wall
    row = {
        "lanes": lanes, "workers": args.workers, "mb": args.mb, "seconds": median,
        "seconds_all": slowest, "mb_per_s_per_worker": args.mb / median,
        "resent_per_packet": resent / sent if sent else 0.0,
        "cpu_s_agents": round(sum(r["cpu_s"] for r in reports), 2),
        "cpu_s_pbox": round(pbox_cpu, 2), "wall_s": round(wall, 2),
        "cores_busy": round(cores_used, 2), "cores": os.cpu_count(),
        "cpu_bound": cores_used >= 0.9 * (os.cpu_count() or 1),
    }
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--mb", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--lanes", type=lambda s: [int(x) for x in s.split(",")],
                        default=[64, 256])
    parser.add_argument("--pbox-workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows = []
    print(f"{args.workers} agents, {args.mb:g} MB float32 each, through p4hub-pbox "
          f"({args.pbox_workers} workers) on 127.0.0.1")
    print(f"{'lanes':>5} {'median s':>9} {'MB/s/worker':>12} {'resent':>7} "
          f"{'cpu agents':>10} {'cpu pbox':>9}  cores busy")
    for lanes in args.lanes:
        row = bench_lanes(lanes, args)
        rows.append(row)
        bound = (f"CPU-bound ({row['cores_busy']:.2f}/{row['cores']} cores)" if row["cpu_bound"]
                 else f"{row['cores_busy']:.2f}/{row['cores']}")
        print(f"{lanes:>5} {row['seconds']:>9.3f} {row['mb_per_s_per_worker']:>12.1f} "
              f"{row['resent_per_packet']:>7.1%} {row['cpu_s_agents']:>9.1f}s "
              f"{row['cpu_s_pbox']:>8.1f}s  {bound}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "pbox_loopback", "python": platform.python_version(),
        "cpus": os.cpu_count(), "config": {k: v for k, v in vars(args).items() if k != "out"},
        "results": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
