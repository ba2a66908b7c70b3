"""``make run``: a multi-iteration all-reduce of ResNet-50-shaped gradients on the rack.

    python -m topologies.run [--workers 4] [--bw 5] [--loss 0] [--iterations 4]
                             [--scale 0.01] [--paths switch,pbox,gloo] [--cli]

Brings up the Mininet rack with the P4 switch running p4src/aggregate.p4
(topologies/rack.py, topologies/p4switch.py), starts the PBox and p4hub-controller,
runs the workers (topologies/worker.py; they JoinJob through the controller and
all-reduce against the aggregator it names) and prints one row per iteration: time,
goodput, where the chunks were aggregated, the max abs error against the float64 sum of
the unquantized inputs, and whether every worker got exactly the sum of the quantized
inputs. Paths: ``switch`` (the controller gives the job switch slots), ``pbox`` (the
same agents, the job placed on the PBox through JoinJob's placement), ``gloo``
(torch.distributed's ring on the same links).
Exits 0 only if every check passed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from topologies import workload
from topologies.launch import WorkerRun, run_workers
from topologies.rack import (
    PBOX_IP,
    PYTHON,
    Rack,
    RackConfig,
    RackError,
    exit_on_sigterm,
    worker_ip,
)

AGENT_PORT = 47000
DEFAULT_BW = 5.0  # Mbit/s: see docs/notes/inc-rack.md for why


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
            "--timeout", str(args.agent_timeout), "--rto-max", str(args.rto_max),
            "--rto", str(args.rto),
            *([] if args.per_layer else ["--fuse"])]


def _row(where: str, by_rank: dict[int, dict], bw_bytes: int) -> dict:
    lines = list(by_rank.values())
    seconds = max(line["seconds"] for line in lines)  # done when the last worker is
    where = "/".join(sorted({line.get("where", where) for line in lines}))
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


def job_worker_args(rack: Rack, args: argparse.Namespace, rank: int, job_name: str,
                    placement: str) -> list[str]:
    return ["--backend", "job", "--controller", rack.controller_address, "--job-name", job_name,
            "--placement", placement, "--data-ip", worker_ip(rank),
            "--agent-port", str(AGENT_PORT)]


def _run_job_path(rack: Rack, args: argparse.Namespace, name: str, where: str,
                  placement: str) -> PathResult:
    before = _switch_ports(rack)
    result, _ = _collect(name, where, rack, args, lambda rank: [
        *job_worker_args(rack, args, rank, f"inc-{where}", placement),
        *_training_args(args, rank)])
    after = _switch_ports(rack)
    if before and after:
        result.counters = {"switch_rx": _total(after, "rx") - _total(before, "rx"),
                           "switch_tx": _total(after, "tx") - _total(before, "tx")}
    wrong = {row["where"] for row in result.rows} - {where}
    if wrong:
        result.problems.append(f"aggregated on {sorted(wrong)}, expected {where}")
        result.ok = False
    return result


def _switch_ports(rack: Rack) -> dict:
    from controller.client import JobClient

    client = JobClient(rack.controller_address, timeout=10.0)
    try:
        return client.call("ShowSwitch", name="s1").get("ports", {})
    except Exception:  # noqa: BLE001 - counters are informative only
        return {}
    finally:
        client.close()


def _total(ports: dict, kind: str) -> int:
    return sum(int(row[kind]["packets"]) for row in ports.values())


def run_switch_path(rack: Rack, args: argparse.Namespace) -> PathResult:
    return _run_job_path(rack, args, "switch path", "switch", "auto")


def run_job_pbox_path(rack: Rack, args: argparse.Namespace) -> PathResult:
    return _run_job_path(rack, args, "PBox path (job placed on the PBox)", "pbox", "pbox")


def run_gloo_path(rack: Rack, args: argparse.Namespace) -> PathResult:
    result, _ = _collect("Gloo ring (torch.distributed)", "gloo", rack, args, lambda rank: [
        "--backend", "gloo", "--master", "10.0.0.1:29500", *_training_args(args, rank)])
    return result


PATHS: dict[str, Callable[[Rack, argparse.Namespace], PathResult]] = {
    "switch": run_switch_path,
    "pbox": run_job_pbox_path,
    "gloo": run_gloo_path,
}


def summarize(results: list[PathResult], args: argparse.Namespace) -> None:
    nbytes = 4 * sum(workload.layer_sizes(args.model, args.scale))
    link_s = nbytes * 8 / (args.bw * 1e6) if args.bw else float("nan")
    n = args.workers
    print(f"\nsummary ({n} workers, {nbytes / 1e6:.2f} MB, {args.bw} Mbit/s, loss {args.loss}%)"
          f"; floors: single PBox N x size / bw = {n * link_s:.3f} s, ring 2(N-1)/N x size / bw"
          f" = {2 * (n - 1) / n * link_s:.3f} s, switch size / bw = {link_s:.3f} s")
    floors = {"switch": link_s, "pbox": n * link_s, "gloo": 2 * (n - 1) / n * link_s}
    print(f"  {'path':<36} {'median s':>9} {'goodput Mbit/s':>15} {'floor s':>8} "
          f"{'x floor':>8}  status")
    for result in results:
        status = "ok" if result.ok else "FAILED"
        median = result.median_seconds()
        floor = floors.get(result.where, float("nan"))
        print(f"  {result.name:<36} {median:>9.3f} {8 * nbytes / median / 1e6:>15.1f} "
              f"{floor:>8.3f} {median / floor:>8.2f}  {status}")
        for problem in result.problems:
            print(f"    problem: {problem}")
        if result.counters:
            print(f"    switch port counters during the path: {result.counters['switch_rx']} "
                  f"packets in, {result.counters['switch_tx']} out")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="topologies.run", description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--bw", type=float, default=DEFAULT_BW,
                        help="link bandwidth, Mbit/s (0: unshaped)")
    parser.add_argument("--loss", type=float, default=0.0, help="loss on every link, percent")
    parser.add_argument("--loss-method", choices=("nft", "iptables"), default="nft",
                        help="host-to-switch drops: nft egress (default) or iptables OUTPUT")
    parser.add_argument("--delay", type=float, default=None,
                        help="ms; not supported on this kernel (no netem): warns")
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--scale", type=float, default=0.005,
                        help="fraction of ResNet-50's 25.6M parameters per iteration")
    parser.add_argument("--model", default=str(workload.DEFAULT_MODEL))
    parser.add_argument("--paths", default="switch,pbox,gloo",
                        help=f"comma list of {','.join(PATHS)}")
    parser.add_argument("--grpc-port", type=int, default=50051, help="the switch's P4Runtime port")
    parser.add_argument("--controller-port", type=int, default=50060, help="job API port")
    parser.add_argument("--no-pcap", action="store_true",
                        help="the switch writes no pcaps (they cost switch CPU per packet)")
    parser.add_argument("--pbox-workers", type=int, default=2)
    parser.add_argument("--per-layer", action="store_true",
                        help="one all-reduce per layer (default: one fused bucket, as DDP and "
                             "the Gloo path do)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--agent-timeout", type=float, default=30.0)
    parser.add_argument("--rto-max", type=float, default=0.0,
                        help="agents' largest retransmission timeout, s (0: agent default)")
    parser.add_argument("--rto", type=float, default=0.0,
                        help="agents' first retransmission timeout, s (0: agent default)")
    parser.add_argument("--job-slots", type=int, default=32,
                        help="switch slots per job (= the agents' window)")
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
                        loss_method=args.loss_method, delay_ms=args.delay, run_name="run",
                        p4=True, grpc_port=args.grpc_port, pcap=not args.no_pcap,
                        controller_port=args.controller_port)
    try:
        with Rack(config) as rack:
            rack.start_pbox(workers=args.pbox_workers)
            rack.start_controller(rack.controller_topology(job_slots=args.job_slots))
            print(f"rack up: {args.workers} workers, P4 switch s1 ({rack.switch.command()[0]}, "
                  f"P4Runtime 127.0.0.1:{args.grpc_port}), PBox at {PBOX_IP}, controller at "
                  f"{rack.controller_address}; logs in {rack.log_dir}")
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

    print(f"Switch, PBox and controller running (logs in {rack.log_dir}).\n"
          f"Try, on every worker wR (rank R-1):  wR {PYTHON} -m topologies.worker --backend job "
          f"--controller {rack.controller_address} --data-ip 10.0.0.R --rank R-1 "
          f"--world {args.workers} --iterations 2 --check &\n"
          f"and from the root shell: {PYTHON} -m controller.cli --controller "
          f"{rack.controller_address} jobs")
    CLI(rack.net)
    return 0


if __name__ == "__main__":
    sys.exit(main())
