"""A tensor's blocks: how one tensor becomes a run of packets in a session's position stream.

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

With the precision option (a relative error bound, the job's), a PRIME primes L/2
blocks in two lanes each: lane j the exponent as above, lane L/2 + j ``128 - m`` with m
the exponent of the block's smallest nonzero value (0: none; at most 255, read as
the smallest subnormal's exponent), so its max-reduced result
brings back, per block, the largest exponent E and the smallest nonzero exponent over
all ranks. Every rank then makes the same decision from the same bytes: a block with
``E - m > quantize.float_span(n, bound)`` is a *float block*, sent as float32 bits with
the FALLBACK flag and exponent ``wire.EXP_FLOAT`` and summed by a PBox; the others are
quantized as usual. ``p = ceil(m / (L/2))``: one packet per L/2 blocks.

So a tensor pays one extra packet per L blocks (1/64 or 1/256 of its data) and one
round trip before its first data packet; every later block's exponent is known long
before its slot comes round. int32 tensors need no exponents: ``p = 0``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np

from p4hub.hosts import quantize
from p4hub.hosts.errors import SessionError
from p4hub.hosts.wire import (
    DEFAULT_LANES,
    EXP_FLOAT,
    LANE_COUNTS,
    MAX_PRIORITY,
    PRIME_EXP_BIAS,
    PRIME_MIN_SATURATED,
    PRIME_MIN_TOP,
)  # fmt: skip

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
    # (m,) int16 exponents of each block's smallest nonzero value (the precision option's;
    # None: not computed, the session does it if its job has the option)
    min_exps: np.ndarray | None = None

    @property
    def lanes(self) -> int:
        return self.blocks.shape[1]


def prepare(
    array: np.ndarray, op: str = "sum", priority: int = 0, lanes: int = DEFAULT_LANES,
    precision: bool = False,
) -> PreparedTensor:
    """Validate and block a tensor into blocks of ``lanes`` lanes; raises QuantizeError or
    SessionError on bad input. ``precision``: also read each block's smallest nonzero
    exponent (for a job with the precision option)."""
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
    mins = quantize.local_min_exponents(blocks) if precision and kind == "float" else None
    return PreparedTensor(kind, arr.shape, arr.size, blocks, exps, op == "mean", priority, mins)


@dataclass(slots=True, eq=False)
class TensorStream:
    """A started tensor: its run of positions in its class and what has come back."""

    tensor_id: Hashable
    prepared: PreparedTensor
    start: int  # position of local offset 0 in its class's stream
    # the precision option's threshold (quantize.float_span); None: the option is off
    float_span: float | None = None
    agreed: np.ndarray = field(init=False)  # (m,) int8 agreed exponents, as they arrive
    sums: np.ndarray = field(init=False)  # (m, L) int32 aggregated lanes
    primes: int = field(init=False)  # p: PRIME packets before the data
    prime_done: np.ndarray = field(init=False)  # (p,) whether PRIME i's result arrived
    per_prime: int = field(init=False)  # blocks one PRIME primes: L, or L/2 with precision
    is_float: np.ndarray = field(init=False)  # (m,) which blocks go unquantized (decided)
    received: int = 0  # blocks whose result arrived

    def __post_init__(self) -> None:
        m, lanes = self.block_count, self.prepared.lanes
        p = self.prepared
        if p.kind != "float":
            self.float_span = None
        if self.float_span is not None and p.min_exps is None:
            p.min_exps = quantize.local_min_exponents(p.blocks)
        self.per_prime = lanes // 2 if self.float_span is not None else lanes
        self.primes = primes_for(p, self.per_prime)
        self.agreed = np.full(m, quantize.EXP_ZERO, dtype=np.int8)
        self.sums = np.zeros((m, lanes), dtype=np.int32)
        self.prime_done = np.zeros(self.primes, dtype=bool)
        self.is_float = np.zeros(m, dtype=bool)

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
        return self.prime_done[block_ids // self.per_prime]

    def prime_lanes(self, prime_ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Write PRIMEs ``prime_ids``' lanes (local exponents + 128; with precision, the
        smallest nonzero exponents' codes in the upper half) into ``out``; returns their
        nelem (lanes carrying data)."""
        per = self.per_prime
        exps = self.prepared.local_exps
        blocks = np.minimum(per, exps.size - prime_ids * per)
        out[...] = 0
        for row, (i, k) in enumerate(zip(prime_ids.tolist(), blocks.tolist(), strict=True)):
            out[row, :k] = exps[i * per : i * per + k].astype(np.int32) - PRIME_EXP_BIAS
        if self.float_span is None:
            return blocks
        mins = self.prepared.min_exps
        assert mins is not None
        for row, (i, k) in enumerate(zip(prime_ids.tolist(), blocks.tolist(), strict=True)):
            m = mins[i * per : i * per + k].astype(np.int32)
            # 255 (a lane's top) stands for any m <= -127: values below 2**-128
            codes = np.minimum(PRIME_MIN_TOP - m, PRIME_MIN_SATURATED)
            out[row, per : per + k] = np.where(m == quantize.EXP_ZERO, 0, codes)
        return per + blocks

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
        floats = self.is_float[index]
        if self.float_span is None or not floats.any():
            quantize.quantize(
                p.blocks[index], self.agreed[index], world_size, out=out, local=p.local_exps[index]
            )
            return
        ids = np.asarray(block_ids)
        ints = ids[~floats]
        if ints.size:
            out[~floats] = quantize.quantize(p.blocks[ints], self.agreed[ints], world_size,
                                             local=p.local_exps[ints])
        out[floats] = p.blocks[ids[floats]].view(np.int32)  # the float32 bits, big-endian

    def exponents(self, block_ids: np.ndarray) -> np.ndarray:
        """The header exponent of blocks ``block_ids``: agreed, or EXP_FLOAT for a float
        block."""
        exps = self.agreed[block_ids]
        if self.float_span is not None:
            exps = np.where(self.is_float[block_ids], np.int8(EXP_FLOAT), exps)
        return exps

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
        per = self.per_prime
        m = self.block_count
        for row, i in enumerate(prime_ids.tolist()):
            k = min(per, m - i * per)
            # a lane beyond 0..255 would be a foreign or corrupt result: clipping keeps
            # the int8 cast defined; the sum it scales is checked like any other
            agreed = (np.clip(lanes[row, :k], 0, 255) + PRIME_EXP_BIAS).astype(np.int8)
            self.agreed[i * per : i * per + k] = agreed
            if self.float_span is not None:
                # the same reduced bytes on every rank: the same decision everywhere
                codes = np.clip(lanes[row, per : per + k], 0, 255).astype(np.int32)
                # a saturated code is read as the smallest subnormal's: conservative
                mins = np.where(codes == PRIME_MIN_SATURATED, quantize.EXP_MIN_NONZERO,
                                PRIME_MIN_TOP - codes)
                span = agreed.astype(np.int32) - mins
                self.is_float[i * per : i * per + k] = (codes > 0) & (span > self.float_span)
        self.prime_done[prime_ids] = True

    def result(self, world_size: int) -> np.ndarray:
        """The reduced tensor (float32 or int32), shaped like the input."""
        p = self.prepared
        if p.kind == "int32":
            flat = self.sums.reshape(-1)
        else:
            out = quantize.dequantize(self.sums, self.agreed, world_size, mean=p.mean)
            if self.is_float.any():  # the PBox's float32 sums, bit for bit
                sums = self.sums[self.is_float].view(np.float32)
                out[self.is_float] = (sums.astype(np.float64) / world_size).astype(np.float32) \
                    if p.mean else sums
            flat = out.reshape(-1)
        return flat[: p.size].reshape(p.shape)


def primes_for(prepared: PreparedTensor, per_prime: int | None = None) -> int:
    """PRIME packets a tensor needs: one per ``per_prime`` blocks (default L; float only)."""
    if prepared.kind != "float":
        return 0
    return -(-prepared.blocks.shape[0] // (per_prime or prepared.lanes))


def _as_index(block_ids: np.ndarray) -> np.ndarray | slice:
    """A slice for an ascending run without gaps (the common case): views, not gathers."""
    if block_ids.size and int(block_ids[-1]) - int(block_ids[0]) + 1 == block_ids.size:
        return slice(int(block_ids[0]), int(block_ids[-1]) + 1)
    return block_ids
