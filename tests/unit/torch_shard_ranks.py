"""Ranks of the sharded scenarios: reduce-scatter and all-gather, FSDP2 and ZeRO.

    python -m tests.unit.torch_shard_ranks SCENARIO RANK WORLD MASTER_PORT

The same protocol as tests/unit/torch_ranks.py (JSON lines of checks and digests);
tests/unit/test_torch_sharded.py runs these against a PBox on loopback.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

from p4hub.workers.train import data
from p4hub.workers.train.model import DigitsNet
from p4hub.workers.workload import quantized_sum
from tests.unit import torch_ranks
from tests.unit.torch_ranks import check, digest, emit, expect_refusal, inputs

# -- the collectives -------------------------------------------------------------------------

# reduce-scatters in the network (wire version 3) block each shard on its own, so their
# reference is each shard's own quantized sum, not a slice of the whole buffer's
NETWORK = os.environ.get("P4HUB_SCATTER") == "network"


def _quantized_shard(parts: list[np.ndarray], span: slice) -> np.ndarray:
    """What a reduce-scatter gives rank ``span``'s owner of float32 ``parts``."""
    return quantized_sum([p[span] for p in parts]) if NETWORK else quantized_sum(parts)[span]


def sharded(rank: int, world: int) -> None:
    _reduce_scatter_floats(rank, world)
    _reduce_scatter_exact(rank, world)
    _gathers(rank, world)
    _async_and_coalesced(rank, world)
    _refusals(world)
    after = torch.zeros(2)
    dist.reduce_scatter_tensor(after, torch.ones(2 * world))
    check("still in step after refusals", torch.equal(after, torch.full((2,), float(world))))
    stats = dist.distributed_c10d._get_default_group().stats()  # type: ignore[attr-defined]
    # in the network: DONEs for the other ranks' blocks; else none at all
    check("reduce-scatters ran where P4HUB_SCATTER says", stats["scatter_in_network"] == NETWORK
          and (stats["dones"] > 0) == NETWORK, dones=stats["dones"])
    # all-gathers too (a static plan's PBox runs gather rounds): header-only joins
    check("all-gathers ran where P4HUB_SCATTER says", stats["gather_in_network"] == NETWORK
          and (stats["joins"] > 0) == NETWORK, joins=stats["joins"])


def _sizes(total: int, world: int) -> list[int]:
    """``total`` split into ``world`` shards as torch.chunk would, so unequal when
    ``total`` is not divisible by the world (the last one shorter)."""
    return [len(c) for c in np.array_split(np.arange(total), world)][::-1]


def _reduce_scatter_floats(rank: int, world: int) -> None:
    total = 1001  # not divisible by 2, 3 or 4: unequal shards in the list form
    everyone = [inputs(r, total, 5) for r in range(world)]
    sizes = _sizes(total, world)
    pieces = list(torch.from_numpy(everyone[rank].copy()).split(sizes))
    out = torch.zeros(sizes[rank])
    dist.reduce_scatter(out, pieces)
    span = slice(sum(sizes[:rank]), sum(sizes[: rank + 1]))
    exact = _quantized_shard(everyone, span)
    check("reduce_scatter float32 SUM of unequal shards is the quantized sum's slice",
          np.array_equal(out.numpy().view(np.int32), exact.view(np.int32)),
          sizes=sizes)
    true = np.sum(np.stack(everyone).astype(np.float64), axis=0)
    bound = 2.0**-20 * float(np.max(np.abs(true)))  # quantization: ~2**-28 of a block's max
    err = float(np.max(np.abs(out.numpy() - true[span])))
    check("reduce_scatter float32 within the quantization bound", err <= bound, err=err,
          bound=bound)
    each = 300  # reduce_scatter_tensor: equal shards, each of an odd length
    flat = [inputs(r, each * world, 6) for r in range(world)]
    mean = torch.zeros(each)
    dist.reduce_scatter_tensor(mean, torch.from_numpy(flat[rank].copy()),
                               op=dist.ReduceOp.AVG)
    want = np.mean(np.stack(flat).astype(np.float64), axis=0)[rank * each:(rank + 1) * each]
    err = float(np.max(np.abs(mean.numpy() - want)))
    check("reduce_scatter_tensor AVG", err < 1e-8, err=err)
    stacked = torch.zeros(3, 5)
    source = torch.from_numpy(flat[rank][: world * 15].copy()).reshape(world * 3, 5)
    dist.reduce_scatter_tensor(stacked, source)  # 2-D: shards along the first dimension
    want2 = _quantized_shard([f[: world * 15] for f in flat], slice(rank * 15, (rank + 1) * 15))
    check("reduce_scatter_tensor of a 2-D tensor", np.array_equal(
        stacked.numpy().reshape(-1).view(np.int32), want2.view(np.int32)))
    for dtype in (torch.float16, torch.bfloat16):
        half = torch.zeros(7, dtype=dtype)
        source_h = (torch.arange(7 * world, dtype=torch.float32) * 0.25 * (rank + 1)).to(dtype)
        dist.reduce_scatter_tensor(half, source_h)
        scale = 0.25 * sum(range(1, world + 1))
        want_h = (torch.arange(rank * 7, (rank + 1) * 7, dtype=torch.float32) * scale).to(dtype)
        check(f"reduce_scatter_tensor {dtype} through float32",
              half.dtype == dtype and torch.equal(half, want_h))


