"""Two-level aggregation over a leaf-spine fabric vs Gloo's ring vs a single PBox (issue 12).

For each layout (``--layouts``, racks x workers per rack; default 2x4 and 4x2) a Mininet
fabric: one leaf per rack, one spine, every link ``--bw`` Mbit/s (host and switch links
alike; 2.5 by default: at 5 the 2x4 switch path was CPU-bound), one PBox per rack,
p4hub-controller. On it, the ``make run --mode allreduce``
paths (experiments/allreduce_run.py), each all-reducing the ResNet-50 gradient sizes times
``--scale`` for ``--iterations`` iterations, exact (``--check``):

* ``switch``: one job over all racks, a tree: each leaf sums its rack's workers and
  sends one PARTIAL per cell up, the spine sums the racks and multicasts the RESULT down
  (docs/DESIGN.md §3.1);
* ``pbox``: one job on one rack's PBox, which the other racks reach over the spine;
* ``gloo``: torch.distributed's ring over the same links;
* ``pbox-root`` (not by default): the switch path with no room on the spine, so the job
  is rooted at the PBox of the rack it was created from: that rack's workers are the
  PBox's members, the other leaves send it their partials (docs/DESIGN.md §3.1).

Per path: the median iteration time and its multiple of the floor (switch: size / bw;
ring: 2(N-1)/N x size / bw; single PBox: N x size / bw; root PBox: (workers per rack +
racks - 1) x size / bw, what its link carries), and the bytes that crossed the
spine per iteration (its port counters, in and out, over the path's iterations), beside
the two-level ideal: each rack sends one PARTIAL per packet a worker sends and gets one
RESULT back, so R x 2 x packets x frame bytes, with the packets a worker sent once (the
agents' counters, resends excluded). Goals: spine bytes within 1.1x of that ideal, and the
switch path ahead of the ring by at least 0.9 x 2(N-1)/N. Rows whose processes were
CPU-bound say so: on a 2-core machine the fabric runs a Python switch per leaf and spine.
Writes bench/results/hierarchy.json and hierarchy.png.

    sudo .venv/bin/python -m bench.hierarchy [--layouts 2x4,4x2] [--bw 2.5] [--iterations 4]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
from pathlib import Path

from bench._common import comma_list, mininet_ready
from p4hub.experiments.progress import track
from p4hub.hosts.wire import LANE_COUNTS, MAX_LANES

RESULTS = Path(__file__).resolve().parent / "results"
FRAME_BYTES = {64: 14 + 20 + 8 + 20 + 4 * 64, 256: 14 + 20 + 8 + 20 + 4 * 256}
SPINE = "t1"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", type=comma_list(str), default=["2x4", "4x2"],
                        help="racks x workers per rack, comma separated")
    parser.add_argument("--paths", type=comma_list(str), default=["switch", "pbox", "gloo"])
    parser.add_argument("--bw", type=float, default=2.5, help="every link, Mbit/s")
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--scale", type=float, default=0.005,
                        help="fraction of ResNet-50's gradients per iteration")
    parser.add_argument("--lanes", type=int, default=MAX_LANES, choices=LANE_COUNTS)
    parser.add_argument("--no-congestion", action="store_true",
                        help="the agents without their congestion window, to compare")
    parser.add_argument("--out", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def layout(text: str) -> tuple[int, int]:
    racks, _, per_rack = text.partition("x")
    return int(racks), int(per_rack)


def run_args(args: argparse.Namespace, racks: int, per_rack: int) -> argparse.Namespace:
    from p4hub.experiments import run

    return run.parse_args([
        "--topo", "leafspine", "--racks", str(racks), "--workers", str(racks * per_rack),
        "--mode", "allreduce", "--iterations", str(args.iterations), "--scale", str(args.scale),
        "--bw", str(args.bw), "--lanes", str(args.lanes), "--paths", "switch",
        "--no-pcap", *(["--no-congestion"] if args.no_congestion else [])])


def spine_bytes(rack) -> int:
    """Bytes in and out of the spine's ports so far (P4 port counters via the controller)."""
    from p4hub.controller.client import JobClient

    client = JobClient(rack.controller_address, timeout=10.0)
    try:
        ports = client.call("ShowSwitch", name=SPINE)["ports"]
    finally:
        client.close()
    return sum(int(row[kind]["bytes"]) for row in ports.values() for kind in ("rx", "tx"))


def run_pbox_root_path(rack, ns: argparse.Namespace, cpu):
    """The switch path under a controller whose spines have one slot: no job fits there,
    so the job's root is a rack's PBox. The controller is put back afterwards."""
    from p4hub.experiments import allreduce_run

    original = copy.deepcopy(rack.topology)
    narrow = copy.deepcopy(original)
    for name, switch in narrow["switches"].items():
        if name.startswith("t"):
            switch.update(slots=1, job_slots=1)
    rack.kill_controller()
    rack.start_controller(narrow)
    try:
        return allreduce_run.run_switch_path(rack, ns, cpu)
    finally:
        rack.kill_controller()
        rack.start_controller(original)


