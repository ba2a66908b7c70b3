"""All-reduce time and goodput: switch path, PBox path and Gloo on the same rack and links.

For each worker count N, one rack (N workers, the PBox host, the P4 switch running
p4src/aggregate.p4, p4hub-controller; links shaped to --bw Mbit/s) runs, on the same
hosts, links and switch in the same run:

* ``switch``: the host agent joins through the controller (JoinJob), which gives the
  job switch slots: the switch sums the fixed-point blocks and multicasts the result;
* ``pbox``: the same agents, the job placed on the PBox (JoinJob placement "pbox"):
  the switch forwards to p4hub-pbox, which sums in software;
* ``gloo``: torch.distributed with the Gloo backend (ring all-reduce over TCP);
* ``switch256`` and ``pbox256``: the switch and PBox paths with 256-lane packets (the
  job asks for them at JoinJob): a quarter of the packets, 1.06x framing instead of 1.24x.

Each timed all-reduce starts after a barrier; its time is the slowest rank's. The
floors are link-bandwidth bounds: switch ``size / bw`` (each worker sends and receives
each byte once), single PBox ``N x size / bw`` (its one link carries every worker's
contribution in and every result out), ring ``2(N-1)/N x size / bw``. Goodput is tensor
bytes / time. The switch process's and the PBox's CPU seconds per backend are recorded
too (where the time goes when a path falls short of its floor), and every row has a
``cpu`` column over its timed all-reduces (topologies/cpuload.py): ``CPU-bound (...)``
when the machine's cores, not the links, were the limit, else ``link-bound (...)``.

    .venv/bin/python -m bench.allreduce [--quick] [--workers 2,4,8] [--sizes-mb 0.5,2]
                                        [--bw 5] [--repeat 2]
                                        [--backends switch,switch256,pbox,pbox256,gloo]

Needs root (Mininet) and, for Gloo, torch (``make torch``). Writes
bench/results/allreduce.json and bench/results/allreduce.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import psutil

from topologies.cpuload import CpuSampler, column
from topologies.launch import WorkerRun, run_workers
from topologies.rack import AGENT_PORT, Rack, RackConfig, RackError, exit_on_sigterm, worker_ip

RESULTS = Path(__file__).resolve().parent / "results"
MB = 1 << 20


def floors(workers: int, size_mb: float, bw_mbit: float) -> dict[str, float]:
    bits = size_mb * MB * 8
    return {
        "switch": bits / (bw_mbit * 1e6),
        "pbox": workers * bits / (bw_mbit * 1e6),
        "gloo": 2 * (workers - 1) / workers * bits / (bw_mbit * 1e6),
    }


# backend -> (JoinJob placement, lanes per packet, the floor it is held to)
INC_BACKENDS = {
    "switch": ("auto", 64, "switch"), "switch256": ("auto", 256, "switch"),
    "pbox": ("pbox", 64, "pbox"), "pbox256": ("pbox", 256, "pbox"),
}


def _floor_key(backend: str) -> str:
    return INC_BACKENDS[backend][2] if backend in INC_BACKENDS else backend


def _worker_args(backend: str, workers: int, args: argparse.Namespace, controller: str):
    def build(rank: int) -> list[str]:
        common = ["--rank", str(rank), "--world", str(workers), "--repeat", str(args.repeat),
                  "--sizes-mb", ",".join(str(s) for s in args.sizes_mb), "--timeout", "60"]
        if backend == "gloo":
            return ["--backend", "gloo", "--master", "10.0.0.1:29500", *common]
        placement, lanes, _ = INC_BACKENDS[backend]
        return ["--backend", "job", "--controller", controller, "--job-name",
                f"inc-bench-{backend}", "--placement", placement, "--lanes", str(lanes),
                "--data-ip", worker_ip(rank), "--agent-port", str(AGENT_PORT), *common]
    return build


def _run_timeout(workers: int, args: argparse.Namespace) -> float:
    # Generous: 30x the PBox floor of every size and repetition, plus start-up.
    total = sum(floors(workers, s, args.bw)["pbox"] for s in args.sizes_mb) * args.repeat
    return 120.0 + 10.0 * total


def _rows(backend: str, workers: int, run: WorkerRun, args: argparse.Namespace,
          cpu: dict[str, float], timed: CpuSampler,
          windows: dict[float, list[tuple[float, float]]]) -> list[dict]:
    rows = []
    for size_mb in args.sizes_mb:
        times = [max(line["seconds"] for line in by_rank.values())
                 for (size, _), by_rank in sorted(run.iterations.items())
                 if size == size_mb and len(by_rank) == workers]
        floor = floors(workers, size_mb, args.bw)
        median = statistics.median(times) if times else None
        rows.append({
            "backend": backend, "workers": workers, "size_mb": size_mb,
            "seconds": median, "seconds_all": times,
            "goodput_mbit": size_mb * MB * 8 / median / 1e6 if median else None,
            "floor_switch_s": floor["switch"], "floor_pbox_s": floor["pbox"],
            "floor_ring_s": floor["gloo"], "floor_own_s": floor[_floor_key(backend)],
            "where": sorted({line.get("where", backend) for (size, _), by_rank
                             in run.iterations.items() if size == size_mb
                             for line in by_rank.values()}),
            "cpu_s_whole_backend": cpu,
            "cpu": _load_json(timed, windows.get(size_mb, [])),
            "complete": len(times) == args.repeat,
            "errors": sorted(set(run.errors.values())),
        })
    return rows


def bench_workers(workers: int, args: argparse.Namespace) -> list[dict]:
    rows: list[dict] = []
    config = RackConfig(workers=workers, bw=args.bw, loss=args.loss, run_name=f"bench-n{workers}",
                        p4=True, pcap=False)
    with Rack(config) as rack:
        pbox = rack.start_pbox(workers=args.pbox_workers)
        rack.start_controller(rack.controller_topology(job_slots=args.window))
        procs = {"switch": rack.switch.proc.pid, "pbox": pbox["pid"]}
        with CpuSampler(rack.process_roots()) as timed:
            for backend in args.backends:
                before = _cpu_seconds(procs)
                windows: dict[float, list[tuple[float, float]]] = {}  # size -> timed windows
                run = run_workers(rack, _worker_args(backend, workers, args, rack.controller_address),
                                  timeout=_run_timeout(workers, args), tag=f"-{backend}",
                                  on_iteration=_window_recorder(timed, windows))
                after = _cpu_seconds(procs)
                cpu = {name: round(after[name] - before[name], 2) for name in after}
                for row in _rows(backend, workers, run, args, cpu, timed, windows):
                    rows.append(row)
                    _print_row(row)
    return rows


def _window_recorder(timed: CpuSampler, windows: dict[float, list[tuple[float, float]]]):
    """on_iteration: every rank reported this all-reduce, so it ended now (mark /proc while
    the workers live); it began the slowest rank's seconds ago."""
    def record(key: tuple, by_rank: dict[int, dict]) -> None:
        end = timed.mark()
        seconds = max(line["seconds"] for line in by_rank.values())
        windows.setdefault(key[0], []).append((end - seconds, end))
    return record


