"""Synthetic gradient sets shaped like a real model, and their reference sums.

Every worker derives every rank's gradients from (seed, iteration, rank), so any
process can recompute the float64 sum of the unquantized inputs and the exact sum
of the quantized inputs without moving data around.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from p4hub.hosts import quantize
from p4hub.hosts.wire import DEFAULT_LANES
from p4hub.topologies.errors import EmulationError

# The profiles ship inside the package (package data), so a fresh clone or an installed
# wheel finds them without anything outside the repository.
WORKLOADS = Path(__file__).resolve().parent / "workloads"
DEFAULT_MODEL = WORKLOADS / "resnet50.json"


class UnknownModelError(EmulationError, ValueError):
    """``--model`` named neither a bundled profile nor an existing file."""


def model_names() -> list[str]:
    """The bare names ``model_path`` accepts: the bundled profiles."""
    return sorted(p.stem for p in WORKLOADS.glob("*.json"))


def model_path(name_or_path: Path | str) -> Path:
    """The profile file for a bundled model name (``resnet50``) or a path to a profile.

    A bare name wins over a same-named file in the working directory, so ``--model vgg19``
    means the same thing wherever it is run from.
    """
    given = Path(name_or_path)
    # Only a bare name (no directory part) may pick a bundled file: "../x" must not escape.
    if given.name == str(given):
        bundled = WORKLOADS / f"{given}.json"
        if bundled.is_file():
            return bundled
    if given.is_file():
        return given
    raise UnknownModelError(
        f"unknown model {str(name_or_path)!r}: not an existing file and not one of the "
        f"bundled profiles {', '.join(model_names())} (in {WORKLOADS})")


def layer_sizes(model: Path | str = DEFAULT_MODEL, scale: float = 1.0) -> list[int]:
    """Per-layer parameter counts of ``model`` times ``scale`` (at least 1 each).

    ``model`` is a bundled profile's name or a path (see ``model_path``).
    """
    layers = json.loads(model_path(model).read_text())["layers"]
    return [max(1, round(layer["params"] * scale)) for layer in layers]


def _layer_scales(n_layers: int, seed: int) -> np.ndarray:
    """Per-layer gradient magnitudes from 1e-4 to 1e-1: block exponents differ by layer."""
    rng = np.random.default_rng([seed, 0xC0FFEE])
    return 10.0 ** rng.uniform(-4.0, -1.0, n_layers)


def gradients(sizes: list[int], seed: int, iteration: int, rank: int) -> list[np.ndarray]:
    """One rank's float32 gradients for one iteration, one array per layer."""
    rng = np.random.default_rng([seed, iteration, rank])
    scales = _layer_scales(len(sizes), seed)
    flat = rng.standard_normal(sum(sizes), dtype=np.float32)
    out, start = [], 0
    for size, scale in zip(sizes, scales, strict=True):
        layer = flat[start : start + size]
        layer *= np.float32(scale)
        out.append(layer)
        start += size
    return out


def flat_gradients(sizes: list[int], seed: int, iteration: int, rank: int) -> np.ndarray:
    """The same gradients as one contiguous float32 vector (a fused bucket)."""
    return np.concatenate(gradients(sizes, seed, iteration, rank))


def float64_sum(inputs: list[np.ndarray]) -> np.ndarray:
    """The exact-as-possible sum of the unquantized inputs of every rank."""
    total = np.zeros(inputs[0].size, dtype=np.float64)
    for x in inputs:
        total += x.astype(np.float64).reshape(-1)
    return total


def quantized_sum(inputs: list[np.ndarray], lanes: int = DEFAULT_LANES) -> np.ndarray:
    """What a correct aggregator must return for one tensor: the sum of the quantized inputs.

    Agreed exponent per block (of ``lanes`` lanes) = max of the ranks' local exponents,
    lanes quantized with it, summed as integers and dequantized once (hosts.quantize's
    scheme).
    """
    n = len(inputs)
    blocks = [quantize.to_blocks(x.reshape(-1), lanes=lanes) for x in inputs]
    agreed = np.max([quantize.local_exponents(b) for b in blocks], axis=0)
    total = np.zeros(blocks[0].shape, dtype=np.int64)
    for b in blocks:
        total += quantize.quantize(b, agreed, n)
    assert np.abs(total).max(initial=0) < 2**31, "the quantization scheme must not overflow"
    result = quantize.dequantize(total.astype(np.int32), agreed, n)
    return result.reshape(-1)[: inputs[0].size]


def digest(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]
