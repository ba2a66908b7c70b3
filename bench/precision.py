"""What the precision option costs and buys (issue 11): blocks that int32 block
quantization cannot carry within a relative error bound go as float32 to a PBox.

No Mininet, no sockets: N sessions and the PBox core (hosts/pbox/aggregator.py) in one
process, datagrams handed over directly (no loss), so the figures are the protocol's
and the code's own. For each workload and bound it reports:

* the fraction of blocks sent float, and the PRIME packets per tensor (the option
  primes L/2 blocks per packet instead of L: the extra PRIME bytes);
* the error achieved with the option off and on: over elements whose contributions all
  share a sign (no cancellation, so a relative error means something), the largest
  ``|y - exact| / |exact|`` and the fraction of them beyond the bound;
* the wall time of the in-process all-reduce, off and on (host-side cost: reading the
  smallest exponents, the decision, the float path);
* the PBox core's CPU per cell, integer vs float (one round of n contributions), at
  64 and 256 lanes.

Workloads: ``normal`` (Gaussian gradients), ``mlp`` (the gradients of a small PyTorch
MLP on random data, each rank its own batch: real layers' spreads), ``heavy`` (Student
t, 1.5 degrees of freedom: heavy tails), ``wide`` (normal, but 10% of the blocks span
1e-8..1e3 with the same magnitudes on every rank).

    .venv/bin/python -m bench.precision [--workers 4] [--mb 1] [--bounds 1e-2,1e-3,1e-4]

Writes bench/results/precision.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from bench._common import comma_list
from p4hub.experiments.progress import track
from p4hub.hosts import blocks, quantize, wire
from p4hub.hosts.events import TensorCompleted
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.session import Session
from p4hub.hosts.wire import EXP_FLOAT, Header, PacketType

RESULTS = Path(__file__).resolve().parent / "results" / "precision.json"
JOB, WINDOW = 1, 64


def workload(name: str, n: int, size: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if name == "normal":
        return [rng.standard_normal(size).astype(np.float32) * 1e-2 for _ in range(n)]
    if name == "heavy":
        return [(rng.standard_t(1.5, size) * 1e-3).astype(np.float32) for _ in range(n)]
    if name == "wide":
        out = workload("normal", n, size, seed)
        blocks = -(-size // wire.DEFAULT_LANES)
        wide = rng.choice(blocks, max(1, blocks // 10), replace=False)
        mags = 10.0 ** rng.uniform(-8, 3, size)
        for x in out:
            for b in wide:
                lo, hi = b * wire.DEFAULT_LANES, min(size, (b + 1) * wire.DEFAULT_LANES)
                x[lo:hi] = mags[lo:hi] * rng.uniform(0.97, 1.03, hi - lo)
        return out
    if name == "mlp":
        return _mlp_gradients(n, size, seed)
    raise ValueError(name)


def _mlp_gradients(n: int, size: int, seed: int) -> list[np.ndarray]:
    """Each rank's flattened gradient of one step of a 784-512-256-10 MLP, tiled or cut
    to ``size``."""
    import torch

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))  # fmt: skip
    out = []
    for _ in range(n):
        model.zero_grad()
        x, y = torch.randn(32, 784), torch.randint(0, 10, (32,))
        torch.nn.functional.cross_entropy(model(x), y).backward()
        flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()
                          if p.grad is not None]).numpy()
        out.append(np.resize(flat, size).astype(np.float32))
    return out


def allreduce(inputs: list[np.ndarray], precision: float | None, lanes: int,
              repeat: int = 5) -> tuple[np.ndarray, float, Aggregator, Session]:
    """``_allreduce`` ``repeat`` times; the fastest wall time (the machine is shared: noisy)."""
    runs = [_allreduce(inputs, precision, lanes) for _ in range(repeat)]
    y, _, agg, s = runs[0]
    return y, min(r[1] for r in runs), agg, s


def _allreduce(inputs: list[np.ndarray], precision: float | None,
               lanes: int) -> tuple[np.ndarray, float, Aggregator, Session]:
    """One all-reduce through the PBox core, datagrams handed over at once (each rank's
    results in one batch, as the agent's recvmmsg); returns rank 0's result, the wall
    time, the core and rank 0's session."""
    n = len(inputs)
    agg = Aggregator()
    agg.add_job(JOB, n, 0, WINDOW, lanes)
    sessions = [Session(JOB, r, n, 0, WINDOW, lanes=lanes, precision=precision)
                for r in range(n)]  # fmt: skip
    t0 = time.perf_counter()
    for r, s in enumerate(sessions):
        s.start(0, blocks.prepare(inputs[r], lanes=lanes, precision=precision is not None), 0.0)
    results: list[np.ndarray | None] = [None] * n
    while any(x is None for x in results):
        moved = False
        replies: list[list[bytes]] = [[] for _ in range(n)]
        for r, s in enumerate(sessions):
            for d in s.datagrams_to_send(0.0):
                moved = True
                for reply, dst in agg.receive(d, ("w", r), 0.0):
                    replies[dst[1]].append(reply)
        for r, got in enumerate(replies):  # one batch per rank, as the agent's recvmmsg
            if got:
                sessions[r].receive_batch(b"".join(got), len(got), 0.0)
        for r, s in enumerate(sessions):
            while (ev := s.next_event()) is not None:
                assert isinstance(ev, TensorCompleted), ev
                results[r] = ev.result
        if not moved and any(x is None for x in results):
            raise RuntimeError("stuck")
    wall = time.perf_counter() - t0
    assert all(x.tobytes() == results[0].tobytes() for x in results)  # type: ignore[union-attr]
    return results[0], wall, agg, sessions[0]  # type: ignore[return-value]


def errors(inputs: list[np.ndarray], y: np.ndarray, bound: float) -> dict:
    stack = np.array(inputs, dtype=np.float64)
    exact = stack.sum(axis=0)
    same = (np.all(stack > 0, axis=0) | np.all(stack < 0, axis=0))
    rel = np.abs(y[same] - exact[same]) / np.abs(exact[same])
    return {"elements_same_sign": int(same.sum()), "max_rel_err": float(rel.max()),
            "p99_rel_err": float(np.quantile(rel, 0.99)),
            "beyond_bound": float(np.mean(rel > bound))}


def contribution_errors(inputs: list[np.ndarray], bound: float, precision: float | None,
                        lanes: int) -> dict:
    """What the bound is about: each nonzero contribution's own quantization error,
    ``|rint(x * 2**s) * 2**-s - x| / |x|`` (0 in a float block), computed from the
    agreed exponents and the same decision the sessions make. Returns the largest and
    the fraction of contributions beyond ``bound``."""
    n = len(inputs)
    blocks = [quantize.to_blocks(x, lanes=lanes) for x in inputs]
    agreed = np.max([quantize.local_exponents(b) for b in blocks], axis=0).astype(np.int32)
    floats = np.zeros(agreed.shape, dtype=bool)
    if precision is not None:
        mins = np.min([np.where(m == quantize.EXP_ZERO, 999, m) for m in
                       (quantize.local_min_exponents(b).astype(np.int32) for b in blocks)], axis=0)
        floats = (mins != 999) & (agreed - mins > quantize.float_span(n, precision))
    worst, beyond, count = 0.0, 0, 0
    for b in blocks:
        x = b.astype(np.float64)
        q = quantize.dequantize(quantize.quantize(b, agreed, n), agreed, n).astype(np.float64)
        nz = (x != 0) & ~floats[:, None]
        rel = np.abs(q[nz] - x[nz]) / np.abs(x[nz])
        count += int(np.count_nonzero(x))
        if rel.size:
            worst = max(worst, float(rel.max()))
            beyond += int(np.count_nonzero(rel > bound))
    return {"max_contribution_rel_err": worst, "contributions_beyond_bound": beyond / count,
            "contributions_beyond_count": beyond}


def cell_cpu(n: int, lanes: int, floats: bool, rounds: int = 2000) -> float:
    """µs of PBox core CPU per cell round (n contributions and the result)."""
    agg = Aggregator()
    agg.add_job(JOB, n, 0, WINDOW, lanes)
    rng = np.random.default_rng(1)
    values = rng.standard_normal(lanes).astype(np.float32)
    lanes_i32 = values.view(np.int32) if floats else (values * 1e6).astype(np.int32)
    packets = []
    for g in range(rounds):
        for r in range(n):
            h = Header(PacketType.CONTRIB, JOB, r, g % WINDOW, g, lanes, lanes=lanes,
                       exp=EXP_FLOAT if floats else 3, fallback=floats,
                       shadow=(g // WINDOW) & 1)  # fmt: skip
            packets.append((wire.encode(h, lanes_i32), ("w", r)))
    t0 = time.process_time()
    for d, src in packets:
        agg.receive(d, src, 0.0)
    spent = time.process_time() - t0
    assert agg.job_stats(JOB).completions == rounds
    return 1e6 * spent / rounds


def prepare_cpu(mb: float, lanes: int, precision: bool, repeat: int = 5) -> float:
    """CPU ms per MB of ``blocks.prepare`` (blocks, exponents and, with the option,
    the smallest exponents), best of ``repeat``."""
    x = np.random.default_rng(2).standard_normal(int(mb * (1 << 20)) // 4).astype(np.float32)
    best = np.inf
    for _ in range(repeat):
        t0 = time.process_time()
        blocks.prepare(x, lanes=lanes, precision=precision)
        best = min(best, time.process_time() - t0)
    return 1e3 * best / mb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--mb", type=float, default=1.0, help="tensor size per rank, MB")
    ap.add_argument("--bounds", type=comma_list(float), default=[1e-2, 1e-3, 1e-4])
    ap.add_argument("--workloads", type=comma_list(str), default=["normal", "mlp", "heavy", "wide"])
    ap.add_argument("--lanes", type=int, default=wire.DEFAULT_LANES)
    args = ap.parse_args()
    n, lanes = args.workers, args.lanes
    size = int(args.mb * (1 << 20)) // 4
    rows = []
    for name in track(args.workloads, "precision workloads"):
        inputs = workload(name, n, size)
        off, wall_off, _, s_off = allreduce(inputs, None, lanes)
        for bound in args.bounds:
            on, wall_on, agg, s_on = allreduce(inputs, bound, lanes)
            blocks = -(-size // lanes)
            floats = agg.job_stats(JOB).float_completions
            row = {
                "workload": name, "bound": bound, "blocks": blocks,
                "float_blocks": floats, "float_fraction": floats / blocks,
                "primes_off": s_off.stats.sent - blocks, "primes_on": s_on.stats.sent - blocks,
                "extra_prime_bytes_fraction": (s_on.stats.sent - s_off.stats.sent) / blocks,
                "wall_s_off": wall_off, "wall_s_on": wall_on,
                "off": errors(inputs, off, bound) | contribution_errors(inputs, bound, None, lanes),
                "on": errors(inputs, on, bound) | contribution_errors(inputs, bound, bound, lanes),
            }
            rows.append(row)
            a, b = row["off"], row["on"]
            print(f"{name:6s} {bound:6g}: {100 * row['float_fraction']:5.2f}% float, PRIMEs "
                  f"{row['primes_off']}->{row['primes_on']} (+{100 * row['extra_prime_bytes_fraction']:.2f}%"
                  f" packets); contributions beyond the bound {a['contributions_beyond_count']}"
                  f" -> {b['contributions_beyond_count']} (max {a['max_contribution_rel_err']:.1e}"
                  f" -> {b['max_contribution_rel_err']:.1e}); sums, same-sign elements: max rel err "
                  f"{a['max_rel_err']:.1e} -> {b['max_rel_err']:.1e}; wall {wall_off:.3f} -> {wall_on:.3f} s")
    cells = []
    for cell_lanes in (64, 256):
        for floats in (False, True):
            us = min(cell_cpu(n, cell_lanes, floats) for _ in range(3))  # shared machine
            cells.append({"lanes": cell_lanes, "kind": "float" if floats else "int32",
                          "us_per_cell": us, "us_per_contribution": us / n})
            print(f"PBox core, {cell_lanes} lanes, {'float' if floats else 'int32'} cell: "
                  f"{us:.1f} µs per cell of {n} ({us / n:.1f} µs per contribution)")
    prep = {"off": prepare_cpu(16, lanes, False), "on": prepare_cpu(16, lanes, True)}
    print(f"prepare (16 MB): {prep['off']:.2f} -> {prep['on']:.2f} CPU ms per MB")
    out = {"workers": n, "mb": args.mb, "lanes": lanes, "machine": platform.node(),
           "prepare_cpu_ms_per_mb": prep,
           "python": platform.python_version(), "rows": rows, "pbox_cells": cells,
           "note": "in-process, no loss; quantize.float_span decides (docs/notes/elastic.md)",
           "threshold_span": {str(b): quantize.float_span(n, b) for b in args.bounds}}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
