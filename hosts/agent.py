"""The host agent: all-reduce numpy arrays through a p4hub aggregator.

Usage::

    from p4hub.hosts.agent import Agent

    with Agent(job_id=1, rank=r, world_size=4, aggregator=("10.0.0.100", 48879)) as agent:
        total = agent.allreduce(grad)                 # float32 (quantized) or int32 (exact)
        avg = agent.allreduce(grad, op="mean")
        handles = [agent.allreduce_async(g) for g in grads]   # several in flight
        results = [h.wait() for h in handles]

    # the session's settings (hosts/session_config.py) as one value, keywords on top
    Agent(job_id=1, rank=r, world_size=4, config=SessionConfig(lanes=256), timeout=30.0)

Every rank must reduce tensors of the same sizes in the same order (as with any
collective). The job (id, world size, slot range) must be configured on the
aggregator (switch controller or PBox) with the same ``slot_base``/``slot_count``.
A job split over several aggregators passes its map (``route_map``: hosts/routes.py,
each route's aggregator an (IPv4, port) or None for ``aggregator``) instead.

An all-reduce never hangs: if no result arrives for ``timeout`` seconds while work is
outstanding (the aggregator or a peer is silent), every pending handle fails with
``AllreduceError`` and the agent is unusable afterwards (its slots are out of step
with its peers'); make a new agent, for example with a fresh job.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Sequence
from typing import Unpack

import numpy as np

from p4hub.hosts import blocks, gather, scatter
from p4hub.hosts.errors import AllreduceError
from p4hub.hosts.events import Event, TensorCompleted, TensorFailed
from p4hub.hosts.routes import Route, to_wire
from p4hub.hosts.session import Session
from p4hub.hosts.session_config import SessionConfig, SessionSettings, with_settings
from p4hub.hosts.transport import UdpTransport
from p4hub.hosts.wire import AGG_UDP_PORT

DEFAULT_SLOT_COUNT = 64


class Handle:
    """One all-reduce in progress."""

    def __init__(self, tensor_id: int) -> None:
        self.tensor_id = tensor_id
        self._done = threading.Event()
        self._result: np.ndarray | None = None
        self._error: str | None = None
        self.completed_at: float | None = None  # time.monotonic() when it completed or failed

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> np.ndarray:
        """The reduced array; raises AllreduceError if it failed or ``timeout`` passed."""
        if not self._done.wait(timeout):
            raise AllreduceError(f"all-reduce {self.tensor_id} not done after {timeout} s")
        if self._error is not None:
            raise AllreduceError(f"all-reduce {self.tensor_id} failed: {self._error}")
        assert self._result is not None
        return self._result

    def _complete(self, result: np.ndarray) -> None:
        self._result = result
        self.completed_at = time.monotonic()
        self._done.set()

    def _fail(self, reason: str) -> None:
        if not self._done.is_set():
            self._error = reason
            self.completed_at = time.monotonic()
            self._done.set()


class Agent:
    """One worker of an all-reduce job, talking UDP to one aggregator."""

    def __init__(
        self,
        job_id: int,
        rank: int,
        world_size: int,
        aggregator: tuple[str, int] = ("127.0.0.1", AGG_UDP_PORT),
        *,
        slot_base: int = 0,
        slot_count: int = DEFAULT_SLOT_COUNT,
        bind: tuple[str, int] = ("0.0.0.0", 0),
        epoch: int = 0,
        route_map: list[Route] | None = None,
        config: SessionConfig | None = None,
        timeout: float | None = None,
        **settings: Unpack[SessionSettings],
    ) -> None:
        """``config``: the session's settings (hosts/session_config.py), with any of its
        fields given as keywords laid over it, among them:
        ``timeout``: seconds without any result before pending all-reduces fail (the
        session's ``deadline``).
        ``rto``/``rto_max``: first and largest retransmission timeout (seconds).
        ``window``: slots kept in flight per priority class (default: ``slot_count //
        classes``).
        ``lanes``: the job's lane count (64 or 256 int32 lanes per packet), as the job
        was configured on the aggregator.
        ``classes``: priority classes (1-64; hosts/session.py): all-reduces of a more
        urgent class overtake queued packets of less urgent ones, sharing ``credit``
        positions in flight (default ``window``). 1 (the default) is one FIFO stream.
        ``precision``: the job's precision option (a relative error bound; None: off):
        blocks int32 quantization cannot carry within it go as float32 to a PBox: on
        their slot's PBox route, or the map's float route for the switch's slots
        (hosts/session.py); without a map, ``aggregator`` must be a PBox.
        ``congestion``: a delay-based congestion window limits positions in flight
        further (hosts/congestion.py); False: only the slots and the credit do.
        ``route_map``: the aggregators serving the job's window (hosts/routes.py), for a
        job split over several; None: all of it on ``aggregator`` from ``slot_base``.
        ``epoch``: the job's aggregator-map epoch."""
        if timeout is not None:
            settings["deadline"] = timeout
        self.config = with_settings(config, settings)
        self._session = Session(job_id, rank, world_size, slot_base, slot_count,
                                config=self.config, epoch=epoch, route_map=route_map)
        self.precision = self.config.precision
        self.epoch = epoch
        self.lanes = self.config.lanes
        self._aggregator = aggregator
        self._lock = threading.Lock()
        self._handles: dict[Hashable, Handle] = {}
        self._next_id = 0
        self._closed = False
        self._close_reason = ""
        self._transport = UdpTransport(
            self._session, aggregator, self._on_event, bind=bind, on_crash=self._crashed,
            name=f"p4hub-agent-{job_id}-{rank}",
        )  # fmt: skip

    @property
    def local_address(self) -> tuple[str, int]:
        return self._transport.local_address

    @property
    def stats(self) -> dict[str, int]:
        """Session counters (a snapshot; read from another thread, so approximate)."""
        return self._session.stats.as_dict() | {"send_errors": self._transport.send_errors}

    @property
    def pending(self) -> int:
        """All-reduces started and not yet completed or failed."""
        with self._lock:
            return len(self._handles)

    @property
    def classes(self) -> int:
        """The session's priority classes."""
        return self._session.classes

    def allreduce(self, array: np.ndarray, op: str = "sum", *, priority: int = 0,
                  stream: int | None = None) -> np.ndarray:
        """Reduce ``array`` over all ranks and return the result (same shape).

        ``priority`` (0-7, higher is more urgent) goes in every packet's header (switches
        started with priority queues serve it first) and, with ``classes`` > 1, picks the
        class unless ``stream`` (0..classes-1, higher is more urgent) names it: all ranks
        must start the same sizes in the same order *within* each class; across classes
        the order may differ.

        float arrays come back as float32 (quantized, see hosts/quantize.py for the
        error bound); int32 arrays are summed exactly. Raises AllreduceError on failure.
        """
        return self.allreduce_async(array, op, priority=priority, stream=stream).wait()

    def allreduce_async(self, array: np.ndarray, op: str = "sum", *, priority: int = 0,
                        stream: int | None = None) -> Handle:
        """Start an all-reduce and return at once; input errors raise here, synchronously.

        The array is copied before this returns, so the caller may reuse it.
        """
        # QuantizeError/SessionError here, in the caller's thread
        prepared = blocks.prepare(array, op, priority, self.lanes, self.precision is not None)
        self._check_stream(stream)
        handle = self._new_handle()
        self._transport.submit(lambda: self._start(handle.tensor_id, prepared, stream))
        return handle

    def reduce_scatter_async(self, array: np.ndarray, sizes: Sequence[int], op: str = "sum", *,
                             priority: int = 0, stream: int | None = None) -> Handle:
        """Start a reduce-scatter in the network (wire version 3, hosts/scatter.py):
        ``array`` is every rank's shards concatenated in rank order, ``sizes`` their
        element counts (the same on every rank); the handle's result is this rank's
        shard of the sum (or mean), 1-D. The aggregator sends each rank only its own
        shard's results (a PBox; the switch forwards these to a PBox job's PBox and has
        no scatter rounds of its own). Input errors raise here; a session that cannot
        lay it out fails the handle."""
        prepared, layout = scatter.prepare(np.asarray(array), sizes, op, priority, self.lanes)
        self._check_stream(stream)
        handle = self._new_handle()
        self._transport.submit(lambda: self._start(handle.tensor_id, prepared, stream, layout))
        return handle

    def all_gather_async(self, shard: np.ndarray | bytes, sizes: Sequence[int], *,
                         priority: int = 0, stream: int | None = None) -> Handle:
        """Start an all-gather in the network (wire version 3, hosts/gather.py): ``shard``
        is this rank's shard (its bytes, any dtype), ``sizes`` every rank's shard in
        bytes (the same on every rank); the handle's result is every shard's bytes
        concatenated in rank order (uint8), bit for bit. This rank sends its own shard's
        blocks and a header per other block. Needs what ``reduce_scatter_async`` needs
        (``can_scatter``); input errors raise here, a session that cannot lay it out
        fails the handle."""
        prepared, layout = gather.prepare(shard, sizes, self._session.rank, priority, self.lanes)
        self._check_stream(stream)
        handle = self._new_handle()
        self._transport.submit(lambda: self._start(handle.tensor_id, prepared, stream, layout))
        return handle

    @property
    def can_scatter(self) -> bool:
        """Whether ``reduce_scatter_async`` can run on this job's map (one aggregator's
        slot range, one slot per rank at least, no precision option)."""
        return self._session.scatters.able

    def _check_stream(self, stream: int | None) -> None:
        """AllreduceError for a class the session does not have (before any handle)."""
        if stream is not None and not 0 <= stream < self._session.classes:
            raise AllreduceError(f"class {stream} outside 0..{self._session.classes - 1}")

    def _new_handle(self) -> Handle:
        with self._lock:
            if self._closed:
                raise AllreduceError(f"the agent is closed: {self._close_reason}")
            tensor_id = self._next_id
            self._next_id += 1
            handle = self._handles[tensor_id] = Handle(tensor_id)
        return handle

    @property
    def progress(self) -> dict:
        """The session counters a controller heartbeat carries (controller/core/traffic.py):
        first transmissions, retransmissions, results, and per route of the map under
        its ``epoch`` (``RouteService``) the results and the seconds it was busy; and
        the map itself (``map``, hosts/routes.py ``to_wire``)."""
        stats = self._session.stats
        epoch, routes = self._session.route_service()
        return {"sent": stats.sent, "retransmitted": stats.retransmitted,
                "results": stats.results, "epoch": epoch,
                "routes": [[n, round(t, 6)] for n, t in routes],
                "map": to_wire(self._session.routes, self._aggregator)}

    def follow(self, epoch: int, slot_base: int | None = None,
               route_map: list[Route] | None = None) -> bool:
        """``resync`` if the controller's ``epoch`` for the job is not the one this agent
        runs under; True when it did."""
        if epoch == self.epoch:
            return False
        self.resync(epoch, slot_base, route_map)
        return True

    def resync(self, epoch: int, slot_base: int | None = None,
               route_map: list[Route] | None = None) -> None:
        """The job's aggregator lost its rounds in flight or the job moved (the
        controller's heartbeat reply shows a new ``epoch``; ``route_map``: the
        aggregators serving its window now, or ``slot_base``: its slots on the one
        aggregator): resend what the new aggregators need (hosts/session.py
        ``resync``). Every rank of the job must be told; pending all-reduces carry on."""
        self.epoch = epoch
        self._transport.submit(
            lambda: self._session.resync(time.monotonic(), epoch=epoch, slot_base=slot_base,
                                         route_map=route_map)
        )

    @property
    def routes(self) -> tuple[Route, ...]:
        """The aggregator map the agent runs under (read from another thread)."""
        return self._session.routes

    def close(self, reason: str = "the agent was closed") -> None:
        """Stop the agent; all-reduces still pending fail with AllreduceError(``reason``)."""
        with self._lock:
            if self._closed:
                return
            self._closed, self._close_reason = True, reason
        self._transport.close()
        self._fail_all(reason)

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- on the transport thread -------------------------------------------------------

    def _start(self, tensor_id: int, prepared: blocks.PreparedTensor,
               stream: int | None, layout: scatter.ScatterLayout | None = None) -> None:
        try:
            self._session.start(tensor_id, prepared, time.monotonic(), stream=stream,
                                scatter=layout)
        except Exception as exc:  # never leave a handle waiting
            self._on_event(TensorFailed(tensor_id, str(exc)))

    def _on_event(self, event: Event) -> None:
        with self._lock:
            handle = self._handles.pop(event.tensor_id, None)
        if handle is None:
            return
        if isinstance(event, TensorCompleted):
            handle._complete(event.result)
        else:
            handle._fail(event.reason)

    def _crashed(self, reason: str) -> None:
        with self._lock:
            self._closed, self._close_reason = True, reason
        self._fail_all(reason)

    def _fail_all(self, reason: str) -> None:
        with self._lock:
            handles, self._handles = list(self._handles.values()), {}
        for h in handles:
            h._fail(reason)
