"""Data-parallel training of DigitsNet, one process per rank.

    python -m p4hub.workers.train.loop --comm gloo --rank 0 --world 4 --master 10.0.0.1:29500
    torchrun --nproc-per-node 4 -m p4hub.workers.train.loop --comm gloo

``--comm`` picks the path the gradients take (see the package docstring): ``gloo``,
``p4hub`` (DDP over a p4hub process group) or ``hook`` (DDP over Gloo, buckets
all-reduced by the p4hub comm hook). ``--schedule fsdp|zero`` trains sharded instead
of with DDP: FSDP2's ``fully_shard`` (gradients reduce-scattered, parameters
all-gathered) or DDP with ``ZeroRedundancyOptimizer`` (optimizer state sharded, updated
parameters broadcast from their owners), over ``--comm gloo`` or ``p4hub``. Rendezvous is ``env://`` when torchrun's variables
are set, else ``tcp://--master``.

Output, one JSON object per line on stdout: ``ready``; per step ``step`` (``step``
counts from 0 across the whole run, ``seconds`` is forward + backward + optimizer step,
DDP's all-reduce included); per epoch ``epoch`` (with ``param_digest``, the same on
every rank when their weights agree, and ``where`` in the p4hub modes); then ``done``,
or ``error`` and exit status 1.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from p4hub.hosts import crashdump
from p4hub.topologies.mgmt import use_data_interface_for_gloo
from p4hub.workers.train import data
from p4hub.workers.train.model import build_model, parameter_count

Emit = Callable[[dict], None]
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
SHARDED = ("fsdp", "zero")  # --schedule values that shard the model or its optimizer


def emit_json(record: dict) -> None:
    # default=str: a backend's stats() may hold values JSON has no type for
    sys.stdout.write(json.dumps(record, default=str) + "\n")
    sys.stdout.flush()


@dataclass(frozen=True)
class Rendezvous:
    init_method: str
    rank: int
    world: int


@dataclass
class Comm:
    """What the training loop needs from the chosen path."""

    forward: nn.Module  # DDP around the model, or the model itself (--schedule fifo|p3)
    model: nn.Module
    p4hub_group: Any = None  # the p4hub process group in the p4hub modes
    overlap: Any = None  # hosts.pytorch.overlap.OverlappedStep with --schedule fifo|p3
    zero: bool = False  # --schedule zero: the optimizer is a ZeroRedundancyOptimizer

    def settle(self) -> None:
        """Apply the updates still in flight (an overlapped step lands them inside the
        next forward pass), before the model is evaluated or digested."""
        if self.overlap is not None:
            self.overlap.synchronize()


def rendezvous_from(args: argparse.Namespace) -> Rendezvous:
    if all(name in os.environ for name in TORCHRUN_VARS):
        return Rendezvous("env://", int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    if args.rank is None or args.world is None or not args.master:
        raise ValueError("without torchrun's environment, --rank, --world and --master are needed")
    return Rendezvous(f"tcp://{args.master}", args.rank, args.world)


def init_default_group(backend: str, rdzv: Rendezvous, timeout: float) -> None:
    dist.init_process_group(backend, init_method=rdzv.init_method, rank=rdzv.rank,
                            world_size=rdzv.world, timeout=datetime.timedelta(seconds=timeout))


def connect(model: nn.Module, args: argparse.Namespace, rdzv: Rendezvous) -> Comm:
    """Join the process group(s) of ``args.comm`` and wrap ``model`` in DDP, or with
    ``--schedule fifo|p3`` in an OverlappedStep (every rank builds the same weights from
    the seed, so no initial broadcast is needed)."""
    use_data_interface_for_gloo()
    if args.schedule in SHARDED:
        return _sharded(model, args, rdzv)
    if args.schedule != "ddp":
        return _overlapped(model, args, rdzv)
    if args.comm == "gloo":
        init_default_group("gloo", rdzv, args.timeout)
        return Comm(DistributedDataParallel(model), model)
    import p4hub.hosts.pytorch  # noqa: F401 - registers the "p4hub" backend

    if args.comm == "p4hub":
        init_default_group("p4hub", rdzv, args.timeout)
        return Comm(DistributedDataParallel(model), model, p4hub_group=dist.group.WORLD)
    # hook: Gloo for DDP's own traffic (the initial broadcast), p4hub for the gradients
    from p4hub.hosts.pytorch import HookState, p4hub_hook

    init_default_group("gloo", rdzv, args.timeout)
    group = dist.new_group(backend="p4hub", timeout=datetime.timedelta(seconds=args.timeout))
    ddp = DistributedDataParallel(model)
    ddp.register_comm_hook(HookState(group), p4hub_hook)
    return Comm(ddp, model, p4hub_group=group)


def _sharded(model: nn.Module, args: argparse.Namespace, rdzv: Rendezvous) -> Comm:
    """FSDP2 over the default group (each of the net's two stages a unit, then the root),
    or DDP whose optimizer run_epochs makes a ZeroRedundancyOptimizer."""
    if args.comm == "hook":
        raise ValueError("--schedule fsdp|zero shard over one group: use --comm gloo or p4hub")
    if args.comm == "p4hub":
        import p4hub.hosts.pytorch  # noqa: F401 - registers the "p4hub" backend
    init_default_group(args.comm, rdzv, args.timeout)
    group = dist.group.WORLD if args.comm == "p4hub" else None
    if args.schedule == "zero":
        return Comm(DistributedDataParallel(model), model, p4hub_group=group, zero=True)
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    mesh = DeviceMesh.from_group(dist.distributed_c10d._get_default_group(), "cpu")
    for stage in model.children():
        fully_shard(stage, mesh=mesh)
    root = fully_shard(model, mesh=mesh)
    if args.comm == "gloo":  # Gloo has no ReduceOp.AVG: sum, then divide
        root.set_force_sum_reduction_for_comms(True)
    return Comm(model, model, p4hub_group=group)


def _overlapped(model: nn.Module, args: argparse.Namespace, rdzv: Rendezvous) -> Comm:
    if args.comm == "hook":
        raise ValueError("--schedule fifo|p3 replaces DDP: use --comm gloo or p4hub")
    if args.comm == "p4hub":
        import p4hub.hosts.pytorch  # noqa: F401 - registers the "p4hub" backend

        # P3's priority classes split the job's slots (hosts/session.py)
        os.environ.setdefault("P4HUB_CLASSES", "4" if args.schedule == "p3" else "1")
    init_default_group(args.comm, rdzv, args.timeout)
    from p4hub.hosts.pytorch.overlap import OverlappedStep

    overlap = OverlappedStep(model, lambda params: make_optimizer(params, args),
                             schedule=args.schedule, slice_params=args.slice_params)
    group = dist.group.WORLD if args.comm == "p4hub" else None
    return Comm(model, model, p4hub_group=group, overlap=overlap)


def p4hub_backend(group: Any) -> Any:
    """The p4hub object behind ``group``: torch hands back the backend itself when it
    subclasses ProcessGroup, and wraps it (reachable per device) otherwise."""
    if hasattr(group, "where"):
        return group
    return group._get_backend(torch.device("cpu"))


def p4hub_fields(comm: Comm) -> dict:
    if comm.p4hub_group is None:
        return {}
    return {"where": p4hub_backend(comm.p4hub_group).where}


def param_digest(model: nn.Module) -> str:
    """First 16 hex digits of sha256 over every parameter's bytes, in model order (an
    FSDP-sharded parameter is all-gathered first: every rank calls this at the same
    points, so the collective lines up)."""
    from torch.distributed.tensor import DTensor

    digest = hashlib.sha256()
    for param in model.parameters():
        full = param.full_tensor() if isinstance(param, DTensor) else param
        digest.update(full.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def train_step(comm: Comm, optimizer: torch.optim.Optimizer | None,
               images: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    """One step; returns this rank's loss and the step's wall time (with DDP the
    all-reduce runs inside backward(); overlapped, the forward pass waits per module for
    the previous step's all-reduces and applies them: counted either way)."""
    start = time.perf_counter()
    if optimizer is not None:
        optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(comm.forward(images), labels)
    loss.backward()
    if optimizer is not None:
        optimizer.step()
    return loss.item(), time.perf_counter() - start


@torch.no_grad()
def evaluate(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    """Accuracy and mean loss on the whole set; no communication (the bare module)."""
    logits = model(images)
    accuracy = (logits.argmax(dim=1) == labels).double().mean().item()
    return accuracy, F.cross_entropy(logits, labels).item()


def run_epoch(epoch: int, first_step: int, steps_left: int | None, comm: Comm,
              optimizer: torch.optim.Optimizer | None, split: data.Split, args: argparse.Namespace,
              rdzv: Rendezvous, emit: Emit) -> tuple[list[float], list[float]]:
    """Train on this rank's shard of ``epoch``; every rank gets the same number of
    batches, so no rank waits in an all-reduce the others never start."""
    losses: list[float] = []
    seconds: list[float] = []
    batches = data.shard(epoch, rdzv.rank, rdzv.world, args.batch, args.seed,
                         n_train=len(split.train_labels))
    if steps_left is not None:
        batches = batches[:steps_left]
    for offset, indices in enumerate(batches):
        batch = torch.from_numpy(indices)
        loss, took = train_step(comm, optimizer, split.train_images[batch],
                                split.train_labels[batch])
        if not math.isfinite(loss):
            raise FloatingPointError(f"loss {loss} at epoch {epoch} step {first_step + offset}")
        emit({"event": "step", "epoch": epoch, "step": first_step + offset, "rank": rdzv.rank,
              "loss": loss, "seconds": took})
        losses.append(loss)
        seconds.append(took)
    return losses, seconds


def epoch_record(epoch: int, losses: list[float], seconds: list[float], comm: Comm,
                 split: data.Split, args: argparse.Namespace, rdzv: Rendezvous) -> dict:
    model = comm.model
    comm.settle()
    accuracy, test_loss = evaluate(model, split.test_images, split.test_labels)
    per_step = statistics.median(seconds)
    return {"event": "epoch", "epoch": epoch, "rank": rdzv.rank,
            "train_loss": statistics.fmean(losses), "test_accuracy": accuracy,
            "test_loss": test_loss, "seconds_per_step": per_step,
            "samples_per_s": rdzv.world * args.batch / per_step, "steps": len(losses),
            "param_digest": param_digest(model), **p4hub_fields(comm)}


def make_optimizer(params: Any, args: argparse.Namespace, zero: bool = False
                   ) -> torch.optim.Optimizer:
    # Adam: an epoch is only ~11 steps at world 4, batch 32, and SGD with momentum was
    # far less reliable in that budget (see the package docstring)
    if zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        if args.optimizer == "adam":
            return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.Adam, lr=args.lr)
        return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.SGD, lr=args.lr,
                                       momentum=args.momentum)
    if args.optimizer == "adam":
        return torch.optim.Adam(params, lr=args.lr)
    return torch.optim.SGD(params, lr=args.lr, momentum=args.momentum)


