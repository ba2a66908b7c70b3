"""Workload replay: a training iteration emulated from a model's per-layer profile.

Compute is emulated by sleeping (it frees the CPU, as a GPU would), the gradient
exchange is real: every layer's gradient is all-reduced through the agent as soon as
its backward step ends, and the next iteration's forward pass runs layer by layer,
each layer waiting only for its own parameters' all-reduces (ByteScheduler's and
P3's overlap: the forward pass of iteration t+1 starts while deeper layers are still
in flight). FIFO and P3 differ only in the plan (hosts/p3.py): whole tensors at one
priority in backward order, or slices at their layer's priority in priority classes.

    iteration:  backward L-1 .. 0  (layer l's slices start when its backward ends)
                forward  0 .. L-1  (layer l waits for its slices, then computes)

An iteration's time runs from the start of its backward pass to the end of the next
forward pass, so back-to-back iterations tile the timeline. ``time_scale`` multiplies
the profile's milliseconds and ``param_scale`` its parameter counts, to put an
experiment at a chosen compute-to-communication balance on the emulated links.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from p4hub.hosts.p3 import Slice, backward_order, layer_class


class Waitable(Protocol):
    completed_at: float | None

    def wait(self, timeout: float | None = None) -> np.ndarray: ...


class Allreducer(Protocol):
    """What the replay needs of an agent (hosts.agent.Agent has it)."""

    def allreduce_async(self, array: np.ndarray, op: str = "sum", *, priority: int = 0,
                        stream: int | None = None) -> Waitable: ...  # fmt: skip


@dataclass(frozen=True, slots=True)
class Layer:
    name: str
    params: int
    fwd_s: float
    bwd_s: float


def load_layers(path: Path, time_scale: float, param_scale: float) -> list[Layer]:
    """A model profile (workers/workloads/*.json), scaled."""
    doc = json.loads(path.read_text())
    return [Layer(layer["name"], max(1, round(layer["params"] * param_scale)),
                  layer["fwd_ms"] * time_scale / 1e3, layer["bwd_ms"] * time_scale / 1e3)
            for layer in doc["layers"]]  # fmt: skip


@dataclass
class IterationRecord:
    """One replayed iteration: its time and, relative to its start, when every slice
    was ready and came back and when every layer's forward step began."""

    iteration: int
    seconds: float
    digest: str  # of every reduced slice, in plan order: equal on every rank
    slices: list[dict] = field(default_factory=list)
    forward_start: list[float] = field(default_factory=list)
    backward_seconds: float = 0.0


def synthetic_gradients(layers: Sequence[Layer], rank: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng([seed, rank])
    return [(rng.standard_normal(layer.params) * 1e-2).astype(np.float32) for layer in layers]


def replay_iteration(
    agent: Allreducer,
    layers: Sequence[Layer],
    plan: Sequence[Sequence[Slice]],
    grads: Sequence[np.ndarray],
    iteration: int,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    timeout: float | None = None,
    classes: int = 1,
) -> IterationRecord:
    """Backward (starting each layer's slices as it ends), then the next forward.
    ``classes``: the agent's priority classes; a layer's slices go to
    ``p3.layer_class`` of it."""
    t0 = clock()
    started: dict[Slice, tuple[float, Waitable]] = {}
    order = backward_order(plan)
    position = 0
    for layer in reversed(range(len(layers))):
        sleep(layers[layer].bwd_s)
        ready = clock()
        while position < len(order) and order[position].layer == layer:
            s = order[position]
            stream = layer_class(layer, len(layers), classes)
            started[s] = (ready, agent.allreduce_async(grads[layer][s.start:s.stop],
                                                       priority=s.priority, stream=stream))  # fmt: skip
            position += 1
    backward = clock() - t0
    digest = hashlib.sha256()
    record = IterationRecord(iteration, 0.0, "", backward_seconds=backward)
    for layer in range(len(layers)):
        for s in plan[layer]:
            ready, handle = started[s]
            digest.update(handle.wait(timeout).tobytes())
            done = handle.completed_at if handle.completed_at is not None else clock()
            record.slices.append({"layer": s.layer, "slice": s.index, "priority": s.priority,
                                  "elements": s.size, "ready": ready - t0, "done": done - t0})
        record.forward_start.append(clock() - t0)
        sleep(layers[layer].fwd_s)
    record.seconds = clock() - t0
    record.digest = digest.hexdigest()[:16]
    return record
