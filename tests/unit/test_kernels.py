"""The compiled kernels (hosts/_kernels.c) give the numpy paths' bytes, errors included.

Each test runs the same call twice, with ``native.KERNELS`` set and with it None (the
fallback), and compares bytes. ``make`` builds the extension (``pip install -e .``); a
missing one fails here instead of silently testing the fallback against itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np
import pytest

from p4hub.hosts import native, packetize, quantize, wire
from p4hub.hosts.errors import QuantizeError
from p4hub.hosts.pbox.aggregator import Aggregator
from p4hub.hosts.wire import Header, PacketType

KERNELS = native.KERNELS
LANES = (64, 256)


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    if KERNELS is None:
        pytest.fail("p4hub.hosts._kernels is not built (`pip install -e .`, which make's "
                    "venv step runs, builds it) or P4HUB_NO_NATIVE is set")
    yield
    native.KERNELS = KERNELS


def both(fn: Callable[[], Any]) -> tuple[Any, Any]:
    """``fn()`` with the kernels, then without; an exception is returned as its text."""
    results = []
    for kernels in (KERNELS, None):
        native.KERNELS = kernels
        try:
            results.append(fn())
        except QuantizeError as exc:
            results.append(f"QuantizeError: {exc}")
    native.KERNELS = KERNELS
    return results[0], results[1]


def as_bytes(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(as_bytes(v) for v in value)
    return value.tobytes() if isinstance(value, np.ndarray) else value


def assert_same(fn: Callable[[], Any]) -> Any:
    a, b = both(fn)
    assert as_bytes(a) == as_bytes(b)
    return a


def awkward(rng: np.random.Generator, n: int) -> np.ndarray:
    """float32s over the whole exponent range: subnormals, zeros, both signs, halves."""
    x = rng.standard_normal(n) * np.exp2(rng.integers(-150, 126, n).astype(np.float64))
    x = x.astype(np.float32)
    x[::5] = 0.0
    x[1::11] = -0.0
    x[2::13] = np.float32(2.5)  # a tie for round-half-to-even at some scales
    x[3::17] = np.float32(1e-45)  # the smallest subnormal
    return x


SIZES = (0, 1, 63, 64, 65, 255, 256, 1000, 64 * 37 + 5)


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("n", SIZES)
def test_blocks_and_exponents_match(lanes: int, n: int) -> None:
    x = awkward(np.random.default_rng(n), n)
    assert_same(lambda: quantize.blocks_and_exponents(x, "float", lanes))


@pytest.mark.parametrize("lanes", LANES)
def test_all_zero_and_subnormal_blocks_match(lanes: int) -> None:
    x = np.zeros(3 * lanes + 7, dtype=np.float32)
    x[lanes : 2 * lanes] = np.float32(1e-40)  # a block whose largest value is subnormal
    blocks, exps = assert_same(lambda: quantize.blocks_and_exponents(x, "float", lanes))
    assert exps.tolist() == [quantize.EXP_ZERO, quantize.EXP_SUBNORMAL, quantize.EXP_ZERO,
                             quantize.EXP_ZERO]
    for world in (1, 2, 32):
        out = assert_same(partial(quantize.quantize, blocks, exps, world))
        assert_same(partial(quantize.dequantize, out, exps, world))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 2.0**127, -3e38])
@pytest.mark.parametrize("lanes", LANES)
def test_unrepresentable_values_raise_the_same_error(bad: float, lanes: int) -> None:
    x = awkward(np.random.default_rng(3), 5 * lanes + 3)
    x[3 * lanes + 9] = bad
    a, b = both(lambda: quantize.blocks_and_exponents(x, "float", lanes))
    assert isinstance(a, str) and a == b and "flat index" in a
    packets = wire.packet_array(6, lanes)
    a, b = both(lambda: packetize.packetize(x, packets, 4, job=1, rank=0))
    assert isinstance(a, str) and a == b


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("world", [1, 2, 3, 8, 32])
def test_quantize_into_packets_and_dequantize_match(lanes: int, world: int) -> None:
    x = awkward(np.random.default_rng(world), 40 * lanes - 3)
    blocks, exps = quantize.blocks_and_exponents(x, "float", lanes)
    # agreed exponents at or above the local ones, as the aggregator returns them
    agreed = np.minimum(exps.astype(np.int32) + np.arange(exps.size) % 3, 127).astype(np.int8)
    for rows in (slice(None), slice(0, 5), np.array([1, 4, 7])):  # striped, few, gathered
        b, e = blocks[rows], agreed[rows]
        packets = [wire.packet_array(b.shape[0], lanes) for _ in range(2)]
        for p, kernels in zip(packets, (KERNELS, None), strict=True):
            native.KERNELS = kernels
            quantize.quantize(b, e, world, out=p["values"], local=exps[rows])
        native.KERNELS = KERNELS
        assert packets[0].tobytes() == packets[1].tobytes()
        native_out = assert_same(partial(quantize.quantize, b, e, world))
        assert native_out.tobytes() == packets[0]["values"].astype(np.int32).tobytes()
        for mean in (False, True):
            assert_same(partial(quantize.dequantize, packets[0]["values"], e, world, mean=mean))


@pytest.mark.parametrize("lanes", LANES)
def test_dequantize_extreme_sums_match(lanes: int) -> None:
    rng = np.random.default_rng(7)
    sums = rng.integers(-(2**31), 2**31, (8, lanes), dtype=np.int64).astype(np.int32)
    sums[0] = [2**31 - 1, -(2**31)] * (lanes // 2)
    exps = np.array([127, -128, -126, -100, 0, 96, 100, 126], dtype=np.int8)  # +-Inf, tiny
    be = sums.astype(">i4")
    for world in (1, 5, 32):
        for mean in (False, True):
            assert_same(partial(quantize.dequantize, sums, exps, world, mean=mean))
            assert_same(partial(quantize.dequantize, be, exps, world, mean=mean))


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("n", [1, 64, 257, 64 * 41 + 9])
@pytest.mark.parametrize("given", [False, True])
def test_packetize_matches_the_numpy_passes(lanes: int, n: int, given: bool) -> None:
    x = awkward(np.random.default_rng(n), n)
    m = -(-n // lanes)
    exps = None
    if given:
        _, local = quantize.blocks_and_exponents(x, "float", lanes)
        exps = np.minimum(local.astype(np.int32) + 1, 127).astype(np.int8)

    def run() -> tuple[np.ndarray, np.ndarray]:
        packets = wire.packet_array(m, lanes)
        used = packetize.packetize(x, packets, 6, job=7, rank=3, position=2**32 - 5,
                                   slot_base=100, window=48, exps=exps, epoch=9,
                                   flags=wire.make_flags(shadow=1, priority=5, lanes=lanes))
        return packets, used

    packets, _ = assert_same(run)
    header, values = wire.decode(packets[-1].tobytes())
    assert (header.job, header.rank, header.epoch, header.nelem) == (7, 3, 9, n - (m - 1) * lanes)
    assert header.slot == 100 + (2**32 - 5 + m - 1) % 48
    assert header.position == (2**32 - 5 + m - 1) % 2**32


def test_packetize_refuses_a_packet_array_of_the_wrong_size() -> None:
    with pytest.raises(QuantizeError, match="packets needed"):
        packetize.packetize(np.ones(65, np.float32), wire.packet_array(1, 64), 2, job=1, rank=0)


@pytest.mark.parametrize("lanes", LANES)
def test_the_pbox_sums_and_maxima_match(lanes: int) -> None:
    """Two aggregators fed the same contributions (sums, PRIME maxima, wrap-around, a
    duplicate's stored result) answer with the same datagrams."""
    rng = np.random.default_rng(lanes)
    datagrams = []
    for slot in range(4):
        ptype = PacketType.PRIME if slot == 3 else PacketType.CONTRIB
        for rank in (2, 0, 1, 1):
            values = rng.integers(-(2**31), 2**31, lanes, dtype=np.int64)
            if ptype is PacketType.PRIME:
                values = values % 256
            header = Header(type=ptype, job=1, rank=rank, slot=slot, position=slot,
                            nelem=lanes, exp=int(rng.integers(-20, 20)), lanes=lanes)
            datagrams.append((wire.encode(header, values.astype(np.int32)), rank))
    answers = []
    for kernels in (KERNELS, None):
        native.KERNELS = kernels
        agg = Aggregator()
        agg.add_job(1, 3, 0, 8, lanes)
        answers.append([agg.receive(d, ("10.0.0.1", 1000 + r), 0.0) for d, r in datagrams])
    native.KERNELS = KERNELS
    assert answers[0] == answers[1]
    assert sum(len(a) for a in answers[0]) == 4 * 3 + 4  # 4 completions to 3, 4 duplicates


def test_p4hub_no_native_forces_the_fallback() -> None:
    code = "from p4hub.hosts import native; print(native.KERNELS is None)"
    for value, expected in (("1", "True"), ("0", "False")):
        env = {**os.environ, native.ENV_DISABLE: value}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True, cwd=os.getcwd())
        assert out.stdout.strip() == expected
