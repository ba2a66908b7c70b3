"""``make run --mode allreduce``: a multi-iteration all-reduce of synthetic, ResNet-50-shaped
gradients on the rack, one table row per iteration (the mode ``make run`` had before it
trained a model).

Each path runs workers/worker.py on every worker: ``switch`` (the controller gives
the job switch slots), ``pbox`` (the same agents, the job placed on the PBox through
JoinJob's placement), ``gloo`` (torch.distributed's ring on the same links). A row has
the iteration's time, goodput, where the blocks were aggregated, the max abs error
against the float64 sum of the unquantized inputs, and whether every worker got exactly
the sum of the quantized inputs, and its CPU use (experiments/cpuload.py): whether the
machine's cores, not the links, were the limit while it ran.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from p4hub.experiments.cpuload import CpuSampler, column
from p4hub.experiments.launch import WorkerRun, run_workers
from p4hub.topologies.rack import AGENT_PORT, Rack, worker_ip
from p4hub.workers import workload


@dataclass
class PathResult:
    name: str
    where: str
    rows: list[dict] = field(default_factory=list)
    ok: bool = True
    problems: list[str] = field(default_factory=list)
    counters: dict = field(default_factory=dict)
    cpu: dict | None = None  # CpuLoad.to_json() over every timed iteration of the path

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
          f"{'max abs err':>12} {'exact':>6} {'same':>5}  cpu")


def _print_row(row: dict) -> None:
    exact = "-" if row["exact"] is None else ("yes" if row["exact"] else "NO")
    same = "yes" if row["same_everywhere"] else "NO"
    print(f"{row['iteration']:>4} {row['seconds']:>8.3f} {row['goodput_mbit']:>15.1f} "
          f"{row['where']:>6} {row['max_abs_err']:>12.3e} {exact:>6} {same:>5}  "
          f"{column(row['cpu'])}", flush=True)


def _collect(name: str, where: str, rack: Rack, args: argparse.Namespace, cpu: CpuSampler,
             worker_args: Callable[[int], list[str]]) -> tuple[PathResult, WorkerRun]:
    result = PathResult(name, where)
    nbytes = 4 * sum(workload.layer_sizes(args.model, args.scale))
    _print_header(f"{name}: {args.workers} workers, {nbytes / 1e6:.2f} MB of gradients "
                  f"per iteration, links {args.bw} Mbit/s, loss {args.loss}%")

    windows: list[tuple[float, float]] = []

    def on_iteration(_key: tuple, by_rank: dict[int, dict]) -> None:
        end = cpu.mark()  # the last rank just reported: the timed all-reduce ended now
        row = _row(where, by_rank, nbytes)
        windows.append((end - row["seconds"], end))
        load = cpu.load(windows[-1:])
        row["cpu"] = load.to_json() if load is not None else None
        result.rows.append(row)
        _print_row(row)

    run = run_workers(rack, worker_args, timeout=args.path_timeout, on_iteration=on_iteration,
                      tag=f"-{name}")
    load = cpu.load(windows)
    result.cpu = load.to_json() if load is not None else None
    for rank, error in sorted(run.errors.items()):
        result.problems.append(f"w{rank + 1}: {error}")
    if run.timed_out:
        result.problems.append(f"workers did not finish within {args.path_timeout} s")
    result.problems += run.exit_problems()
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
            "--placement", placement, "--lanes", str(args.lanes), "--data-ip", worker_ip(rank),
            "--agent-port", str(AGENT_PORT),
            *(["--no-congestion"] if getattr(args, "no_congestion", False) else [])]


def _run_job_path(rack: Rack, args: argparse.Namespace, cpu: CpuSampler, name: str, where: str,
                  placement: str) -> PathResult:
    before = _switch_ports(rack)
    result, run = _collect(name, where, rack, args, cpu, lambda rank: [
        *job_worker_args(rack, args, rank, f"inc-{where}", placement),
        *_training_args(args, rank)])
    after = _switch_ports(rack)
    if before and after:
        result.counters = {"switch_rx": _total(after, "rx") - _total(before, "rx"),
                           "switch_tx": _total(after, "tx") - _total(before, "tx")}
    result.counters |= agent_resends(run)
    wrong = {row["where"] for row in result.rows} - {where}
    if wrong:
        result.problems.append(f"aggregated on {sorted(wrong)}, expected {where}")
        result.ok = False
    return result


def agent_resends(run: WorkerRun) -> dict[str, int]:
    """The agents' datagrams sent, resent and resent early, summed over the ranks (empty
    when no agent reported its counters)."""
    stats = run.agent_stats.values()
    if not stats:
        return {}
    return {f"agent_{key}": sum(s.get(key, 0) for s in stats)
            for key in ("sent", "retransmitted", "early_resends")}


def _switch_ports(rack: Rack) -> dict:
    """Every switch's port counters (leaves and spines on a fabric), by (switch, port)."""
    from p4hub.controller.client import JobClient

    client = JobClient(rack.controller_address, timeout=10.0)
    try:
        return {(name, port): row for name in rack.config.switch_names
                for port, row in client.call("ShowSwitch", name=name).get("ports", {}).items()}
    except Exception:  # noqa: BLE001 - counters are informative only
        return {}
    finally:
        client.close()


