"""Block quantization: the overflow guarantee and the error bound, as properties.

Each case draws n workers' tensors with per-block scales from subnormal to 1e38,
zero blocks and mixed magnitudes inside a block, runs the whole scheme (local
exponents, max over workers, quantize, int32 sum, dequantize) and checks the
guarantees stated in hosts/quantize.py against float64 references.
"""

from __future__ import annotations

import numpy as np
import pytest

from p4hub.hosts import quantize as qz
from p4hub.hosts.errors import QuantizeError
from p4hub.hosts.wire import DEFAULT_LANES

WORLD_SIZES = [1, 2, 3, 4, 5, 8, 17, 32]


def random_blocks(rng: np.random.Generator, nblocks: int) -> np.ndarray:
    """float32 blocks mixing every regime the scheme must handle."""
    x = rng.standard_normal((nblocks, DEFAULT_LANES))
    kind = rng.integers(0, 6, size=nblocks)
    scale = 10.0 ** rng.uniform(-37, 37, size=nblocks)
    scale[kind == 1] = 1e30  # huge
    scale[kind == 2] = 1e-42  # subnormal float32
    scale[kind == 3] = 0.0  # zero block
    x *= scale[:, None]
    x[kind == 4, 0] = 1e30  # mixed: one lane dominates the rest by many orders
    x[kind == 5] = rng.uniform(-1, 1, size=(np.count_nonzero(kind == 5), DEFAULT_LANES)) * 1.5e38
    return x.astype(np.float32)  # all |x| < 1.5e38 < 2**127


def exact_dequantized(total: np.ndarray, agreed: np.ndarray, n: int) -> np.ndarray:
    """``sum q * 2**-s`` in float64, block by block with Python powers of two (exact)."""
    s = qz.shifts(agreed, n)
    return np.stack([total[i].astype(np.float64) * 2.0 ** -int(s[i]) for i in range(len(s))])


def run_scheme(inputs: list[np.ndarray], mean: bool = False):
    n = len(inputs)
    agreed = np.max([qz.local_exponents(b) for b in inputs], axis=0)
    qs = [qz.quantize(b, agreed, n) for b in inputs]
    total64 = np.sum([q.astype(np.int64) for q in qs], axis=0)
    total = np.sum(qs, axis=0, dtype=np.int32)
    assert isinstance(total, np.ndarray)  # a sum over axis 0 of 2-D blocks
    return agreed, qs, total64, total, qz.dequantize(total, agreed, n, mean=mean)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("n", WORLD_SIZES)
def test_sum_never_overflows_and_stays_within_the_bound(n, seed):
    rng = np.random.default_rng(seed * 100 + n)
    nblocks = int(rng.integers(1, 40))
    inputs = [random_blocks(rng, nblocks) for _ in range(n)]
    agreed, qs, total64, total, y = run_scheme(inputs)
    b = qz.headroom_bits(n)
    # every lane fits its share of the headroom, so the n-way int32 sum cannot wrap
    assert max(int(np.abs(q).max()) for q in qs) <= 2 ** (30 - b)
    assert np.abs(total64).max() <= 2**30
    assert np.array_equal(total64, total)
    # each lane is within half a quantum (2**-s / 2) of its input: round to nearest
    s = qz.shifts(agreed, n).astype(np.float64)[:, None]
    for x, q in zip(inputs, qs, strict=True):
        assert np.all(np.abs(q * np.exp2(-s) - x) <= np.exp2(-s - 1))
    # one rounding: y is the correctly rounded float32 of the exact fixed-point sum
    exact_fixed = exact_dequantized(total, agreed, n)
    with np.errstate(over="ignore"):
        assert np.array_equal(y, exact_fixed.astype(np.float32))
    # a sum beyond float32's range is +-Inf, as a float32 sum would be; nothing else is
    over = ~np.isfinite(y)
    assert np.all(np.abs(exact_fixed[over]) > np.finfo(np.float32).max)
    assert np.array_equal(np.sign(y[over]), np.sign(exact_fixed[over]))
    # the stated bound, against the float64 sum of the inputs
    x64 = np.sum([x.astype(np.float64) for x in inputs], axis=0)
    abs64 = np.sum([np.abs(x.astype(np.float64)) for x in inputs], axis=0)
    quantum_term = n * np.exp2(agreed.astype(np.float64) + b - 31)[:, None]
    slack = abs64 * n * 2.0**-52  # float64 rounding of the reference itself
    err = np.where(over, 0.0, np.abs(y.astype(np.float64) - x64))
    half_ulp = np.where(over, 0.0, np.spacing(np.abs(y)).astype(np.float64) / 2)
    assert np.all(err <= quantum_term + half_ulp + slack)
    assert np.all(err <= qz.error_bound(agreed, n)[:, None] + slack)


