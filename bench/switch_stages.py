"""Per-packet cost of each stage of p4lite's switch core on aggregate.p4 contributions,
three ways, interleaved: lane views with the C kernel for their register runs
(``native``: p4lite/switch/core/vecops.py), lane views with the numpy form (``views``:
p4lite/switch/core/laneviews.py), every lane a field slot (``fields``).

The switch is bench/switch_core.py's AggRack (the controller's own entries, one job of
N workers, realistic CONTRIB frames whose results are checked against the PBox core
first). Each stage is timed by a wrapper put into the switch's generated namespace:
``parse``, the ingress pipeline (every node from the init table on), the egress
pipeline, ``deparse`` (once per result packet: a completing contribution multicasts N);
``other`` is the rest of ``process()`` (receive/egress life-cycle glue, the packet
objects, the multicast replication). Per contribution, i.e. including 1/N of a
cell's N result packets. The wrappers cost ~0.1-0.2 us each (in every column alike).
``total`` is wall-clock time; ``cpu`` the process CPU time of the same loop (no
wrapper cost of its own), the steadier figure when other jobs share the machine.
Receive and send (the AF_PACKET system calls) are outside the core: see
bench/switch_core.py's process part and docs/notes/switch-process.md.

Usage: ``python -m bench.switch_stages [--lanes 256] [--n 4] [--rounds 6] [--cycles 4]``
Results: bench/results/switch_stages.json. Without the built extension (or with
P4LITE_NO_NATIVE=1) the ``native`` column is the numpy form again: the bench says so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import bench.switch_core as core
from bench.switch_core import AggRack, check_cycle
from p4lite.switch.core import vecops

RESULTS = Path(__file__).resolve().parent / "results" / "switch_stages.json"
STAGES = ("parse", "ingress", "egress", "deparse")
VARIANTS = {"native": {"lane_views": True, "native": True},
            "views": {"lane_views": True, "native": False},
            "fields": {"lane_views": False, "native": False}}


class Stages:
    """Timing wrappers in one switch's generated namespace; ``totals`` in ns."""

    def __init__(self, sw) -> None:
        self.totals = dict.fromkeys(STAGES, 0)
        rt = sw.runtime
        ns = rt._ns
        for name in ("parse", "deparse"):
            ns[name] = self._timed(ns[name], name)
        rt._ingress_init = self._pipeline(rt._ingress_init, "ingress")
        rt._egress_init = self._pipeline(rt._egress_init, "egress")

    def _timed(self, fn: Callable, stage: str) -> Callable:
        clock, totals = time.perf_counter_ns, self.totals

        def timed(*args):
            t0 = clock()
            try:
                return fn(*args)
            finally:
                totals[stage] += clock() - t0
        return timed

    def _pipeline(self, init: Callable | None, stage: str) -> Callable | None:
        if init is None:
            return None
        clock, totals = time.perf_counter_ns, self.totals

        def whole(F, P):  # the whole pipeline in one call: the loop then ends at once
            t0 = clock()
            node = init
            try:
                while node is not None:
                    node = node(F, P)
            finally:
                totals[stage] += clock() - t0
        return whole


def measure(agg: AggRack, n: int, variant: str, cycles: int, start: int) -> dict:
    options = VARIANTS[variant]
    core.SWITCH_OPTIONS.update(options)
    sw = agg.switch()
    job = agg.jobs[n]
    assert check_cycle(sw, job, 0) == len(job.frames)  # results as the PBox sends them
    assert bool(sw.program.lane_views) == options["lane_views"]
    assert sw.program.native == (options["native"] and vecops.KERNEL is not None)
    stages = Stages(sw)
    process, clock, cpu_clock = sw.process, time.perf_counter_ns, time.process_time_ns
    total = cpu = count = 0
    for c in range(start, start + cycles):
        frames = job.cycle(c)
        t0, c0 = clock(), cpu_clock()
        for port, frame in frames:
            process(frame, port, 0)
        total += clock() - t0
        cpu += cpu_clock() - c0
        count += len(frames)
    out = {k: v / count / 1e3 for k, v in stages.totals.items()}
    out["other"] = total / count / 1e3 - sum(out.values())
    out["total"] = total / count / 1e3
    out["cpu"] = cpu / count / 1e3  # process CPU time: steadier on a shared machine
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", type=int, default=256)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=6, help="A/B pairs, interleaved")
    ap.add_argument("--cycles", type=int, default=4, help="job cycles per measurement")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    agg = AggRack(world_sizes=(args.n,), lanes=args.lanes)
    runs: dict[str, list[dict]] = {k: [] for k in VARIANTS}
    start = 1
    for _ in range(args.rounds):
        for key in VARIANTS:
            runs[key].append(measure(agg, args.n, key, args.cycles, start))
            start += args.cycles
    keys = (*STAGES, "other", "total", "cpu")
    medians = {k: {s: round(statistics.median(r[s] for r in rs), 2) for s in keys}
               for k, rs in runs.items()}
    print(f"aggregate.p4, {args.lanes} lanes, N = {args.n}: us per contribution "
          f"(median of {args.rounds} interleaved runs; load {os.getloadavg()[0]:.1f})")
    if vecops.KERNEL is None:
        print("the C kernel is not built or disabled: 'native' is the numpy form")
    print(f"{'stage':10s} " + " ".join(f"{k:>8s}" for k in ("fields", "views", "native")))
    for s in keys:
        print(f"{s:10s} " + " ".join(f"{medians[k][s]:8.2f}" for k in ("fields", "views", "native")))
    ratio = [f["total"] / v["total"] for f, v in zip(runs["fields"], runs["views"], strict=True)]
    native = [v["total"] / c["total"] for v, c in zip(runs["views"], runs["native"], strict=True)]
    native_cpu = [v["cpu"] / c["cpu"] for v, c in zip(runs["views"], runs["native"], strict=True)]
    print(f"fields/views total per round: {', '.join(f'{r:.2f}' for r in ratio)}")
    print(f"views/native total per round: {', '.join(f'{r:.2f}' for r in native)}")
    print(f"views/native CPU per round: {', '.join(f'{r:.2f}' for r in native_cpu)}")
    doc = {"benchmark": "switch_stages", "lanes": args.lanes, "n": args.n,
           "rounds": args.rounds, "cycles": args.cycles, "cpus": os.cpu_count(),
           "load_average_1min": round(os.getloadavg()[0], 2),
           "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "native_built": vecops.KERNEL is not None,
           "us_per_contribution_median": medians, "total_ratio_per_pair": ratio,
           "views_over_native_per_round": native,
           "views_over_native_cpu_per_round": native_cpu}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