def done_record(comm: Comm, rdzv: Rendezvous, steps: int) -> dict:
    comm.settle()
    record = {"event": "done", "rank": rdzv.rank, "steps": steps,
              "param_digest": param_digest(comm.model), **p4hub_fields(comm)}
    if comm.p4hub_group is not None:
        record["stats"] = p4hub_backend(comm.p4hub_group).stats()
    return record


def run_epochs(comm: Comm, split: data.Split, args: argparse.Namespace, rdzv: Rendezvous,
               emit: Emit) -> int:
    """``--epochs`` epochs, or fewer under ``--max-steps``; returns the steps taken."""
    # overlapped: one optimizer per parameter, inside the OverlappedStep
    optimizer = (None if comm.overlap is not None
                 else make_optimizer(comm.forward.parameters(), args, zero=comm.zero))
    step = 0
    for epoch in range(args.epochs):
        steps_left = args.max_steps - step if args.max_steps else None
        if steps_left == 0:
            break
        losses, seconds = run_epoch(epoch, step, steps_left, comm, optimizer, split, args,
                                    rdzv, emit)
        if not losses:
            raise ValueError(f"no full global batch of {rdzv.world}x{args.batch} "
                             f"in {len(split.train_labels)} samples")
        step += len(losses)
        emit(epoch_record(epoch, losses, seconds, comm, split, args, rdzv))
    return step


