"""Priority propagation (P3) vs FIFO: replayed training iterations on the switch path.

One rack (N workers, the P4 switch running p4src/aggregate.p4 with priority queues, the
controller; links shaped to each bandwidth of the sweep) replays training iterations of
a model profile (workers/replay.py): compute emulated by sleeping, gradients really
all-reduced through the switch, the next forward pass overlapped layer by layer.

* ``fifo``: one whole-tensor all-reduce per layer in backward order, one stream (what a
  framework without a scheduler does; DDP-like but without bucket fusion);
* ``p3``: every layer cut into slices of whole blocks, priority by the layer's distance
  from the input (hosts/p3.py), the agent's priority classes (urgent slices overtake
  queued packets), switch priority queues.

Both keep the same number of packets in flight (``--credit``: FIFO's window, the
credit P3's classes share; each class has ``--class-window`` slots of its own, by
default as many as the credit). The compute time is scaled so that compute equals the switch path's
communication floor (model bytes / bandwidth) at the middle bandwidth of the sweep (the
*balance point*); the sweep goes below and above it. Each row gives iterations per
second (from the mean iteration time of the slowest rank over the timed iterations,
the first one discarded as warm-up) with a 95% t-interval, P3's gain over FIFO, the
spread of the iterations (slowest over median: a stall shows there, not in the mean's
interval) and the agents' counters (resends, duplicates, congestion-window cuts), summed
over the ranks, per iteration.

``--runs 2`` measures every row twice, interleaved (FIFO, P3, FIFO, P3 on the same rack)
and says whether the runs agree: their intervals overlap. ``--busy 1`` keeps one busy
process spinning beside the emulation (the machine shared with other work).

    sudo .venv/bin/python -m bench.priority [--models resnet50,vgg19] [--bw 2.5,5,10]
                                            [--balance 5]
                                            [--iterations 12] [--workers 4] [--runs 2]
                                            [--busy 1]

Writes bench/results/priority.json, bench/results/priority.png (gain vs bandwidth) and
bench/results/priority_timeline_<model>.png (one iteration at the balance point, FIFO
and P3: when each layer's slices were ready and came back, and when its forward began).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench._common import comma_list, mininet_ready
from p4hub.experiments.cpuload import CpuSampler, column
from p4hub.experiments.launch import WorkerRun, run_workers
from p4hub.experiments.progress import track
from p4hub.hosts.wire import LANE_COUNTS, MAX_LANES
from p4hub.topologies.rack import AGENT_PORT, Rack, RackConfig, RackError, worker_ip
from p4hub.workers import workload

RESULTS = Path(__file__).resolve().parent / "results"
# parameter scale per model: about 1 MB of float32 gradients, so an iteration takes
# seconds, not minutes, on 5 Mbit/s links
PARAM_SCALES = {"resnet50": 0.01, "vgg19": 0.002, "bert_base": 0.0025}
T_95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
        10: 2.23, 11: 2.20, 12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13, 16: 2.12, 17: 2.11,
        18: 2.10, 19: 2.09}
COUNTERS = ("sent", "retransmitted", "early_resends", "duplicates", "cwnd_cuts")


def model_profile(name: str) -> dict:
    return json.loads(workload.model_path(name).read_text())


def time_scale_for_balance(profile: dict, param_scale: float, bw_mbit: float) -> float:
    """The compute-time factor that makes compute (forward + backward) equal the switch
    path's floor for the model's gradients at ``bw_mbit``."""
    comm = 32 * profile["total_params"] * param_scale / (bw_mbit * 1e6)
    compute = (profile["fwd_ms_total"] + profile["bwd_ms_total"]) / 1e3
    return comm / compute


def interval(seconds: list[float]) -> tuple[float, float, float]:
    """Iterations per second: (rate from the mean time, low, high) of a 95% t-interval."""
    mean = statistics.fmean(seconds)
    if len(seconds) < 2:
        return 1 / mean, 1 / mean, 1 / mean
    half = T_95.get(len(seconds) - 1, 1.96) * statistics.stdev(seconds) / len(seconds) ** 0.5
    return 1 / mean, 1 / (mean + half), 1 / max(mean - half, 1e-9)


def spread(seconds: list[float]) -> dict:
    """The iterations' median, slowest, and slowest over median."""
    median = statistics.median(seconds)
    return {"median_s": median, "max_s": max(seconds), "max_over_median": max(seconds) / median}


