"""How one tensor becomes a run of packets in a session's position stream.

Vocabulary (docs/DESIGN.md, Glossary): a tensor is cut into *blocks* of L lanes (the
job's lane count, 64 or 256), one block per packet. A session numbers every packet of a
priority class with a *position* g = 0, 1, 2, ... (the wire's position field =
g mod 2**32, slot = the class's first slot + g mod W, shadow set = (g // W) mod 2).
Tensors take consecutive runs of positions of their class in the order they are
started, so every worker, starting the same tensors in the same order, puts the same
data in the same slot.

A float tensor of m blocks takes ``p + m`` positions, where ``p = ceil(m / L)``:

* local offsets ``0 .. p-1`` are PRIME packets: the one at offset i carries in its
  lanes the local exponents of blocks ``i*L .. i*L + L-1`` (as ``e + 128``; nelem = how
  many), and the aggregator takes the lane-wise maximum, so its RESULT brings back the
  agreed exponents of those L blocks;
* local offset ``p + j`` carries block j, quantized with its agreed exponent, which
  therefore must have come back: block j waits for the result of PRIME ``j // L``.

So a tensor pays one extra packet per L blocks (1/64 or 1/256 of its data) and one
round trip before its first data packet; every later block's exponent is known long
before its slot comes round. int32 tensors need no exponents: ``p = 0``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np

from hosts import quantize
from hosts.errors import SessionError
from hosts.wire import LANE_COUNTS, MAX_PRIORITY, PRIME_EXP_BIAS, K

OPS = ("sum", "mean")


@dataclass(slots=True, eq=False)
class PreparedTensor:
    """A tensor copied into blocks with its local exponents (done in the caller's thread)."""

    kind: str  # "float" (quantized) or "int32" (exact)
    shape: tuple[int, ...]
    size: int
    blocks: np.ndarray  # (m, L) float32 or int32, zero padded
    local_exps: np.ndarray  # (m,) int8; zeros for int32
    mean: bool
    priority: int

    @property
    def lanes(self) -> int:
        return self.blocks.shape[1]


def prepare(
    array: np.ndarray, op: str = "sum", priority: int = 0, lanes: int = K
) -> PreparedTensor:
    """Validate and block a tensor into blocks of ``lanes`` lanes; raises QuantizeError or
    SessionError on bad input."""
    if lanes not in LANE_COUNTS:
        raise SessionError(f"lane count {lanes} is not one of {LANE_COUNTS}")
    if op not in OPS:
        raise SessionError(f"unknown reduction {op!r}: expected one of {OPS}")
    if not 0 <= priority <= MAX_PRIORITY:
        raise SessionError(f"priority {priority} outside 0..{MAX_PRIORITY}")
    arr = np.asarray(array)
    kind = quantize.tensor_kind(arr)
    if kind == "int32" and op == "mean":
        raise SessionError("the mean of an int32 tensor is not exact: reduce with op='sum'")
    blocks, exps = quantize.blocks_and_exponents(arr, kind, lanes)
    return PreparedTensor(kind, arr.shape, arr.size, blocks, exps, op == "mean", priority)


@dataclass(slots=True, eq=False)
class TensorStream:
    """A started tensor: its run of positions in its class and what has come back."""

    tensor_id: Hashable
    prepared: PreparedTensor
    start: int  # position of local offset 0 in its class's stream
    agreed: np.ndarray = field(init=False)  # (m,) int8 agreed exponents, as they arrive
    sums: np.ndarray = field(init=False)  # (m, L) int32 aggregated lanes
    primes: int = field(init=False)  # p: PRIME packets before the data
    prime_done: np.ndarray = field(init=False)  # (p,) whether PRIME i's result arrived
    received: int = 0  # blocks whose result arrived

    def __post_init__(self) -> None:
        m, lanes = self.block_count, self.prepared.lanes
        self.primes = primes_for(self.prepared)
        self.agreed = np.full(m, quantize.EXP_ZERO, dtype=np.int8)
        self.sums = np.zeros((m, lanes), dtype=np.int32)
        self.prime_done = np.zeros(self.primes, dtype=bool)

    @property
    def block_count(self) -> int:
        """m: the tensor's blocks (data packets)."""
        return self.prepared.blocks.shape[0]

    @property
    def end(self) -> int:
        """One past the last position."""
        return self.start + self.primes + self.block_count

    @property
    def complete(self) -> bool:
        return self.received == self.block_count

    def exponents_known(self, block_ids: np.ndarray) -> np.ndarray:
        """Whether the agreed exponents of ``block_ids`` are in (int32: always)."""
        if not self.primes:
            return np.ones(block_ids.shape, dtype=bool)
        return self.prime_done[block_ids // self.prepared.lanes]

    def prime_lanes(self, prime_ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Write PRIMEs ``prime_ids``' lanes (local exponents + 128) into ``out``; returns
        their nelem (exponents carried)."""
        lanes = self.prepared.lanes
        exps = self.prepared.local_exps
        nelem = np.minimum(lanes, exps.size - prime_ids * lanes)
        out[...] = 0
        for row, (i, k) in enumerate(zip(prime_ids.tolist(), nelem.tolist(), strict=True)):
            out[row, :k] = exps[i * lanes : i * lanes + k].astype(np.int32) - PRIME_EXP_BIAS
        return nelem

    def nelem(self, block_ids: np.ndarray) -> np.ndarray:
        """Lanes carrying data in the packets of blocks ``block_ids``."""
        lanes = self.prepared.lanes
        return np.minimum(lanes, self.prepared.size - block_ids * lanes)

    def lanes(self, block_ids: np.ndarray, world_size: int, out: np.ndarray) -> None:
        """Write the lanes of blocks ``block_ids`` (ascending) into ``out`` (a (len, L) view)."""
        p = self.prepared
        index = _as_index(block_ids)
        if p.kind == "int32":
            out[...] = p.blocks[index]
            return
        quantize.quantize(
            p.blocks[index], self.agreed[index], world_size, out=out, local=p.local_exps[index]
        )

    def store_results(self, offsets: np.ndarray, lanes: np.ndarray) -> None:
        """Record the results at ascending local ``offsets``: agreed exponents from
        PRIME results, aggregated lanes from data results."""
        n_primes = int(np.searchsorted(offsets, self.primes))
        if n_primes:
            self._store_agreed(offsets[:n_primes], lanes[:n_primes])
        block_ids = offsets[n_primes:] - self.primes
        self.received += int(block_ids.size)
        self.sums[_as_index(block_ids)] = lanes[n_primes:]

    def _store_agreed(self, prime_ids: np.ndarray, lanes: np.ndarray) -> None:
        width = self.prepared.lanes
        m = self.block_count
        for row, i in enumerate(prime_ids.tolist()):
            k = min(width, m - i * width)
            # a lane beyond 0..255 would be a foreign or corrupt result: clipping keeps
            # the int8 cast defined; the sum it scales is checked like any other
            self.agreed[i * width : i * width + k] = (
                np.clip(lanes[row, :k], 0, 255) + PRIME_EXP_BIAS
            ).astype(np.int8)
        self.prime_done[prime_ids] = True

    def result(self, world_size: int) -> np.ndarray:
        """The reduced tensor (float32 or int32), shaped like the input."""
        p = self.prepared
        if p.kind == "int32":
            flat = self.sums.reshape(-1)
        else:
            flat = quantize.dequantize(self.sums, self.agreed, world_size, mean=p.mean).reshape(-1)
        return flat[: p.size].reshape(p.shape)


def primes_for(prepared: PreparedTensor) -> int:
    """PRIME packets a tensor needs: one per L blocks (float only)."""
    if prepared.kind != "float":
        return 0
    return -(-prepared.blocks.shape[0] // prepared.lanes)


def _as_index(block_ids: np.ndarray) -> np.ndarray | slice:
    """A slice for an ascending run without gaps (the common case): views, not gathers."""
    if block_ids.size and int(block_ids[-1]) - int(block_ids[0]) + 1 == block_ids.size:
        return slice(int(block_ids[0]), int(block_ids[-1]) + 1)
    return block_ids
