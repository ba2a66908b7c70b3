"""Training iterations under simulated time: a model's per-layer profile replayed.

What ``workers/replay.py`` does on the emulator with a sleeping clock, as one SimPy
process per rank: the backward pass takes each layer's backward time (the profile's,
divided by the GPU-speed factor), last layer first, and starts that layer's slices as
it ends; the next forward pass waits, layer by layer from the input, for the layer's
slices to come back, then takes the layer's forward time. An iteration's time is from
the start of its backward pass to the end of its forward pass.

The slices, their priorities and their agent classes are P3's own rules
(``hosts/p3.py``: ``p3_plan``, ``fifo_plan``, ``layer_class``), so every rank starts the
same slices in the same order. The gradients are ``workers/workload.py``'s synthetic
ones (seeded per iteration and rank), so any rank's result can be checked against the
exact sum of the quantized inputs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator, Hashable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from p4hub.hosts.p3 import DEFAULT_SLICE_PARAMS, Slice, fifo_plan, layer_class, p3_plan
from p4hub.sim.engine import Engine
from p4hub.workers import workload
from p4hub.workers.replay import load_layers


class Collective(Protocol):
    def start(self, rank: int, tensor_id: Hashable, array: np.ndarray, *, priority: int = 0,
              stream: int | None = None) -> None: ...


@dataclass(frozen=True)
class Workload:
    """Per layer (input first): parameters, forward and backward seconds."""

    name: str
    sizes: list[int]
    fwd_s: list[float]
    bwd_s: list[float]

    @property
    def parameters(self) -> int:
        return sum(self.sizes)


def load_workload(model: str, *, scale: float = 1.0, elements: int = 0,
                  gpu_speed: float = 1.0) -> Workload:
    """A bundled profile (``workers/workloads``) scaled, or ``synthetic``: one tensor of
    ``elements`` float32 and no compute (a pure all-reduce benchmark)."""
    if model == "synthetic":
        return Workload("synthetic", [elements], [0.0], [0.0])
    layers = load_layers(workload.model_path(model), 1.0 / gpu_speed, scale)
    return Workload(model, [la.params for la in layers], [la.fwd_s for la in layers],
                    [la.bwd_s for la in layers])


class Trainer:
    """Runs ``iterations`` iterations on every rank; ``collective`` is set before
    ``start`` (it needs the trainer's callbacks to be built)."""

    def __init__(self, engine: Engine, work: Workload, *, ranks: int, iterations: int,
                 schedule: str, classes: int, lanes: int, seed: int, check: bool,
                 slice_params: int = DEFAULT_SLICE_PARAMS, data: bool = True) -> None:
        """``data``: real gradients (each rank's own, seeded); False gives every rank the
        same zero arrays of the right sizes, for a collective that moves sizes only
        (tier F), so a thousand ranks cost no thousand gradient sets."""
        self.engine = engine
        self.work = work
        self.ranks = ranks
        self.iterations = iterations
        self.classes = classes
        self.lanes = lanes
        self.seed = seed
        self.check = check
        self.plan: list[list[Slice]] = (
            p3_plan(work.sizes, slice_params, lanes) if schedule == "p3" else fifo_plan(work.sizes))
        self.collective: Collective | None = None
        self.iteration_times: list[list[float]] = [[] for _ in range(ranks)]
        self.failures: list[str] = []
        self._waiting: dict[tuple[int, Hashable], Any] = {}
        self._results: dict[Hashable, list[bytes | None]] = {}
        self._trace = hashlib.sha256()
        self._zeros = None if data else [np.zeros(n, np.float32) for n in work.sizes]
        self._inputs: dict[int, list[list[np.ndarray]]] = {}  # check: by iteration, per rank
        self._unchecked: dict[int, int] = {}  # check: tensors of an iteration not yet checked
        self.mismatches = 0  # results that differ between ranks or from the exact sum
        self.checked = 0  # tensors compared with the exact sum of the quantized inputs
        self.finished = 0  # ranks done with every iteration
        self.ended_at = 0.0  # simulated time the last rank finished
        self.started_at = 0.0  # simulated time ``start`` was called
        # called once every rank has finished (sim/multijob.py ends the job's placement)
        self.on_finished: Callable[[], None] | None = None

    # -- callbacks of the collective ---------------------------------------------------

    def complete(self, rank: int, tensor_id: Hashable, result: np.ndarray) -> None:
        self._trace.update(f"{self.engine.now!r} {rank} {tensor_id!r};".encode())
        if self.check:
            results = self._results.setdefault(tensor_id, [None] * self.ranks)
            results[rank] = np.ascontiguousarray(result).tobytes()
            if all(r is not None for r in results):
                self._check(tensor_id, results)
        self._waiting.pop((rank, tensor_id)).succeed()

    def failed(self, rank: int, tensor_id: Hashable, reason: str) -> None:
        self.failures.append(f"rank {rank}, tensor {tensor_id!r}: {reason}")
        self._waiting.pop((rank, tensor_id)).succeed()

    def _check(self, tensor_id: Hashable, results: list[bytes | None]) -> None:
        del self._results[tensor_id]
        if any(r != results[0] for r in results):
            self.mismatches += 1
            return
        key: tuple[int, int, int] = tensor_id  # type: ignore[assignment]
        iteration, layer, index = key
        s = self.plan[layer][index]
        grads = self._inputs[iteration]
        inputs = [grads[r][layer][s.start:s.stop] for r in range(self.ranks)]
        expected = workload.quantized_sum(inputs, self.lanes).astype(np.float32)
        self.checked += 1
        if expected.tobytes() != results[0]:
            self.mismatches += 1
        self._unchecked[iteration] -= 1
        if self._unchecked[iteration] == 0:  # every tensor of the iteration is checked
            del self._inputs[iteration], self._unchecked[iteration]

    # -- the ranks ------------------------------------------------------------------

    def start(self) -> None:
        if self.collective is None:
            raise RuntimeError("Trainer.collective must be set before start")
        self.started_at = self.engine.now
        for rank in range(self.ranks):
            self.engine.process(self._rank(rank))

    def _gradients(self, iteration: int, rank: int) -> list[np.ndarray]:
        """Rank ``rank``'s gradients of ``iteration``; with ``check``, every rank's are
        kept until the iteration's results are checked (made once, not per tensor)."""
        if self._zeros is not None:
            return self._zeros
        if not self.check:
            return workload.gradients(self.work.sizes, self.seed, iteration, rank)
        if iteration not in self._inputs:
            self._inputs[iteration] = [workload.gradients(self.work.sizes, self.seed, iteration, r)
                                       for r in range(self.ranks)]
            self._unchecked[iteration] = sum(len(layer) for layer in self.plan)
        return self._inputs[iteration][rank]

    def _rank(self, rank: int) -> Generator[Any, Any, None]:
        engine, work, plan = self.engine, self.work, self.plan
        collective = self.collective
        assert collective is not None
        layers = len(work.sizes)
        for iteration in range(self.iterations):
            t0 = engine.now
            grads = self._gradients(iteration, rank)
            for layer in reversed(range(layers)):
                if work.bwd_s[layer] > 0:
                    yield engine.timeout(work.bwd_s[layer])
                stream = layer_class(layer, layers, self.classes) if self.classes > 1 else None
                for s in plan[layer]:
                    tid = (iteration, layer, s.index)
                    self._waiting[(rank, tid)] = engine.event()
                    collective.start(rank, tid, grads[layer][s.start:s.stop],
                                     priority=s.priority, stream=stream)
            for layer in range(layers):
                for s in plan[layer]:
                    event = self._waiting.get((rank, (iteration, layer, s.index)))
                    if event is not None:
                        yield event
                if work.fwd_s[layer] > 0:
                    yield engine.timeout(work.fwd_s[layer])
            self.iteration_times[rank].append(engine.now - t0)
        self.finished += 1
        self.ended_at = max(self.ended_at, engine.now)
        if self.finished == self.ranks and self.on_finished is not None:
            self.on_finished()

    @property
    def trace_digest(self) -> str:
        return self._trace.hexdigest()[:16]

    def iteration_seconds(self) -> list[float]:
        """Per iteration, the slowest rank's time (a synchronous step ends with it)."""
        done = min(len(t) for t in self.iteration_times)
        return [max(t[i] for t in self.iteration_times) for i in range(done)]