def overlap(intervals: list[list[float]]) -> bool:
    """Whether the intervals ([low, high] each) share a point: the runs agree."""
    return max(lo for lo, _ in intervals) <= min(hi for _, hi in intervals)


def iteration_counters(run: WorkerRun) -> list[dict]:
    """Per iteration, the agents' counters summed over the ranks (each iteration's line
    carries its rank's cumulative counters: the differences)."""
    out, before = [], dict.fromkeys(COUNTERS, 0)
    for _, by_rank in sorted(run.iterations.items()):
        stats = [line.get("agent_stats") or {} for line in by_rank.values()]
        now = {k: sum(st.get(k, 0) for st in stats) for k in COUNTERS}
        out.append({k: now[k] - before[k] for k in COUNTERS})
        before = now
    return out


def _worker_args(mode: str, model: str, args: argparse.Namespace, controller: str,
                 time_scale: float, timeline: Path):
    def build(rank: int) -> list[str]:
        classes = args.classes if mode == "p3" else 1
        window = args.class_window if mode == "p3" else args.credit
        return ["--backend", "job", "--controller", controller, "--job-name", f"p3-{mode}",
                "--placement", args.placement,
                "--lanes", str(args.lanes), "--data-ip", worker_ip(rank),
                "--agent-port", str(AGENT_PORT), "--rank", str(rank), "--world", str(args.workers),
                "--replay", mode, "--model", model, "--scale", str(PARAM_SCALES[model]),
                "--time-scale", f"{time_scale:.6f}", "--iterations", str(args.iterations + 1),
                "--classes", str(classes), "--window", str(window),
                "--credit", str(args.credit), "--slice-params", str(args.slice_params),
                "--timeout", "120", "--timeline", str(timeline)]
    return build


def _row(mode: str, model: str, bw: float, run: WorkerRun, args: argparse.Namespace,
         time_scale: float, cpu: dict | None, run_index: int = 0) -> dict:
    times, digests = [], set()
    for (_, it), by_rank in sorted(run.iterations.items()):
        if len(by_rank) == args.workers:
            digests |= {line["digest"] for line in by_rank.values()}
            if it > 0:  # the first iteration warms up
                times.append(max(line["seconds"] for line in by_rank.values()))
    rate = interval(times) if times else None
    profile = model_profile(model)
    counters = iteration_counters(run)
    timed = counters[1:]
    return {
        "run": run_index, **(spread(times) if times else {}),
        "counters_per_iteration": counters,
        "counters": {k: sum(c[k] for c in timed) for k in COUNTERS},
        "model": model, "mode": mode, "bw_mbit": bw, "workers": args.workers,
        "where": sorted({line.get("where", "?") for by_rank in run.iterations.values()
                         for line in by_rank.values()}),
        "iterations_per_s": rate[0] if rate else None,
        "ci95": [rate[1], rate[2]] if rate else None,
        "seconds_all": times,
        "compute_s": (profile["fwd_ms_total"] + profile["bwd_ms_total"]) * time_scale / 1e3,
        "floor_comm_s": 32 * profile["total_params"] * PARAM_SCALES[model] / (bw * 1e6),
        "time_scale": time_scale, "ranks_agree": len(digests) <= 1 and bool(times),
        "cpu": cpu, "complete": len(times) == args.iterations and not run.errors,
        "errors": sorted(set(run.errors.values())),
    }


def bench_bandwidth(bw: float, args: argparse.Namespace, scales: dict[str, float]) -> list[dict]:
    rows = []
    config = RackConfig(workers=args.workers, bw=bw, run_name=f"bench-p3-{bw:g}", p4=True,
                        pcap=False)
    with Rack(config) as rack:
        rack.start_pbox()
        job_slots = max(args.credit, args.class_window * args.classes)
        rack.start_controller(rack.controller_topology(job_slots=job_slots))
        with CpuSampler(rack.process_roots()) as timed:
            for k in range(args.runs):  # the runs interleaved, FIFO and P3 in turn
                for model in args.models:
                    for mode in ("fifo", "p3"):
                        rows.append(_measure(rack, timed, model, mode, bw, args, scales, k))
    return rows


