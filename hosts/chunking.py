"""How one tensor becomes a run of packets in a session's position stream.

Vocabulary (docs/DESIGN.md, Glossary): a tensor is cut into *blocks* of L lanes (the
job's lane count, 64 or 256), one block per packet. A session numbers every packet it will ever send with a
*position* g = 0, 1, 2, ... (the wire's position field = g mod 2**32, slot =
slot_base + g mod W, shadow set = (g // W) mod 2). Tensors take consecutive runs of
positions in the order they are started, so every worker, starting the same tensors in
the same order, puts the same data in the same slot.

A float tensor of m blocks takes ``c + m`` positions, where ``c = min(W, m)``:

* local offsets ``0 .. c-1`` are *priming* packets (no lanes, ``nelem = 0``);
* local offset ``c + j`` carries block j.

The packet at local offset l carries in ``exp`` the local exponent of block l
(if l < m), and its RESULT brings back the agreed exponent of block l. So block j
waits for the result at offset j, which is c positions earlier: the previous round of
the same slot when ``c = W`` (SwitchML's "one window ahead"), and the priming round for
the first window. A tensor smaller than the window primes only its own blocks (c = m).
int32 tensors need no exponents: ``c = 0`` and their packets carry ``exp = 0``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np

from hosts import quantize
from hosts.errors import SessionError
from hosts.wire import LANE_COUNTS, MAX_PRIORITY, K

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
    """A started tensor: its run of positions and what has come back so far."""

    tensor_id: Hashable
    prepared: PreparedTensor
    start: int  # position of local offset 0
    primes: int  # c: priming packets before the data
    agreed: np.ndarray = field(init=False)  # (m,) int8 agreed exponents, as they arrive
    sums: np.ndarray = field(init=False)  # (m, L) int32 aggregated lanes
    received: int = 0  # blocks whose result arrived

    def __post_init__(self) -> None:
        m = self.block_count
        self.agreed = np.full(m, quantize.EXP_ZERO, dtype=np.int8)
        self.sums = np.zeros((m, self.prepared.lanes), dtype=np.int32)

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

    def carried_exps(self, offsets: np.ndarray) -> np.ndarray:
        """The ``exp`` field of the packets at local ``offsets``: block l's local exponent."""
        exps = np.full(offsets.shape, quantize.EXP_ZERO, dtype=np.int8)
        inside = offsets < self.block_count
        exps[inside] = self.prepared.local_exps[offsets[inside]]
        return exps

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

    def store_results(self, offsets: np.ndarray, exps: np.ndarray, lanes: np.ndarray) -> None:
        """Record the results at ascending local ``offsets`` (exps and lanes alike)."""
        known = offsets < self.block_count
        self.agreed[offsets[known]] = exps[known]
        data = offsets >= self.primes
        block_ids = offsets[data] - self.primes
        self.received += int(block_ids.size)
        self.sums[_as_index(block_ids)] = lanes[data]

    def result(self, world_size: int) -> np.ndarray:
        """The reduced tensor (float32 or int32), shaped like the input."""
        p = self.prepared
        if p.kind == "int32":
            flat = self.sums.reshape(-1)
        else:
            flat = quantize.dequantize(self.sums, self.agreed, world_size, mean=p.mean).reshape(-1)
        return flat[: p.size].reshape(p.shape)


def primes_for(prepared: PreparedTensor, window: int) -> int:
    """Priming packets a tensor needs: one per block of its first window (float only)."""
    return min(window, prepared.blocks.shape[0]) if prepared.kind == "float" else 0


def _as_index(block_ids: np.ndarray) -> np.ndarray | slice:
    """A slice for an ascending run without gaps (the common case): views, not gathers."""
    if block_ids.size and int(block_ids[-1]) - int(block_ids[0]) + 1 == block_ids.size:
        return slice(int(block_ids[0]), int(block_ids[-1]) + 1)
    return block_ids
