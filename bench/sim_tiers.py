"""The simulator's tiers against each other at issue 33's sizes: a 32-worker rack and a
2x16 leaf-spine, with and without loss.

Each case runs one job (a 1 MB synthetic tensor a worker, all-reduced twice, no compute,
so the iteration is all communication and every tier difference shows) in tiers P, M and
F; the figure is the median iteration time, and the goals are tier M within 5% of tier P
and tier F within 10% of tier M (docs/notes/sim.md §3). Tier F has no loss
(``sim/fluid.py``): its lossy rows are its lossless time, which is what it claims to be
near. Every tier P and M result is checked equal to the exact sum; drops and resends are
the run's. Each point runs in a process of its own, so one slow tier P case does not
share memory with the next. CPU-bound by nature; the simulated times do not depend on
the machine.

    .venv/bin/python -m bench.sim_tiers [--cases rack32,fabric2x16] [--loss 0,0.01]
        [--paths switch] [--elements 262144]

Writes bench/results/sim_tiers.json and sim_tiers.png.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench._common import comma_list
from p4hub.sim import scenario
from p4hub.sim.run import run_scenario

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
TIERS = ("P", "M", "F")
TOPOLOGIES: dict[str, dict[str, Any]] = {
    "rack32": {"kind": "rack", "workers": 32, "pboxes": 1},
    "fabric2x16": {"kind": "leafspine", "racks": 2, "workers": 16, "spines": 2, "pboxes": 1},
}
GOALS = {"M/P": 0.05, "F/M": 0.10}


def raw_case(case: str, tier: str, loss: float, path: str, elements: int) -> dict[str, Any]:
    return {"name": f"tiers-{case}", "topology": TOPOLOGIES[case],
            "links": {"bandwidth": "1Gbit", "loss": 0.0 if tier == "F" else loss},
            "switch": {"slots": 1024},  # what aggregate.p4 holds (tier P runs it)
            "job": {"model": "synthetic", "elements": elements, "iterations": 2,
                    "paths": [path]},
            "run": {"tier": tier, "seed": 0}}


def point(case: str, tier: str, loss: float, path: str, elements: int) -> dict[str, Any]:
    (sc,) = scenario.parse(raw_case(case, tier, loss, path, elements), None)
    cpu0 = time.process_time()
    r = run_scenario(sc)
    return {"case": case, "tier": tier, "loss": loss, "path": path, "workers": r.workers,
            "iteration_s": statistics.median(r.iteration_times) if r.iteration_times else None,
            "iterations_s": r.iteration_times, "events": r.events, "wall_s": r.wall_s,
            "cpu_s": time.process_time() - cpu0, "drops": r.drops, "resends": r.resends,
            "exact": r.exact, "failures": r.failures}


def run_point(case: str, tier: str, loss: float, path: str, elements: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "bench.sim_tiers", "--point",
                           json.dumps([case, tier, loss, path, elements])],
                          cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        return {"case": case, "tier": tier, "loss": loss, "path": path, "iteration_s": None,
                "failures": [done.stderr.strip().splitlines()[-1] if done.stderr.strip()
                             else f"exit {done.returncode}"]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (case, loss, path): tier M over P and F over M, each against its goal."""
    out = []
    keys = sorted({(r["case"], r["loss"], r["path"]) for r in rows})
    for case, loss, path in keys:
        t = {r["tier"]: r["iteration_s"] for r in rows
             if (r["case"], r["loss"], r["path"]) == (case, loss, path)}
        entry: dict[str, Any] = {"case": case, "loss": loss, "path": path}
        for name, (a, b) in (("M/P", ("M", "P")), ("F/M", ("F", "M"))):
            if t.get(a) and t.get(b):
                ratio = t[a] / t[b]
                entry[name] = ratio
                entry[f"{name} within goal"] = abs(ratio - 1) <= GOALS[name]
        out.append(entry)
    return out