def _measure(rack: Rack, timed: CpuSampler, model: str, mode: str, bw: float,
             args: argparse.Namespace, scales: dict[str, float], k: int) -> dict:
    """One row: ``mode`` on ``model`` at ``bw``, run ``k``."""
    suffix = f"_run{k}" if k else ""
    timeline = RESULTS / f"priority_timeline_{model}_{mode}_{bw:g}{suffix}.json"
    windows: list[tuple[float, float]] = []
    run = run_workers(rack, _worker_args(mode, model, args, rack.controller_address,
                                         scales[model], timeline),
                      timeout=args.path_timeout, tag=f"-{model}-{mode}{suffix}",
                      on_iteration=_window_recorder(timed, windows))
    load = timed.load(windows)
    row = _row(mode, model, bw, run, args, scales[model], load.to_json() if load else None, k)
    row["cpu_column"] = column(row["cpu"])
    _print_row(row)
    return row


def _window_recorder(timed: CpuSampler, windows: list[tuple[float, float]]):
    """on_iteration: every rank reported the iteration, so it ended now; it began the
    slowest rank's seconds ago (the CPU column covers the timed iterations only)."""
    def record(_key: tuple, by_rank: dict[int, dict]) -> None:
        end = timed.mark()
        windows.append((end - max(line["seconds"] for line in by_rank.values()), end))
    return record


def _print_row(row: dict) -> None:
    if row["iterations_per_s"] is None:
        print(f"{row['model']:>9} {row['mode']:>4} {row['bw_mbit']:>5g} Mbit/s  FAILED "
              f"{'; '.join(row['errors'])[:200]}", flush=True)
        return
    lo, hi = row["ci95"]
    c = row["counters"]
    print(f"{row['model']:>9} {row['mode']:>4} {row['bw_mbit']:>5g} Mbit/s run {row['run']} "
          f"{row['iterations_per_s']:.3f} it/s [{lo:.3f}, {hi:.3f}]  median "
          f"{row['median_s']:.2f} s, max/median {row['max_over_median']:.2f}; compute "
          f"{row['compute_s']:.2f} s, comm floor {row['floor_comm_s']:.2f} s; resent "
          f"{c['retransmitted']}/{c['sent']}, cwnd cuts {c['cwnd_cuts']}; ranks agree: "
          f"{row['ranks_agree']}; {row['cpu_column']}", flush=True)


def gains(rows: list[dict]) -> list[dict]:
    out = []
    for p3 in (r for r in rows if r["mode"] == "p3" and r["iterations_per_s"]):
        fifo = next((r for r in rows if r["mode"] == "fifo" and r["model"] == p3["model"]
                     and r["bw_mbit"] == p3["bw_mbit"] and r["run"] == p3["run"]
                     and r["iterations_per_s"]), None)
        if fifo:
            out.append({"model": p3["model"], "bw_mbit": p3["bw_mbit"], "run": p3["run"],
                        "gain": p3["iterations_per_s"] / fifo["iterations_per_s"] - 1,
                        "gain_low": p3["ci95"][0] / fifo["ci95"][1] - 1,
                        "gain_high": p3["ci95"][1] / fifo["ci95"][0] - 1})
    return out


def agreement(rows: list[dict], table: list[dict]) -> list[dict]:
    """Per model, bandwidth and mode (and P3's gain): do the runs' intervals overlap?"""
    out = []
    keys = sorted({(r["model"], r["bw_mbit"]) for r in rows})
    for model, bw in keys:
        for mode in ("fifo", "p3"):
            cis = [r["ci95"] for r in rows if (r["model"], r["bw_mbit"], r["mode"]) ==
                   (model, bw, mode) and r["ci95"]]
            if len(cis) > 1:
                out.append({"model": model, "bw_mbit": bw, "what": mode, "agree": overlap(cis)})
        cis = [[g["gain_low"], g["gain_high"]] for g in table
               if (g["model"], g["bw_mbit"]) == (model, bw)]
        if len(cis) > 1:
            out.append({"model": model, "bw_mbit": bw, "what": "gain", "agree": overlap(cis)})
    return out