def run_layout(args: argparse.Namespace, racks: int, per_rack: int) -> dict:
    from p4hub.experiments import allreduce_run, run
    from p4hub.experiments.cpuload import CpuSampler, column
    from p4hub.topologies.rack import Rack
    from p4hub.workers import workload

    ns = run_args(args, racks, per_rack)
    n = racks * per_rack
    size = 4 * sum(workload.layer_sizes(ns.model, ns.scale))
    link_s = size * 8 / (args.bw * 1e6)
    floors = {"switch": link_s, "gloo": 2 * (n - 1) / n * link_s, "pbox": n * link_s,
              "pbox-root": (per_rack + racks - 1) * link_s}
    paths = {**allreduce_run.PATHS, "pbox-root": run_pbox_root_path}
    rows = []
    with Rack(run.rack_config(ns, run_name=f"hierarchy-{racks}x{per_rack}")) as rack:
        run.start_services(rack, ns)
        with CpuSampler(rack.process_roots()) as cpu:
            for name in args.paths:
                before = spine_bytes(rack)
                result = paths[name](rack, ns, cpu)
                crossed = (spine_bytes(rack) - before) / args.iterations
                row = {"layout": f"{racks}x{per_rack}", "racks": racks, "workers": n,
                       "path": name, "ok": result.ok, "problems": result.problems,
                       "median_s": result.median_seconds(), "floor_s": floors[name],
                       "spine_bytes_per_iteration": crossed, "cpu": result.cpu,
                       "cpu_column": column(result.cpu), "agent_counters": result.counters}
                sent = result.counters.get("agent_sent", 0)
                if name in ("switch", "pbox-root") and sent:
                    # a spine root takes each rack's partial in and sends its RESULT out;
                    # under a root PBox the other racks' partials and RESULTs go through
                    # the spine (in and out), and the PBox's own rack does not cross it
                    crossing = 2 * racks if name == "switch" else 4 * (racks - 1)
                    once = (sent - result.counters["agent_retransmitted"]) / n / args.iterations
                    row["ideal_spine_bytes"] = crossing * once * FRAME_BYTES[args.lanes]
                rows.append(row)
                print(_line(row), flush=True)
    return {"layout": f"{racks}x{per_rack}", "size_bytes": size, "rows": rows}


def _line(row: dict) -> str:
    ideal = row.get("ideal_spine_bytes")
    vs = f" ({row['spine_bytes_per_iteration'] / ideal:.2f}x ideal {ideal / 1e6:.3f} MB)" \
        if ideal else ""
    counters = row["agent_counters"]
    resent = f"  resent {counters['agent_retransmitted'] / counters['agent_sent']:.1%}" \
        if counters.get("agent_sent") else ""
    return (f"  {row['layout']:>4} {row['path']:<9} {row['median_s']:7.3f} s "
            f"({row['median_s'] / row['floor_s']:.2f}x floor)  spine "
            f"{row['spine_bytes_per_iteration'] / 1e6:7.3f} MB/iteration{vs}{resent}  "
            f"{'ok' if row['ok'] else 'FAILED'}  {row['cpu_column']}")


def verdicts(layouts: list[dict]) -> list[str]:
    out = []
    for lay in layouts:
        by = {row["path"]: row for row in lay["rows"]}
        n = lay["rows"][0]["workers"]
        if "switch" in by and by["switch"].get("ideal_spine_bytes"):
            ratio = by["switch"]["spine_bytes_per_iteration"] / by["switch"]["ideal_spine_bytes"]
            out.append(f"{lay['layout']}: switch path spine bytes {ratio:.2f}x the two-level "
                       f"ideal (goal <= 1.10)")
        if "switch" in by and "gloo" in by:
            speedup = by["gloo"]["median_s"] / by["switch"]["median_s"]
            goal = 0.9 * 2 * (n - 1) / n
            out.append(f"{lay['layout']}: switch path {speedup:.2f}x faster than the ring "
                       f"(goal >= 0.9 x 2(N-1)/N = {goal:.2f}); switch row "
                       f"{by['switch']['cpu_column']}")
    return out


def plot(layouts: list[dict], path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = [lay["layout"] for lay in layouts]
    paths = sorted({row["path"] for lay in layouts for row in lay["rows"]})
    width = 0.8 / max(1, len(paths))
    for i, name in enumerate(paths):
        times = [next((r["median_s"] for r in lay["rows"] if r["path"] == name), 0.0)
                 for lay in layouts]
        spine = [next((r["spine_bytes_per_iteration"] / 1e6 for r in lay["rows"]
                       if r["path"] == name), 0.0) for lay in layouts]
        xs = [x + i * width for x in range(len(layouts))]
        left.bar(xs, times, width, label=name)
        right.bar(xs, spine, width, label=name)
    ideal = [next((r.get("ideal_spine_bytes", 0) / 1e6 for r in lay["rows"]
                   if r["path"] == "switch"), 0.0) for lay in layouts]
    right.scatter([x + width * paths.index("switch") for x in range(len(layouts))]
                  if "switch" in paths else [], ideal if "switch" in paths else [],
                  color="black", marker="_", s=400, label="two-level ideal", zorder=3)
    for ax, title in ((left, "median iteration time (s)"), (right, "spine MB per iteration")):
        ax.set_xticks([x + width * (len(paths) - 1) / 2 for x in range(len(layouts))], names)
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    unknown = set(args.paths) - {"switch", "pbox", "gloo", "pbox-root"}
    if unknown:
        print(f"unknown paths {sorted(unknown)}: choose from switch, pbox, gloo, pbox-root")
        return 2
    if not mininet_ready("hierarchy"):
        return 2
    layouts = []
    for text in track(args.layouts, "hierarchy layouts"):
        racks, per_rack = layout(text)
        print(f"layout {racks} racks x {per_rack} workers, {args.bw} Mbit/s links:", flush=True)
        layouts.append(run_layout(args, racks, per_rack))
    lines = verdicts(layouts)
    print("\n".join(lines))
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
              "layouts": layouts, "verdicts": lines}
    (args.out / "hierarchy.json").write_text(json.dumps(report, indent=1))
    png = plot(layouts, args.out / "hierarchy.png")
    print(f"wrote {args.out / 'hierarchy.json'}" + (f" and {png}" if png else ""))
    ok = all(row["ok"] for lay in layouts for row in lay["rows"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
