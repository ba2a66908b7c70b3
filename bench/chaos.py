"""Chaos: switch, PBox, controller and a worker die mid-job; how each fault went.

One rack (six workers, the P4 switch, the PBox, the controller; links shaped to
``--bw`` Mbit/s with ``--loss`` percent loss on every link) runs two jobs that all-reduce
continuously: A on the switch (four workers), B on the PBox (two). ``--rounds`` times
each of switch restart, PBox crash (B moves to the switch; the PBox comes back and the
next PBox fault first starts a new B on it) and controller crash is injected, in a
seeded random order, each after both jobs completed two more iterations; last, a
worker of A is killed (experiments/chaos.py).

Per fault: when, whether every rank of both jobs completed an iteration after it and
how long that took (``recover s``: the fault's cost plus up to one iteration,
``iteration s`` is the median iteration before the first fault), and whether every
all-reduce so far was exact and identical on every rank. For the worker: whether its
peers failed with an error naming it, and how long that took (the controller's
worker_timeout, ``--worker-timeout``, is most of it).

    sudo .venv/bin/python -m bench.chaos [--rounds 3] [--loss 5] [--bw 20] [--seed 1]

Writes bench/results/chaos.json.
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

RESULTS = Path(__file__).resolve().parent / "results"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="times each fault is injected")
    parser.add_argument("--loss", type=float, default=5.0, help="percent, every link")
    parser.add_argument("--bw", type=float, default=20.0, help="Mbit/s per link (0: unshaped)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--down-for", type=float, default=1.0,
                        help="seconds the switch and the controller stay down")
    parser.add_argument("--worker-timeout", type=float, default=8.0)
    parser.add_argument("--quick", action="store_true", help="one round")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not mininet_ready("chaos"):
        return 2
    from p4hub.experiments.chaos import Chaos, fault_sequence
    from p4hub.topologies.rack import Rack, RackConfig

    rounds = 1 if args.quick else args.rounds
    config = RackConfig(workers=6, bw=args.bw or None, run_name="bench-chaos", p4=True,
                        pcap=False)
    started = time.monotonic()
    with Rack(config) as rack:
        rack.start_pbox(workers=1)
        rack.start_controller(rack.controller_topology(slots=64, job_slots=32,
                                                       worker_timeout=args.worker_timeout))
        chaos = Chaos(rack, loss_percent=args.loss, down_for=args.down_for)
        try:
            chaos.settle()
            iteration_s = statistics.median(
                row["seconds"] for run in (chaos.a, chaos.b) for r in run.lines
                for row in run.events(r, "iteration"))
            for fault in fault_sequence(args.seed, rounds):
                _print(chaos.inject(fault))
            _print(chaos.kill_worker())
            clean = chaos.finish()
        finally:
            chaos.stop()
    rows = [row.as_dict() for row in chaos.rows]
    out = {"bench": "chaos", "rounds": rounds, "loss_percent": args.loss, "bw_mbit": args.bw,
           "seed": args.seed, "down_for_s": args.down_for,
           "worker_timeout_s": args.worker_timeout, "iteration_s": round(iteration_s, 3),
           "rows": rows, "jobs_b_clean": clean, "wall_s": round(time.monotonic() - started, 1),
           "host": platform.node(), "cpus": os.cpu_count()}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "chaos.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"median iteration {iteration_s:.3f} s; {_summary(rows)}; job B runs exited cleanly: "
          f"{clean}")
    return 0 if clean and all(r["recovered"] and r["exact"] for r in rows) else 1


def _print(row) -> None:
    took = "-" if row.recover_s is None else f"{row.recover_s:.2f} s"
    print(f"{row.fault:>10} at {row.at_s:7.1f} s  recovered {str(row.recovered):5}  "
          f"in {took:>8}  exact {row.exact}  {row.detail}", flush=True)


def _summary(rows: list[dict]) -> str:
    parts = []
    for fault in dict.fromkeys(r["fault"] for r in rows):
        mine = [r for r in rows if r["fault"] == fault]
        times = [r["recover_s"] for r in mine if r["recover_s"] is not None]
        worst = f", worst {max(times):.2f} s" if times else ""
        parts.append(f"{fault}: {sum(r['recovered'] for r in mine)}/{len(mine)} recovered"
                     f"{worst}, exact {all(r['exact'] for r in mine)}")
    return "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