def _total(ports: dict, kind: str) -> int:
    return sum(int(row[kind]["packets"]) for row in ports.values())


def run_switch_path(rack: Rack, args: argparse.Namespace, cpu: CpuSampler) -> PathResult:
    return _run_job_path(rack, args, cpu, "switch path", "switch", "auto")


def run_job_pbox_path(rack: Rack, args: argparse.Namespace, cpu: CpuSampler) -> PathResult:
    return _run_job_path(rack, args, cpu, "PBox path (job placed on the PBox)", "pbox", "pbox")


def run_gloo_path(rack: Rack, args: argparse.Namespace, cpu: CpuSampler) -> PathResult:
    result, _ = _collect("Gloo ring (torch.distributed)", "gloo", rack, args, cpu, lambda rank: [
        "--backend", "gloo", "--master", "10.0.0.1:29500", *_training_args(args, rank)])
    return result


PATHS: dict[str, Callable[[Rack, argparse.Namespace, CpuSampler], PathResult]] = {
    "switch": run_switch_path,
    "pbox": run_job_pbox_path,
    "gloo": run_gloo_path,
}


def path_report(result: PathResult) -> dict:
    """One path for the run's JSON: its rows (each with its ``cpu``) and the path's ``cpu``."""
    return {"name": result.name, "where": result.where, "ok": result.ok,
            "problems": result.problems, "median_seconds": result.median_seconds(),
            "rows": result.rows, "counters": result.counters, "cpu": result.cpu}


def summarize(results: list[PathResult], args: argparse.Namespace) -> None:
    nbytes = 4 * sum(workload.layer_sizes(args.model, args.scale))
    link_s = nbytes * 8 / (args.bw * 1e6) if args.bw else float("nan")
    n = args.workers
    pboxes = getattr(args, "pboxes", 1)
    pbox_bw = getattr(args, "pbox_bw", 0.0) or args.bw
    # P PBoxes share the N workers' traffic; no worker sends or gets less than size
    pbox_s = max(link_s, n * link_s * args.bw / (pboxes * pbox_bw)) if args.bw else link_s
    what = "single PBox N x size / bw" if pboxes == 1 else \
        f"{pboxes} PBoxes max(size / bw, N x size / ({pboxes} x {pbox_bw:g} Mbit/s))"
    print(f"\nsummary ({n} workers, {nbytes / 1e6:.2f} MB, {args.bw} Mbit/s, loss {args.loss}%)"
          f"; floors: {what} = {pbox_s:.3f} s, ring 2(N-1)/N x size / bw"
          f" = {2 * (n - 1) / n * link_s:.3f} s, switch size / bw = {link_s:.3f} s")
    floors = {"switch": link_s, "pbox": pbox_s, "gloo": 2 * (n - 1) / n * link_s}
    print(f"  {'path':<36} {'median s':>9} {'goodput Mbit/s':>15} {'floor s':>8} "
          f"{'x floor':>8}  {'status':<6}  cpu (over the timed iterations)")
    for result in results:
        status = "ok" if result.ok else "FAILED"
        median = result.median_seconds()
        floor = floors.get(result.where, float("nan"))
        print(f"  {result.name:<36} {median:>9.3f} {8 * nbytes / median / 1e6:>15.1f} "
              f"{floor:>8.3f} {median / floor:>8.2f}  {status:<6}  {column(result.cpu)}")
        for problem in result.problems:
            print(f"    problem: {problem}")
        counters = result.counters
        if "switch_rx" in counters:
            print(f"    switch port counters during the path (every switch's ports): "
                  f"{counters['switch_rx']} packets in, {counters['switch_tx']} out")
        if counters.get("agent_sent"):
            print(f"    agents resent {counters['agent_retransmitted']} of "
                  f"{counters['agent_sent']} datagrams "
                  f"({counters['agent_retransmitted'] / counters['agent_sent']:.3f} per packet;"
                  f" {counters['agent_early_resends']} early, before their timeout)")
