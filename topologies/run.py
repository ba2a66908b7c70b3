"""``make run``: a multi-iteration all-reduce of ResNet-50-shaped gradients on the rack.

    python -m topologies.run [--workers 4] [--bw 100] [--loss 0] [--iterations 12]
                             [--scale 0.02] [--paths pbox[,gloo]] [--cli]

Brings up the Mininet rack (topologies/rack.py), starts the PBox, runs the workers
(topologies/worker.py) and prints one row per iteration: time, goodput, where the
chunks were aggregated, the max abs error against the float64 sum of the unquantized
inputs, and whether every worker got exactly the sum of the quantized inputs.
Each aggregation path is a function (rack, args) -> PathResult in PATHS, so a switch
path slots in beside the PBox and Gloo ones. Exits 0 only if every check passed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from topologies import workload
from topologies.launch import WorkerRun, run_workers
from topologies.rack import PBOX_IP, PYTHON, Rack, RackConfig, RackError, exit_on_sigterm

JOB_ID = 1
SLOT_COUNT = 4096


@dataclass
class PathResult:
    name: str
    where: str
    rows: list[dict] = field(default_factory=list)
    ok: bool = True
    problems: list[str] = field(default_factory=list)
    counters: dict = field(default_factory=dict)

    def median_seconds(self) -> float:
        return statistics.median(r["seconds"] for r in self.rows) if self.rows else float("nan")


def _training_args(args: argparse.Namespace, rank: int) -> list[str]:
    return ["--rank", str(rank), "--world", str(args.workers), "--scale", str(args.scale),
            "--iterations", str(args.iterations), "--seed", str(args.seed), "--check",
            "--timeout", str(args.agent_timeout), "--rto-max", str(args.rto_max)]


def _row(where: str, by_rank: dict[int, dict], bw_bytes: int) -> dict:
    lines = list(by_rank.values())
    seconds = max(line["seconds"] for line in lines)  # done when the last worker is
    exact = [line.get("exact") for line in lines]
    return {
        "iteration": lines[0]["iteration"],
        "seconds": seconds,
        "goodput_mbit": 8 * bw_bytes / seconds / 1e6,
        "where": where,
        "max_abs_err": max(line["max_abs_err"] for line in lines),
        "exact": None if None in exact else all(exact),
        "same_everywhere": len({line["digest"] for line in lines}) == 1,
    }


def _print_header(title: str) -> None:
    print(f"\n{title}")
    print(f"{'iter':>4} {'time s':>8} {'goodput Mbit/s':>15} {'where':>6} "
          f"{'max abs err':>12} {'exact':>6} {'same':>5}")


def _print_row(row: dict) -> None:
    exact = "-" if row["exact"] is None else ("yes" if row["exact"] else "NO")
    same = "yes" if row["same_everywhere"] else "NO"
    print(f"{row['iteration']:>4} {row['seconds']:>8.3f} {row['goodput_mbit']:>15.1f} "
          f"{row['where']:>6} {row['max_abs_err']:>12.3e} {exact:>6} {same:>5}", flush=True)


def _collect(name: str, where: str, rack: Rack, args: argparse.Namespace,
             worker_args: Callable[[int], list[str]]) -> tuple[PathResult, WorkerRun]:
    result = PathResult(name, where)
    nbytes = 4 * sum(workload.layer_sizes(args.model, args.scale))
    _print_header(f"{name}: {args.workers} workers, {nbytes / 1e6:.2f} MB of gradients "
                  f"per iteration, links {args.bw} Mbit/s, loss {args.loss}%")

    def on_iteration(_key: tuple, by_rank: dict[int, dict]) -> None:
        row = _row(where, by_rank, nbytes)
        result.rows.append(row)
        _print_row(row)

    run = run_workers(rack, worker_args, timeout=args.path_timeout, on_iteration=on_iteration,
                      tag=f"-{name}")
    for rank, error in sorted(run.errors.items()):
        result.problems.append(f"w{rank + 1}: {error}")
    if run.timed_out:
        result.problems.append(f"workers did not finish within {args.path_timeout} s")
    if len(result.rows) != args.iterations:
        result.problems.append(f"{len(result.rows)} of {args.iterations} iterations completed")
    for row in result.rows:
        if row["exact"] is False or not row["same_everywhere"]:
            result.problems.append(f"iteration {row['iteration']}: wrong or differing results")
    result.ok = run.ok and not result.problems
    return result, run


def run_pbox_path(rack: Rack, args: argparse.Namespace) -> PathResult:
    rack.start_pbox(jobs=[f"{JOB_ID}:{args.workers}:0:{SLOT_COUNT}"], workers=args.pbox_workers)
    try:
        result, _ = _collect("PBox path", "pbox", rack, args, lambda rank: [
            "--backend", "pbox", "--job", str(JOB_ID), "--pbox", f"{PBOX_IP}:48879",
            *_training_args(args, rank)])
    finally:
        lines = rack.stop_pbox()
    exit_line = next((line for line in reversed(lines) if line.get("event") == "exit"), {})
    result.counters = exit_line.get("jobs", {}).get(str(JOB_ID), {})
    return result


def run_gloo_path(rack: Rack, args: argparse.Namespace) -> PathResult:
    result, _ = _collect("Gloo ring (torch.distributed)", "gloo", rack, args, lambda rank: [
        "--backend", "gloo", "--master", "10.0.0.1:29500", *_training_args(args, rank)])
    return result


PATHS: dict[str, Callable[[Rack, argparse.Namespace], PathResult]] = {
    "pbox": run_pbox_path,
    "gloo": run_gloo_path,
}


def summarize(results: list[PathResult], args: argparse.Namespace) -> None:
    nbytes = 4 * sum(workload.layer_sizes(args.model, args.scale))
    link_s = nbytes * 8 / (args.bw * 1e6) if args.bw else float("nan")
    n = args.workers
    print(f"\nsummary ({n} workers, {nbytes / 1e6:.2f} MB, {args.bw} Mbit/s, loss {args.loss}%)"
          f"; floors: single PBox N x size / bw = {n * link_s:.3f} s, ring 2(N-1)/N x size / bw"
          f" = {2 * (n - 1) / n * link_s:.3f} s, switch size / bw = {link_s:.3f} s")
    for result in results:
        status = "ok" if result.ok else "FAILED"
        print(f"  {result.name:<32} median {result.median_seconds():.3f} s  {status}")
        for problem in result.problems:
            print(f"    problem: {problem}")
        if result.counters:
            c = result.counters
            rejected = sum(c.get("rejected", {}).values())
            print(f"    PBox counters: {c['contributions']} contributions, {c['duplicates']} "
                  f"duplicates, {c['resent_results']} results resent, {rejected} rejected")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="topologies.run", description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--bw", type=float, default=100.0, help="link bandwidth, Mbit/s")
    parser.add_argument("--loss", type=float, default=0.0, help="loss on every link, percent")
    parser.add_argument("--loss-method", choices=("nft", "iptables"), default="nft",
                        help="host-to-switch drops: nft egress (default) or iptables OUTPUT")
    parser.add_argument("--delay", type=float, default=None,
                        help="ms; not supported on this kernel (no netem): warns")
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--scale", type=float, default=0.02,
                        help="fraction of ResNet-50's 25.6M parameters per iteration")
    parser.add_argument("--model", default=str(workload.DEFAULT_MODEL))
    parser.add_argument("--paths", default="pbox", help=f"comma list of {','.join(PATHS)}")
    parser.add_argument("--pbox-workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--agent-timeout", type=float, default=30.0)
    parser.add_argument("--rto-max", type=float, default=0.0,
                        help="agents' largest retransmission timeout, s (0: agent default)")
    parser.add_argument("--path-timeout", type=float, default=600.0)
    parser.add_argument("--cli", action="store_true", help="open the Mininet CLI instead")
    args = parser.parse_args(argv)
    unknown = set(args.paths.split(",")) - set(PATHS)
    if unknown:
        parser.error(f"unknown paths {sorted(unknown)}; choose from {sorted(PATHS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    exit_on_sigterm()
    config = RackConfig(workers=args.workers, bw=args.bw or None, loss=args.loss,
                        loss_method=args.loss_method, delay_ms=args.delay, run_name="run")
    try:
        with Rack(config) as rack:
            print(f"rack up: {args.workers} workers, PBox at {PBOX_IP}, logs in {rack.log_dir}")
            if args.cli:
                return _cli(rack, args)
            results = [PATHS[name](rack, args) for name in args.paths.split(",")]
    except RackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; the rack was stopped", file=sys.stderr)
        return 130
    summarize(results, args)
    return 0 if all(r.ok for r in results) else 1


def _cli(rack: Rack, args: argparse.Namespace) -> int:
    from mininet.cli import CLI

    rack.start_pbox(jobs=[f"{JOB_ID}:{args.workers}:0:{SLOT_COUNT}"], workers=args.pbox_workers)
    print(f"PBox running (job {JOB_ID}, {args.workers} workers, logs in {rack.log_dir}).\n"
          f"Try, on every worker wR (rank R-1):  wR {PYTHON} -m topologies.worker --rank R-1 "
          f"--world {args.workers} --iterations 2 --check &")
    CLI(rack.net)
    return 0


if __name__ == "__main__":
    sys.exit(main())
