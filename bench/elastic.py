"""Static vs elastic load over several PBoxes, with and without a straggler (issue 11).

One Mininet rack: ``--workers`` workers on ``--bw`` Mbit/s links, ``--pboxes`` PBoxes on
``--pbox-bw`` Mbit/s links (PHub's PBoxes are servers with more NIC bandwidth than a
worker), the P4 switch and p4hub-controller. A job placed on the PBoxes
(``--placement pbox``), or with ``--switch-slots N`` on N switch slots and the rest of
its 32 over the PBoxes (the controller's partial placement, as when the switch is short
of slots; the switch's share is not re-split), all-reduces the ResNet-50 gradient sizes times ``--scale`` for
``--iterations`` iterations, exact (``--check``), under each straggler:

* ``none``;
* ``link``: another host floods the second PBox with ``--flood`` of its link rate (0.75:
  the PBox keeps a quarter of its link, a 4x straggler), sharing its link as another
  tenant would (experiments/straggler.py);
* ``cpu``: busy processes in the second PBox's host. On a 2-core machine they slow the
  whole emulation, not one PBox: its rows say CPU-bound and are not a figure about the
  design.

and each mode: ``static`` (the controller's topology says ``rebalance: false``: the even
split over the PBoxes, as PHub/MXNet shard keys) and ``elastic`` (the controller re-splits
the PBox share by the rates the agents measure: controller/core/elastic.py). The straggler is
on from the job's start; elastic has to find it.

Per row: iterations, the median iteration time over the second half (steady state) and
its goodput per worker, the aggregator moves, and the emulation's CPU use over the run.
The defaults keep the emulation link-bound on a 2-core machine (4 workers at 10 Mbit/s
through three Python PBoxes and the Python switch were CPU-bound: every row ~7.5 s,
straggler or not).
Then: each mode's straggler throughput as a share of its no-straggler throughput (goal:
elastic >= 90% under a 4x straggler) and elastic's speed-up over static (PSLD reports up
to 2.86x). Writes bench/results/elastic.json and elastic.png (iteration time per
iteration, and the shares of each PBox over time in the elastic runs), or
elastic_switch.json and elastic_switch.png with ``--switch-slots``.

    sudo .venv/bin/python -m bench.elastic [--stragglers none,link] [--iterations 10]
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import sys
import time
from pathlib import Path

from bench._common import comma_list, mininet_ready
from p4hub.experiments.progress import track
from p4hub.hosts.wire import LANE_COUNTS, MAX_LANES

RESULTS = Path(__file__).resolve().parent / "results"
MODES = ("static", "elastic")
POLL = 0.5  # seconds between ShowJob polls (the shares over time)
JOB_SLOTS = 32  # the job's window


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--pboxes", type=int, default=3)
    parser.add_argument("--bw", type=float, default=2.5, help="worker links, Mbit/s")
    parser.add_argument("--pbox-bw", type=float, default=5.0, help="PBox links, Mbit/s")
    parser.add_argument("--lanes", type=int, default=MAX_LANES, choices=LANE_COUNTS)
    parser.add_argument("--flood", type=float, default=0.75,
                        help="link straggler: the flood's share of the PBox link")
    parser.add_argument("--cpu-procs", type=int, default=2, help="cpu straggler: busy processes")
    parser.add_argument("--stragglers", type=comma_list(str), default=["none", "link", "cpu"])
    parser.add_argument("--modes", type=comma_list(str), default=list(MODES))
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--scale", type=float, default=0.005,
                        help="of ResNet-50's gradients (0.005: 0.5 MB per iteration)")
    parser.add_argument("--quick", action="store_true", help="none and link, 6 iterations")
    parser.add_argument("--no-congestion", action="store_true",
                        help="the workers without their congestion window")
    parser.add_argument("--switch-slots", type=int, default=0,
                        help=f"the switch's slots, the rest of the job's {JOB_SLOTS} over the "
                             f"PBoxes (0: all on the PBoxes)")
    args = parser.parse_args(argv)
    if not 0 <= args.switch_slots < JOB_SLOTS:
        parser.error(f"--switch-slots must be 0..{JOB_SLOTS - 1}")
    if args.quick:
        args.stragglers, args.iterations = ["none", "link"], 6
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not mininet_ready("elastic"):
        return 2
    from p4hub.experiments.cpuload import CpuSampler
    from p4hub.topologies.rack import Rack, RackConfig

    config = RackConfig(workers=args.workers, pboxes=args.pboxes, extra_hosts=1, bw=args.bw,
                        pbox_bw=args.pbox_bw, p4=True, run_name="bench-elastic",
                        grpc_port=50351, controller_port=50361)
    rows = []
    with Rack(config) as rack:
        rack.start_pboxes(workers=1)
        with CpuSampler(rack.process_roots()) as cpu:
            for straggler, mode in track(list(itertools.product(args.stragglers, args.modes)),
                                         "elastic runs"):
                row = run_one(rack, args, mode, straggler, cpu)
                rows.append(row)
                print_row(row)
    summary = summarize(rows)
    report = {"config": dict(vars(args)), "machine": platform.node(), "rows": rows,
              "summary": summary}
    RESULTS.mkdir(exist_ok=True)
    stem = "elastic_switch" if args.switch_slots else "elastic"
    (RESULTS / f"{stem}.json").write_text(json.dumps(report, indent=1))
    plot(rows, RESULTS / f"{stem}.png", args)
    print_summary(summary)
    print(f"\nwritten: {RESULTS / f'{stem}.json'}, {RESULTS / f'{stem}.png'}")
    return 0 if all(row["exact"] for row in rows) else 1


def run_one(rack, args: argparse.Namespace, mode: str, straggler: str, cpu) -> dict:
    from p4hub.experiments import straggler as stragglers
    from p4hub.experiments.jobrun import JobRun
    from p4hub.experiments.jobwatch import JobWatch

    if rack.controller_proc is not None:
        rack.kill_controller()
    rack.start_controller(rack.controller_topology(slots=args.switch_slots or 64,
                                                   job_slots=JOB_SLOTS,
                                                   rebalance=mode == "elastic"))
    victim = "pbox2" if args.pboxes > 1 else "pbox"
    kind_args = {"link": {"mbit": args.flood * (args.pbox_bw or args.bw)},
                 "cpu": {"procs": args.cpu_procs}}.get(straggler, {})
    name = f"el-{mode}-{straggler}"
    work = ("--scale", str(args.scale), "--fuse", "--check", "--timeout", "60",
            "--rto-max", "0.2", "--lanes", str(args.lanes),
            *(["--no-congestion"] if args.no_congestion else []))
    victim_host = rack.pbox_host(victim)
    flood_host = rack.extras[0]
    before = (_link_bytes(victim_host, "rx"), _link_bytes(flood_host, "tx"))
    with stragglers.inject(rack, straggler, pbox=victim, **kind_args):
        start = time.monotonic()
        with JobWatch(rack.controller_address, POLL) as watch:
            run = JobRun(rack, rack.workers, name, iterations=args.iterations,
                         extra=["--placement", "auto" if args.switch_slots else "pbox"],
                         work=work)
            try:
                run.finish(timeout=60.0 + 30.0 * args.iterations)
                exact = True
            except AssertionError as exc:
                print(f"  {name}: {str(exc)[:300]}", file=sys.stderr)
                exact = False
            end = time.monotonic()
    after = (_link_bytes(victim_host, "rx"), _link_bytes(flood_host, "tx"))
    joined = run.events(0, "joined")
    timeline = watch.timeline.get(joined[0]["job_id"], []) if joined else []
    iterations = run.events(0, "iteration")
    seconds = [row["seconds"] for row in iterations]
    steady = seconds[len(seconds) // 2:] or seconds
    median = statistics.median(steady) if steady else float("nan")
    size = iterations[0]["bytes"] if iterations else 0
    load = cpu.load([(start, end)])
    moves = [m["reason"] for m in timeline[-1]["moves"]] if timeline else []
    return {"mode": mode, "straggler": straggler, "exact": exact, "iterations": len(seconds),
            "seconds": seconds, "steady_median_s": median,
            "mb_per_s": size / median / 1e6 if median == median and median > 0 else None,
            "moves": moves, "timeline": timeline,
            # what reached the straggler PBox's link, and what the flooding host sent
            "victim_rx_mbit": round((after[0] - before[0]) * 8 / (end - start) / 1e6, 3),
            "flood_tx_mbit": round((after[1] - before[1]) * 8 / (end - start) / 1e6, 3),
            "cpu": load.to_json() if load is not None else None}


def _link_bytes(host, direction: str) -> int:
    """Bytes the host's data interface has received (rx) or sent (tx) so far."""
    text = host.cmd(f"cat /sys/class/net/{host.name}-eth0/statistics/{direction}_bytes")
    return int(text.strip() or 0)