def _load_json(timed: CpuSampler, windows: list[tuple[float, float]]) -> dict | None:
    load = timed.load(windows)
    return load.to_json() if load is not None else None


def _cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """User + system CPU of each process and its children (the PBox forks its workers)."""
    out = {}
    for name, pid in pids.items():
        try:
            proc = psutil.Process(pid)
            total = 0.0
            for p in [proc, *proc.children(recursive=True)]:
                times = p.cpu_times()
                total += times.user + times.system
            out[name] = total
        except psutil.NoSuchProcess:
            out[name] = float("nan")
    machine = psutil.cpu_times()
    out["machine_busy"] = sum(machine) - machine.idle - getattr(machine, "iowait", 0.0)
    out["wall"] = time.monotonic()
    return out


def _print_row(row: dict) -> None:
    if row["seconds"] is None:
        print(f"{row['backend']:>5} N={row['workers']} {row['size_mb']:>5g} MB   FAILED "
              f"{'; '.join(row['errors'])[:200]}", flush=True)
        return
    print(f"{row['backend']:>6} N={row['workers']} {row['size_mb']:>5g} MB "
          f"{row['seconds']:>8.3f} s {row['goodput_mbit']:>7.1f} Mbit/s   floor: own "
          f"{row['floor_own_s']:.3f} s (x{row['seconds'] / row['floor_own_s']:.1f}); switch "
          f"{row['floor_switch_s']:.3f} s, single PBox {row['floor_pbox_s']:.3f} s, ring "
          f"{row['floor_ring_s']:.3f} s; {column(row['cpu'])}", flush=True)