def train(args: argparse.Namespace, emit: Emit) -> None:
    """The whole run for one rank: rendezvous, train, report, leave the group."""
    torch.set_num_threads(args.threads)
    # The first conv's weight gradient (1 input channel) comes back with strides that
    # differ from its bucket view's in the size-1 dimension only: same memory layout,
    # one 72-float copy, and a warning on every rank's stderr that says it is no error.
    warnings.filterwarnings("ignore", message="Grad strides do not match bucket view strides")
    rdzv = rendezvous_from(args)
    split = data.load_split(args.seed)
    model = build_model(args.seed, args.hidden)
    try:
        comm = connect(model, args, rdzv)
        emit({"event": "ready", "rank": rdzv.rank, "comm": args.comm,
              "params": parameter_count(model), "world": rdzv.world})
        steps = run_epochs(comm, split, args, rdzv, emit)
        emit(done_record(comm, rdzv, steps))
    finally:
        if dist.is_initialized():  # also after a failure half-way through connect()
            dist.destroy_process_group()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="p4hub.workers.train.loop")
    parser.add_argument("--comm", choices=("gloo", "p4hub", "hook"), default="gloo",
                        help="gloo: DDP over Gloo; p4hub: DDP over a p4hub group; "
                             "hook: DDP over Gloo with the p4hub comm hook")
    parser.add_argument("--schedule", choices=("ddp", "fifo", "p3", *SHARDED), default="ddp",
                        help="ddp: DDP buckets; fifo|p3: per-parameter all-reduces overlapped "
                             "with the next forward pass (hosts/pytorch/overlap.py), P3 "
                             "slices and priorities or whole tensors in backward order; "
                             "fsdp: FSDP2 fully_shard; zero: DDP with ZeroRedundancyOptimizer")
    parser.add_argument("--slice-params", type=int, default=40_000, help="P3 slice size")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.9, help="SGD only")
    parser.add_argument("--seed", type=int, default=1, help="weights, split and shuffling")
    parser.add_argument("--hidden", type=int, default=0,
                        help="width of a hidden layer before the classes (0: none)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds a rendezvous or collective may wait")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--max-steps", type=int, default=0, help="stop after this many steps "
                        "(0: no cap)")
    parser.add_argument("--rank", type=int, default=None, help="ignored under torchrun")
    parser.add_argument("--world", type=int, default=None, help="ignored under torchrun")
    parser.add_argument("--master", default="", help="rendezvous HOST:PORT (tcp://)")
    return parser.parse_args(argv)


def reported_rank(args: argparse.Namespace) -> int:
    """This process's rank for an error record, before or without a rendezvous."""
    if "RANK" in os.environ:
        return int(os.environ["RANK"])
    return args.rank if args.rank is not None else -1


def main(argv: list[str] | None = None) -> int:
    crashdump.enable()  # a fatal signal leaves every thread's Python stack in stderr
    args = parse_args(argv)
    try:
        train(args, emit_json)
        return 0
    except Exception as exc:  # report any failure as a JSON line the driver can show
        emit_json({"event": "error", "rank": reported_rank(args),
                   "error": f"{type(exc).__name__}: {exc}"})
        return 1


if __name__ == "__main__":
    status = main()
    # Leave without the interpreter's teardown: after an FSDP2 run over Gloo, libtorch's
    # destructors at exit sometimes end the process with std::terminate ("terminate
    # called without an active exception", SIGABRT, about 1 run in 20 with 2 ranks),
    # after the group was destroyed and every record written. Nothing is left to do.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