def summarize(rows: list[dict]) -> dict:
    by = {(r["mode"], r["straggler"]): r for r in rows}
    out: dict = {}
    for (mode, straggler), row in by.items():
        base = by.get((mode, "none"))
        if straggler != "none" and base and row["mb_per_s"] and base["mb_per_s"]:
            out[f"{mode} {straggler} / {mode} none"] = round(row["mb_per_s"] / base["mb_per_s"], 3)
        static = by.get(("static", straggler))
        if mode == "elastic" and static and row["mb_per_s"] and static["mb_per_s"]:
            out[f"elastic / static, {straggler}"] = round(row["mb_per_s"] / static["mb_per_s"], 3)
    return out


def print_row(row: dict) -> None:
    cpu = row["cpu"]["label"] if row["cpu"] else "cpu ?"
    mbps = f"{row['mb_per_s']:.3f}" if row["mb_per_s"] else "-"
    print(f"{row['mode']:<8} {row['straggler']:<6} its {row['iterations']:>3}  steady "
          f"{row['steady_median_s']:7.2f} s  {mbps:>7} MB/s/worker  moves "
          f"{len(row['moves']):>2}  exact {row['exact']}  victim rx {row['victim_rx_mbit']:.2f}"
          f" flood {row['flood_tx_mbit']:.2f} Mbit/s  {cpu}", flush=True)