def _reduce_scatter_exact(rank: int, world: int) -> None:
    sizes = _sizes(37, world)
    ints = torch.arange(37, dtype=torch.int32) * (rank + 1) + 2**28
    out = torch.zeros(sizes[rank], dtype=torch.int32)
    dist.reduce_scatter(out, list(ints.split(sizes)))
    want = (torch.arange(37, dtype=torch.int32) * sum(range(1, world + 1))
            + world * 2**28)[sum(sizes[:rank]): sum(sizes[: rank + 1])]
    check("reduce_scatter int32 is exact", torch.equal(out, want))
    big = torch.full((world * 1000,), 2**31 // world - 1, dtype=torch.int32)
    mine = torch.zeros(1000, dtype=torch.int32)
    dist.reduce_scatter_tensor(mine, big)
    check("reduce_scatter_tensor int32 near the top of its range is exact",
          torch.equal(mine, torch.full((1000,), world * (2**31 // world - 1), dtype=torch.int32)))


def _gathers(rank: int, world: int) -> None:
    sizes = _sizes(13, world)  # bytes: unequal, and not whole int32 words
    outs = [torch.zeros(n, dtype=torch.uint8) for n in sizes]
    dist.all_gather(outs, torch.arange(sizes[rank], dtype=torch.uint8) + 10 * rank)
    check("all_gather of unequal uint8 shards is bit exact",
          all(torch.equal(o, torch.arange(n, dtype=torch.uint8) + 10 * r)
              for r, (o, n) in enumerate(zip(outs, sizes, strict=True))))
    mine = (torch.arange(5, dtype=torch.float32) * (rank + 1) / 3).to(torch.bfloat16)
    flat = torch.zeros(5 * world, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(flat, mine)
    want = torch.cat([(torch.arange(5, dtype=torch.float32) * (r + 1) / 3).to(torch.bfloat16)
                      for r in range(world)])
    check("all_gather_into_tensor bfloat16 is bit exact",
          torch.equal(flat.view(torch.int16), want.view(torch.int16)))
    digest("all_gather", flat)


def _async_and_coalesced(rank: int, world: int) -> None:
    outs = [torch.zeros(100) for _ in range(3)]
    gathered = torch.zeros(4 * world)
    works = [dist.reduce_scatter_tensor(o, torch.full((100 * world,), float(rank + i)),
                                        async_op=True) for i, o in enumerate(outs)]
    works.append(dist.all_gather_into_tensor(gathered, torch.full((4,), float(rank)),
                                             async_op=True))
    for work in reversed(works):  # in any order: each completes on its own
        work.wait()
    ok = all(torch.equal(o, torch.full((100,), float(sum(r + i for r in range(world)))))
             for i, o in enumerate(outs))
    ok &= torch.equal(gathered, torch.arange(world).repeat_interleave(4).float())
    check("three async reduce_scatters and an all_gather in flight", ok)
    a, b = torch.zeros(3), torch.zeros(5)
    with dist._coalescing_manager(async_ops=True) as manager:
        dist.reduce_scatter_tensor(a, torch.full((3 * world,), 1.0))
        dist.reduce_scatter_tensor(b, torch.full((5 * world,), 2.0))
    manager.wait()
    check("coalesced reduce_scatter_tensor", torch.equal(a, torch.full((3,), float(world)))
          and torch.equal(b, torch.full((5,), 2.0 * world)))


def _refusals(world: int) -> None:
    expect_refusal("reduce_scatter MAX refused", lambda: dist.reduce_scatter_tensor(
        torch.zeros(1), torch.ones(world), op=dist.ReduceOp.MAX), "MAX")
    expect_refusal("reduce_scatter float64 refused", lambda: dist.reduce_scatter_tensor(
        torch.zeros(1, dtype=torch.float64), torch.ones(world, dtype=torch.float64)),
        "reduce_scatter_tensor of torch.float64")
    expect_refusal("reduce_scatter AVG of int32 refused", lambda: dist.reduce_scatter_tensor(
        torch.zeros(1, dtype=torch.int32), torch.ones(world, dtype=torch.int32),
        op=dist.ReduceOp.AVG), "int32")
    expect_refusal("all_to_all refused", lambda: dist.all_to_all_single(
        torch.zeros(world), torch.ones(world)), "all_to_all")


def dead_scatter(rank: int, world: int) -> None:
    """As torch_ranks.dead, with reduce_scatter_tensor as the collective left waiting."""
    out = torch.zeros(10)
    dist.reduce_scatter_tensor(out, torch.ones(10 * world))
    if rank == world - 1:
        emit(event="dying")
        os._exit(0)
    start = time.monotonic()
    try:
        dist.reduce_scatter_tensor(out, torch.ones(10 * world))
    except Exception as exc:  # noqa: BLE001 - the message is what is checked
        emit(event="failed", seconds=time.monotonic() - start, error=str(exc),
             type=type(exc).__name__)
        if rank == 0:
            time.sleep(10)  # rank 0 hosts the store (torch_ranks.dead says why)
        os._exit(0)
    emit(event="no error")


# -- sharded training ----------------------------------------------------------------------

STEPS = 8
BATCH = 32  # per rank


def training(rank: int, world: int) -> None:
    """FSDP2 and ZeroRedundancyOptimizer train DigitsNet (workers/train/model.py) on the
    digits over p4hub and, in the same processes, over Gloo; each rank reports its losses
    (the test compares them) and the digests of the full parameters (every rank's must be
    equal: all-gather and broadcast are exact)."""
    gloo = dist.new_group(backend="gloo")
    split = data.load_split(1)
    batches = [torch.from_numpy(ix) for ix in data.shard(0, rank, world, BATCH, 1)[:STEPS]]
    for kind, train in (("fsdp", _fsdp), ("zero", _zero)):
        params = {}
        for name, group in (("p4hub", None), ("gloo", gloo)):
            losses, params[name] = train(group, split, batches)
            emit(losses=f"{kind} {name}", values=losses)
            digest(f"{kind} {name} parameters", params[name])
        # quantization moves each gradient by ~2**-28 of its block's largest: the
        # parameters differ from Gloo's, by far less than a lost gradient would move them
        worst = float((params["p4hub"] - params["gloo"]).abs().max()
                      / params["gloo"].abs().max())
        check(f"{kind} parameters near Gloo's", 0 < worst < 2**-16, worst_relative=worst)


def _net() -> DigitsNet:
    torch.manual_seed(3)
    return DigitsNet(hidden=24)  # parameters of odd sizes: FSDP pads their shards


def _fsdp(group: dist.ProcessGroup | None, split: data.Split, batches: list[torch.Tensor]
          ) -> tuple[list[float], torch.Tensor]:
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    mesh = DeviceMesh.from_group(group or dist.distributed_c10d._get_default_group(), "cpu")
    net = _net()
    for part in (net.features, net.classifier):
        fully_shard(part, mesh=mesh)
    root = fully_shard(net, mesh=mesh)
    if group is not None:  # Gloo: it has no AVG, so SUM then divide; p4hub reduces with AVG
        root.set_force_sum_reduction_for_comms(True)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.2, momentum=0.9)
    losses = _train(net, optimizer, split, batches)
    sharded = [p for p in net.parameters() if isinstance(p, DTensor)]
    assert len(sharded) == len(list(net.parameters()))  # every parameter is sharded
    full = torch.cat([p.full_tensor().reshape(-1) for p in sharded])
    return losses, full.detach()


def _zero(group: dist.ProcessGroup | None, split: data.Split, batches: list[torch.Tensor]
          ) -> tuple[list[float], torch.Tensor]:
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel

    model = _net()
    ddp = DistributedDataParallel(model, process_group=group)
    optimizer = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.SGD,
                                        process_group=group, lr=0.2, momentum=0.9)
    losses = _train(ddp, optimizer, split, batches)
    return losses, torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def _train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, split: data.Split,
           batches: list[torch.Tensor]) -> list[float]:
    losses = []
    for ix in batches:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(split.train_images[ix]),
                                                 split.train_labels[ix])
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return losses


SCENARIOS = {"sharded": sharded, "dead_scatter": dead_scatter, "training": training}

if __name__ == "__main__":
    torch_ranks.SCENARIOS.update(SCENARIOS)
    sys.exit(torch_ranks.main(sys.argv[1:]))
