"""Host agents all-reducing through a real ``p4hub-pbox`` on loopback: MB/s per worker.

No Mininet and no links: N agent processes and the PBox (its worker processes and
its cBPF steering) on 127.0.0.1, so the figure is what the software path itself costs
(system calls, packet building, the PBox's aggregation), not a link's bandwidth. For
each lane count (64 and 256 by default) a PBox is started with one job of that lane
count, every agent all-reduces a float32 tensor of ``--mb`` MB ``--repeat`` times after
a warm-up, and a row reports the median time over all ranks' slowest, MB/s per worker
(tensor bytes / time), the resends per packet, and the CPU seconds each side used
during the timed all-reduces, also per MB moved (the machine has few cores: when agents
plus PBox need more than there are, the row says CPU-bound, and the figure is the
cores' limit, not the design's).

Modes, run interleaved round by round (``--rounds``) so that both see the same machine:
``new`` (compiled kernels and segmentation offload where the path has it) and
``fallback`` (``P4HUB_NO_NATIVE=1 P4HUB_NO_GSO=1``: numpy and ``sendmmsg``). Each round
also measures the raw ceiling of one Python sender and one receiver process on
loopback with the same 1044-byte datagrams: GSO sends of 62 read with UDP_GRO
(``gso``), and ``sendmmsg`` of 64 read with ``recvmmsg`` (``sendmmsg``); MB/s of
datagrams received. Rows give their MB/s per worker as a fraction of that round's GSO ceiling.

    .venv/bin/python -m bench.pbox_loopback [--workers 4] [--mb 4] [--repeat 5]
        [--lanes 64,256] [--pbox-workers 2] [--modes new,fallback] [--rounds 1]

Writes bench/results/pbox_loopback.json.
"""

from __future__ import annotations

import argparse
import errno
import json
import multiprocessing
import os
import platform
import select
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


MODES = {"new": {}, "fallback": {"P4HUB_NO_NATIVE": "1", "P4HUB_NO_GSO": "1"}}
CEILING_SIZE = 1044  # a 256-lane datagram
CEILING_SECONDS = 0.5


def agent_main(rank: int, world: int, port: int, lanes: int, elems: int, repeat: int,
               out: multiprocessing.Queue, start: threading.Barrier) -> None:
    from p4hub.hosts import native
    from p4hub.hosts.agent import Agent

    native.KERNELS = native.load()  # this mode's environment, not the parent's import
    x = np.random.default_rng(rank).standard_normal(elems).astype(np.float32)
    with Agent(JOB, rank, world, ("127.0.0.1", port), slot_count=SLOTS, lanes=lanes,
               timeout=60.0) as agent:
        agent.allreduce(x[: 64 * lanes])  # warm-up: timers learn the round trip
        times = []
        before = psutil.Process().cpu_times()
        for _ in range(repeat):
            start.wait()
            t = time.perf_counter()
            agent.allreduce(x)
            times.append(time.perf_counter() - t)
        cpu = psutil.Process().cpu_times()
        out.put({"rank": rank, "times": times, "stats": agent.stats,
                 "cpu_s": cpu.user + cpu.system - before.user - before.system,
                 "gso_sends": agent._transport._sender.gso_sends})


def _drain(sock: socket.socket, seconds: float, gro: bool, out: multiprocessing.Queue) -> None:
    from p4hub.hosts.batchio import BatchReceiver
    from p4hub.hosts.gro import GroReceiver

    receiver = GroReceiver(sock, 16, CEILING_SIZE) if gro else BatchReceiver(sock, 64, CEILING_SIZE)
    got = 0
    end = time.monotonic() + seconds + 0.2
    while time.monotonic() < end:
        n = receiver.receive()
        got += sum(receiver.lengths[:n])
        if not n:
            select.select([sock], [], [], 0.01)
    out.put(got)


