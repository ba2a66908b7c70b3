"""How torch tensors ride on the aggregator's two kinds of all-reduce.

The aggregator sums int32 lanes exactly and float32 through shared-exponent fixed
point (hosts/quantize.py). Everything the backend does maps onto those:

* all_reduce SUM/AVG of float32: quantized; float16 and bfloat16 go through float32
  (their own rounding dominates the quantization error); int32: exact.
* broadcast of any dtype: the tensor's bytes as int32 words from the root, zeros from
  everyone else; an exact sum of one non-zero term is the root's bytes, bit for bit.
* all_gather of any dtype: each rank writes its words into its own region of a zero
  buffer as long as all the shards; the exact sum is every rank's shards at once.
* reduce_scatter: the all_reduce of the concatenated shards, each rank keeping its own
  (hosts/pytorch/shards.py says what that costs against a switch-native one).

Tensors must be on the CPU: the backend is registered for the "cpu" device only.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.distributed import ReduceOp

from p4hub.hosts.errors import NotSupportedError

THROUGH_FLOAT32 = (torch.float16, torch.bfloat16)
REDUCIBLE = (torch.float32, torch.int32, *THROUGH_FLOAT32)


def check_cpu(tensor: torch.Tensor, what: str) -> None:
    if tensor.device.type != "cpu":
        raise NotSupportedError(
            f"{what} of a tensor on {tensor.device} (p4hub carries CPU tensors: copy it "
            f"with .cpu(), or use the DDP hook, which stages buckets through the CPU)")
    if tensor.is_sparse:
        raise NotSupportedError(f"{what} of a sparse tensor")


def reduce_op_name(op: object, dtype: torch.dtype) -> str:
    """The agent's op for a torch ReduceOp: "sum" or "mean"."""
    if op == ReduceOp.SUM:
        return "sum"
    if op == ReduceOp.AVG:
        if dtype == torch.int32:
            raise NotSupportedError("ReduceOp.AVG of int32 (not exact: reduce with SUM and "
                                    "divide)")
        return "mean"
    raise NotSupportedError(f"ReduceOp {_op_name(op)} (p4hub sums: use SUM or AVG)")


def _op_name(op: object) -> str:
    for name in ("PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"):
        if op == getattr(ReduceOp, name):
            return name
    return str(op)


def reduce_input(tensor: torch.Tensor, what: str = "all_reduce") -> np.ndarray:
    """The array the agent reduces for ``tensor`` (a copy is made by the agent)."""
    check_cpu(tensor, what)
    if tensor.dtype not in REDUCIBLE:
        raise NotSupportedError(
            f"{what} of {tensor.dtype} (p4hub reduces float32, float16, bfloat16 "
            f"and int32)")
    if tensor.dtype in THROUGH_FLOAT32:
        return tensor.detach().to(torch.float32).contiguous().numpy().reshape(-1)
    return tensor.detach().contiguous().numpy().reshape(-1)


def write_back(tensor: torch.Tensor, result: np.ndarray) -> None:
    """Put a reduced array back into ``tensor`` (cast back to its dtype)."""
    tensor.copy_(torch.from_numpy(result.reshape(tensor.shape)))


def to_words(tensor: torch.Tensor) -> np.ndarray:
    """The tensor's bytes as int32 words (zero padded to a whole word)."""
    raw = tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
    padded = np.zeros(word_count(tensor), dtype=np.int32)
    padded.view(np.uint8)[: raw.size] = raw
    return padded


def word_count(tensor: torch.Tensor) -> int:
    return -(-tensor.numel() * tensor.element_size() // 4)


def from_words(tensor: torch.Tensor, words: np.ndarray) -> None:
    """Overwrite ``tensor`` with the bytes ``to_words`` made of a tensor like it."""
    nbytes = tensor.numel() * tensor.element_size()
    raw = torch.from_numpy(np.ascontiguousarray(words).view(np.uint8)[:nbytes].copy())
    if tensor.is_contiguous():
        tensor.reshape(-1).view(torch.uint8).copy_(raw)
    else:
        tensor.copy_(raw.view(tensor.dtype).reshape(tensor.shape))
