"""One rank of a multi-process torch.distributed scenario against a p4hub aggregator.

    python -m tests.unit.torch_ranks SCENARIO RANK WORLD MASTER_PORT
    torchrun ... -m tests.unit.torch_ranks SCENARIO        (rank and world from the env)

Prints JSON lines: ``{"check": name, "ok": bool, ...}`` for each check made inside the
rank, ``{"digest": name, "value": hex}`` for results every rank must share, and
``{"event": "done"}`` at the end. tests/unit/test_torch_backend.py runs these.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.distributed as dist

import p4hub.hosts.pytorch  # noqa: F401 - registers the backend
from p4hub.hosts.errors import HostError, NotSupportedError
from p4hub.hosts.pytorch import HookState, p4hub_hook
from p4hub.hosts.pytorch.backend import P4hubProcessGroup
from p4hub.workers.workload import quantized_sum

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("TEST_PG_TIMEOUT", "30")))


def emit(**record: object) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def check(name: str, ok: bool, **detail: object) -> None:
    emit(check=name, ok=bool(ok), **detail)


def digest(name: str, tensor: torch.Tensor) -> None:
    data = tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    emit(digest=name, value=hashlib.sha256(data).hexdigest()[:16])


def inputs(rank: int, n: int, seed: int) -> np.ndarray:
    return np.random.default_rng([seed, rank]).standard_normal(n).astype(np.float32) * 0.01


def expect_refusal(name: str, action: Callable[[], object], needle: str) -> None:
    try:
        action()
    except NotSupportedError as exc:
        check(name, str(exc).startswith("not supported by p4hub: ") and needle in str(exc),
              message=str(exc))
        return
    check(name, False, message="no error")


# -- scenarios -----------------------------------------------------------------------------


def collectives(rank: int, world: int) -> None:
    _sums(rank, world)
    _broadcasts(rank, world)
    _gathers(rank, world)
    _async_and_barrier(rank, world)
    _refusals()
    after = torch.full((4,), 1.0)
    dist.all_reduce(after)
    check("still in step after refusals", torch.equal(after, torch.full((4,), float(world))))
    _ddp_over_p4hub(rank, world)


def _sums(rank: int, world: int) -> None:
    everyone = [inputs(r, 5000, 1) for r in range(world)]
    t = torch.from_numpy(everyone[rank].copy())
    dist.all_reduce(t)
    check("float32 SUM is the exact quantized sum",
          np.array_equal(t.numpy().view(np.int32), quantized_sum(everyone).view(np.int32)))
    mean = torch.from_numpy(everyone[rank].copy())
    dist.all_reduce(mean, op=dist.ReduceOp.AVG)
    reference = np.mean(np.stack(everyone).astype(np.float64), axis=0)
    check("float32 AVG", np.max(np.abs(mean.numpy() - reference)) < 1e-8,
          err=float(np.max(np.abs(mean.numpy() - reference))))
    digest("avg", mean)
    ints = torch.arange(3000, dtype=torch.int32) * (rank + 1) + 2**24
    dist.all_reduce(ints)
    want = torch.arange(3000, dtype=torch.int32) * sum(range(1, world + 1)) + world * 2**24
    check("int32 SUM is exact", torch.equal(ints, want))
    for dtype in (torch.float16, torch.bfloat16):
        half = torch.full((100,), 0.25 * (rank + 1), dtype=dtype)
        dist.all_reduce(half)
        want_half = torch.full((100,), 0.25 * sum(range(1, world + 1)), dtype=dtype)
        check(f"{dtype} through float32", half.dtype == dtype and torch.equal(half, want_half))


def _broadcasts(rank: int, world: int) -> None:
    root = world - 1
    f64 = torch.tensor([np.pi, -1e300, 5e-324], dtype=torch.float64) * (rank + 1)
    dist.broadcast(f64, src=root)
    want = torch.tensor([np.pi, -1e300, 5e-324], dtype=torch.float64) * world
    check("broadcast float64 is bit exact", torch.equal(f64.view(torch.int64),
                                                         want.view(torch.int64)))
    odd = torch.arange(7, dtype=torch.int8) * (rank + 1)
    dist.broadcast(odd, src=0)
    check("broadcast of 7 bytes", torch.equal(odd, torch.arange(7, dtype=torch.int8)))
    flags = torch.tensor([rank == 1, True, False])
    dist.broadcast(flags, src=1)
    check("broadcast bool", flags.tolist() == [True, True, False])
    base = torch.arange(12, dtype=torch.int64).reshape(3, 4) * (rank + 1)
    view = base.t()  # not contiguous
    dist.broadcast(view, src=0)
    check("broadcast into a non-contiguous view",
          torch.equal(base, torch.arange(12, dtype=torch.int64).reshape(3, 4)))


def _gathers(rank: int, world: int) -> None:
    outs = [torch.zeros(5, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(outs, torch.full((5,), 10**12 + rank, dtype=torch.int64))
    check("all_gather int64", all(torch.equal(o, torch.full((5,), 10**12 + r,
                                                            dtype=torch.int64))
                                  for r, o in enumerate(outs)))
    mine = torch.from_numpy(inputs(rank, 33, 2))
    flat = torch.zeros(world * 33)
    dist.all_gather_into_tensor(flat, mine)
    want = np.concatenate([inputs(r, 33, 2) for r in range(world)])
    check("all_gather_into_tensor float32 is bit exact", np.array_equal(flat.numpy(), want))


def _async_and_barrier(rank: int, world: int) -> None:
    tensors = [torch.full((1000 * (i + 1),), float(rank + i)) for i in range(5)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    for work in works:
        work.wait()
    ok = all(torch.equal(t, torch.full_like(t, float(sum(r + i for r in range(world)))))
             for i, t in enumerate(tensors))
    check("five async all_reduces in flight", ok)
    future = dist.all_reduce(torch.ones(3), async_op=True).get_future()
    check("work.get_future() holds the tensors", torch.equal(future.wait()[0], torch.full(
        (3,), float(world))))
    dist.barrier()
    check("barrier", True)


def _refusals() -> None:
    expect_refusal("float64 all_reduce refused", lambda: dist.all_reduce(
        torch.ones(2, dtype=torch.float64)), "torch.float64")
    expect_refusal("MAX refused", lambda: dist.all_reduce(torch.ones(2), op=dist.ReduceOp.MAX),
                   "MAX")
    expect_refusal("AVG of int32 refused", lambda: dist.all_reduce(
        torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.AVG), "int32")
    expect_refusal("a tensor on another device refused", lambda: dist.all_reduce(
        torch.ones(2, device="meta")), "meta")
    expect_refusal("reduce refused", lambda: dist.reduce(torch.ones(2), dst=0), "reduce")
    expect_refusal("all_to_all refused", lambda: dist.all_to_all_single(
        torch.ones(dist.get_world_size()), torch.ones(dist.get_world_size())), "all_to_all")


def _ddp_over_p4hub(rank: int, world: int) -> None:
    torch.manual_seed(100 + rank)  # different weights: DDP must broadcast rank 0's
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    digest("ddp weights after init", torch.cat([p.reshape(-1) for p in model.parameters()]))
    x = torch.from_numpy(inputs(rank, 8 * 4, 3).reshape(4, 8)) * 100
    ddp(x).pow(2).sum().backward()
    digest("ddp grads", torch.cat([_grad(p).reshape(-1) for p in model.parameters()]))


def _grad(p: torch.Tensor) -> torch.Tensor:
    """``p.grad`` after a backward pass (every parameter here takes part in the loss)."""
    assert p.grad is not None
    return p.grad


def mixed(rank: int, world: int) -> None:
    """A p4hub group beside a Gloo default group, and the DDP hook against Gloo DDP."""
    group = dist.new_group(backend="p4hub")
    t = torch.full((10,), float(rank + 1))
    dist.all_reduce(t, group=group)
    gl = torch.full((10,), float(rank + 1))
    dist.all_reduce(gl)
    check("p4hub group beside gloo", torch.equal(t, gl), backend=dist.get_backend(group))
    plain, hooked = _model(), _model()
    plain_ddp = torch.nn.parallel.DistributedDataParallel(plain)
    hooked_ddp = torch.nn.parallel.DistributedDataParallel(hooked)
    hooked_ddp.register_comm_hook(HookState(group), p4hub_hook)
    worst = 0.0
    for step in range(3):
        x = torch.from_numpy(inputs(rank * 10 + step, 64 * 8, 4).reshape(64, 8)) * 100
        for ddp in (plain_ddp, hooked_ddp):
            ddp.zero_grad()
            ddp(x).pow(2).mean().backward()
        for a, b in zip(plain.parameters(), hooked.parameters(), strict=True):
            scale = float(_grad(a).abs().max())
            worst = max(worst, float((_grad(a) - _grad(b)).abs().max()) / max(scale, 1e-30))
        for model in (plain, hooked):
            with torch.no_grad():
                for p in model.parameters():
                    p.sub_(0.1 * _grad(p))  # in place, as `p -= ...` (which mypy reads as a rebind)
    # quantization: each element within ~2**-28 of its bucket's largest gradient (n=2)
    check("DDP hook matches Gloo's average", worst < 2**-20, worst_relative=worst)
    digest("hooked weights", torch.cat([p.reshape(-1) for p in hooked.parameters()]))


def _model() -> torch.nn.Module:
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def overlap(rank: int, world: int) -> None:
    """OverlappedStep (P3 and FIFO over p4hub, FIFO over Gloo) gives the parameters of the
    unscheduled loop (average every gradient, then step), bit for bit."""
    from p4hub.hosts.pytorch.overlap import OverlappedStep

    gloo = dist.new_group(backend="gloo")
    for name, group, schedule in (("p3 over p4hub", None, "p3"),
                                  ("fifo over p4hub", None, "fifo"),
                                  ("over gloo", gloo, "fifo")):  # fmt: skip
        model, reference = _model(), _model()
        opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
        step = OverlappedStep(model, lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
                              group, schedule=schedule, slice_params=64)
        for it in range(3):
            x = torch.from_numpy(inputs(rank * 10 + it, 64 * 8, 4).reshape(64, 8))
            model(x).pow(2).mean().backward()  # waits per module for the last step
            opt.zero_grad()
            reference(x).pow(2).mean().backward()
            for p in reference.parameters():
                if group is None:
                    dist.all_reduce(_grad(p), op=dist.ReduceOp.AVG)
                else:  # as the step does on Gloo: divide, then sum
                    p.grad = _grad(p) / world
                    dist.all_reduce(_grad(p), group=group)
            opt.step()
        step.synchronize()
        same = all(torch.equal(a, b) for a, b in zip(model.parameters(),
                                                        reference.parameters(), strict=True))
        check(f"overlapped step {name} equals the unscheduled loop", same)
        digest(f"overlapped weights {name}", torch.cat([p.reshape(-1) for p in model.parameters()]))
        step.remove()


def dead(rank: int, world: int) -> None:
    t = torch.ones(100)
    dist.all_reduce(t)
    if rank == world - 1:
        emit(event="dying")
        os._exit(0)  # no goodbye: the way a crashed or killed worker goes
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(100))
    except Exception as exc:  # noqa: BLE001 - the message is what is checked
        emit(event="failed", seconds=time.monotonic() - start, error=str(exc),
             type=type(exc).__name__)
        if rank == 0:
            # Rank 0 hosts the c10d store: leaving at once would take the store away
            # from the other survivor before it has seen rank 2's silence (it would then
            # rightly report an unreachable store, not a dead rank).
            time.sleep(10)
        os._exit(0)  # the group is broken; skip destroy's goodbyes
    emit(event="no error")


def late(rank: int, world: int) -> None:
    if rank == 1:
        time.sleep(8)  # alive (heartbeating) but not at the collective
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(100))
        emit(event="no error")
    except Exception as exc:  # noqa: BLE001
        emit(event="failed", seconds=time.monotonic() - start, error=str(exc))
    os._exit(0)


def basic(rank: int, world: int) -> None:
    t = torch.full((1000,), float(rank))
    dist.all_reduce(t)
    check("sum", torch.equal(t, torch.full((1000,), float(sum(range(world))))))
    group = dist.distributed_c10d._get_default_group()
    assert isinstance(group, P4hubProcessGroup)  # the default group's backend is p4hub here
    emit(stats=group.stats())


def follow(rank: int, world: int) -> None:
    """All-reduces for a few seconds while the controller's heartbeat replies change the
    job's epoch (or end the job): every sum exact, or a failure naming the reason."""
    group = dist.distributed_c10d._get_default_group()
    assert isinstance(group, P4hubProcessGroup)
    ok = True
    try:
        for i in range(40):
            t = torch.full((5000,), float(rank + i))
            dist.all_reduce(t)
            ok &= torch.equal(t, torch.full((5000,), float(sum(range(world)) + world * i)))
            time.sleep(0.08)
    except Exception as exc:  # noqa: BLE001 - the scenario reports it
        emit(failed=str(exc))
    check("sums", ok)
    emit(stats=group.stats())


SCENARIOS: dict[str, Callable[[int, int], None]] = {
    "collectives": collectives, "mixed": mixed, "dead": dead, "late": late, "basic": basic,
    "overlap": overlap, "follow": follow,
}
DEFAULT_BACKEND = {"mixed": "gloo"}


def main(argv: list[str]) -> int:
    scenario = argv[0]
    if "RANK" in os.environ and len(argv) == 1:  # under torchrun
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        init = "env://"
    else:
        rank, world = int(argv[1]), int(argv[2])
        init = f"tcp://127.0.0.1:{argv[3]}"
    backend = DEFAULT_BACKEND.get(scenario, "p4hub")
    try:
        dist.init_process_group(backend, init_method=init, rank=rank, world_size=world,
                                timeout=TIMEOUT)
    except HostError as exc:
        emit(event="init failed", error=str(exc), type=type(exc).__name__)
        return 1
    SCENARIOS[scenario](rank, world)
    dist.destroy_process_group()
    emit(event="done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
