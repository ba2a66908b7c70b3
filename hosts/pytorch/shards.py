"""Shard layouts of the sharded collectives (reduce-scatter, all-gather) on today's paths.

Neither collective has a path of its own in the data plane yet, so both ride on the
job's all-reduce of a whole buffer:

* **reduce-scatter**: every rank all-reduces the concatenation of all the shards (the
  float32 path, quantized with the agreed exponents, or int32 exactly) and keeps the
  slice that is its own. Each rank sends and receives the whole buffer, N shards: an
  in-network reduce-scatter would send each shard's result to its owner only, 1/N of
  the downlink bytes (docs/notes/pytorch.md, "Sharded collectives").
* **all-gather**: every rank writes its shard's bytes, as int32 words, into its own
  region of a zero buffer as long as all the shards together; the exact int32 sum is
  everyone's shards at once. Each rank sends N shards' worth (mostly zeros): an
  in-network all-gather would send its own shard once and multicast it, 1/N of the
  uplink bytes.

A :class:`Layout` is where each rank's shard starts in the flat buffer. Shards may be
of unequal length (the list forms of both collectives allow it); every rank must pass
the same lengths, in the same order, as for any collective (the buffer's length is
part of what the ranks must agree on, like an all_reduce's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from p4hub.hosts.errors import BackendError
from p4hub.hosts.pytorch import encoding


@dataclass(frozen=True)
class Layout:
    """Offsets of each rank's shard in the flat buffer (``offsets[r]:offsets[r + 1]``)."""

    offsets: tuple[int, ...]

    @classmethod
    def of(cls, sizes: Sequence[int]) -> Layout:
        return cls(tuple(int(x) for x in np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])))

    @property
    def total(self) -> int:
        return self.offsets[-1]

    def span(self, rank: int) -> slice:
        return slice(self.offsets[rank], self.offsets[rank + 1])


def check_scatter(what: str, output: torch.Tensor, inputs: Sequence[torch.Tensor],
                  rank: int, world: int) -> Layout:
    """Validate one reduce-scatter (``inputs[r]`` is rank r's shard of the sum) and return
    its layout in elements. Raises before anything starts, so the ranks stay in step."""
    if len(inputs) != world:
        raise BackendError(f"{what}: {len(inputs)} input shards for a group of {world}")
    for tensor in (output, *inputs):
        encoding.check_cpu(tensor, what)
        if tensor.dtype != output.dtype:
            raise BackendError(f"{what}: input {tensor.dtype} does not match output "
                               f"{output.dtype}")
    if inputs[rank].numel() != output.numel():
        raise BackendError(f"{what}: this rank's shard (input {rank}) has "
                           f"{inputs[rank].numel()} elements, its output {output.numel()}")
    return Layout.of([t.numel() for t in inputs])


def check_scatter_single(what: str, output: torch.Tensor, input: torch.Tensor,
                         world: int) -> Layout:
    """reduce_scatter_tensor: ``input`` is ``world`` equal shards, rank-major."""
    encoding.check_cpu(output, what)
    encoding.check_cpu(input, what)
    if input.dtype != output.dtype:
        raise BackendError(f"{what}: input {input.dtype} does not match output {output.dtype}")
    if input.numel() != output.numel() * world:
        raise BackendError(f"{what}: input has {input.numel()} elements, expected "
                           f"{world} x {output.numel()}")
    return Layout.of([output.numel()] * world)


def scatter_input(inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """The flat buffer every rank all-reduces: the shards, concatenated in rank order."""
    return torch.cat([t.detach().reshape(-1) for t in inputs])


def gather_input(tensor: torch.Tensor, word_sizes: Sequence[int], rank: int) -> np.ndarray:
    """This rank's all-gather contribution: its words at its offset, zeros elsewhere."""
    layout = Layout.of(word_sizes)
    buffer = np.zeros(layout.total, dtype=np.int32)
    buffer[layout.span(rank)] = encoding.to_words(tensor)
    return buffer
