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
``cpu`` column over its timed all-reduces (experiments/cpuload.py): ``CPU-bound (...)``
when the machine's cores, not the links, were the limit, else ``link-bound (...)``.

    .venv/bin/python -m bench.allreduce [--quick] [--workers 2,4,8] [--sizes-mb 0.5,2]
                                        [--bw 5] [--repeat 2] [--loss 0]
                                        [--backends switch,switch256,pbox,pbox256,gloo]

Needs root (Mininet) and, for Gloo, torch (``make torch``). Writes
bench/results/allreduce.json and bench/results/allreduce.png.

Loss sweep: ``--loss 1,5,10`` (percent, on every link in both directions,
topologies/linkem.py) runs each worker count on a fresh rack at each rate and at 0 %
(added when not listed), by default with the switch path (256 lanes) and Gloo only, and
reports each row against the same backend's lossless time (``x_lossless``) with the
agents' resends per packet sent (timeouts and early resends, docs/notes/host-agent.md
§5; Gloo's TCP retransmissions are not counted). Writes bench/results/allreduce_loss.json
and .png (time and x lossless against the loss rate).

    .venv/bin/python -m bench.allreduce --workers 4 --sizes-mb 2 --repeat 3 --loss 1,5,10
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import psutil

from bench._common import comma_list, mininet_ready
from p4hub.experiments.cpuload import CpuSampler, column
from p4hub.experiments.launch import WorkerRun, run_workers
from p4hub.experiments.progress import track
from p4hub.topologies.linkem import LinkEmulationError, check_loss
from p4hub.topologies.rack import AGENT_PORT, Rack, RackConfig, RackError, worker_ip

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


ALL_BACKENDS = ("switch", "switch256", "pbox", "pbox256", "gloo")
LOSS_SWEEP_BACKENDS = ("switch256", "gloo")  # what make run --loss compares


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


def resend_figures(agent_stats: dict[int, dict]) -> dict[str, float | None]:
    """Resends per packet sent, summed over the ranks' agents (their whole run: every
    size and repetition, and the barriers' one-element all-reduces)."""
    sent = sum(s.get("sent", 0) for s in agent_stats.values())
    if not sent:
        return {"resends_per_packet": None, "early_resends_per_packet": None}
    return {
        "resends_per_packet": sum(s.get("retransmitted", 0) for s in agent_stats.values()) / sent,
        "early_resends_per_packet": sum(s.get("early_resends", 0) for s in agent_stats.values())
        / sent,
    }


def _rows(backend: str, workers: int, run: WorkerRun, args: argparse.Namespace,
          cpu: dict[str, float], timed: CpuSampler,
          windows: dict[float, list[tuple[float, float]]], loss: float = 0.0) -> list[dict]:
    rows = []
    resends = resend_figures(run.agent_stats)
    for size_mb in args.sizes_mb:
        times = [max(line["seconds"] for line in by_rank.values())
                 for (size, _), by_rank in sorted(run.iterations.items())
                 if size == size_mb and len(by_rank) == workers]
        floor = floors(workers, size_mb, args.bw)
        median = statistics.median(times) if times else None
        rows.append({
            "backend": backend, "workers": workers, "size_mb": size_mb, "loss_percent": loss,
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
            **resends,
        })
    return rows


def bench_workers(workers: int, args: argparse.Namespace, loss: float = 0.0) -> list[dict]:
    rows: list[dict] = []
    name = f"bench-n{workers}" + (f"-loss{loss:g}" if loss else "")
    config = RackConfig(workers=workers, bw=args.bw, loss=loss, run_name=name, p4=True,
                        pcap=False)
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
                for row in _rows(backend, workers, run, args, cpu, timed, windows, loss):
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
    loss = f" loss {row['loss_percent']:g}%" if row.get("loss_percent") else ""
    if row["seconds"] is None:
        print(f"{row['backend']:>5} N={row['workers']} {row['size_mb']:>5g} MB{loss}   FAILED "
              f"{'; '.join(row['errors'])[:200]}", flush=True)
        return
    print(f"{row['backend']:>6} N={row['workers']} {row['size_mb']:>5g} MB{loss} "
          f"{row['seconds']:>8.3f} s {row['goodput_mbit']:>7.1f} Mbit/s   floor: own "
          f"{row['floor_own_s']:.3f} s (x{row['seconds'] / row['floor_own_s']:.1f}); switch "
          f"{row['floor_switch_s']:.3f} s, single PBox {row['floor_pbox_s']:.3f} s, ring "
          f"{row['floor_ring_s']:.3f} s; {column(row['cpu'])}", flush=True)