def ceiling(gso: bool, seconds: float = CEILING_SECONDS) -> float:
    """MB/s of 1044-byte datagrams one Python sender gets to one receiver process: GSO
    sends and UDP_GRO receives (``gso``), or sendmmsg and recvmmsg."""
    from p4hub.hosts.batchio import BatchSender
    from p4hub.hosts.gso import GsoSender

    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    rx.bind(("127.0.0.1", 0))
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.Queue = ctx.Queue()
    proc = ctx.Process(target=_drain, args=(rx, seconds, gso, out))
    proc.start()
    lost = (errno.EAGAIN, errno.ENOBUFS)
    sender = GsoSender(tx, 64, lost) if gso else BatchSender(tx, 64, lost)
    if gso:
        assert sender.uses_gso("127.0.0.1"), "loopback takes no GSO here"  # type: ignore[union-attr]
    rows = bytearray(62 * CEILING_SIZE if gso else 64 * CEILING_SIZE)
    to = rx.getsockname()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sender.send_rows(rows, CEILING_SIZE, to)
    got = out.get(timeout=30)
    proc.join()
    rx.close()
    tx.close()
    return got / seconds / 1e6


def bench_lanes(lanes: int, args: argparse.Namespace, mode: str = "new") -> dict:
    saved = {k: os.environ.get(k) for k in MODES["fallback"]}
    for key in saved:
        os.environ.pop(key, None)
    os.environ.update(MODES[mode])
    try:
        return _bench_lanes(lanes, args) | {"mode": mode}
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _bench_lanes(lanes: int, args: argparse.Namespace) -> dict:
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
    moved = args.mb * args.workers * args.repeat
    cpu_agents = sum(r["cpu_s"] for r in reports)
    row = {
        "lanes": lanes, "workers": args.workers, "mb": args.mb, "seconds": median,
        "seconds_all": slowest, "mb_per_s_per_worker": args.mb / median,
        "resent_per_packet": resent / sent if sent else 0.0,
        "cpu_s_agents": round(cpu_agents, 2), "cpu_s_pbox": round(pbox_cpu, 2),
        "agent_cpu_ms_per_mb": round(1000 * cpu_agents / moved, 1),
        "pbox_cpu_ms_per_mb": round(1000 * pbox_cpu / moved, 1),
        "agent_gso_sends": sum(r["gso_sends"] for r in reports), "wall_s": round(wall, 2),
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
    parser.add_argument("--modes", type=lambda s: s.split(","), default=["new", "fallback"])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if unknown := set(args.modes) - set(MODES):
        parser.error(f"unknown mode(s) {sorted(unknown)}: choose from {sorted(MODES)}")
    rows, ceilings = [], []
    print(f"{args.workers} agents, {args.mb:g} MB float32 each, through p4hub-pbox "
          f"({args.pbox_workers} workers) on 127.0.0.1")
    print(f"{'round':>5} {'mode':>8} {'lanes':>5} {'median s':>9} {'MB/s/worker':>12} "
          f"{'x gso':>6} {'resent':>7} {'agents ms/MB':>12} {'pbox ms/MB':>10}  cores busy")
    for round_ in range(args.rounds):
        limit = {"round": round_, "gso_mb_s": ceiling(True), "sendmmsg_mb_s": ceiling(False)}
        ceilings.append(limit)
        print(f"{round_:>5} raw ceiling, 1044-byte datagrams: GSO {limit['gso_mb_s']:.0f} MB/s,"
              f" sendmmsg {limit['sendmmsg_mb_s']:.0f} MB/s", flush=True)
        for lanes in args.lanes:
            for mode in args.modes:
                row = bench_lanes(lanes, args, mode) | {"round": round_}
                row["fraction_of_gso_ceiling"] = row["mb_per_s_per_worker"] / limit["gso_mb_s"]
                rows.append(row)
                bound = (f"CPU-bound ({row['cores_busy']:.2f}/{row['cores']} cores)"
                         if row["cpu_bound"] else f"{row['cores_busy']:.2f}/{row['cores']}")
                print(f"{round_:>5} {mode:>8} {lanes:>5} {row['seconds']:>9.3f} "
                      f"{row['mb_per_s_per_worker']:>12.1f} "
                      f"{row['fraction_of_gso_ceiling']:>6.3f} {row['resent_per_packet']:>7.1%} "
                      f"{row['agent_cpu_ms_per_mb']:>12.1f} {row['pbox_cpu_ms_per_mb']:>10.1f}"
                      f"  {bound}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "pbox_loopback", "python": platform.python_version(),
        "cpus": os.cpu_count(), "config": {k: v for k, v in vars(args).items() if k != "out"},
        "ceilings": ceilings, "results": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