def report(rows: list[dict[str, Any]], summary: list[dict[str, Any]]) -> None:
    print(f"\n{'case':<11} {'loss':>5} {'path':<7} {'tier':<4} {'iteration':>10} "
          f"{'events':>9} {'wall':>7} {'drops':>6} {'resends':>7}  exact")
    for r in rows:
        it = f"{r['iteration_s'] * 1e3:.2f} ms" if r.get("iteration_s") else "failed"
        print(f"{r['case']:<11} {r['loss']:>5.0%} {r['path']:<7} {r['tier']:<4} {it:>10} "
              f"{r.get('events', 0):>9,} {r.get('wall_s', 0):>6.1f}s {r.get('drops', 0):>6} "
              f"{r.get('resends', 0):>7}  {r.get('exact')}"
              + (f"  {'; '.join(r['failures'])}" if r.get("failures") else ""))
    print(f"\n{'case':<11} {'loss':>5} {'path':<7} {'M/P':>7} {'(goal +-5%)':>11} "
          f"{'F/M':>7} {'(goal +-10%)':>12}")
    for s in summary:
        print(f"{s['case']:<11} {s['loss']:>5.0%} {s['path']:<7} {_cell(s, 'M/P'):>7} "
              f"{_ok(s, 'M/P'):>11} {_cell(s, 'F/M'):>7} {_ok(s, 'F/M'):>12}")


def _cell(entry: dict[str, Any], name: str) -> str:
    return f"{entry[name]:.3f}" if name in entry else "-"


def _ok(entry: dict[str, Any], name: str) -> str:
    if name not in entry:
        return "-"
    return "within" if entry[f"{name} within goal"] else "OUTSIDE"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(r["case"], r["loss"], r["path"]) for r in rows})
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / len(TIERS)
    for i, tier in enumerate(TIERS):
        values = [next((r["iteration_s"] * 1e3 for r in rows if r["tier"] == tier
                        and (r["case"], r["loss"], r["path"]) == g and r.get("iteration_s")),
                       0.0) for g in groups]
        ax.bar([j + i * width for j in range(len(groups))], values, width, label=f"tier {tier}")
    ax.set_xticks([j + width for j in range(len(groups))],
                  [f"{c}\n{loss:.0%} loss, {p}" for c, loss, p in groups], fontsize=8)
    ax.set_ylabel("iteration, ms (simulated)")
    ax.set_title("tiers P, M, F on the same cases (tier F has no loss)")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=comma_list(str), default=list(TOPOLOGIES))
    parser.add_argument("--loss", type=comma_list(float), default=[0.0, 0.01])
    parser.add_argument("--paths", type=comma_list(str), default=["switch"])
    parser.add_argument("--elements", type=int, default=262144, help="float32s a worker")
    parser.add_argument("--point", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS / "sim_tiers.json")
    args = parser.parse_args(argv)
    if args.point:
        case, tier, loss, path, elements = json.loads(args.point)
        print(json.dumps(point(case, tier, loss, path, elements)))
        return 0
    unknown = set(args.cases) - set(TOPOLOGIES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; choose from {sorted(TOPOLOGIES)}")
    started = time.time()
    rows: list[dict[str, Any]] = []
    for case in args.cases:
        for loss in args.loss:
            for path in args.paths:
                for tier in TIERS:
                    if tier == "F" and loss and any(r["tier"] == "F" and r["case"] == case
                                                    and r["path"] == path for r in rows):
                        # tier F has no loss: its lossless row stands for both
                        row = dict(next(r for r in rows if r["tier"] == "F"
                                        and r["case"] == case and r["path"] == path))
                        row["loss"] = loss
                        rows.append(row)
                        continue
                    row = run_point(case, tier, loss, path, args.elements)
                    rows.append(row)
                    it = row.get("iteration_s")
                    print(f"{case} loss {loss:.0%} {path} tier {tier}: "
                          f"{it * 1e3:.2f} ms" if it else f"{case} {tier}: failed", flush=True)
    summary = ratios(rows)
    report(rows, summary)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "sim_tiers", "cpu_bound": True, "goals": GOALS,
           "config": {"cases": args.cases, "loss": args.loss, "paths": args.paths,
                      "elements": args.elements},
           "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "seconds_total": time.time() - started, "rows": rows, "ratios": summary}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    plot(rows, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    failed = any(r.get("failures") or r.get("exact") is False for r in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
