"""SwitchML-style block quantization of float32 gradients to int32 lanes.

A *block* is the L lanes of one packet (L = 64 or 256, the job's lane count). Everything here is whole-array
numpy over all blocks of a tensor at once; there is no per-element Python.

Scheme
------
* **Local exponent** of a block: the smallest integer ``e`` with ``max|x| < 2**e``
  (the ``frexp`` exponent of the block's largest magnitude), read straight from the
  IEEE-754 bits. An all-zero block gets ``EXP_ZERO = -128``; a block whose largest
  value is subnormal gets -126 (still ``> max|x|``). Values with ``|x| >= 2**127``
  (exponent 128 does not fit the wire's int8), NaN and Inf raise ``QuantizeError``
  naming the first bad element.
* **Agreed exponent** ``e``: the maximum of the n workers' local exponents for that
  block, returned by the aggregator (see hosts/session.py), so ``|x| < 2**e`` holds
  for every worker's values in that block.
* **Scale**: with ``b = ceil(log2 n)`` headroom bits, the shift is
  ``s = 30 - b - e`` and ``q = rint(x * 2**s)`` (round half to even). Multiplying by
  a power of two is exact, so the only rounding is ``rint``. The multiplication is a
  float32 ``x * 2.0**s`` (SIMD, ~25x ``np.ldexp``'s speed); only blocks whose factor is
  not a float32 (``s > 127``, all values below ``2**-97``) go through ``np.ldexp``, which
  gives the same values.

Why no overflow: ``|x * 2**s| < 2**(30-b)`` so ``|q| <= 2**(30-b)``; an n-way sum with
``n <= 2**b`` has ``|sum q| <= 2**30 < 2**31 - 1``. (With ``31 - b`` instead of ``30 - b``
n values each rounded up to ``2**(31-b)`` would reach exactly ``2**31``: one bit is the
price of round-to-nearest.)

Error bound (sum), per element, with ``y`` the float32 result and ``x_i`` the inputs::

    |y - sum_i x_i|  <=  n * 2**(e + b - 31)  +  ulp32(y) / 2
                     <=  n * 2**(e + b - 31)  +  2**(e + b - 24)

The first term is n roundings of at most half a quantum ``2**-s = 2**(e+b-30)``; the
second is the single rounding of the exact value ``sum q * 2**-s`` to float32
(``|sum q * 2**-s| <= 2**(e+b)``). Dequantization rounds exactly once (it is computed
so that the result is the correctly rounded float32 of ``sum q * 2**-s``), so all
workers get bit-identical results. A sum whose magnitude exceeds float32's range
(possible only when inputs come near 2**127) comes back as +-Inf, as a float32 sum
would. For ``mean`` the value ``sum q * 2**-s / n`` is
formed in float64 and rounded to float32: the bound is divided by n, plus ``ulp32(y)/2``
and float64's negligible ``2**-53`` relative error.

int32 tensors are not scaled: lanes are the values, and the sum is exact modulo
2**32 (two's-complement wrap-around, the same on switch and PBox).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from p4hub.hosts import native
from p4hub.hosts.errors import QuantizeError
from p4hub.hosts.wire import DEFAULT_LANES

EXP_ZERO = -128  # local exponent of an all-zero block (smaller than any real one)
EXP_SUBNORMAL = -126  # local exponent of a block whose largest value is subnormal
EXP_MIN_NONZERO = -148  # frexp exponent of the smallest subnormal float32, 2**-149
MAX_ABS_EXCLUSIVE = 2.0**127  # |x| must stay below this: exponent 128 is not an int8
HEADROOM_TOP = 30  # s = 30 - b - e, see the module docstring
# Blocks per pass: temporaries of 1 MB stay in cache and are reused, instead of
# tensor-sized temporaries that page-fault on every call.
STRIPE = 4096

_ABS_MASK = np.int32(0x7FFFFFFF)
_EXP_FIELD_SHIFT = 23
_INF_BITS = 0x7F800000  # bit patterns >= this (after the sign mask) are Inf or NaN
_TOO_BIG_BITS = 0x7F000000  # biased exponent 254: 2**127 <= |x| < 2**128


def headroom_bits(world_size: int) -> int:
    """``ceil(log2 n)``: the bits a sum of n values needs above one value."""
    if world_size < 1:
        raise QuantizeError(f"world size {world_size} must be at least 1")
    return (world_size - 1).bit_length()


def shifts(exps: np.ndarray, world_size: int) -> np.ndarray:
    """Per-block binary scale ``s = 30 - b - e`` (int32) for agreed exponents ``exps``."""
    return HEADROOM_TOP - headroom_bits(world_size) - np.asarray(exps, dtype=np.int32)


def error_bound(exps: np.ndarray, world_size: int) -> np.ndarray:
    """Closed-form worst-case absolute error of a dequantized sum, per block (float64)."""
    eb = np.asarray(exps, dtype=np.float64) + headroom_bits(world_size)
    return world_size * np.exp2(eb - 31) + np.exp2(eb - 24)


def tensor_kind(array: np.ndarray) -> str:
    """``"float"`` (quantized) or ``"int32"`` (exact); anything else is refused."""
    dt = np.asarray(array).dtype
    if dt.kind == "f" and dt.itemsize <= 8:
        return "float"
    if dt == np.int32:
        return "int32"
    raise QuantizeError(
        f"cannot all-reduce dtype {dt}: use a float (quantized to int32) or int32 (exact)"
    )


def to_blocks(array: np.ndarray, kind: str | None = None, lanes: int = DEFAULT_LANES) -> np.ndarray:
    """Copy a tensor into a zero-padded ``(ceil(size/L), L)`` float32 or int32 array."""
    arr = np.asarray(array)
    kind = kind or tensor_kind(arr)
    dtype = np.float32 if kind == "float" else np.int32
    nblocks = -(-arr.size // lanes)
    blocks = np.zeros((nblocks, lanes), dtype=dtype)
    if arr.size:
        # float64 values beyond float32's range become Inf here and are caught below
        with np.errstate(over="ignore"):
            np.copyto(blocks.reshape(-1)[: arr.size], arr.reshape(-1), casting="unsafe")
    return blocks


def blocks_and_exponents(
    array: np.ndarray, kind: str | None = None, lanes: int = DEFAULT_LANES
) -> tuple[np.ndarray, np.ndarray]:
    """``to_blocks`` and, for floats, ``local_exponents`` in one pass over memory: each
    stripe of blocks is copied and its exponents read while it is still in cache.
    int32 tensors get zero exponents."""
    arr = np.asarray(array)
    kind = kind or tensor_kind(arr)
    if kind != "float":
        blocks = to_blocks(arr, kind, lanes)
        return blocks, np.zeros(blocks.shape[0], dtype=np.int8)
    flat = arr.reshape(-1)
    nblocks = -(-flat.size // lanes)
    kernels = native.KERNELS
    if kernels is not None and flat.dtype == np.float32 and flat.dtype.isnative:
        # one compiled pass: copy, pad, exponent; a bad value: the numpy path's error
        blocks = np.empty((nblocks, lanes), dtype=np.float32)
        exps = np.empty(nblocks, dtype=np.int8)
        if kernels.block_exponents(np.ascontiguousarray(flat), blocks, exps):
            return blocks, exps
    blocks = np.zeros((nblocks, lanes), dtype=np.float32)
    exps = np.empty(nblocks, dtype=np.int8)
    out = blocks.reshape(-1)
    step = STRIPE * lanes
    try:
        # float64 values beyond float32's range become Inf here and are refused below
        with np.errstate(over="ignore"):
            for lo in range(0, nblocks, STRIPE):
                hi = min(nblocks, lo + STRIPE)
                start = lo * lanes
                np.copyto(out[start : start + step][: flat.size - start],
                          flat[start : start + step], casting="unsafe")
                exps[lo:hi] = local_exponents(blocks[lo:hi])
    except QuantizeError:
        local_exponents(blocks)  # again on the whole tensor: the error names the flat index
        raise
    return blocks, exps


def local_exponents(blocks: np.ndarray) -> np.ndarray:
    """Per-block local exponents (int8) of a ``(m, L)`` float32 array.

    Raises QuantizeError if a value is NaN, Inf or has ``|x| >= 2**127``.
    """
    # For non-negative IEEE floats the bit pattern orders like the value, so the
    # integer max is the magnitude max, and its exponent field is the exponent.
    top = _magnitude_bits(blocks, np.max)
    if top.size and int(top.max()) >= _TOO_BIG_BITS:
        _raise_unrepresentable(blocks, top)
    biased = top >> _EXP_FIELD_SHIFT
    exps = np.where(biased > 0, biased - 126, EXP_SUBNORMAL)
    exps[top == 0] = EXP_ZERO
    return exps.astype(np.int8)


def _magnitude_bits(blocks: np.ndarray, reduce: Callable[..., Any],
                    zeros_as: int | None = None) -> np.ndarray:
    """Per block of a ``(m, L)`` float32 array, ``reduce`` (np.max or np.min) over its
    values' magnitudes as int32 bit patterns (zeros as ``zeros_as`` if given), a stripe
    of blocks at a time through one scratch buffer."""
    out = np.empty(blocks.shape[0], dtype=np.int32)
    bits = blocks.view(np.int32)
    scratch = np.empty((min(blocks.shape[0], STRIPE), blocks.shape[1]), dtype=np.int32)
    for lo in range(0, blocks.shape[0], STRIPE):
        t = scratch[: min(STRIPE, blocks.shape[0] - lo)]
        np.bitwise_and(bits[lo : lo + STRIPE], _ABS_MASK, out=t)
        if zeros_as is not None:
            t[t == 0] = zeros_as
        reduce(t, axis=1, out=out[lo : lo + STRIPE])
    return out


def local_min_exponents(blocks: np.ndarray) -> np.ndarray:
    """Per-block ``frexp`` exponent m of the smallest *nonzero* magnitude of a ``(m, L)``
    float32 array (``2**(m-1) <= |x| < 2**m``; int16: a subnormal's goes down to
    -148); ``EXP_ZERO`` for an all-zero block. Only the precision option needs it
    (which blocks int32 quantization would crush)."""
    # zeros do not count: as _ABS_MASK they are larger than any finite magnitude
    out = _magnitude_bits(blocks, np.min, zeros_as=int(_ABS_MASK))
    biased = out >> _EXP_FIELD_SHIFT
    # a subnormal is t * 2**-149 with t < 2**23: its exponent is bit_length(t) - 149
    sub = np.frexp(np.where(biased > 0, 1, out).astype(np.float64))[1] - 149
    exps = np.where(biased > 0, biased - 126, sub)
    exps[out == _ABS_MASK] = EXP_ZERO
    return exps.astype(np.int16)


def float_span(world_size: int, rel_err: float) -> float:
    """The precision option's threshold: a block whose agreed exponent E and smallest
    nonzero exponent m (over all ranks) have ``E - m > float_span`` goes unquantized.

    Why: a value rounds to the quantum ``2**(E + b - 30)`` with an error of at most half
    of it, ``2**(E + b - 31)``, and the smallest nonzero value is at least ``2**(m - 1)``,
    so its relative error is at most ``2**(E + b - 30 - m)``; that exceeds ``rel_err``
    exactly when ``E - m > 30 - b + log2(rel_err)``."""
    if not 0.0 < rel_err < 1.0:
        raise QuantizeError(f"relative error bound {rel_err} must lie strictly between 0 and 1")
    return HEADROOM_TOP - headroom_bits(world_size) + float(np.log2(rel_err))


def _raise_unrepresentable(blocks: np.ndarray, top: np.ndarray) -> None:
    block = int(np.flatnonzero(top >= _TOO_BIG_BITS)[0])
    lanes = blocks[block]
    lane = int(np.flatnonzero(~(np.abs(lanes) < MAX_ABS_EXCLUSIVE))[0])
    value = lanes[lane]
    what = "NaN" if np.isnan(value) else "Inf" if np.isinf(value) else f"{float(value):g} (|x| >= 2**127)"
    raise QuantizeError(
        f"tensor holds {what} at flat index {block * blocks.shape[1] + lane} (block {block}, lane {lane}):"
        " only finite values below 2**127 can be aggregated"
    )


def quantize(
    blocks: np.ndarray,
    exps: np.ndarray,
    world_size: int,
    out: np.ndarray | None = None,
    local: np.ndarray | None = None,
) -> np.ndarray:
    """Fixed-point lanes ``rint(x * 2**s)`` of ``(m, L)`` float32 blocks.

    ``exps`` are the agreed exponents (one per block). ``out`` may be any integer view
    of shape ``(m, L)``, e.g. a packet array's big-endian ``values`` field, so the lanes
    land in wire order without another pass. If ``local`` (the blocks' own local
    exponents) is given, an agreed exponent below it raises QuantizeError instead of
    silently overflowing (a misbehaving aggregator).
    """
    exps = np.asarray(exps)
    if local is not None and local.size and bool(np.any(exps < local)):
        block = int(np.flatnonzero(exps < local)[0])
        raise QuantizeError(
            f"agreed exponent {int(exps[block])} of block {block} is below its local"
            f" exponent {int(local[block])}: the aggregator returned a wrong maximum"
        )
    s = shifts(exps, world_size)
    if out is None:
        out = np.empty(blocks.shape, dtype=np.int32)
    kernels = native.KERNELS
    if kernels is not None and native.float32_rows(blocks) and native.int32_rows(out):
        kernels.quantize(blocks, np.ascontiguousarray(s, dtype=np.int32), out)
        return out
    if blocks.shape[0] <= _FEW_BLOCKS:  # a session's typical few blocks: no stripes
        np.copyto(out, np.rint(np.ldexp(blocks, s[:, None])), casting="unsafe")
        return out
    scale = _powers_of_two(s, np.float32)
    rows, lanes = min(blocks.shape[0], STRIPE), blocks.shape[1]
    scratch = np.empty((rows, lanes), dtype=np.float32)
    ints = np.empty((rows, lanes), dtype=np.int32)
    # In stripes that stay in cache: scale, round to native int32 (|t| <= 2**30, so the
    # cast is exact), then one copy into ``out`` (byte-swapping when it is wire order).
    for lo in range(0, blocks.shape[0], STRIPE):
        hi = min(blocks.shape[0], lo + STRIPE)
        t, q = scratch[: hi - lo], ints[: hi - lo]
        np.multiply(blocks[lo:hi], scale[lo:hi, None], out=t)
        np.rint(t, out=q, casting="unsafe")
        np.copyto(out[lo:hi], q)
    wide = np.flatnonzero(s > _MAX_POW2_FLOAT32)
    if wide.size:  # factors beyond float32: the exact, slow way
        t = np.ldexp(blocks[wide], s[wide, None]).astype(np.float32)
        out[wide] = np.rint(t).astype(np.int32)
    return out


_MAX_POW2_FLOAT32 = 127  # 2**127 is the largest power of two a float32 holds
# Up to this many blocks the striped, table-driven path costs more in fixed overhead than
# it saves (a session quantizes the few blocks a window's results just released).
_FEW_BLOCKS = 8


def _powers_of_two(s: np.ndarray, dtype: type) -> np.ndarray:
    """``2.0**s`` as ``dtype``, exactly, for ``-126 <= s <= 127`` (normal float32 powers);
    other entries are 1 (the caller handles those rows another way)."""
    safe = np.where((s >= -126) & (s <= _MAX_POW2_FLOAT32), s, 0).astype(np.int32)
    return np.ldexp(np.ones(s.shape, dtype=dtype), safe)


def dequantize(
    sums: np.ndarray,
    exps: np.ndarray,
    world_size: int,
    *,
    mean: bool = False,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """float32 values of summed lanes ``(m, L)`` with the agreed exponents: one rounding.

    ``sums`` may be native or big-endian int32. With ``mean`` the sum is divided by n.
    """
    with np.errstate(over="ignore"):  # a sum beyond float32's range is +-Inf, as in float32
        return _dequantize(sums, shifts(exps, world_size)[:, None], world_size, mean, out)


def _dequantize(
    sums: np.ndarray, s: np.ndarray, world_size: int, mean: bool, out: np.ndarray | None
) -> np.ndarray:
    if out is None:
        out = np.empty(sums.shape, dtype=np.float32)
    kernels = native.KERNELS
    if kernels is not None and native.int32_rows(sums) and native.float32_rows(out):
        kernels.dequantize(sums, np.ascontiguousarray(s[:, 0], dtype=np.int32), out,
                           world_size if mean else 0)
        return out
    if mean:
        _dequantize_wide(sums, s, world_size, out)
        return out
    # The int32 -> float32 conversion is the one rounding; scaling by 2**-s is exact
    # as long as every non-zero result stays >= 2**-126 (a normal float32), i.e. s <= 126.
    np.copyto(out, sums, casting="unsafe")
    np.multiply(out, _powers_of_two(-s, np.float32), out=out)  # exact: a power of two
    tiny = np.flatnonzero(s[:, 0] > 126)  # subnormal results (or all-zero blocks)
    if tiny.size:
        wide = np.empty((tiny.size, sums.shape[1]), dtype=np.float32)
        _dequantize_wide(sums[tiny], s[tiny], 1, wide)
        out[tiny] = wide
    return out


def _dequantize_wide(sums: np.ndarray, s: np.ndarray, divisor: int, out: np.ndarray) -> None:
    """``sums * 2**-s / divisor`` through float64 (the int32 and the scaling are exact
    there), rounded once to float32 at the end."""
    scratch = np.empty((min(sums.shape[0], STRIPE), sums.shape[1]), dtype=np.float64)
    for lo in range(0, sums.shape[0], STRIPE):
        t = scratch[: min(STRIPE, sums.shape[0] - lo)]
        np.copyto(t, sums[lo : lo + STRIPE], casting="unsafe")
        np.ldexp(t, -s[lo : lo + STRIPE], out=t)
        if divisor != 1:
            t /= divisor
        np.copyto(out[lo : lo + STRIPE], t, casting="same_kind")
