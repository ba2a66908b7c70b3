"""P3 priority propagation: which slices of which layer go at which priority.

After P3 (Jayarajan et al., MLSys'19): a layer's gradient is cut into slices, and a
slice's priority comes from its layer's distance from the input, because the next
forward pass needs layer 0's parameters first. The header has 3 bits of priority (7 is
the most urgent), so layers share priorities on a log scale: layer l gets
``7 - floor(log2(l + 1))``: layer 0 gets 7, layers 1-2 get 6, 3-6 get 5, 7-14 get 4,
... 63-126 get 1, 127 and beyond 0. The urgency of the
layers near the input is what decides how early the next forward pass can start; the
deep layers are needed last and can share one level.

The header's priority steers the switch's queues. Inside the agent (hosts/session.py)
the urgency is finer: ``layer_class`` gives every run of ``ceil(L / C)`` consecutive
layers its own class (C classes, up to 64; with L <= C, every layer its own), the
input side most urgent. Inside a class slices go in start order, which is backward
order, so a class that held many layers would deliver the one the forward pass needs
first last; hence classes per layer rather than per header priority.

Every rank evaluates these rules on the same model, so every rank cuts the same slices
and gives them the same priorities and classes; ranks start each class's slices in the
same order (backward order) whatever the gradient-ready timing, and the agent preempts
at packet granularity between classes.

Slices are whole blocks: a slice's length is a multiple of the lane count, so cutting
a tensor into slices never moves a block boundary, and the sliced all-reduce returns
the same bits as the whole tensor's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from p4hub.hosts.errors import SessionError
from p4hub.hosts.wire import LANE_COUNTS, MAX_LANES, MAX_PRIORITY

DEFAULT_SLICE_PARAMS = 40_000  # P3's default slice size


@dataclass(frozen=True, slots=True)
class Slice:
    """Elements ``start:stop`` of layer ``layer``'s flat gradient, sent at ``priority``."""

    layer: int
    index: int  # the slice's number inside its layer
    start: int
    stop: int
    priority: int

    @property
    def size(self) -> int:
        return self.stop - self.start


def layer_priority(layer: int) -> int:
    """The header priority of a layer's slices: 7 for layer 0, one less per doubling
    of the distance from the input, 0 from layer 127 on."""
    if layer < 0:
        raise SessionError(f"layer index {layer} must not be negative")
    return MAX_PRIORITY - min(MAX_PRIORITY, (layer + 1).bit_length() - 1)


def slice_length(slice_params: int, lanes: int) -> int:
    """``slice_params`` rounded up to whole blocks of ``lanes``."""
    if slice_params < 1:
        raise SessionError(f"slice size {slice_params} must be positive")
    if lanes not in LANE_COUNTS:
        raise SessionError(f"lane count {lanes} is not one of {LANE_COUNTS}")
    return -(-slice_params // lanes) * lanes


def p3_plan(layer_sizes: Sequence[int], slice_params: int = DEFAULT_SLICE_PARAMS,
            lanes: int = MAX_LANES) -> list[list[Slice]]:
    """Per layer (input first), its slices with their P3 priorities."""
    step = slice_length(slice_params, lanes)
    return [[Slice(layer, i, lo, min(lo + step, size), layer_priority(layer))
             for i, lo in enumerate(range(0, size, step))]
            for layer, size in enumerate(layer_sizes)]  # fmt: skip


def fifo_plan(layer_sizes: Sequence[int]) -> list[list[Slice]]:
    """The baseline: one whole-tensor all-reduce per layer, all at priority 0, so they
    go in backward order (what a framework without a scheduler does)."""
    return [[Slice(layer, 0, 0, size, 0)] for layer, size in enumerate(layer_sizes)]


def layer_class(layer: int, layers: int, classes: int) -> int:
    """The agent class of ``layer``'s slices (``classes - 1`` is the most urgent): runs
    of consecutive layers from the input, one class each."""
    if not 0 <= layer < layers:
        raise SessionError(f"layer {layer} outside 0..{layers - 1}")
    return classes - 1 - layer * classes // max(layers, classes)


def backward_order(plan: Sequence[Sequence[Slice]]) -> list[Slice]:
    """The order gradients become ready and slices are started: last layer first."""
    return [s for layer in reversed(plan) for s in layer]
