"""Training steps that overlap the gradient exchange with the next forward pass.

ByteScheduler's and P3's design, which DDP cannot do (DDP's ``backward()`` returns only
when every bucket is reduced, so the optimizer steps the whole model at once and the next
forward pass waits for the last bucket):

* each parameter's gradient is all-reduced (averaged) as soon as autograd has
  accumulated it (``register_post_accumulate_grad_hook``), sliced and prioritised by
  hosts/p3.py with the ``p3`` schedule, whole at one priority with ``fifo``;
* the optimizer step of a parameter runs as soon as its own all-reduces are back,
  inside the next forward pass;
* a forward pre-hook on every module with parameters waits only for that module's
  parameters, so layer 0 computes while deeper layers are still in flight.

Usage (every rank, same model, same order)::

    step = OverlappedStep(model, lambda params: torch.optim.SGD(params, lr=0.1,
                          momentum=0.9), group, schedule="p3")
    for x, y in batches:
        loss = loss_fn(model(x), y)   # waits per module for the previous step's updates
        loss.backward()               # starts the all-reduces as gradients appear
    step.synchronize()                # apply what is still pending (before eval/save)

``group`` is a p4hub process group (``hosts.pytorch.backend``; set ``P4HUB_CLASSES`` to
4 or 8 for the P3 schedule's priority classes) or any other torch.distributed group
(e.g. Gloo, for comparison: whole tensors, in gradient-ready order, no priorities).
Because slices are whole blocks and an optimizer that updates each parameter on its
own (SGD, Adam and their kin) is split per parameter, the parameters after each step
are bit for bit those of the unscheduled loop: all-reduce (mean) every gradient, then
``optimizer.step()`` (tests/unit/test_torch_backend.py checks it).

The layer index that sets a parameter's priority is its module's position among the
model's modules that own parameters, in ``named_modules()`` order (registration order,
the same on every rank: for the usual models, input to output).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
import torch.distributed as dist

from p4hub.hosts import p3
from p4hub.hosts.errors import BackendError
from p4hub.hosts.pytorch import encoding
from p4hub.hosts.wire import MAX_LANES

SCHEDULES = ("p3", "fifo")


class _Waitable(Protocol):
    def wait(self, timeout: float | None = None) -> np.ndarray: ...


@dataclass
class _Param:
    param: torch.nn.Parameter
    layer: int
    stream: int  # the agent class of its slices (p3.layer_class)
    slices: list[p3.Slice]
    optimizer: torch.optim.Optimizer
    pending: list[tuple[p3.Slice, _Waitable]] = field(default_factory=list)
    gloo_work: tuple[torch.Tensor, dist.Work] | None = None


class OverlappedStep:
    """Per-parameter all-reduce, optimizer step and forward wait (see the module doc)."""

    def __init__(self, model: torch.nn.Module,
                 optimizer_for: Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer],
                 group: dist.ProcessGroup | None = None, *, schedule: str = "p3",
                 slice_params: int = p3.DEFAULT_SLICE_PARAMS) -> None:  # fmt: skip
        if schedule not in SCHEDULES:
            raise BackendError(f"unknown schedule {schedule!r}: expected one of {SCHEDULES}")
        self.group = group if group is not None else dist.distributed_c10d._get_default_group()
        self.world = dist.get_world_size(self.group)
        # a p4hub group (hosts/pytorch/backend.py) is the Python object itself
        p4hub: Any = self.group if hasattr(self.group, "start_average") else None
        self._p4hub = p4hub
        lanes = p4hub.agent.lanes if p4hub is not None else MAX_LANES
        self._params: dict[torch.nn.Parameter, _Param] = {}
        self._hooks = []
        modules = _modules_with_params(model)
        classes = p4hub.agent.classes if p4hub is not None else 1
        for layer, module in enumerate(modules):
            own = [p for p in module.parameters(recurse=False) if p.requires_grad]
            for param in own:
                n = param.numel()
                slices = (p3.p3_plan([n], slice_params, lanes)[0] if schedule == "p3"
                          else p3.fifo_plan([n])[0])
                slices = [p3.Slice(layer, s.index, s.start, s.stop,
                                   p3.layer_priority(layer) if schedule == "p3" else 0)
                          for s in slices]  # fmt: skip
                stream = p3.layer_class(layer, len(modules), classes) if schedule == "p3" else 0
                self._params[param] = _Param(param, layer, stream, slices,
                                             optimizer_for([param]))
                self._hooks.append(param.register_post_accumulate_grad_hook(self._ready))
            self._hooks.append(module.register_forward_pre_hook(self._before_forward(own)))

    # -- hooks -------------------------------------------------------------------------

    def _ready(self, param: torch.Tensor) -> None:
        """Autograd accumulated ``param``'s gradient: start its all-reduces now."""
        entry = self._params[param]  # type: ignore[index]
        if entry.pending or entry.gloo_work is not None:
            raise BackendError("a gradient was produced twice before the next forward pass:"
                               " OverlappedStep needs one backward per step")
        grad = param.grad
        assert grad is not None
        if self._p4hub is not None:
            flat = encoding.reduce_input(grad).reshape(-1)
            entry.pending = [(s, self._p4hub.start_average(flat[s.start:s.stop], s.priority,
                                                           entry.stream))
                             for s in entry.slices]  # fmt: skip
        else:
            scaled = grad.detach() / self.world
            work = dist.all_reduce(scaled, group=self.group, async_op=True)
            assert work is not None
            entry.gloo_work = (scaled, work)

    def _before_forward(self, params: Sequence[torch.nn.Parameter]):
        def hook(_module: torch.nn.Module, _inputs: object) -> None:
            for param in params:
                self._apply(self._params[param])
        return hook

    def _apply(self, entry: _Param) -> None:
        """Wait for one parameter's all-reduces, then step it."""
        param = entry.param
        if entry.pending:
            grad = param.grad
            assert grad is not None
            out = np.empty(param.numel(), dtype=np.float32)
            for s, handle in entry.pending:
                out[s.start:s.stop] = handle.wait()
            entry.pending = []
            encoding.write_back(grad, out.reshape(grad.shape))
        elif entry.gloo_work is not None:
            scaled, work = entry.gloo_work
            work.wait()
            entry.gloo_work = None
            assert param.grad is not None
            param.grad.copy_(scaled)
        else:
            return
        entry.optimizer.step()
        entry.optimizer.zero_grad(set_to_none=True)

    # -- public ------------------------------------------------------------------------

    def synchronize(self) -> None:
        """Apply every pending update now (before evaluating or saving the model)."""
        for entry in self._params.values():
            self._apply(entry)

    def remove(self) -> None:
        """Take the hooks off the model (pending updates are applied first)."""
        self.synchronize()
        for handle in self._hooks:
            handle.remove()
        self._hooks = []


def _modules_with_params(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [m for _, m in model.named_modules()
            if any(p.requires_grad for p in m.parameters(recurse=False))]  # fmt: skip

