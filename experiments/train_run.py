"""``make run``'s default: train DigitsNet on the rack three ways and compare them.

Every path runs ``python -m p4hub.workers.train.loop`` on the same worker hosts with the
same seed, so the weights, the global batches and their order are the same; only the
way gradients are summed differs:

* ``switch``: DDP over the ``p4hub`` backend; the group joins a job through the
  controller's JobService, which gives it switch slots (aggregate.p4 sums in the switch);
* ``pbox``: the same, with the job placed on the PBox (``P4HUB_PLACEMENT=pbox``); with
  ``--scatter network`` both paths' reduce-scatters and all-gathers (FSDP's) run in
  the network (``P4HUB_SCATTER=network``: scatter rounds, each rank receiving only its
  own shard's results; gather rounds, each rank sending only its own shard);
* ``precision`` (not in the default set): the switch path with the precision option
  (``P4HUB_PRECISION``, ``--precision``): blocks int32 quantization cannot carry within
  the bound go as float32 through the switch to the job's float route on the PBox;
* ``gloo``: DDP over Gloo's ring, over TCP on the same links: the reference;
* ``hook`` (not in the default set): DDP over Gloo with its buckets averaged by
  ``p4hub_hook`` through a p4hub group whose job is on the switch.

Checks (the run fails if one does not hold): every rank of a path ends each epoch with
the same weights (``param_digest``); the switch and PBox paths are bit-identical to
each other (both return exactly the sum of the quantized gradients; the precision path
sums some blocks in float and is left out; a reduce-scatter in the network quantizes
each shard on its own, so with ``--scatter network`` the switch and PBox paths are
compared with each other only); and each p4hub
path's loss curve stays within ``LOSS_TOLERANCE`` of Gloo's at every step, with the
final test accuracy within ``ACCURACY_TOLERANCE``. Why those tolerances: the only
difference from Gloo is quantization, at most about 2**-28 of each 64-gradient
block's largest magnitude with 4 workers (hosts/quantize.py); measured on this rack,
the per-step losses differ from Gloo's by under 1e-5 over three epochs, and the
tolerances leave a wide margin above that while staying far below what a wrong sum
does (a gradient lost or counted twice moves the loss by 1e-2 or more within a few
steps).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from p4hub.experiments.cpuload import CpuSampler, column
from p4hub.experiments.launch import WorkerRun, run_ranks
from p4hub.topologies.rack import AGENT_PORT, Rack, mgmt_ip, worker_ip

LOSS_TOLERANCE = 1e-3  # absolute, on the global batch's mean cross-entropy
ACCURACY_TOLERANCE = 2 / 360  # two test images
STORE_PORT = 29500  # + the path's index: every path gets a fresh c10d store
# The two step times printed are different statistics, so they have different labels.
# An epoch row: every rank's median step time over the epoch (the loop's
# seconds_per_step), the slowest rank's.
EPOCH_STEP_LABEL = "slowest rank's median s/step"
# The summary: each global step timed by its slowest rank (a step is done when every
# rank is), the median over the run's steps; samples/s is derived from it.
SUMMARY_STEP_LABEL = "median s/global step"


@dataclass(frozen=True)
class TrainPath:
    name: str  # switch, pbox, gloo
    title: str
    comm: str  # the loop's --comm
    placement: str = ""  # P4HUB_PLACEMENT for the p4hub paths
    precision: bool = False  # P4HUB_PRECISION=--precision

    @property
    def exact(self) -> bool:
        """Returns exactly the sum of the quantized gradients (DDP over the backend,
        without the precision option's float blocks)."""
        return self.comm == "p4hub" and not self.precision

    @property
    def expected_where(self) -> str | None:
        """Where its job must aggregate (None: wherever)."""
        return {"auto": "switch", "pbox": "pbox"}.get(self.placement)


PATHS = {
    "switch": TrainPath("switch", "switch (p4hub backend, job on the switch)", "p4hub", "auto"),
    "pbox": TrainPath("pbox", "PBox (p4hub backend, job on the PBox)", "p4hub", "pbox"),
    "gloo": TrainPath("gloo", "Gloo ring (torch.distributed)", "gloo"),
    "hook": TrainPath("hook", "Gloo DDP + p4hub hook (job on the switch)", "hook", "auto"),
    "precision": TrainPath("precision", "precision (switch, float blocks on PBox)",
                           "p4hub", "auto", precision=True),
}


@dataclass
class TrainResult:
    path: TrainPath
    world: int
    steps: dict[int, dict[int, dict]] = field(default_factory=dict)  # step -> rank -> line
    epochs: dict[int, dict[int, dict]] = field(default_factory=dict)  # epoch -> rank -> line
    done: dict[int, dict] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    run: WorkerRun = field(default_factory=WorkerRun)
    # CPU use (CpuLoad.to_json()) per epoch, timed from the start of its first step to the
    # moment every rank reported the epoch, and over all those windows of the path
    epoch_cpu: dict[int, dict | None] = field(default_factory=dict)
    cpu: dict | None = None
    scatter: str = "allreduce"  # P4HUB_SCATTER of its ranks
    epoch_start: dict[int, float] = field(default_factory=dict)  # monotonic s
    cpu_windows: list[tuple[float, float]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def losses(self) -> list[float]:
        """Per step, the mean of the ranks' losses: the global batch's loss."""
        return [statistics.fmean(line["loss"] for line in self.steps[s].values())
                for s in sorted(self.steps) if len(self.steps[s]) == self.world]

    def step_seconds(self) -> list[float]:
        """Per step, the slowest rank's time (a step is done when every rank is)."""
        return [max(line["seconds"] for line in self.steps[s].values())
                for s in sorted(self.steps) if len(self.steps[s]) == self.world]

    def epoch_rows(self) -> list[dict]:
        return [{**_epoch_row(e, by_rank), "cpu": self.epoch_cpu.get(e)}
                for e, by_rank in sorted(self.epochs.items()) if len(by_rank) == self.world]

    def median_step_seconds(self) -> float:
        seconds = self.step_seconds()
        return statistics.median(seconds) if seconds else float("nan")

    def float_share(self) -> tuple[int, int] | None:
        """Rank 0's float32 blocks and all its first transmissions (PRIMEs included),
        from its backend's counters; None where it reported none."""
        stats = self.done.get(0, {}).get("stats") or {}
        if "float_blocks" not in stats:
            return None
        return int(stats["float_blocks"]), int(stats.get("sent", 0))

    def where(self) -> str:
        places = {line.get("where", self.path.name) for line in self.done.values()}
        return "/".join(sorted(places)) or "?"


def _epoch_row(epoch: int, by_rank: dict[int, dict]) -> dict:
    lines = list(by_rank.values())
    return {"epoch": epoch, "train_loss": statistics.fmean(x["train_loss"] for x in lines),
            "test_accuracy": lines[0]["test_accuracy"], "test_loss": lines[0]["test_loss"],
            "seconds_per_step": max(x["seconds_per_step"] for x in lines),
            "same_weights": len({x["param_digest"] for x in lines}) == 1,
            "digest": lines[0]["param_digest"]}


def loop_args(path: TrainPath, args: argparse.Namespace, rank: int, index: int) -> list[str]:
    return ["-m", "p4hub.workers.train.loop", "--comm", path.comm, "--rank", str(rank),
            "--world", str(args.workers), "--master", f"{store_host()}:{STORE_PORT + index}",
            "--epochs", str(args.epochs), "--batch", str(args.batch), "--seed", str(args.seed),
            "--timeout", str(args.agent_timeout),
            "--schedule", getattr(args, "schedule", "ddp"),
            "--hidden", str(getattr(args, "hidden", 0))]


def store_host() -> str:
    """Rank 0's management address: the c10d store's TCP stays off the data links."""
    return mgmt_ip(worker_ip(0))


def p4hub_env(rack: Rack, path: TrainPath, args: argparse.Namespace, rank: int) -> dict:
    env = {"P4HUB_CONTROLLER": rack.controller_address, "P4HUB_DATA_IP": worker_ip(rank),
           "P4HUB_PORT": str(AGENT_PORT), "P4HUB_JOB_NAME": f"train-{path.name}",
           "P4HUB_PLACEMENT": path.placement, "P4HUB_LANES": str(args.lanes)}
    if args.rto:
        env["P4HUB_RTO"] = str(args.rto)
    if args.rto_max:
        env["P4HUB_RTO_MAX"] = str(args.rto_max)
    if path.precision:
        env["P4HUB_PRECISION"] = repr(args.precision)
    if scatter_of(path, args) == "network":
        env["P4HUB_SCATTER"] = "network"
    return env


def scatter_of(path: TrainPath, args: argparse.Namespace) -> str:
    """Where ``path``'s reduce-scatters run (P4HUB_SCATTER): in the network with
    ``--scatter network`` on the p4hub backend's exact paths (switch and PBox: scatter
    rounds on either; the precision option's float blocks cannot be laid out by shard)."""
    network = path.exact and getattr(args, "scatter", "allreduce") == "network"
    return "network" if network else "allreduce"


def run_path(rack: Rack, path: TrainPath, index: int, args: argparse.Namespace,
             observe: Callable[[int, dict], None] | None = None,
             cpu: CpuSampler | None = None) -> TrainResult:
    """Train on every worker over ``path``; ``observe`` also sees every JSON line; with
    ``cpu``, each epoch and the path get their CPU use (``epoch_cpu``, ``cpu``)."""
    result = TrainResult(path, args.workers)
    print(f"\n{path.title}: {args.workers} workers x batch {args.batch}, {args.epochs} epochs, "
          f"links {args.bw} Mbit/s, loss {args.loss}%", flush=True)
    print(f"{'epoch':>5} {'train loss':>11} {'test acc':>9} {'test loss':>10} "
          f"{EPOCH_STEP_LABEL} {'same weights':>13}  cpu", flush=True)

    def on_line(rank: int, line: dict) -> None:
        _record(result, rank, line, cpu)
        if observe is not None:
            observe(rank, line)

    env = None if path.comm == "gloo" else (lambda rank: p4hub_env(rack, path, args, rank))
    result.scatter = scatter_of(path, args)
    run_ranks(rack, lambda rank: loop_args(path, args, rank, index), args.path_timeout,
              on_line, result.run, tag=f"-{path.name}", env=env)
    if cpu is not None:
        load = cpu.load(result.cpu_windows)
        result.cpu = load.to_json() if load is not None else None
    _check_path(result, args)
    return result


def _record(result: TrainResult, rank: int, line: dict, cpu: CpuSampler | None = None) -> None:
    event = line.get("event")
    if event == "step":
        result.steps.setdefault(line["step"], {})[rank] = line
        if cpu is not None:  # the epoch's timed work began with its earliest step
            began = cpu.clock() - line["seconds"]
            epoch = line.get("epoch", 0)
            result.epoch_start[epoch] = min(began, result.epoch_start.get(epoch, began))
    elif event == "epoch":
        by_rank = result.epochs.setdefault(line["epoch"], {})
        by_rank[rank] = line
        if len(by_rank) == result.world:
            if cpu is not None:
                _epoch_cpu(result, line["epoch"], cpu)
            _print_epoch(_epoch_row(line["epoch"], by_rank), result.epoch_cpu.get(line["epoch"]))
    elif event == "done":
        result.done[rank] = line
    elif event == "error":
        result.errors[rank] = line.get("error", "?")


def _epoch_cpu(result: TrainResult, epoch: int, cpu: CpuSampler) -> None:
    """Every rank reported ``epoch`` (they are alive: mark now, none of their CPU is lost)."""
    end = cpu.mark()
    start = result.epoch_start.get(epoch)
    if start is None:
        result.epoch_cpu[epoch] = None
        return
    result.cpu_windows.append((start, end))
    load = cpu.load([(start, end)])
    result.epoch_cpu[epoch] = load.to_json() if load is not None else None


def _print_epoch(row: dict, cpu: dict | None = None) -> None:
    same = "yes" if row["same_weights"] else "NO"
    width = len(EPOCH_STEP_LABEL)
    print(f"{row['epoch'] + 1:>5} {row['train_loss']:>11.4f} {row['test_accuracy']:>9.3f} "
          f"{row['test_loss']:>10.4f} {row['seconds_per_step']:>{width}.3f} {same:>13}  "
          f"{column(cpu)}", flush=True)


def _check_path(result: TrainResult, args: argparse.Namespace) -> None:
    problems = result.problems
    problems += [f"w{rank + 1}: {error}" for rank, error in sorted(result.errors.items())]
    if result.run.timed_out:
        problems.append(f"the workers did not finish within {args.path_timeout} s")
    problems += result.run.exit_problems()  # e.g. "rank 1 (w2) killed by SIGSEGV; ..."
    rows = result.epoch_rows()
    if len(rows) != args.epochs:
        problems.append(f"{len(rows)} of {args.epochs} epochs completed")
    problems += [f"epoch {row['epoch'] + 1}: the ranks' weights differ"
                 for row in rows if not row["same_weights"]]
    expected = result.path.expected_where
    if result.path.precision and getattr(args, "topo", "rack") == "leafspine":
        expected = "pbox"  # a job over racks cannot carry float blocks: it goes to a PBox
    if expected and result.done and result.where() != expected:
        problems.append(f"aggregated on {result.where()}, expected {expected}")


def compare(results: dict[str, TrainResult]) -> list[str]:
    """Cross-path checks; each problem is also added to the path it concerns."""
    problems = []
    gloo = results.get("gloo")
    for name, result in results.items():
        if result.path.comm == "gloo" or gloo is None or not result.ok or not gloo.ok:
            continue
        for problem in _against_gloo(result, gloo):
            result.problems.append(problem)
            problems.append(f"{name}: {problem}")
    # DDP over the p4hub backend sums pre-divided gradients exactly wherever the job is,
    # so those paths must agree bit for bit (the hook averages instead: other roundings),
    # as must reduce-scatters in the network on the switch and on the PBox (each shard
    # blocked on its own: other exponents than the all-reduce's, the same on both)
    for mode in ("allreduce", "network"):
        exact = [r for r in results.values() if r.path.exact and r.ok and r.scatter == mode]
        for other in exact[1:]:
            if [row["digest"] for row in other.epoch_rows()] != \
                    [row["digest"] for row in exact[0].epoch_rows()]:
                other.problems.append(f"weights differ from the {exact[0].path.name} path's "
                                      f"(both must be exact)")
                problems.append(f"{other.path.name} and {exact[0].path.name} paths are not "
                                f"bit-identical")
    return problems


def _against_gloo(result: TrainResult, gloo: TrainResult) -> list[str]:
    ours, theirs = result.losses(), gloo.losses()
    if len(ours) != len(theirs):
        return [f"{len(ours)} steps, Gloo {len(theirs)}"]
    worst = max_loss_gap(result, gloo)
    problems = []
    if worst > LOSS_TOLERANCE:
        problems.append(f"loss differs from Gloo's by up to {worst:.2e} "
                        f"(tolerance {LOSS_TOLERANCE:.0e})")
    accuracy = result.epoch_rows()[-1]["test_accuracy"]
    reference = gloo.epoch_rows()[-1]["test_accuracy"]
    if abs(accuracy - reference) > ACCURACY_TOLERANCE + 1e-12:
        problems.append(f"final test accuracy {accuracy:.3f}, Gloo {reference:.3f}")
    return problems


def max_loss_gap(result: TrainResult, gloo: TrainResult) -> float:
    pairs = zip(result.losses(), gloo.losses(), strict=False)
    return max((abs(a - b) for a, b in pairs), default=float("nan"))


def summarize(results: dict[str, TrainResult], args: argparse.Namespace) -> None:
    gloo = results.get("gloo")
    gloo_rate = _samples_per_s(gloo, args) if gloo and gloo.ok else float("nan")
    width = len(SUMMARY_STEP_LABEL)
    print(f"\nsummary ({args.workers} workers, batch {args.batch} per worker, {args.epochs} "
          f"epochs, {args.bw} Mbit/s links, loss {args.loss}%; loss tolerance vs Gloo "
          f"{LOSS_TOLERANCE:.0e}, accuracy tolerance {ACCURACY_TOLERANCE:.4f})")
    print(f"  {'path':<42} {'where':>6} {'test acc':>8} {SUMMARY_STEP_LABEL} {'samples/s':>9} "
          f"{'x Gloo':>7} {'max |loss - Gloo|':>18}  {'status':<6}  cpu (over the epochs)")
    for result in results.values():
        rows = result.epoch_rows()
        accuracy = rows[-1]["test_accuracy"] if rows else float("nan")
        rate = _samples_per_s(result, args)
        gap = max_loss_gap(result, gloo) if gloo and result is not gloo else 0.0
        status = "ok" if result.ok else "FAILED"
        print(f"  {result.path.title:<42} {result.where():>6} {accuracy:>8.3f} "
              f"{result.median_step_seconds():>{width}.3f} {rate:>9.0f} {rate / gloo_rate:>7.2f} "
              f"{gap:>18.2e}  {status:<6}  {column(result.cpu)}")
        floats = result.float_share() if result.path.precision else None
        if floats is not None:
            print(f"    float32 blocks (rank 0): {floats[0]} of {floats[1]} packets sent "
                  f"({100 * floats[0] / max(floats[1], 1):.2f}%), bound {args.precision:g}")
        for problem in result.problems:
            print(f"    problem: {problem}")


def _samples_per_s(result: TrainResult | None, args: argparse.Namespace) -> float:
    if result is None:
        return float("nan")
    return args.workers * args.batch / result.median_step_seconds()
