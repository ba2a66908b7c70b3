"""P3 vs FIFO on simulated links, explicit clock: the replay's communication, with ranks
that fall behind now and then.

The rack's bench (bench/priority.py) runs on a shared 2-core machine, where a rank's
emulated backward pass is sometimes late by tens of milliseconds or more (a process
not scheduled). This replays the same iteration (its ResNet-50 or VGG-19 profile, the
same scales, 4 workers, 32 classes of 16 slots and a credit of 32 for P3, a window of
32 for FIFO, 256-lane packets, 5 Mbit/s switch path: bench/_bottleneck.py with 1:1
drop-tail links) on simulated links, and makes the lateness a knob: at every layer of
its backward pass, each rank is late by 50-150 ms with probability ``--hiccup``. The
iteration ends when the slowest rank's forward pass (which waits per layer for its
slices, as workers/replay.py) ends. Nothing here reads a clock.

    .venv/bin/python -m bench.priority_sim [--models resnet50] [--hiccup 0,0.03,0.1]
                                           [--seeds 3] [--loss 0]

Writes bench/results/priority_sim.json and .png (iteration time against --hiccup).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench._bottleneck import Bottleneck, BottleneckNet
from bench._common import comma_list
from p4hub.hosts import p3
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.session import Session
from p4hub.workers import replay, workload

RESULTS = Path(__file__).resolve().parent / "results"
PARAM_SCALES = {"resnet50": 0.01, "vgg19": 0.002, "bert_base": 0.0025}  # bench/priority.py's
WORKERS, CLASSES, CLASS_WINDOW, CREDIT, LANES, SLICE = 4, 32, 16, 32, 256, 4096


class ReplayNet(BottleneckNet):
    """BottleneckNet with control events: ``at(t, rank, call)`` runs ``call(now)``."""

    def at(self, t: float, rank: int, call: Any) -> None:
        self._push(t, "call", rank, call)

    def _deliver(self, kind: str, r: int, data: Any) -> None:
        if kind == "call":
            data(self.now)
            self._pump(r)
        else:
            super()._deliver(kind, r, data)


def run(model: str, mode: str, hiccup: float, seed: int, loss: float, bw: float,
        congestion: bool = True, scale: float | None = None) -> dict:
    """One iteration of ``mode`` (fifo or p3): its seconds and the agents' counters.
    ``scale``: of the model's parameters (default the bench's; the compute follows, so
    the balance point stays at 5 Mbit/s)."""
    profile = json.loads(workload.model_path(model).read_text())
    scale = PARAM_SCALES[model] if scale is None else scale
    compute = (profile["fwd_ms_total"] + profile["bwd_ms_total"]) / 1e3
    time_scale = 32 * profile["total_params"] * scale / (5e6 * compute)  # balance at 5 Mbit/s
    layers = replay.load_layers(workload.model_path(model), time_scale, scale)
    sizes = [layer.params for layer in layers]
    classes, window = (CLASSES, CLASS_WINDOW) if mode == "p3" else (1, CREDIT)
    plan = p3.p3_plan(sizes, SLICE, LANES) if mode == "p3" else p3.fifo_plan(sizes)
    slots = classes * window
    sessions = [Session(7, r, WORKERS, 0, slots, window, classes=classes, credit=CREDIT,
                        lanes=LANES, deadline=120.0, congestion=congestion)
                for r in range(WORKERS)]
    agg = Aggregator()
    agg.add_job(7, WORKERS, 0, slots, LANES)
    tx = sessions[0].packet_len * 8 / (bw * 1e6)  # seconds per datagram on every link
    net = ReplayNet(sessions, agg, Bottleneck(tx=tx, shared=False, loss=loss, seed=seed))
    rng = random.Random(seed)
    for r in range(WORKERS):
        t = rng.uniform(0.0, 0.002)  # after the barrier
        for layer in reversed(range(len(layers))):
            t += layers[layer].bwd_s * rng.uniform(0.98, 1.02) + rng.uniform(0.0, 0.005)
            if rng.random() < hiccup:
                t += rng.uniform(0.05, 0.15)
            for s in plan[layer]:
                net.at(t, r, lambda now, r=r, s=s: sessions[r].start(
                    (s.layer, s.index), np.ones(s.size, np.float32), now, priority=s.priority,
                    stream=p3.layer_class(s.layer, len(layers), classes)))
    total = WORKERS * sum(len(p) for p in plan)
    net.run(600.0, completions=total)
    done = {(r, tid): at for at, r, tid in net.tally.completions}
    ok = len(done) == total and not net.failures()
    seconds = 0.0
    for r in range(WORKERS):
        clock = sum(layer.bwd_s for layer in layers)
        for layer in range(len(layers)):
            clock = max(clock, *(done.get((r, (s.layer, s.index)), np.inf) for s in plan[layer]))
            clock += layers[layer].fwd_s
        seconds = max(seconds, clock)
    count = {k: sum(getattr(s.stats, k) for s in sessions)
             for k in ("sent", "retransmitted", "early_resends", "cwnd_cuts")}
    return {"model": model, "mode": mode, "hiccup": hiccup, "seed": seed, "loss": loss,
            "seconds": seconds, "complete": ok, **count}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=comma_list(str), default=["resnet50"])
    parser.add_argument("--hiccup", type=comma_list(float), default=[0.0, 0.03, 0.1])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--loss", type=float, default=0.0)
    parser.add_argument("--bw", type=float, default=5.0)
    parser.add_argument("--no-congestion", action="store_true",
                        help="the sessions without their congestion windows")
    parser.add_argument("--out", type=Path, default=RESULTS / "priority_sim.json")
    args = parser.parse_args(argv)
    rows = []
    for model in args.models:
        for hiccup in args.hiccup:
            for mode in ("fifo", "p3"):
                for seed in range(args.seeds):
                    row = run(model, mode, hiccup, seed, args.loss, args.bw,
                              not args.no_congestion)
                    rows.append(row)
                    print(f"{model:>9} {mode:>4} hiccup {hiccup:<5g} seed {seed}: "
                          f"{row['seconds']:.2f} s, resent {row['retransmitted']}/{row['sent']},"
                          f" cwnd cuts {row['cwnd_cuts']}{'' if row['complete'] else ' INCOMPLETE'}",
                          flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "priority_sim", "config": {
        k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "results": rows}, indent=1) + "\n")
    _plot(rows, args.out.with_suffix(".png"))
    return 0 if all(r["complete"] for r in rows) else 1


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    keys = sorted({(r["model"], r["mode"]) for r in rows})
    for i, (model, mode) in enumerate(keys):
        mine = [r for r in rows if (r["model"], r["mode"]) == (model, mode)]
        xs = sorted({r["hiccup"] for r in mine})
        med = [statistics.median(r["seconds"] for r in mine if r["hiccup"] == x) for x in xs]
        worst = [max(r["seconds"] for r in mine if r["hiccup"] == x) for x in xs]
        ax.plot(xs, med, "o-", color=f"C{i}", label=f"{model} {mode} (median)")
        ax.plot(xs, worst, "v:", color=f"C{i}", label=f"{model} {mode} (slowest)")
    ax.set(xlabel="probability a rank is late 50-150 ms at a layer",
           ylabel="iteration (simulated s)", title="P3 vs FIFO, simulated 5 Mbit/s switch path")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