def print_summary(summary: dict) -> None:
    print("\nthroughput ratios (goodput per worker, steady state):")
    for key, value in summary.items():
        print(f"  {key:<32} {value:.2f}")


def plot(rows: list[dict], path: Path, args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stragglers = list(dict.fromkeys(r["straggler"] for r in rows))
    fig, axes = plt.subplots(2, len(stragglers), figsize=(5 * len(stragglers), 7), squeeze=False)
    for col, straggler in enumerate(stragglers):
        top, bottom = axes[0][col], axes[1][col]
        for row in rows:
            if row["straggler"] == straggler:
                top.plot(range(1, len(row["seconds"]) + 1), row["seconds"], marker="o",
                         label=row["mode"])
            if row["straggler"] == straggler and row["mode"] == "elastic":
                names = sorted({n for point in row["timeline"] for n in point["shares"]})
                for pbox in names:
                    bottom.plot([p["t"] for p in row["timeline"]],
                                [p["shares"].get(pbox, 0) for p in row["timeline"]], label=pbox)
        top.set_title(f"straggler: {straggler}")
        top.set_xlabel("iteration")
        top.set_ylabel("seconds")
        top.legend()
        bottom.set_xlabel("seconds since start (elastic run)")
        bottom.set_ylabel("window slots")
        bottom.legend()
    switch = f", {args.switch_slots} of {JOB_SLOTS} slots on the switch" if args.switch_slots else ""
    fig.suptitle(f"{args.workers} workers at {args.bw} Mbit/s, {args.pboxes} PBoxes at "
                 f"{args.pbox_bw} Mbit/s{switch}, {args.scale} x ResNet-50 per iteration")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
