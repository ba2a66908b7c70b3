"""The "p4hub" torch.distributed backend: a Python ProcessGroup over the host agent.

One group owns one :class:`~hosts.agent.Agent` (one job at the aggregator, one UDP
socket), a :class:`~hosts.pytorch.liveness.Liveness` thread and a
:class:`~hosts.pytorch.completion.Completer` thread. A collective validates its
tensors on the caller's thread (bad input raises there, before anything is started,
so the rank's positions stay in step with its peers'), starts its all-reduces on the
agent in call order (torch starts collectives in the same order on every rank, which
is the agent's contract), and returns a ``Work`` made from a future the completer
fulfils. ``async_op=True`` hands that work to the caller; otherwise torch waits on it.

Collectives: all_reduce, reduce_scatter, reduce_scatter_tensor (SUM, AVG), broadcast,
all_gather, all_gather_into_tensor (and the coalesced forms), barrier. The rest raise
``NotSupportedError`` ("not supported by p4hub: ..."). With ``P4HUB_SCATTER=network`` on a
job of one rack (its switch or a PBox) a reduce-scatter runs in the network (the agent's
``reduce_scatter_async``: each rank receives only its own shard's results), else on the job's all-reduce of the whole
buffer (hosts/pytorch/shards.py: N times the downlink bytes); and where the job's
aggregators also run gather rounds (the join reply's ``gather``) an all-gather runs in
the network too (``all_gather_async``: each rank sends its own shard and a header per
other block, any dtype bit for bit), else it rides on the all-reduce (N times the uplink
bytes).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from p4hub.hosts.agent import Agent, Handle
from p4hub.hosts.errors import BackendError, HostError, NotSupportedError
from p4hub.hosts.pytorch import encoding, shards
from p4hub.hosts.pytorch.completion import Collective, Completer
from p4hub.hosts.pytorch.config import BackendConfig
from p4hub.hosts.pytorch.liveness import Liveness
from p4hub.hosts.pytorch.rendezvous import Membership, rendezvous
from p4hub.hosts.routes import from_wire

BACKEND_NAME = "p4hub"
SUPPORTED = ("all_reduce, reduce_scatter and reduce_scatter_tensor (SUM, AVG), broadcast, "
             "all_gather, all_gather_into_tensor and barrier")


class FutureWork(dist._Work):
    """A collective's Work over its future.

    ``_create_work_from_future`` would be shorter, but its ``wait()`` returns normally
    when the future failed, so a dead peer would leave the caller with its own input
    as the "result". Here ``wait`` raises the collective's BackendError (torch's C++
    side sees the same failure through the future: hosts/pytorch/completion.py).
    """

    def __init__(self, collective: Collective) -> None:
        super().__init__()
        self._collective = collective

    def wait(self, timeout: timedelta | None = None) -> bool:
        try:
            self._collective.future.wait()
        except RuntimeError:  # torch's wrapping of the error: raise ours, by its type
            if self._collective.error is None:
                raise
        if self._collective.error is not None:
            raise BackendError(str(self._collective.error))
        return True

    def get_future(self) -> torch.futures.Future:
        return self._collective.future

    def is_completed(self) -> bool:
        return self._collective.future.done()

    def is_success(self) -> bool:
        return self._collective.future.done() and self._collective.error is None


class P4hubProcessGroup(dist.ProcessGroup):
    def __init__(self, store: dist.Store, rank: int, world_size: int, timeout: timedelta,
                 config: BackendConfig | None = None) -> None:
        super().__init__(rank, world_size)  # type: ignore[call-arg]  # (rank, size) exists
        config = config or BackendConfig.from_env()
        self._rank, self._world_size = rank, world_size
        self._broken: str | None = None
        self._lock = threading.Lock()
        self.membership: Membership | None = None
        self.liveness = Liveness(store, rank, world_size, self._who, on_dead=self._peer_gone,
                                 dead_after=config.dead_after)
        self.liveness.publish()  # before the rendezvous, so a peer's first read finds it
        self.membership, self._lease = rendezvous(store, rank, world_size, config, timeout)
        plan = self.membership.plan
        self.where = plan.where
        self.timeout = config.timeout or timeout.total_seconds()
        self.agent = Agent(plan.job_id, rank, world_size, plan.aggregator_address,
                           slot_base=plan.slot_base, slot_count=plan.slot_count,
                           bind=self.membership.bind,
                           epoch=self._lease.epoch if self._lease is not None else 0,
                           route_map=from_wire(plan.routes),
                           config=plan.session_config(config, self.timeout))
        try:
            self.scatter_in_network = _scatter_in_network(config.scatter, plan.scatter,
                                                          self.agent.can_scatter)
        except BackendError:
            self.agent.close()
            raise
        # all-gathers in the network along with the reduce-scatters, where the job's
        # aggregators run gather rounds (an older controller does not say so: all-reduce)
        self.gather_in_network = self.scatter_in_network and plan.gather
        if self._lease is not None:
            self.liveness.extra_beat = self._follow_job
        self.liveness.start()
        self._completer = Completer(f"p4hub-complete-{rank}", self._explain)

    # -- identity --------------------------------------------------------------------

    def getBackendName(self) -> str:  # noqa: N802 - the C++ name
        return BACKEND_NAME

    def size(self) -> int:
        return self._world_size

    def stats(self) -> dict:
        """The agent's counters, where the job is aggregated, and its job id."""
        assert self.membership is not None
        return {"where": self.where, "job_id": self.membership.plan.job_id,
                "job_name": self.membership.name, "scatter_in_network": self.scatter_in_network,
                "gather_in_network": self.gather_in_network,
                **self.agent.stats}

    # torch keeps a group's name on its C++ backends and a Python group has none, so
    # ``group.group_name`` (which DeviceMesh.from_group, FSDP2 and functional collectives
    # read) would raise "ProcessGroup name not set": the group keeps the name itself.
    # init_process_group/new_group call _set_group_name from Python, so this one is used.
    def _set_group_name(self, name: str) -> None:
        self._name = name

    @property
    def group_name(self) -> str:  # type: ignore[override]
        if not getattr(self, "_name", ""):
            raise RuntimeError("ProcessGroup name not set")
        return self._name

    def __repr__(self) -> str:
        return (f"P4hubProcessGroup(rank={self._rank}, world_size={self._world_size}, "
                f"where={getattr(self, 'where', '?')})")

    # -- collectives -------------------------------------------------------------------

    # The C++ signatures the trampoline calls; torch's stubs list the Python wrappers'
    # overloads too, which a subclass cannot match: hence the ignores on the overrides.
    def allreduce(self, tensors: list[torch.Tensor],  # type: ignore[override]
                  opts: dist.AllreduceOptions | None = None) -> dist.Work:
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        names = [encoding.reduce_op_name(op, t.dtype) for t in tensors]
        arrays = [encoding.reduce_input(t) for t in tensors]
        handles = self._start([(a, n) for a, n in zip(arrays, names, strict=True)])

        def finish(results: list[np.ndarray]) -> list[torch.Tensor]:
            for tensor, result in zip(tensors, results, strict=True):
                encoding.write_back(tensor, result)
            return tensors

        return self._work(handles, finish, f"all_reduce of {_shapes(tensors)}")

    def allreduce_coalesced(self, tensors: list[torch.Tensor],
                            opts: dist.AllreduceCoalescedOptions | None = None) -> dist.Work:
        options = dist.AllreduceOptions()
        if opts is not None:
            options.reduceOp = opts.reduceOp
        return self.allreduce(tensors, options)

    def broadcast(self, tensors: list[torch.Tensor],  # type: ignore[override]
                  opts: dist.BroadcastOptions | None = None) -> dist.Work:
        root = opts.rootRank if opts is not None else 0
        if not 0 <= root < self._world_size:
            raise BackendError(f"broadcast from rank {root}: the group has ranks "
                               f"0..{self._world_size - 1}")
        for tensor in tensors:
            encoding.check_cpu(tensor, "broadcast")
        arrays = [encoding.to_words(t) if self._rank == root
                  else np.zeros(encoding.word_count(t), dtype=np.int32) for t in tensors]
        handles = self._start([(a, "sum") for a in arrays])

        def finish(results: list[np.ndarray]) -> list[torch.Tensor]:
            for tensor, words in zip(tensors, results, strict=True):
                encoding.from_words(tensor, words)
            return tensors

        return self._work(handles, finish, f"broadcast from rank {root} of {_shapes(tensors)}")

    def allgather(self, output_tensors: list[list[torch.Tensor]],  # type: ignore[override]
                  input_tensors: list[torch.Tensor],
                  opts: Any = None) -> dist.Work:
        """all_gather (and its coalesced form): ``outputs[r]`` receives rank r's tensor.
        Shards may differ in length between ranks (every rank passes the same output
        shapes). In the network where the job allows it (``gather_in_network``: each
        rank sends its shard's bytes once), else an exact int32 sum of N shards' worth of
        words in which each rank fills its own region (hosts/pytorch/shards.py): N x the
        uplink bytes."""
        for outputs, tensor in zip(output_tensors, input_tensors, strict=True):
            self._check_gather(outputs, tensor)
        if self.gather_in_network:
            return self._gather_in_network(output_tensors, input_tensors)
        arrays = [shards.gather_input(t, [encoding.word_count(o) for o in outputs], self._rank)
                  for outputs, t in zip(output_tensors, input_tensors, strict=True)]
        handles = self._start([(a, "sum") for a in arrays])

        def finish(results: list[np.ndarray]) -> list[list[torch.Tensor]]:
            for outputs, flat in zip(output_tensors, results, strict=True):
                layout = shards.Layout.of([encoding.word_count(o) for o in outputs])
                for rank, out in enumerate(outputs):
                    encoding.from_words(out, flat[layout.span(rank)])
            return output_tensors

        return self._work(handles, finish, f"all_gather of {_shapes(input_tensors)}")

    allgather_coalesced = allgather  # type: ignore[assignment]  # the same shape of call

    def _gather_in_network(self, output_tensors: list[list[torch.Tensor]],
                           input_tensors: list[torch.Tensor]) -> dist.Work:
        """One all-gather in the network per input (hosts/gather.py): its bytes, every
        rank's come back concatenated, each written into its output bit for bit."""
        sizes = [[o.numel() * o.element_size() for o in outputs] for outputs in output_tensors]
        raws = [t.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
                for t in input_tensors]
        handles = self._begin(lambda: [self.agent.all_gather_async(raw, s)
                                       for raw, s in zip(raws, sizes, strict=True)])

        def finish(results: list[np.ndarray]) -> list[list[torch.Tensor]]:
            for outputs, got, s in zip(output_tensors, results, sizes, strict=True):
                offsets = np.concatenate([[0], np.cumsum(s)])
                for rank, out in enumerate(outputs):
                    if s[rank]:
                        encoding.from_words(out, got[offsets[rank] : offsets[rank + 1]])
            return output_tensors

        return self._work(handles, finish, f"all_gather of {_shapes(input_tensors)}")

    def all_gather_single(self, output: torch.Tensor, tensor: torch.Tensor,
                          opts: Any = None) -> dist.Work:
        """all_gather_into_tensor: ``output`` holds world_size copies' worth, rank-major."""
        return self.all_gather_single_coalesced([output], [tensor], opts)

    _allgather_base = all_gather_single  # type: ignore[assignment]  # its pre-2.10 name

    def all_gather_single_coalesced(self, outputs: list[torch.Tensor],
                                    tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        """Several all_gather_into_tensor as one collective (``_coalescing_manager``)."""
        views = []
        for output, tensor in zip(outputs, tensors, strict=True):
            if output.numel() != tensor.numel() * self._world_size:
                raise BackendError(f"all_gather_into_tensor: output has {output.numel()} "
                                   f"elements, expected {self._world_size} x {tensor.numel()}")
            if not output.is_contiguous():
                raise NotSupportedError("all_gather_into_tensor into a non-contiguous output")
            views.append([p.view(tensor.shape)
                          for p in output.reshape(-1).chunk(self._world_size)])
        return self.allgather(views, tensors, opts)

    allgather_into_tensor_coalesced = all_gather_single_coalesced  # type: ignore[assignment]

    def reduce_scatter(self, output_tensors: list[torch.Tensor],  # type: ignore[override]
                       input_tensors: list[list[torch.Tensor]],
                       opts: dist.ReduceScatterOptions | None = None) -> dist.Work:
        """reduce_scatter: ``output`` gets the sum (or mean) of every rank's
        ``input_list[rank]``. The shards may differ in length (every rank passes the same
        lengths). In the network where the job allows it (``scatter_in_network``), else
        an all-reduce of the whole concatenated buffer, each rank keeping its slice
        (hosts/pytorch/shards.py: N x the downlink bytes)."""
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        layouts = [shards.check_scatter("reduce_scatter", out, ins, self._rank,
                                        self._world_size)
                   for out, ins in zip(output_tensors, input_tensors, strict=True)]
        flats = [shards.scatter_input(ins) for ins in input_tensors]
        return self._reduce_scatter(output_tensors, flats, layouts, op, "reduce_scatter")

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor,
                              opts: dist.ReduceScatterOptions | None = None) -> dist.Work:
        """reduce_scatter_tensor: ``input`` is world_size equal shards, rank-major."""
        return self.reduce_scatter_single_coalesced([output], [input], opts)

    _reduce_scatter_base = reduce_scatter_single  # type: ignore[assignment]

    def reduce_scatter_single_coalesced(self, outputs: list[torch.Tensor],
                                        inputs: list[torch.Tensor],
                                        opts: dist.ReduceScatterOptions | None = None
                                        ) -> dist.Work:
        """Several reduce_scatter_tensor as one collective (``_coalescing_manager``)."""
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        layouts = [shards.check_scatter_single("reduce_scatter_tensor", out, inp,
                                               self._world_size)
                   for out, inp in zip(outputs, inputs, strict=True)]
        return self._reduce_scatter(outputs, inputs, layouts, op, "reduce_scatter_tensor")

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced  # type: ignore[assignment]

    def _reduce_scatter(self, outputs: list[torch.Tensor], flats: Sequence[torch.Tensor],
                        layouts: list[shards.Layout], op: object, what: str) -> dist.Work:
        """Start one reduce-scatter (or all-reduce) per flat buffer (validated first, so a
        refusal starts nothing); each rank writes its own span of the result into its
        output (a reduce-scatter's result is that span)."""
        names = [encoding.reduce_op_name(op, out.dtype) for out in outputs]
        arrays = [encoding.reduce_input(flat, what) for flat in flats]
        sizes = [np.diff(layout.offsets).tolist() for layout in layouts] \
            if self.scatter_in_network else None
        handles = self._start([(a, n) for a, n in zip(arrays, names, strict=True)], scatter=sizes)
        mine = [slice(None) if sizes else layout.span(self._rank) for layout in layouts]

        def finish(results: list[np.ndarray]) -> list[torch.Tensor]:
            for out, result, span in zip(outputs, results, mine, strict=True):
                encoding.write_back(out, result[span])
            return outputs

        return self._work(handles, finish, f"{what} of {_shapes(flats)}")

    def barrier(self, opts: Any = None) -> dist.Work:
        handles = self._start([(np.zeros(1, dtype=np.int32), "sum")])
        return self._work(handles, lambda _results: [], "barrier")

    # -- the machinery -------------------------------------------------------------------

    def _start(self, jobs: Sequence[tuple[np.ndarray, str]], priority: int = 0,
               stream: int | None = None,
               scatter: Sequence[Sequence[int]] | None = None) -> list[Handle]:
        """Start every all-reduce of one collective, in order, or none of them
        (``scatter``: reduce-scatters in the network instead, of these shard sizes)."""
        if scatter is not None:
            return self._begin(lambda: [
                self.agent.reduce_scatter_async(array, sizes, op, priority=priority, stream=stream)
                for (array, op), sizes in zip(jobs, scatter, strict=True)])
        return self._begin(lambda: [
            self.agent.allreduce_async(array, op, priority=priority, stream=stream)
            for array, op in jobs])

    def _begin(self, start: Callable[[], list[Handle]]) -> list[Handle]:
        """``start`` one collective's handles on the agent, unless the group is broken."""
        with self._lock:
            if self._broken is not None:
                raise BackendError(f"the p4hub group is broken: {self._broken}")
            self.liveness.started += 1
            try:
                return start()
            except HostError as exc:
                raise BackendError(self._explain(str(exc))) from None

    def start_average(self, array: np.ndarray, priority: int,
                      stream: int | None = None) -> Handle:
        """Start a ``mean`` all-reduce of ``array`` at ``priority`` (in class ``stream``)
        and return the agent's handle (hosts/pytorch/overlap.py waits on it where it needs
        the result, not in start order as the completion thread does)."""
        return self._start([(array, "mean")], priority, stream)[0]

    def _work(self, handles: list[Handle], finish: Callable, describe: str) -> dist.Work:
        return FutureWork(self._complete_later(handles, finish, describe))

    def _complete_later(self, handles: list[Handle], finish: Callable,
                        describe: str) -> Collective:
        """A collective the completion thread completes with ``finish`` of the handles'
        results (its ``future`` is what torch gets)."""
        seq = self.liveness.started
        collective = Collective(wait=lambda: [h.wait() for h in handles], finish=finish,
                                describe=f"{describe} (collective #{seq} of rank {self._rank})")
        self._completer.submit(collective)
        return collective

    def average_future(self, tensor: torch.Tensor) -> torch.futures.Future:
        """Average ``tensor`` in place; the future's value is the tensor (the DDP hook)."""
        handles = self._start([(encoding.reduce_input(tensor), "mean")])

        def finish(results: list[np.ndarray]) -> torch.Tensor:
            encoding.write_back(tensor, results[0])
            return tensor

        return self._complete_later(handles, finish,
                                    f"DDP bucket of {tensor.numel()} {tensor.dtype}").future

    def _who(self, rank: int) -> str:
        return self.membership.who(rank) if self.membership is not None else f"rank {rank}"

    def _explain(self, reason: str) -> str:
        if self._broken is not None and self._broken not in reason:
            return f"{self._broken} ({reason})"
        diagnosis = self.liveness.diagnose(time.monotonic())
        return f"{reason}; {diagnosis}" if diagnosis else reason

    def _follow_job(self) -> None:
        """The controller heartbeat (from the liveness thread): a new epoch means the
        aggregator restarted or the job moved, so the agent resynchronises; a job the
        controller ended fails the group with its reason."""
        import grpc

        assert self._lease is not None
        try:
            beat = self._lease.heartbeat(self.agent.progress)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                self._peer_gone(f"the controller ended job {self._lease.job_id}: {exc.details()}")
                return
            if exc.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                # its token will not get better: the job would expire while we retried
                self._peer_gone(f"the controller refused job {self._lease.job_id}'s token: "
                                f"{exc.details()}")
                return
            raise
        if self.agent.follow(beat.get("epoch", self.agent.epoch), beat.get("slot_base"),
                             from_wire(beat.get("routes"))):
            self.where = beat.get("where", self.where)

    def _peer_gone(self, why: str) -> None:
        """A peer died or left: fail what is pending and everything after, naming it."""
        with self._lock:
            if self._broken is not None:
                return
            self._broken = why
        self.agent.close(reason=why)

    # -- the end -------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Called by ``destroy_process_group``: leave the job, stop the threads.

        Order: the peers learn first whether this rank finished everything it started
        (then they still collect their results of it: hosts/pytorch/liveness.py); the
        liveness thread stops before the agent it may close; the agent fails whatever is
        pending; the completion thread completes those failures and is joined, so no
        thread of the group touches a tensor or a future after this returns."""
        with self._lock:
            finished = self._broken is None and self.agent.pending == 0
            if self._broken is None:
                self._broken = "the group was destroyed"
        self.liveness.mark_left(finished)
        self.liveness.stop()
        self.agent.close(reason="the p4hub group was destroyed")
        self._completer.close()
        if self._lease is not None:
            try:
                self._lease.leave()
            except Exception:  # noqa: BLE001, S110 - the controller expires it anyway
                pass
            self._lease = None

    def abort(self) -> None:
        self.shutdown()

    def _check_gather(self, outputs: list[torch.Tensor], tensor: torch.Tensor) -> None:
        encoding.check_cpu(tensor, "all_gather")
        if len(outputs) != self._world_size:
            raise BackendError(f"all_gather: {len(outputs)} output tensors for a group of "
                               f"{self._world_size}")
        for out in outputs:
            encoding.check_cpu(out, "all_gather")
            if out.dtype != tensor.dtype:
                raise BackendError(f"all_gather: output {tuple(out.shape)} {out.dtype} does "
                                   f"not match input {tuple(tensor.shape)} {tensor.dtype}")
        if outputs[self._rank].numel() != tensor.numel():
            raise BackendError(f"all_gather: this rank's output (output {self._rank}) has "
                               f"{outputs[self._rank].numel()} elements, its input "
                               f"{tensor.numel()}")


def _refusal(name: str) -> Callable[..., dist.Work]:
    def refuse(self: P4hubProcessGroup, *_args: object, **_kwargs: object) -> dist.Work:
        raise NotSupportedError(f"{name} (p4hub does {SUPPORTED})")

    refuse.__name__ = name
    return refuse


# What torch's Python API calls on a group for the collectives p4hub does not carry;
# without these the base class would answer with an error that does not say why.
for _name in ("reduce", "alltoall", "all_to_all_single", "alltoall_base", "gather", "scatter",
              "send", "recv", "recv_anysource"):
    setattr(P4hubProcessGroup, _name, _refusal(_name))


def _shapes(tensors: Sequence[torch.Tensor]) -> str:
    return ", ".join(f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}" for t in tensors)


def _scatter_in_network(mode: str, rounds: bool, able: bool) -> bool:
    """Whether reduce-scatters run in the network (hosts/pytorch/config.py,
    P4HUB_SCATTER); BackendError for ``network`` where they cannot: a job whose
    aggregators have no scatter rounds (``rounds`` false: a job over racks, whose leaves
    reject a SCATTER) or a map that does not allow it."""
    if mode != "network":
        return False
    if not rounds:
        raise BackendError("P4HUB_SCATTER=network: the job spans racks, whose leaves have no "
                           "scatter rounds (reduce-scatter in the network needs the job on "
                           "one rack's switch or PBox)")
    if not able:
        raise BackendError("P4HUB_SCATTER=network: this job cannot run reduce-scatters in "
                           "the network (it needs its slot range on one aggregator, a slot "
                           "per rank, at most 32 ranks and no precision option)")
    return True
