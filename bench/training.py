"""Training throughput: DDP+Gloo, DDP+p4hub hook and DDP over the p4hub backend, on the
same Mininet rack and links; or sharded training (FSDP2, ZeRO) over Gloo and p4hub.

For each link bandwidth and worker count, one rack (4 workers by default, the PBox host,
the P4 switch running p4src/aggregate.p4, p4hub-controller) trains DigitsNet
(workers/train; ``--hidden W`` adds a hidden layer of width W) over:

* ``gloo``: DDP over Gloo's ring (the reference);
* ``hook``: DDP over Gloo, buckets averaged by ``p4hub_hook`` (job on the switch);
* ``switch``: DDP over the p4hub backend, job on the switch;
* ``pbox``: DDP over the p4hub backend, job on the PBox.

Per path: seconds per step (median over the steps after ``--warmup``, each step the
slowest rank's), samples/s (workers x batch / that), x Gloo, and the CPU use over the
measured steps (experiments/cpuload.py, the rule ``make run`` uses too): a row is flagged
CPU-bound when the machine was busy for at least 0.9 of its cores or one process of
the emulation used 0.95 of a core: then the emulator (4 Python workers, a Python
switch and the PBox on 2 cores), not the link, set the pace, and the figure says
nothing about the design.

    .venv/bin/python -m bench.training [--bw 5,20] [--epochs 3] [--paths gloo,hook,switch,pbox]

With ``--schedule fsdp|zero`` every path trains sharded (``make run``'s option of the same
name; ``--scatter network`` puts the switch and PBox paths' reduce-scatters and
all-gathers in the network). FSDP's step time over p4hub against Gloo at 4 and 8 workers
(docs/notes/pytorch.md):

    .venv/bin/python -m bench.training --schedule fsdp --scatter network --hidden 256 \
        --workers 4,8 --bw 5 --paths gloo,switch --out bench/results/training_fsdp.json

Needs root (Mininet). Writes bench/results/training.json and training.png (or ``--out``).
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

from bench._common import mininet_ready
from p4hub.experiments import run as rack_run
from p4hub.experiments import train_plot, train_run
from p4hub.experiments.cpuload import MACHINE_BOUND, PROCESS_BOUND, CpuLoad, CpuSampler
from p4hub.experiments.progress import track
from p4hub.topologies.rack import Rack, RackError
from p4hub.workers.train.data import TRAIN_SIZE

RESULTS = Path(__file__).resolve().parent / "results"


class CpuWindow:
    """CPU use from the start of the first measured step to the moment every rank reported
    the last step (``cpu`` marks /proc then, while the workers still run)."""

    def __init__(self, first_step: int, last_step: int, world: int, cpu: CpuSampler) -> None:
        self.first_step, self.last_step, self.world = first_step, last_step, world
        self.cpu = cpu
        self.seen: dict[int, int] = {}
        self.start: float | None = None
        self.end: float | None = None

    def observe(self, _rank: int, line: dict) -> None:
        if line.get("event") != "step":
            return
        step = line["step"]
        self.seen[step] = self.seen.get(step, 0) + 1
        if step == self.first_step and self.start is None:
            self.start = self.cpu.clock() - line["seconds"]
        if step == self.last_step and self.seen[step] == self.world:
            self.end = self.cpu.mark()

    def load(self) -> CpuLoad | None:
        if self.start is None or self.end is None:
            return None
        return self.cpu.load([(self.start, self.end)])


def bench_bandwidth(bw: float, workers: int, args: argparse.Namespace) -> list[dict]:
    rack_args = rack_run.parse_args(["--bw", str(bw), "--epochs", str(args.epochs),
                                     "--no-pcap", "--paths", ",".join(args.paths),
                                     "--workers", str(workers), "--schedule", args.schedule,
                                     "--scatter", args.scatter, "--hidden", str(args.hidden)])
    steps = args.epochs * (TRAIN_SIZE // (rack_args.workers * rack_args.batch))
    if steps - 1 <= args.warmup:
        raise RackError(f"{workers} workers: {steps} steps leave none after --warmup {args.warmup}")
    rows = []
    with Rack(rack_run.rack_config(rack_args, run_name=f"bench-train-{bw:g}-{workers}")) as rack, \
            CpuSampler() as cpu:
        rack_run.start_services(rack, rack_args)
        for group, pid in rack.process_roots().items():
            cpu.watch(group, pid)
        results = {}
        for index, name in enumerate(args.paths):
            window = CpuWindow(args.warmup, steps - 1, rack_args.workers, cpu)
            result = train_run.run_path(rack, train_run.PATHS[name], index, rack_args,
                                        observe=window.observe)
            results[name] = result
            rows.append(_row(name, bw, result, window, rack_args, args))
        train_run.compare(results)
        gloo_result = results.get("gloo")
        for row in rows:
            result = results[row["path"]]
            row["ok"] = result.ok
            row["problems"] = result.problems
            row["losses"] = result.losses()
            row["step_seconds"] = result.step_seconds()
            row["max_loss_gap_to_gloo"] = (train_run.max_loss_gap(result, gloo_result)
                                           if gloo_result and result is not gloo_result else None)
        curves = args.out.with_name(f"{args.out.stem}-{bw:g}mbit-{workers}w-curves.png")
        train_plot.plot(results, curves, f"{args.schedule.upper()}, {workers} workers, "
                        f"{bw:g} Mbit/s: loss and time per step")
    gloo = next((r for r in rows if r["path"] == "gloo"), None)
    for row in rows:
        row["x_gloo"] = row["samples_per_s"] / gloo["samples_per_s"] if gloo else None
    return rows


def _row(name: str, bw: float, result: train_run.TrainResult, window: CpuWindow,
         rack_args: argparse.Namespace, args: argparse.Namespace) -> dict:
    measured = result.step_seconds()[args.warmup:]
    per_step = statistics.median(measured) if measured else float("nan")
    load = window.load()
    rows = result.epoch_rows()
    return {"path": name, "title": result.path.title, "bw_mbit": bw, "where": result.where(),
            "workers": rack_args.workers, "batch": rack_args.batch,
            "schedule": rack_args.schedule, "scatter": result.scatter,
            "hidden": rack_args.hidden,
            "steps_measured": len(measured), "seconds_per_step": per_step,
            "p90_seconds_per_step": _quantile(measured, 0.9),
            "samples_per_s": rack_args.workers * rack_args.batch / per_step,
            "cpu_busy_fraction": load.busy_cores / load.cores if load else float("nan"),
            "cpu_bound": load.cpu_bound if load else False,
            "cpu": load.to_json() if load else None,
            "final_test_accuracy": rows[-1]["test_accuracy"] if rows else None,
            "agent_stats": result.done.get(0, {}).get("stats")}


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def print_rows(rows: list[dict]) -> None:
    print(f"\n{'Mbit/s':>6} {'N':>3} {'path':<44} {'where':>6} {'s/step':>7} {'p90':>7} "
          f"{'samples/s':>9} {'x Gloo':>7} {'CPU busy':>8}  note")
    for r in rows:
        note = f"{r['cpu']['label']}: emulator-limited" if r["cpu_bound"] else ""
        if not r["ok"]:
            note = f"FAILED: {'; '.join(r['problems'])[:120]}"
        x = f"{r['x_gloo']:.2f}" if r["x_gloo"] else "-"
        print(f"{r['bw_mbit']:>6g} {r['workers']:>3} {r['title']:<44} {r['where']:>6} "
              f"{r['seconds_per_step']:>7.3f} {r['p90_seconds_per_step']:>7.3f} "
              f"{r['samples_per_s']:>9.0f} {x:>7} {r['cpu_busy_fraction']:>8.0%}  {note}")


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(r["bw_mbit"], r["workers"]) for r in rows})
    names = list(dict.fromkeys(r["path"] for r in rows))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [next((r["samples_per_s"] for r in rows
                        if r["path"] == name and (r["bw_mbit"], r["workers"]) == g), 0.0)
                  for g in groups]
        bound = [next((r["cpu_bound"] for r in rows
                       if r["path"] == name and (r["bw_mbit"], r["workers"]) == g), False)
                 for g in groups]
        xs = [j + i * width for j in range(len(groups))]
        bars = ax.bar(xs, values, width, label=name)
        for bar, is_bound in zip(bars, bound, strict=True):
            if is_bound:
                bar.set_hatch("//")
    ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(groups))],
                  [f"{bw:g} Mbit/s, {n} workers" for bw, n in groups])
    first = rows[0]
    net = f"DigitsNet, hidden {first['hidden']}" if first["hidden"] else "DigitsNet"
    ax.set(ylabel=f"samples/s ({net})",
           title=f"{first['schedule'].upper()} training throughput "
                 "(hatched: CPU-bound, emulator-limited)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bw", type=lambda s: [float(x) for x in s.split(",")],
                        default=[5.0, 20.0], help="link bandwidths, Mbit/s")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3, help="steps left out of the median")
    parser.add_argument("--paths", type=lambda s: s.split(","),
                        default=["gloo", "hook", "switch", "pbox"])
    parser.add_argument("--workers", type=lambda s: [int(x) for x in s.split(",")],
                        default=[4], help="worker counts, one rack each")
    parser.add_argument("--schedule", choices=("ddp", "fsdp", "zero"), default="ddp")
    parser.add_argument("--scatter", choices=("allreduce", "network"), default="allreduce")
    parser.add_argument("--hidden", type=int, default=0, help="DigitsNet's hidden width")
    parser.add_argument("--out", type=Path, default=RESULTS / "training.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not mininet_ready("training"):
        return 2
    started = time.time()
    args.out.parent.mkdir(parents=True, exist_ok=True)  # each configuration's curves go there
    rows: list[dict] = []
    try:
        for bw, workers in track([(bw, n) for bw in args.bw for n in args.workers],
                                 "training bandwidths and worker counts"):
            rows += bench_bandwidth(bw, workers, args)
    except RackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_rows(rows)
    report = {"benchmark": "training", "config": {k: str(v) if isinstance(v, Path) else v
                                                  for k, v in vars(args).items()},
              "cpu_bound_thresholds": {"machine_fraction": MACHINE_BOUND,
                                       "process_cores": PROCESS_BOUND},
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "kernel": platform.release()},
              "seconds_total": time.time() - started, "results": rows}
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    plot(rows, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