def plot(rows: list[dict], path: Path, bw: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    counts = sorted({r["workers"] for r in rows})
    fig, axes = plt.subplots(1, len(counts), figsize=(5 * len(counts), 4), squeeze=False)
    for ax, n in zip(axes[0], counts, strict=True):
        for backend, style in (("switch", "^-"), ("switch256", "v-"), ("pbox", "o-"),
                               ("pbox256", "d-"), ("gloo", "s-")):
            pts = [(r["size_mb"], r["seconds"]) for r in rows
                   if r["workers"] == n and r["backend"] == backend and r["seconds"]]
            if pts:
                ax.plot(*zip(*pts, strict=True), style, label=f"{backend} measured")
        sizes = sorted({r["size_mb"] for r in rows if r["workers"] == n})
        # markers too, so a floor still shows when the run has a single size
        # in the colour of the backend it bounds (C0 switch, C1 PBox, C2 Gloo, as above)
        for key, style, colour, label in (("switch", "_-.", "C0", "switch floor"),
                                          ("pbox", "_--", "C1", "single-PBox floor"),
                                          ("gloo", "_:", "C2", "ring floor")):
            ax.plot(sizes, [floors(n, s, bw)[key] for s in sizes], style, color=colour,
                    markersize=14, label=label)
        ax.set(xscale="log", yscale="log", xlabel="tensor size (MB)", ylabel="all-reduce time (s)",
               title=f"N = {n}, {bw:g} Mbit/s links")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(ScalarFormatter())
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    def numbers(cast):
        return lambda text: [cast(x) for x in text.split(",")]

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 2, 4, 8; 0.5 MB; 2 repeats")
    parser.add_argument("--workers", type=numbers(int), default=None)
    parser.add_argument("--sizes-mb", type=numbers(float), default=None)
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--bw", type=float, default=5.0,
                        help="link bandwidth, Mbit/s (5: link-limited for the Python switch)")
    parser.add_argument("--loss", type=float, default=0.0, help="percent, every link")
    parser.add_argument("--backends", type=lambda s: s.split(","),
                        default=["switch", "switch256", "pbox", "pbox256", "gloo"],
                        help=f"of {', '.join([*INC_BACKENDS, 'gloo'])}")
    parser.add_argument("--window", type=int, default=32,
                        help="slots per job = the agents' window")
    parser.add_argument("--pbox-workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "allreduce.json")
    args = parser.parse_args(argv)
    quick = {"workers": [2, 4, 8], "sizes_mb": [0.5], "repeat": 2}
    full = {"workers": [2, 4, 8], "sizes_mb": [0.5, 2.0], "repeat": 1}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    unknown = set(args.backends) - {*INC_BACKENDS, "gloo"}
    if unknown:
        parser.error(f"unknown backends {sorted(unknown)}")
    if "gloo" in args.backends and not _have_torch():
        print("warning: torch is not installed (make torch): skipping the Gloo comparison",
              file=sys.stderr)
        args.backends = [b for b in args.backends if b != "gloo"]
    return args


def _have_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("bench.allreduce needs root (Mininet)", file=sys.stderr)
        return 2
    exit_on_sigterm()
    started = time.time()
    rows: list[dict] = []
    try:
        for workers in args.workers:
            rows += bench_workers(workers, args)
    except RackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "allreduce",
        "config": {"workers": args.workers, "sizes_mb": args.sizes_mb, "repeat": args.repeat,
                   "bw_mbit": args.bw, "loss_percent": args.loss, "backends": args.backends,
                   "pbox_workers": args.pbox_workers, "agent_window": args.window,
                   "switch": "p4lite-switch or simple_switch_grpc, p4src/aggregate.p4, no pcaps"},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "kernel": platform.release()},
        "seconds_total": time.time() - started,
        "results": rows,
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    plot(rows, args.out.with_suffix(".png"), args.bw)
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0 if all(r["complete"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