def add_loss_ratios(rows: list[dict]) -> None:
    """Give every row ``x_lossless``: its time over the same backend's, worker count's and
    size's time at 0 % loss (None where either is missing)."""
    lossless = {(r["backend"], r["workers"], r["size_mb"]): r["seconds"] for r in rows
                if not r.get("loss_percent")}
    for r in rows:
        base = lossless.get((r["backend"], r["workers"], r["size_mb"]))
        r["x_lossless"] = r["seconds"] / base if r["seconds"] and base else None


def loss_table(rows: list[dict]) -> list[str]:
    """The sweep's summary, one line per row: time, x lossless, resends per packet."""
    def num(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    lines = [f"{'backend':>9} {'N':>3} {'MB':>5} {'loss %':>6} {'time s':>8} {'x lossless':>10} "
             f"{'resends/pkt':>11} {'early/pkt':>9}"]
    for r in sorted(rows, key=lambda r: (r["workers"], r["size_mb"], r["backend"],
                                         r.get("loss_percent", 0.0))):
        lines.append(f"{r['backend']:>9} {r['workers']:>3} {r['size_mb']:>5g} "
                     f"{r.get('loss_percent', 0.0):>6g} {num(r['seconds'], '.3f'):>8} "
                     f"{num(r.get('x_lossless'), '.2f'):>10} "
                     f"{num(r.get('resends_per_packet'), '.3f'):>11} "
                     f"{num(r.get('early_resends_per_packet'), '.3f'):>9}")
    return lines


def plot_loss(rows: list[dict], path: Path, bw: float) -> None:
    """Time and x lossless against the loss rate, one line per backend, worker count and size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_time, ax_ratio) = plt.subplots(1, 2, figsize=(10, 4))
    for key in sorted({(r["backend"], r["workers"], r["size_mb"]) for r in rows}):
        pts = sorted((r.get("loss_percent", 0.0), r["seconds"], r.get("x_lossless"))
                     for r in rows if (r["backend"], r["workers"], r["size_mb"]) == key
                     and r["seconds"])
        if not pts:
            continue
        label = f"{key[0]} N={key[1]} {key[2]:g} MB"
        ax_time.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
        ratio = [(p[0], p[2]) for p in pts if p[2] is not None]
        if ratio:
            ax_ratio.plot(*zip(*ratio, strict=True), "o-", label=label)
    ax_ratio.axhline(2.0, color="grey", linestyle=":", label="2x lossless")
    ax_time.set(xlabel="loss on every link, each direction (%)", ylabel="all-reduce time (s)",
                title=f"{bw:g} Mbit/s links")
    ax_ratio.set(xlabel="loss on every link, each direction (%)", ylabel="x own lossless time",
                 title="slowdown from loss")
    for ax in (ax_time, ax_ratio):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 2, 4, 8; 0.5 MB; 2 repeats")
    parser.add_argument("--workers", type=comma_list(int), default=None)
    parser.add_argument("--sizes-mb", type=comma_list(float), default=None)
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--bw", type=float, default=5.0,
                        help="link bandwidth, Mbit/s (5: link-limited for the Python switch)")
    parser.add_argument("--loss", type=comma_list(float), default=[0.0],
                        help="percent, every link, both directions; several (1,5,10) sweep "
                             "them against 0 (see above)")
    parser.add_argument("--backends", type=comma_list(str), default=None,
                        help=f"of {', '.join([*INC_BACKENDS, 'gloo'])} (default: all; "
                             f"{','.join(LOSS_SWEEP_BACKENDS)} for a loss sweep)")
    parser.add_argument("--window", type=int, default=32,
                        help="slots per job = the agents' window")
    parser.add_argument("--pbox-workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON report (default bench/results/allreduce.json, "
                             "allreduce_loss.json for a loss sweep); the plot goes beside it")
    args = parser.parse_args(argv)
    try:
        for loss in args.loss:
            check_loss(loss)
    except LinkEmulationError as exc:
        parser.error(str(exc))
    args.sweep = any(args.loss)
    if args.sweep:  # every rate is held against the lossless time, measured first
        args.loss = sorted({0.0, *args.loss})
    if args.backends is None:
        args.backends = list(LOSS_SWEEP_BACKENDS if args.sweep else ALL_BACKENDS)
    if args.out is None:
        args.out = RESULTS / ("allreduce_loss.json" if args.sweep else "allreduce.json")
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
    if not mininet_ready("allreduce"):
        return 2
    started = time.time()
    rows: list[dict] = []
    try:
        for workers, loss in track(list(itertools.product(args.workers, args.loss)),
                                   "all-reduce racks"):
            rows += bench_workers(workers, args, loss)
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
    if args.sweep:
        add_loss_ratios(rows)
        print("\n" + "\n".join(loss_table(rows)))
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    (plot_loss if args.sweep else plot)(rows, args.out.with_suffix(".png"), args.bw)
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0 if all(r["complete"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
