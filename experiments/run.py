"""``make run``: bring up the Mininet rack and train a model on it three ways.

    python -m p4hub.experiments.run [--workers 4] [--bw 5] [--loss 0] [--epochs 3]
                             [--paths switch,pbox,gloo] [--cli]
    python -m p4hub.experiments.run --mode allreduce [--iterations 4] [--scale 0.005] ...
    python -m p4hub.experiments.run --topo leafspine [--racks 2] [--spines 1] --paths gloo

Brings up the rack with the P4 switch running p4src/aggregate.p4 (topologies/rack.py,
topologies/p4switch.py), starts the PBox and p4hub-controller, then:

* ``--mode train`` (default, experiments/train_run.py): DDP training of a small CNN on
  scikit-learn's digits, on every worker, once per path (the switch and the PBox through
  the p4hub torch.distributed backend, and Gloo); per-epoch loss, accuracy and time per
  step, a summary with samples/s and x Gloo, ``logs/<run>/training.png`` and
  ``training.json``; fails if the p4hub curves leave Gloo's tolerance or the switch and
  PBox paths are not bit-identical;
* ``--mode allreduce`` (experiments/allreduce_run.py): the synthetic-gradient table and
  ``logs/<run>/allreduce.json``.

``--topo leafspine`` brings up a leaf-spine fabric instead of one rack (topologies/rack.py,
docs/notes/fabric.md): ``--racks`` leaves with ``--workers / --racks`` workers and one PBox
each, ``--spines`` spines, a P4 switch process per switch (P4Runtime ports --grpc-port,
+1, ... leaves first). The switch path is a job over both racks: each leaf sums its rack
and the spine sums the leaves (docs/DESIGN.md §3.1); the PBox path is one job on rack 1's
PBox, which rack 2's workers reach over the spine; Gloo's ring crosses the spine too.

Every row and every path's summary has a ``cpu`` column (experiments/cpuload.py):
``CPU-bound (1.96/2 cores, 0.40 outside the run; switch 0.98)`` when the machine's cores,
not the links, were the limit while it was timed, else ``link-bound (cpu 1.10/2)``.

Exits 0 only if every check passed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import sys
from collections.abc import Iterator

from p4hub.experiments import allreduce_run, progress, straggler, train_plot, train_run
from p4hub.experiments.cpuload import CpuSampler
from p4hub.experiments.jobwatch import JobWatch
from p4hub.hosts.wire import LANE_COUNTS, MAX_LANES
from p4hub.topologies.rack import PYTHON, Rack, RackConfig, RackError, exit_on_sigterm
from p4hub.workers import workload

DEFAULT_BW = 5.0  # Mbit/s: see docs/notes/inc-rack.md for why
TOPOS = ("rack", "leafspine")
DEFAULT_WORKERS = {"rack": 4, "leafspine": 8}  # leafspine: 2 racks x 4


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="p4hub.experiments.run", description=__doc__.split("\n")[0])
    parser.add_argument("--topo", choices=TOPOS, default="rack",
                        help="one rack (default) or a leaf-spine fabric of --racks racks")
    parser.add_argument("--racks", type=int, default=2, help="leafspine: racks (leaves)")
    parser.add_argument("--spines", type=int, default=1, help="leafspine: spines")
    parser.add_argument("--workers", type=int, default=None,
                        help="workers in all (default 4; leafspine: 8, spread over the racks)")
    parser.add_argument("--bw", type=float, default=DEFAULT_BW,
                        help="link bandwidth, Mbit/s (0: unshaped)")
    parser.add_argument("--loss", type=float, default=0.0, help="loss on every link, percent")
    parser.add_argument("--loss-method", choices=("nft", "iptables"), default="nft",
                        help="host-to-switch drops: nft egress (default) or iptables OUTPUT")
    parser.add_argument("--delay", type=float, default=None,
                        help="ms; not supported on this kernel (no netem): warns")
    parser.add_argument("--mode", choices=("train", "allreduce"), default="train",
                        help="train a model (default) or all-reduce synthetic gradients")
    parser.add_argument("--epochs", type=int, default=3, help="train: epochs per path")
    parser.add_argument("--hidden", type=int, default=0,
                        help="train: a hidden layer of this width in DigitsNet (0: none; "
                             "256: 69,610 parameters, 18x the default net's)")
    parser.add_argument("--batch", type=int, default=32, help="train: samples per worker")
    parser.add_argument("--iterations", type=int, default=4, help="allreduce: iterations")
    parser.add_argument("--scale", type=float, default=0.005,
                        help="allreduce: fraction of ResNet-50's 25.6M parameters per iteration")
    parser.add_argument("--model", default=str(workload.DEFAULT_MODEL))
    parser.add_argument("--paths", default="switch,pbox,gloo",
                        help="comma list of switch, pbox, gloo (and, train mode only, hook: "
                             "Gloo DDP with the p4hub comm hook; precision: the p4hub backend "
                             "with the precision option, --precision)")
    parser.add_argument("--precision", type=float, default=1e-3,
                        help="the precision path's relative error bound: blocks int32 "
                             "quantization cannot carry within it go as float32 to a PBox "
                             "(docs/notes/elastic.md section 4)")
    parser.add_argument("--grpc-port", type=int, default=50051, help="the switch's P4Runtime port")
    parser.add_argument("--controller-port", type=int, default=50060, help="job API port")
    parser.add_argument("--metrics-port", type=int, default=0,
                        help="serve the controller's Prometheus metrics on 127.0.0.1:PORT "
                        "(docs/notes/observability.md; 0, the default: off)")
    parser.add_argument("--no-pcap", action="store_true",
                        help="the switch writes no pcaps (they cost switch CPU per packet)")
    parser.add_argument("--switch-log", default="off",
                        choices=("off", "trace", "debug", "info", "warn", "error"),
                        help="the P4 switch's per-packet log level (default off: no "
                             "--log-console); the log rotates past --switch-log-max-mb")
    parser.add_argument("--switch-log-max-mb", type=int, default=50,
                        help="size at which the switch log rotates (MB, 2 old files kept)")
    parser.add_argument("--pbox-workers", type=int, default=2)
    parser.add_argument("--pboxes", type=int, default=1,
                        help="PBoxes in the rack: the PBox path's job is split over all of "
                             "them and the controller moves load away from a straggler")
    parser.add_argument("--pbox-bw", type=float, default=0.0,
                        help="Mbit/s of the PBoxes' links (0: --bw)")
    parser.add_argument("--straggler", choices=straggler.KINDS, default="none",
                        help="make the PBox a straggler while its path runs: cpu (a busy "
                        "process beside it) or link (an extra host floods its link)")
    parser.add_argument("--straggler-mbit", type=float, default=0.0,
                        help="link straggler: flood rate, Mbit/s (default: half of --bw)")
    parser.add_argument("--per-layer", action="store_true",
                        help="one all-reduce per layer (default: one fused bucket, as DDP and "
                             "the Gloo path do)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--agent-timeout", type=float, default=30.0,
                        help="seconds a collective may go without progress")
    parser.add_argument("--rto-max", type=float, default=0.0,
                        help="agents' largest retransmission timeout, s (0: agent default)")
    parser.add_argument("--rto", type=float, default=0.0,
                        help="agents' first retransmission timeout, s (0: agent default)")
    parser.add_argument("--no-congestion", action="store_true",
                        help="allreduce mode: the agents run without their congestion window "
                             "(hosts/congestion.py), to compare")
    parser.add_argument("--lanes", type=int, choices=LANE_COUNTS, default=MAX_LANES,
                        help="int32 lanes per packet of the p4hub paths (default 256: the "
                        "emulated switch and agents pay per packet, not per lane; 64 is what "
                        "fits a hardware switch's single pass)")
    parser.add_argument("--job-slots", type=int, default=None,
                        help="switch slots per job (= the agents' window; 32, or 128 with "
                             "--schedule p3)")
    parser.add_argument("--switch-slots", type=int, default=0,
                        help="the switch's slots for jobs (0: plenty); fewer than --job-slots "
                             "places the switch path's job partly on the switch and the rest "
                             "over the PBoxes, as when the switch is short of slots")
    parser.add_argument("--path-timeout", type=float, default=600.0)
    parser.add_argument("--schedule", choices=("ddp", "fifo", "p3", "fsdp", "zero"),
                        default="ddp",
                        help="train: ddp (DDP buckets) or per-parameter all-reduces overlapped "
                             "with the next forward pass, in backward order (fifo) or by P3 "
                             "priority (p3: 4 priority classes; job slots default to 128), "
                             "or sharded: fsdp (FSDP2: reduce-scatter and all-gather) or zero "
                             "(DDP with ZeroRedundancyOptimizer)")
    parser.add_argument("--scatter", choices=("allreduce", "network"), default="allreduce",
                        help="the switch and pbox paths' reduce-scatters and all-gathers "
                             "(--schedule fsdp): over the all-reduce, or in the network "
                             "(P4HUB_SCATTER=network: scatter rounds in the switch or the PBox, "
                             "each rank receiving only its own shard's results, and gather "
                             "rounds, each rank sending only its own shard)")
    parser.add_argument("--cli", action="store_true", help="open the Mininet CLI instead")
    args = parser.parse_args(argv)
    if args.job_slots is None:
        args.job_slots = 128 if args.schedule == "p3" else 32
    fabric = args.topo == "leafspine"
    if args.workers is None:
        args.workers = DEFAULT_WORKERS[args.topo]
    known = train_run.PATHS if args.mode == "train" else allreduce_run.PATHS
    unknown = set(args.paths.split(",")) - set(known)
    if unknown:
        parser.error(f"unknown paths {sorted(unknown)}; choose from {sorted(known)}")
    if fabric and (args.straggler != "none" or args.switch_slots):
        parser.error("--straggler and --switch-slots are for one rack (--topo rack)")
    if args.switch_slots < 0:
        parser.error("--switch-slots must be 0 or more")
    if args.hidden < 0:
        parser.error("--hidden must be 0 (no hidden layer) or a width")
    if not 0.0 < args.precision < 1.0:
        parser.error(f"--precision must be strictly between 0 and 1, not {args.precision}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    exit_on_sigterm()
    paths = [] if args.cli else args.paths.split(",")
    try:
        with progress.Phases(["rack (Mininet, P4 switches)", "PBox and controller",
                              *(f"{args.mode} over {name}" for name in paths)],
                             "make run") as phases, Rack(rack_config(args)) as rack:
            phases.next()
            start_services(rack, args)
            phases.next()
            print(_banner(rack, args))
            if args.cli:
                return _cli(rack, args)
            if args.mode == "allreduce":
                return _allreduce(rack, args, phases)
            return _train(rack, args, phases)
    except RackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; the rack was stopped", file=sys.stderr)
        return 130


def _banner(rack: Rack, args: argparse.Namespace) -> str:
    pboxes = ", ".join(h.IP() for h in rack.pbox_hosts)
    many = len(rack.pbox_hosts) > 1
    if rack.config.is_fabric:
        switches = (f"leaf-spine fabric: {rack.config.racks} racks x "
                    f"{args.workers // rack.config.racks} workers, P4 switches "
                    f"{', '.join(rack.config.switch_names)} ({rack.switch.command()[0]}, "
                    f"P4Runtime 127.0.0.1:{args.grpc_port}..)")
    else:
        switches = (f"rack up: {args.workers} workers, P4 switch s1 ({rack.switch.command()[0]}, "
                    f"P4Runtime 127.0.0.1:{args.grpc_port})")
    tls = (f"; TLS credentials (CA, admin.pem/admin.key for you) in {rack.credentials.directory}"
           if rack.credentials else "")
    return (f"{switches}, PBox{'es' * many} at {pboxes}, controller at "
            f"{rack.controller_address}; logs in {rack.log_dir}{tls}")


def rack_config(args: argparse.Namespace, run_name: str = "run") -> RackConfig:
    extra = 1 if getattr(args, "straggler", "none") == "link" else 0
    fabric = getattr(args, "topo", "rack") == "leafspine"
    return RackConfig(workers=args.workers, bw=args.bw or None, loss=args.loss, extra_hosts=extra,
                      racks=args.racks if fabric else 1, spines=args.spines if fabric else 0,
                      pboxes=args.racks if fabric else getattr(args, "pboxes", 1),
                      pbox_bw=getattr(args, "pbox_bw", 0.0) or None,
                      loss_method=args.loss_method, delay_ms=args.delay, run_name=run_name,
                      p4=True, grpc_port=args.grpc_port, pcap=not args.no_pcap,
                      controller_port=args.controller_port, switch_log=args.switch_log,
                      switch_log_max_mb=args.switch_log_max_mb)


def start_services(rack: Rack, args: argparse.Namespace) -> None:
    """The PBox and p4hub-controller (the switch is up with the rack)."""
    rack.start_pboxes(workers=args.pbox_workers)
    slots = {"slots": args.switch_slots} if getattr(args, "switch_slots", 0) else {}
    metrics = ["--metrics", f"127.0.0.1:{args.metrics_port}"] if args.metrics_port else []
    rack.start_controller(rack.controller_topology(job_slots=args.job_slots, **slots),
                          extra=metrics)


def _allreduce(rack: Rack, args: argparse.Namespace, phases: progress.Phases | None = None) -> int:
    results = []
    with CpuSampler(rack.process_roots()) as cpu:
        for name in args.paths.split(","):
            with _straggler(rack, args, name):
                results.append(allreduce_run.PATHS[name](rack, args, cpu))
            if phases is not None:
                phases.next()
    allreduce_run.summarize(results, args)
    report = {"config": vars(args), "paths": [allreduce_run.path_report(r) for r in results]}
    (rack.log_dir / "allreduce.json").write_text(json.dumps(report, indent=1))
    print(f"\nrows and CPU use: {rack.log_dir / 'allreduce.json'}")
    return 0 if all(r.ok for r in results) else 1


def _train(rack: Rack, args: argparse.Namespace, phases: progress.Phases | None = None) -> int:
    names = args.paths.split(",")
    results = {}
    with CpuSampler(rack.process_roots()) as cpu:
        for i, name in enumerate(names):
            with _straggler(rack, args, name):
                results[name] = train_run.run_path(rack, train_run.PATHS[name], i, args, cpu=cpu)
            if phases is not None:
                phases.next()
    train_run.compare(results)
    train_run.summarize(results, args)
    title = (f"DigitsNet, {args.workers} workers x batch {args.batch}, {args.bw} Mbit/s, "
             f"loss {args.loss}%")
    png = train_plot.plot(results, rack.log_dir / "training.png", title)
    (rack.log_dir / "training.json").write_text(json.dumps(_report(results, args), indent=1))
    print(f"\nloss curves and time per step: {png}")
    return 0 if all(r.ok for r in results.values()) else 1


@contextlib.contextmanager
def _straggler(rack: Rack, args: argparse.Namespace, path: str) -> Iterator[None]:
    """The (last) PBox made a straggler while a path that uses the PBoxes runs
    (``--straggler``: the PBox path, and the switch paths with ``--switch-slots``); with
    several PBoxes, the aggregator changes the controller made meanwhile are printed."""
    uses_pboxes = path == "pbox" or (path in ("switch", "hook", "precision")
                                     and args.switch_slots > 0)
    if not uses_pboxes or (args.straggler == "none" and args.pboxes == 1):
        yield
        return
    victim = rack.pbox_names[-1]
    stack = contextlib.ExitStack()
    if args.straggler != "none":
        link_bw = (args.pbox_bw or args.bw or DEFAULT_BW)
        mbit = args.straggler_mbit or link_bw / 2
        what = "a busy process beside it" if args.straggler == "cpu" else \
            f"a {mbit:g} Mbit/s flood on its link"
        print(f"\nPBox {victim} is a straggler for this path: {what}", flush=True)
        stack.enter_context(straggler.inject(rack, args.straggler, mbit=mbit, pbox=victim))
    with stack, _moves_printed(rack) if args.pboxes > 1 else contextlib.nullcontext():
        yield


@contextlib.contextmanager
def _moves_printed(rack: Rack) -> Iterator[None]:
    """Print each job's aggregator changes (the controller's map moves) seen while the
    block runs (experiments/jobwatch.py)."""
    watch = JobWatch(rack.controller_address)
    try:
        with watch:
            yield
    finally:
        for job_id, snapshots in sorted(watch.timeline.items()):
            for move in snapshots[-1]["moves"]:
                print(f"  job {job_id}, epoch {move['epoch']}: {move['reason']}", flush=True)
            print(f"  job {job_id}: window slots per aggregator, last seen: "
                  f"{snapshots[-1]['shares']}", flush=True)


def _report(results: dict[str, train_run.TrainResult], args: argparse.Namespace) -> dict:
    return {"config": vars(args), "loss_tolerance": train_run.LOSS_TOLERANCE,
            "paths": {name: {"title": r.path.title, "where": r.where(), "ok": r.ok,
                             "problems": r.problems, "epochs": r.epoch_rows(),
                             "losses": r.losses(), "step_seconds": r.step_seconds(),
                             "median_step_seconds": r.median_step_seconds(), "cpu": r.cpu,
                             "float_blocks": r.float_share()}
                      for name, r in results.items()}}


def _cli(rack: Rack, args: argparse.Namespace) -> int:
    from mininet.cli import CLI

    # one job token for the ranks started by hand, in a 0600 file (never on a command line)
    token_file = rack.log_dir / "job.token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_urlsafe(32) + "\n")
    creds = " ".join(f"{k}={os.environ[k]}" for k in ("P4HUB_STATE_DIR", "P4HUB_CA")
                     if k in os.environ)
    print(f"Switch, PBox and controller running (logs in {rack.log_dir}).\n"
          f"Try, on every worker wR (rank R-1):  wR env {creds} P4HUB_JOB_TOKEN_FILE={token_file} "
          f"{PYTHON} -m p4hub.workers.worker --backend job "
          f"--controller {rack.controller_address} --data-ip 10.0.0.R --rank R-1 "
          f"--world {args.workers} --iterations 2 --check &\n"
          f"and from the root shell: env {creds} {PYTHON} -m p4hub.controller.cli --controller "
          f"{rack.controller_address} jobs  (or top, a live view)")
    CLI(rack.net)
    return 0


if __name__ == "__main__":
    sys.exit(main())