@pytest.mark.parametrize("n", [2, 3, 7, 32])
def test_mean_is_within_the_bound_divided_by_n(n):
    rng = np.random.default_rng(n)
    inputs = [random_blocks(rng, 16) for _ in range(n)]
    agreed, _, _, total, y = run_scheme(inputs, mean=True)
    x64 = np.mean([x.astype(np.float64) for x in inputs], axis=0)
    b = qz.headroom_bits(n)
    bound = np.exp2(agreed.astype(np.float64) + b - 31)[:, None] + np.spacing(np.abs(y)) / 2
    bound += np.abs(x64) * 2.0**-50 + 2.0**-149  # float64 division, subnormal floor
    assert np.all(np.abs(y - x64) <= bound)
    assert np.array_equal(y, (exact_dequantized(total, agreed, n) / n).astype(np.float32))


@pytest.mark.parametrize("n", [1, 3, 32])
def test_worst_case_all_lanes_at_the_top_of_the_range(n):
    top = np.nextafter(np.float32(2.0**20), np.float32(0))  # largest value with exponent 20
    for sign in (1, -1):
        inputs = [np.full((2, DEFAULT_LANES), sign * top, dtype=np.float32) for _ in range(n)]
        agreed, qs, total64, total, y = run_scheme(inputs)
        assert list(agreed) == [20, 20]
        assert np.array_equal(total64, total)  # no wrap-around
        assert np.all(np.abs(y - n * sign * np.float64(top)) <= qz.error_bound(agreed, n)[0])


def test_local_exponent_is_the_frexp_exponent():
    rng = np.random.default_rng(3)
    blocks = random_blocks(rng, 300)
    exps = qz.local_exponents(blocks)
    top = np.abs(blocks).max(axis=1).astype(np.float64)
    normal = top >= 2.0**-126
    assert np.array_equal(exps[normal], np.frexp(top[normal])[1])
    assert np.all(top[normal] < np.exp2(exps[normal].astype(np.float64)))
    assert np.all(top[normal] >= np.exp2(exps[normal].astype(np.float64) - 1))
    assert np.all(exps[(top > 0) & ~normal] == qz.EXP_SUBNORMAL)
    assert np.all(exps[top == 0] == qz.EXP_ZERO)
    assert exps.dtype == np.int8


def test_zero_and_subnormal_blocks_round_trip():
    x = np.zeros((3, DEFAULT_LANES), dtype=np.float32)
    x[1] = np.float32(1e-45) * np.arange(DEFAULT_LANES)  # multiples of the smallest subnormal
    agreed, _, _, _, y = run_scheme([x, x])
    assert list(agreed) == [qz.EXP_ZERO, qz.EXP_SUBNORMAL, qz.EXP_ZERO]
    assert np.array_equal(y, 2 * x)  # the quantum 2**-155 is finer than any subnormal


@pytest.mark.parametrize(
    "value,what", [(np.nan, "NaN"), (np.inf, "Inf"), (-np.inf, "Inf"), (2.0**127, "2\\*\\*127"), (1e300, "Inf")]
)
def test_unrepresentable_values_are_refused_with_their_position(value, what):
    x = np.ones(200)
    x[131] = value
    with pytest.raises(QuantizeError, match=f"{what}.*flat index 131 \\(block 2, lane 3\\)"):
        qz.local_exponents(qz.to_blocks(x))


def test_largest_accepted_value():
    x = np.array([np.nextafter(np.float32(2.0**127), np.float32(0))], dtype=np.float32)
    agreed, _, _, _, y = run_scheme([qz.to_blocks(x)] * 2)
    assert agreed[0] == 127 and np.isfinite(y).all()
    assert abs(float(y[0, 0]) - 2 * float(x[0])) <= qz.error_bound(agreed, 2)[0]


@pytest.mark.parametrize("dtype", [np.int64, np.int16, np.uint32, np.bool_, np.complex64])
def test_unsupported_dtypes_are_refused(dtype):
    with pytest.raises(QuantizeError, match="cannot all-reduce dtype"):
        qz.tensor_kind(np.zeros(3, dtype=dtype))