def plot_gains(table: list[dict], path: Path, balance_bw: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    runs = sorted({g["run"] for g in table})
    for i, model in enumerate(sorted({g["model"] for g in table})):
        for k in runs:
            pts = sorted((g["bw_mbit"], g["gain"], g["gain_low"], g["gain_high"])
                         for g in table if g["model"] == model and g["run"] == k)
            if not pts:
                continue
            bw, gain, low, high = zip(*pts, strict=True)
            ax.errorbar([b * (1 + 0.03 * k) for b in bw], [100 * g for g in gain],
                        yerr=[[100 * (g - lo) for g, lo in zip(gain, low, strict=True)],
                              [100 * (hi - g) for g, hi in zip(gain, high, strict=True)]],
                        fmt="os^v"[k % 4] + "-", color=f"C{i}", capsize=3,
                        label=model if len(runs) == 1 else f"{model} run {k}")
    ax.axvline(balance_bw, color="grey", linestyle=":", label="balance point")
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set(xscale="log", xlabel="link bandwidth (Mbit/s)", ylabel="P3 gain over FIFO (%)",
           title="priority propagation on the switch path")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=comma_list(str), default=["resnet50", "vgg19"])
    parser.add_argument("--bw", type=comma_list(float), default=[2.5, 5.0, 10.0],
                        help="Mbit/s; the middle one is the balance point")
    parser.add_argument("--balance", type=float, default=None,
                        help="Mbit/s of the balance point (default: the middle of --bw)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=12, help="timed, after one warm-up")
    parser.add_argument("--runs", type=int, default=1,
                        help="measure every row this many times, interleaved (2: a rerun that"
                             " says whether the runs agree)")
    parser.add_argument("--busy", type=int, default=0,
                        help="busy processes spinning beside the emulation while it runs")
    parser.add_argument("--lanes", type=int, choices=LANE_COUNTS, default=MAX_LANES)
    parser.add_argument("--classes", type=int, default=32,
                        help="P3's agent classes (runs of layers, hosts/p3.py layer_class)")
    # a class may have the whole credit in flight: at the end of a backward pass the most
    # urgent class is alone, and a window below the credit slowed its tail (BERT-base at
    # 5 Mbit/s: -5.0% against FIFO with 16, +1.0% with 32; docs/notes/priority.md)
    parser.add_argument("--class-window", type=int, default=None,
                        help="P3: slots per class (default: the credit)")
    parser.add_argument("--credit", type=int, default=32,
                        help="packets in flight: FIFO's window, P3's credit over its classes")
    parser.add_argument("--slice-params", type=int, default=4096,
                        help="P3 slice size (P3's 40,000 scaled down with the model)")
    parser.add_argument("--placement", choices=("auto", "pbox"), default="auto",
                        help="auto: the switch aggregates; pbox: the PBox does")
    parser.add_argument("--path-timeout", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "priority.json")
    args = parser.parse_args(argv)
    if args.class_window is None:
        args.class_window = args.credit
    unknown = set(args.models) - set(PARAM_SCALES)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}: one of {sorted(PARAM_SCALES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not mininet_ready("priority"):
        return 2
    RESULTS.mkdir(parents=True, exist_ok=True)
    balance_bw = args.balance or sorted(args.bw)[len(args.bw) // 2]
    scales = {m: time_scale_for_balance(model_profile(m), PARAM_SCALES[m], balance_bw)
              for m in args.models}  # fmt: skip
    started = time.time()
    rows: list[dict] = []
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy)]
    try:
        for bw in track(args.bw, "priority bandwidths"):
            rows += bench_bandwidth(bw, args, scales)
    except RackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    table = gains(rows)
    for g in table:
        print(f"gain {g['model']:>9} {g['bw_mbit']:>5g} Mbit/s run {g['run']}: "
              f"{100 * g['gain']:+.1f}% [{100 * g['gain_low']:+.1f}%, {100 * g['gain_high']:+.1f}%]")
    agree = agreement(rows, table)
    for a in agree:
        print(f"runs {'agree' if a['agree'] else 'DISAGREE'}: {a['model']} {a['bw_mbit']:g} Mbit/s"
              f" {a['what']} (95% intervals {'' if a['agree'] else 'do not '}overlap)")
    report = {
        "benchmark": "priority",
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "balance_bw_mbit": balance_bw, "time_scales": scales, "param_scales": PARAM_SCALES,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "kernel": platform.release()},
        "seconds_total": time.time() - started, "results": rows, "gains": table,
        "runs_agree": agree,
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    if table:
        plot_gains(table, args.out.with_suffix(".png"), balance_bw)
    from p4hub.experiments.timeline_plot import plot_timelines

    for model in args.models:
        runs = {mode: RESULTS / f"priority_timeline_{model}_{mode}_{balance_bw:g}.json"
                for mode in ("fifo", "p3")}
        if all(p.exists() for p in runs.values()):
            plot_timelines(runs, RESULTS / f"priority_timeline_{model}.png")
    print(f"wrote {args.out} and its plots")
    return 0 if all(r["complete"] and r["ranks_agree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
