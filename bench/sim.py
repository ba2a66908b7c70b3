"""What the simulator costs: events/s per tier, the split between the project's cores
and the simulator's own machinery, and wall time and memory against worker count.

Three parts, each CPU-bound by nature (the simulator is one Python process; these are
its own speed on this machine, not the network's):

* ``tiers``: one case (4 workers, one rack, the switch path, a 2 MB synthetic tensor at
  10 Gbit/s) in tiers P, M and F: events, wall time, events/s, the simulated time.
* ``split``: a cProfile of tier P on the same case; the time inside the cores (the
  sessions' calls, the PBox core's ``receive``, p4lite's ``process`` with the frames'
  wrapping) against everything else (the engine, links, queues, nodes, training loop).
  Goal (issue 33): the simulator's own share at most half of the cores' time.
* ``scale``: tier M, the switch path, ResNet-50 at 1% of its parameters and 1 Gbit/s,
  one iteration, on 2-rack leaf-spines of 4 to 32 workers in all, each point in a
  process of its own (its peak RSS is its own): wall time and peak memory against
  workers, log-log, with the fitted exponents.
* ``huge`` (not in the default parts: about 5 minutes): tier F's goal (issue 33), one
  iteration of 16,384 workers in 512 racks under a three-level tree
  (sim/scenarios/scale-16k.toml, the switch path), in a process of its own: wall time,
  peak RSS, events.

Writes bench/results/sim.json and sim.png.

    .venv/bin/python -m bench.sim [--parts tiers,split,scale,huge] [--workers 4,8,16,32]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import platform
import pstats
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import comma_list
from p4hub.sim import scenario
from p4hub.sim.run import run_scenario

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"

CASE: dict[str, Any] = {
    "name": "bench-case",
    "topology": {"kind": "rack", "workers": 4, "pboxes": 1},
    "links": {"bandwidth": "10Gbit", "delay": "1us"},
    "switch": {"slots": 128},
    "job": {"model": "synthetic", "elements": 524288, "iterations": 1, "paths": ["switch"],
            "window": 128},
    "run": {"tier": "P"},
}
# the cores' entry points, as the simulator's nodes call them (file suffix, function)
CORE_CALLS = [
    ("hosts/session.py", "routed_packets"), ("hosts/session.py", "receive_batch"),
    ("hosts/session.py", "handle_timer"), ("hosts/session.py", "get_timer"),
    ("hosts/session.py", "next_event"), ("hosts/session.py", "start"),
    ("hosts/pbox/aggregator.py", "receive"), ("switch/core/runtime.py", "process"),
    ("sim/nodes/p4switch.py", "wrap"), ("sim/nodes/p4switch.py", "_unwrap_key"),
]


def _case(tier: str, **changes: Any) -> scenario.Scenario:
    raw = json.loads(json.dumps(CASE))
    raw["run"]["tier"] = tier
    for key, value in changes.items():
        section, name = key.split(".")
        raw[section][name] = value
    (point,) = scenario.parse(raw, None)
    return point


def tiers() -> list[dict[str, Any]]:
    out = []
    for tier in ("P", "M", "F"):
        r = run_scenario(_case(tier))
        out.append({"tier": tier, "events": r.events, "wall_s": r.wall_s,
                    "events_per_s": r.events / r.wall_s, "iteration_s": r.iteration_times[0],
                    "exact": r.exact})
        print(f"tier {tier}: {r.events} events in {r.wall_s:.2f} s ({r.events / r.wall_s:,.0f}"
              f"/s), simulated iteration {r.iteration_times[0] * 1e3:.2f} ms, exact {r.exact}")
    return out


def split() -> dict[str, Any]:
    run_scenario(_case("P"))  # compile and load aggregate.p4 outside the profile
    profile = cProfile.Profile()
    profile.enable()
    run_scenario(_case("P"))
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = max(ct for (_, _, name), (_, _, _, ct, _) in stats.items() if name == "run_scenario")
    cores = 0.0
    by_call: dict[str, float] = {}
    for (path, _, name), (_, _, _, cumtime, _) in stats.items():
        for suffix, fn in CORE_CALLS:
            if name == fn and path.endswith(suffix):
                cores += cumtime
                by_call[f"{suffix}:{fn}"] = by_call.get(f"{suffix}:{fn}", 0.0) + cumtime
    rest = total - cores
    print(f"split (tier P, profiled): {total:.2f} s in all, cores {cores:.2f} s, "
          f"simulator {rest:.2f} s ({rest / cores:.2f} of the cores' time; goal <= 0.5)")
    return {"total_s": total, "cores_s": cores, "simulator_s": rest,
            "simulator_over_cores": rest / cores, "by_core_call_s": by_call,
            "note": "cProfile inflates per-call costs; the shares, not the seconds, are the result"}


def scale_point(workers: int) -> dict[str, Any]:
    raw = {"name": f"scale-{workers}",
           "topology": {"kind": "leafspine", "racks": 2, "workers": workers // 2, "spines": 2,
                        "pboxes": 1},
           "links": {"bandwidth": "1Gbit", "oversubscription": 1.0},
           "job": {"model": "resnet50", "scale": 0.01, "iterations": 1, "paths": ["switch"]},
           "run": {"tier": "M"}}
    (point,) = scenario.parse(raw, None)
    r = run_scenario(point, check=False)
    return {"workers": workers, "wall_s": r.wall_s, "peak_rss_bytes": r.peak_rss_bytes,
            "events": r.events, "iteration_s": r.iteration_times[0] if r.iteration_times else None,
            "failures": r.failures}


def scale(workers: list[int]) -> dict[str, Any]:
    points = []
    for n in workers:  # a process each: its peak RSS is its own
        done = subprocess.run([sys.executable, "-m", "bench.sim", "--scale-point", str(n)],
                              cwd=REPO, capture_output=True, text=True, check=True)
        point = json.loads(done.stdout.strip().splitlines()[-1])
        points.append(point)
        print(f"scale: {n} workers: wall {point['wall_s']:.1f} s, peak RSS "
              f"{point['peak_rss_bytes'] / 2**20:.0f} MiB, {point['events']} events", flush=True)
    x = np.log([p["workers"] for p in points])
    fits = {}
    for key in ("wall_s", "peak_rss_bytes"):
        if len(points) > 1:
            fits[key] = float(np.polyfit(x, np.log([p[key] for p in points]), 1)[0])
    print(f"scale: wall ~ workers^{fits.get('wall_s', float('nan')):.2f}, memory ~ "
          f"workers^{fits.get('peak_rss_bytes', float('nan')):.2f}")
    return {"points": points, "exponents": fits}


HUGE = REPO / "sim" / "scenarios" / "scale-16k.toml"


def huge_point() -> dict[str, Any]:
    (point,) = scenario.load(HUGE)
    cpu0 = time.process_time()
    r = run_scenario(point, path="switch")
    # CPU seconds too: on a shared machine the wall time is the load's as much as ours
    return {"workers": r.workers, "racks": point.topology.total_racks,
            "pods": point.topology.pods, "tier": r.tier, "path": r.path, "wall_s": r.wall_s,
            "cpu_s": time.process_time() - cpu0,
            "peak_rss_bytes": r.peak_rss_bytes, "events": r.events,
            "iteration_s": r.iteration_times[0] if r.iteration_times else None,
            "failures": r.failures}


def huge() -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "bench.sim", "--huge-point"], cwd=REPO,
                          capture_output=True, text=True, check=True)
    point: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"huge: {point['workers']} workers ({point['racks']} racks, {point['pods']} pods), "
          f"tier F switch path: wall {point['wall_s']:.0f} s (goal 300 s; CPU "
          f"{point['cpu_s']:.0f} s), peak RSS "
          f"{point['peak_rss_bytes'] / 2**20:.0f} MiB, {point['events']} events, "
          f"iteration {point['iteration_s'] * 1e3:.1f} ms simulated", flush=True)
    return point


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    if "scale" in doc:
        pts = doc["scale"]["points"]
        w = [p["workers"] for p in pts]
        axes[0].loglog(w, [p["wall_s"] for p in pts], "o-", label="wall time (s)")
        axes[0].loglog(w, [p["peak_rss_bytes"] / 2**20 for p in pts], "s-", label="peak RSS (MiB)")
        axes[0].set_xlabel("workers (tier M, ResNet-50 at 1%, 2-rack leaf-spine)")
        exps = doc["scale"]["exponents"]
        axes[0].set_title(f"wall ~ N^{exps.get('wall_s', float('nan')):.2f}, "
                          f"memory ~ N^{exps.get('peak_rss_bytes', float('nan')):.2f}")
        axes[0].legend()
    if "tiers" in doc:
        t = doc["tiers"]
        axes[1].bar([r["tier"] for r in t], [r["events_per_s"] for r in t])
        axes[1].set_ylabel("events per second (CPU-bound)")
        axes[1].set_title("simulator speed per tier (4 workers, 2 MB)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", type=comma_list(str), default=["tiers", "split", "scale"])
    parser.add_argument("--workers", type=comma_list(int), default=[4, 8, 16, 32])
    parser.add_argument("--scale-point", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--huge-point", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.scale_point:
        print(json.dumps(scale_point(args.scale_point)))
        return 0
    if args.huge_point:
        print(json.dumps(huge_point()))
        return 0
    t0 = time.perf_counter()
    # parts not run this time keep their earlier results (each part says when it ran)
    earlier = args.out / "sim.json"
    doc: dict[str, Any] = json.loads(earlier.read_text()) if earlier.exists() else {}
    doc.update({"benchmark": "sim", "cpu_bound": True,
                "machine": {"python": platform.python_version()}})
    doc.setdefault("measured", {}).update(
        {part: time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()) for part in args.parts})
    if "tiers" in args.parts:
        doc["tiers"] = tiers()
    if "split" in args.parts:
        doc["split"] = split()
    if "scale" in args.parts:
        doc["scale"] = scale(args.workers)
    if "huge" in args.parts:
        doc["huge"] = huge()
    doc["seconds_total"] = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sim.json").write_text(json.dumps(doc, indent=1))
    plot(doc, args.out / "sim.png")
    print(f"wrote {args.out / 'sim.json'} and sim.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