def test_float64_and_float16_inputs_are_carried_as_float32_and_int32_exactly():
    assert qz.tensor_kind(np.zeros(1, np.float64)) == qz.tensor_kind(np.zeros(1, np.float16)) == "float"
    ints = np.arange(-70, 70, dtype=np.int32)
    blocks = qz.to_blocks(ints)
    assert blocks.dtype == np.int32 and blocks.shape == (3, DEFAULT_LANES)
    assert np.array_equal(blocks.reshape(-1)[:140], ints) and not blocks.reshape(-1)[140:].any()


def test_an_agreed_exponent_below_the_local_one_is_refused():
    x = np.full((2, DEFAULT_LANES), 3.0, dtype=np.float32)  # local exponent 2
    local = qz.local_exponents(x)
    with pytest.raises(QuantizeError, match="block 1"):
        qz.quantize(x, np.array([2, 1], dtype=np.int8), 4, local=local)


def test_quantize_writes_big_endian_lanes_in_place():
    x = np.random.default_rng(0).standard_normal((5, DEFAULT_LANES)).astype(np.float32)
    exps = qz.local_exponents(x)
    out = np.zeros((5, DEFAULT_LANES), dtype=">i4")
    qz.quantize(x, exps, 4, out=out)
    assert np.array_equal(out, qz.quantize(x, exps, 4))


def test_long_tensors_are_processed_in_stripes_with_the_same_result():
    rng = np.random.default_rng(8)
    blocks = random_blocks(rng, 2 * qz.STRIPE + 77)
    exps = qz.local_exponents(blocks)
    pieces = [slice(0, 1000), slice(1000, 5000), slice(5000, None)]
    assert np.array_equal(exps, np.concatenate([qz.local_exponents(blocks[p]) for p in pieces]))
    q = qz.quantize(blocks, exps, 5)
    assert np.array_equal(q, np.concatenate([qz.quantize(blocks[p], exps[p], 5) for p in pieces]))
    for mean in (False, True):
        y = qz.dequantize(q, exps, 5, mean=mean)
        parts = [qz.dequantize(q[p], exps[p], 5, mean=mean) for p in pieces]
        assert np.array_equal(y, np.concatenate(parts), equal_nan=True)


@pytest.mark.parametrize("lanes", [64, 256])
def test_the_fast_scaling_equals_ldexp_at_every_exponent(lanes):
    """quantize/dequantize multiply by 2**s as float32 where that is a float32 and fall back
    to ldexp elsewhere: the lanes must equal the plain ldexp formula for every agreed
    exponent, the float32 range's edges (s = 127, 128, 126, 127 on the way back) included."""
    rng = np.random.default_rng(lanes)
    exps = np.arange(-128, 128, dtype=np.int8)
    mantissas = rng.uniform(-1, 1, (exps.size, lanes))
    blocks = np.ldexp(mantissas, exps.astype(np.int32)[:, None] - 1).astype(np.float32)
    blocks[0] = 0.0
    for n in (1, 2, 5, 32):
        s = qz.shifts(exps, n)
        assert s.max() > 127 and s.min() < 0  # both paths are exercised
        want = np.rint(np.ldexp(blocks, s[:, None]).astype(np.float32)).astype(np.int32)
        got = qz.quantize(blocks, exps, n)
        np.testing.assert_array_equal(got, want)
        back = qz.dequantize(got, exps, n)
        exact = np.ldexp(got.astype(np.float64), -s[:, None]).astype(np.float32)
        np.testing.assert_array_equal(back.view(np.int32), exact.view(np.int32))


@pytest.mark.parametrize("lanes", [64, 256])
def test_blocks_and_exponents_in_one_pass_equal_the_two_passes(lanes):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(qz.STRIPE * lanes * 2 + 77).astype(np.float64)
    x[::997] *= 1e9
    blocks, exps = qz.blocks_and_exponents(x, lanes=lanes)
    np.testing.assert_array_equal(blocks, qz.to_blocks(x, lanes=lanes))
    np.testing.assert_array_equal(exps, qz.local_exponents(blocks))
    ints, zeros = qz.blocks_and_exponents(np.arange(10, dtype=np.int32), lanes=lanes)
    assert ints.shape == (1, lanes) and not zeros.any()
    x[qz.STRIPE * lanes + 5] = np.nan  # in the second stripe: the index is the tensor's
    with pytest.raises(QuantizeError, match=f"flat index {qz.STRIPE * lanes + 5} "):
        qz.blocks_and_exponents(x, lanes=lanes)
